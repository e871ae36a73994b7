"""An HTTP client that calls an ASGI app directly on its own event loop.

Starlette's TestClient runs every request through httpx and a thread portal: about 4 ms
a request on this machine, against a few hundred microseconds of the app's own work. The
golden replays and property tests post tens of thousands of chunks, so they use this
client: the same app, the same ASGI messages, no transport. Tests of the transport itself
(headers, connections, WebSockets) keep TestClient or a real server."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from json import dumps, loads
from typing import Any

from starlette.types import ASGIApp, Message


@dataclass(frozen=True)
class Reply:
    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return loads(self.content)


class InProcessClient:
    """POSTs bodies to one app, each request run to completion on the client's loop."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()

    def post(
        self,
        path: str,
        content: bytes | None = None,
        *,
        json: Any = None,
        content_type: str = "application/json",
    ) -> Reply:
        body = content if content is not None else dumps(json).encode()
        return self.loop.run_until_complete(self._request(path, body, content_type))

    async def _request(self, path: str, body: bytes, content_type: str) -> Reply:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"testserver"),
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        answered = asyncio.Event()
        pending = [{"type": "http.request", "body": body, "more_body": False}]
        start: Message = {}
        parts: list[bytes] = []

        async def receive() -> Message:
            if pending:
                return pending.pop()
            await answered.wait()  # as a server does: the client leaves once answered
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    answered.set()

        await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]}
        return Reply(start["status"], headers, b"".join(parts))
