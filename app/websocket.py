"""The WebSocket transport (docs/transports.md): one connection, many streams, a
message per chunk.

Messages are answered one at a time, in the order they came, so each stream's replies
are in order. An error answers its own message's stream (which leaves the connection:
it resumes with its context) and the connection stays open for the others. The
connection closes when the client closes it or after ``--ws-idle-timeout`` seconds
without a message.
"""

from __future__ import annotations

import logging

import anyio
import msgspec
from msgspec import Struct
from starlette.types import Receive, Scope, Send

from app.body import decode_body, received, too_large
from app.errors import BadRequest, StateRequired
from app.failures import failure
from app.protocol import ErrorInfo, encoder
from app.service import DerenderService
from app.session_store import StreamKey
from app.socket_streams import Lane, OpenStream, SocketChunk, SocketReply

logger = logging.getLogger("derender_server")

SOCKET_SUFFIX = "/ws"
# A client's close code when the server goes away (the idle timeout's close).
GOING_AWAY = 1001
POLICY_VIOLATION = 1008


class SocketError(Struct):
    """An error reply: the stream of the message it answers (null when the message
    names none) and the OpenAI-style error."""

    request_id: str | None
    index: int | None
    error: ErrorInfo


class _ChoiceKey(Struct):
    index: int = 0


class _ChunkKey(Struct):
    request_id: str
    choices: list[_ChoiceKey] = []


class _Keyed(Struct):
    generate_chunk: _ChunkKey


_keyed = msgspec.json.Decoder(_Keyed)
_CONTEXT_FIELDS = ("prompt_token_ids", "chat_request", "stream_state")


def _stream_key(body: bytes) -> StreamKey | None:
    """The stream a message is for, or None when it names none readably."""
    try:
        chunk = _keyed.decode(body).generate_chunk
    except (msgspec.DecodeError, RecursionError):
        return None
    return chunk.request_id, chunk.choices[0].index if chunk.choices else 0


class SocketConnection:
    """One accepted connection of a route: its open streams, answered in turn."""

    def __init__(self, service: DerenderService, lane: Lane) -> None:
        self.service = service
        self.lane = lane
        self.streams: dict[StreamKey, OpenStream] = {}

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        idle = self.service.settings.ws_idle_timeout
        while True:
            message = None
            with anyio.move_on_after(idle):
                message = await receive()
            if message is None:
                await send({"type": "websocket.close", "code": GOING_AWAY})
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            body = text.encode() if text is not None else message.get("bytes") or b""
            reply = await self.answer(body)
            await send({"type": "websocket.send", "text": reply.decode()})

    async def answer(self, body: bytes) -> bytes:
        """One message's reply (an error reply for a refused or failed one)."""
        key = _stream_key(body)
        try:
            return await self._answer(body, key)
        except Exception as exc:
            if key is not None:
                self.streams.pop(key, None)
            error = failure(exc, self.service.metrics, self.lane.endpoint, body)
            request_id, index = key if key is not None else (None, None)
            return encoder.encode(SocketError(request_id, index, error.body().error))

    async def _answer(self, body: bytes, key: StreamKey | None) -> bytes:
        limit = self.service.settings.max_request_bytes
        if len(body) > limit:
            raise too_large(limit)
        view = received(body, self.lane.endpoint, None, compact=True)
        if key is None:  # the full decode says what is wrong with the message
            decode_body(body, self.lane.kind)
            raise BadRequest("a message names its stream in generate_chunk.request_id")
        stream = self.streams.pop(key, None)
        raw = view.view
        if any(bytes(getattr(raw, name)) != b"null" for name in _CONTEXT_FIELDS):
            if stream is None and len(self.streams) >= self.service.settings.ws_max_streams:
                raise BadRequest(
                    f"this connection already carries {len(self.streams)} open streams "
                    "(--ws-max-streams): finish one, or open another connection."
                )
            reply, carried, held = await self.lane.open(view)
        elif stream is None:
            raise StateRequired("this connection holds no open stream of this request_id")
        else:
            chunk = decode_body(body, SocketChunk, self.lane.endpoint)
            reply, carried, held = await self.lane.proceed(chunk, stream)
        if held is not None:
            self.streams[key] = held
        return encoder.encode(SocketReply(key[0], key[1], reply, msgspec.Raw(carried)))


def refuse_socket() -> dict[str, object]:
    """The message that refuses a handshake (uvicorn answers it with a 403)."""
    return {"type": "websocket.close", "code": POLICY_VIOLATION}
