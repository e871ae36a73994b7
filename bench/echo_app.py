"""An ASGI app that answers every request with its own body, and every WebSocket
message with itself: the transports' floors.

Served (``python -m bench.echo_app --port N``) by the server's own uvicorn
configuration (its HTTP protocol class, event loop and WebSocket options), it shows
what any chunk costs before a line of derender code runs: reading the request or
message and writing a reply of the protocol's size (on the full protocol, the
``stream_state`` the client echoes dominates both).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from app.serving.cli import parse_options, uvicorn_options
from app.serving.metrics import Metrics

Message = dict[str, Any]


async def app(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] == "websocket":
        await _echo_messages(receive, send)
        return
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _echo_messages(
    receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
) -> None:
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while (message := await receive())["type"] == "websocket.receive":
        await send({"type": "websocket.send", "text": message.get("text")})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.echo_app")
    parser.add_argument("--port", type=int, required=True)
    options = parse_options(["--port", str(parser.parse_args().port), "--log-level", "warning"])
    uvicorn.run(app, **uvicorn_options(options, Metrics()), lifespan="off")


if __name__ == "__main__":
    main()
