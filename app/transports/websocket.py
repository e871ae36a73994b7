"""The WebSocket transport (docs/transports.md): one connection, many streams, a
message per chunk, or a batch frame (app/transports/batch.py) of chunks of many streams.

Messages are answered one at a time, in the order they came (a frame's entries in
theirs), so each stream's replies are in order. An error answers its own message's
stream (which leaves the connection: it resumes with its context) and the connection
stays open for the others. The connection closes when the client closes it or after
``--ws-idle-timeout`` seconds without a message.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import msgspec
from msgspec import Raw, Struct
from starlette.types import Message, Receive, Send

from app.serving.failures import failure
from app.serving.service import DerenderService
from app.serving.settings import Settings
from app.streams.session_store import StreamKey
from app.transports.batch import Answer, answered, frame_entries
from app.transports.socket_streams import (
    Answered,
    HeldStreams,
    Lane,
    OpenStream,
    SocketMessage,
    SocketReply,
)
from app.wire.body import decode_body, received, too_large
from app.wire.errors import BadRequest, DerenderError
from app.wire.protocol import ErrorInfo, encoder
from app.wire.validation import chunk_tokens

SOCKET_SUFFIX = "/ws"
# The close code the server sends when it goes away (on the idle timeout).
GOING_AWAY = 1001
POLICY_VIOLATION = 1008
# Where a chunk's JSON is found when it is needed whole: its message, or its frame's place.
B = TypeVar("B")


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


class _Messages(Struct):
    """A frame whose entries all read as messages (a frame of chunks that continue held
    streams, the common one), read in one decode rather than one an entry."""

    batch: list[SocketMessage] | None = None


class _Entries:
    """The JSON of a frame's entries, split out of it once, when an entry is first
    needed whole (it opens its stream, or failed)."""

    def __init__(self, body: bytes, settings: Settings) -> None:
        self._body = body
        self._settings = settings
        self._entries: list[Raw] | None = None

    def entry(self, index: int) -> bytes:
        if self._entries is None:
            self._entries = frame_entries(self._body, self._settings)
            assert self._entries is not None  # its messages were read: it is a frame
        return bytes(self._entries[index])


_keyed = msgspec.json.Decoder(_Keyed)
_message = msgspec.json.Decoder(SocketMessage)
_messages = msgspec.json.Decoder(_Messages)


def _copied(body: bytes | Raw) -> bytes:
    return bytes(body)


def named_stream(body: bytes) -> StreamKey | None:
    """The stream a message that could not be read is for, if it names one."""
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
        self.streams = HeldStreams(service.store.cache)
        self._last_message = time.monotonic()

    def close(self) -> None:
        """The connection is gone: the streams it held stop counting in the cache."""
        self.streams.close()

    async def serve(self, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._close_when_idle, send, tasks.cancel_scope)
            # Each message is answered in a call of its own, so nothing of it (its text,
            # body and reply: a few times a large message's size) stays alive while the
            # connection waits for the next one.
            while await self._serve_one(await receive(), send):
                pass
            tasks.cancel_scope.cancel()

    async def _serve_one(self, message: Message, send: Send) -> bool:
        """Answer one ASGI message; False once the connection is over."""
        self._last_message = time.monotonic()
        if message["type"] == "websocket.disconnect":
            return False
        text = message.get("text")
        body = text.encode() if text is not None else message.get("bytes") or b""
        reply = await self.answer(body)
        try:
            await send({"type": "websocket.send", "text": reply.decode()})
        except OSError:  # the client went away before its reply
            return False
        return True

    async def _close_when_idle(self, send: Send, connection: anyio.CancelScope) -> None:
        """Close the connection once it has gone ``--ws-idle-timeout`` seconds without a
        message (one timer per connection, not one per message)."""
        idle = self.service.settings.ws_idle_timeout
        while (left := self._last_message + idle - time.monotonic()) > 0:
            await anyio.sleep(left)
        await send({"type": "websocket.close", "code": GOING_AWAY})
        connection.cancel()

    async def answer(self, body: bytes) -> bytes:
        """One message's reply: a chunk's, or a batch frame's (its entries' replies; an
        error reply naming no stream when the frame is refused whole)."""
        metrics, endpoint = self.service.metrics, self.lane.endpoint
        read = self._read_frame(body)
        if read is not None and read.batch is not None:
            answer = functools.partial(self._answer_entry, _Entries(body, self.service.settings))
            return await answered(list(enumerate(read.batch)), answer, metrics, endpoint)
        if read is None:  # a frame refused whole, one with an entry that cannot be read
            try:  # (it answers for itself), or a message that is no frame
                entries = frame_entries(body, self.service.settings)
            except DerenderError as exc:
                metrics.observe(endpoint, "batch", exc.status, 0.0)
                return encoder.encode(SocketError(None, None, exc.body().error))
            if entries is not None:
                return await answered(entries, self._answer_chunk, metrics, endpoint)
        started = time.perf_counter()
        given = self._answer_chunk(body)
        reply, status = given if isinstance(given, tuple) else await given
        encoded = encoder.encode(reply)
        metrics.observe(endpoint, "socket", status, time.perf_counter() - started)
        return encoded

    def _answer_chunk(self, body: bytes | Raw) -> Answer | Awaitable[Answer]:
        """One chunk's reply (an error reply for a refused or failed one) and status, as
        ``_answer_read`` gives it once the chunk's message is read."""
        try:
            message = self._read(body)
        except Exception as exc:
            return self._failed(bytes(body), None, exc)
        return self._answer_read(message, _copied, body)

    def _answer_entry(
        self, entries: _Entries, read: tuple[int, SocketMessage]
    ) -> Answer | Awaitable[Answer]:
        """The reply of a frame's entry ``read`` (its place and its message)."""
        index, message = read
        return self._answer_read(message, entries.entry, index)

    def _answer_read(
        self, message: SocketMessage, body: Callable[[B], bytes], of: B
    ) -> Answer | Awaitable[Answer]:
        """The reply of a chunk read as ``message`` (``body(of)`` gives its JSON when it
        is read whole, copied out of its frame): at once when it continues a held stream
        with a chunk small enough to derender on the event loop (no await between its
        message and its reply), else to await."""
        key = message.key
        stream = None
        try:
            stream = self.streams.continued(key, message)
            if stream is not None and self.service.inline(chunk_tokens(message.generate_chunk)):
                answered = self.service.run_now(self.lane.proceed, message, stream)
                return self._continued(key, stream, answered)
        except Exception as exc:
            return self._failed(body(of), key, exc)
        return self._answer_later(body(of), message, stream)

    async def _answer_later(
        self, body: bytes, message: SocketMessage, stream: OpenStream | None
    ) -> Answer:
        """A chunk that opens its stream, or a long one continued on a worker thread."""
        key = message.key
        try:
            if stream is not None:
                tokens = chunk_tokens(message.generate_chunk)
                return self._replied(
                    key, await self.service.run(tokens, self.lane.proceed, message, stream)
                )
            if (
                key not in self.streams
                and len(self.streams) >= self.service.settings.ws_max_streams
            ):
                raise BadRequest(
                    f"this connection already carries {len(self.streams)} open streams "
                    "(--ws-max-streams): finish one, or open another connection."
                )
            view = received(body, self.lane.endpoint, None, compact=True)
            return self._replied(key, await self.lane.open(view))
        except Exception as exc:
            return self._failed(body, key, exc)

    def _replied(self, key: StreamKey, answered: Answered) -> Answer:
        """The reply of a chunk answered, its stream held for the next one."""
        reply, carried, held = answered
        self.streams.put(key, held)
        return SocketReply(key[0], key[1], reply, carried), 200

    def _continued(self, key: StreamKey, stream: OpenStream, answered: Answered) -> Answer:
        """``_replied`` for a chunk that continued ``stream``, the one the connection
        holds under ``key`` (no lookup to find it again)."""
        reply, carried, held = answered
        self.streams.continue_with(key, stream, held)
        return SocketReply(key[0], key[1], reply, carried), 200

    def _failed(self, body: bytes, key: StreamKey | None, exc: Exception) -> Answer:
        """The error reply of a chunk refused or failed; its stream leaves the connection."""
        key = key or named_stream(body)
        if key is not None:
            self.streams.drop(key)
        error = failure(exc, self.service.metrics, self.lane.endpoint, body)
        request_id, index = key if key is not None else (None, None)
        return SocketError(request_id, index, error.body().error), error.status

    def _read_frame(self, body: bytes) -> _Messages | None:
        """A message read as a frame's messages, in one decode (``batch`` None: it is
        no frame), when it is no frame or a frame within its bounds whose every entry
        reads as a message; else None (``frame_entries`` reads it, and each entry is
        read, and answers for itself, on its own). A frame within
        ``--max-request-bytes`` has no entry over it."""
        settings = self.service.settings
        if len(body) > min(settings.max_request_bytes, settings.batch_max_bytes):
            return None
        try:
            read = _messages.decode(body)
        except (msgspec.DecodeError, RecursionError):
            return None
        if read.batch is not None and len(read.batch) > settings.batch_max_entries:
            return None
        return read

    def _read(self, body: bytes | Raw) -> SocketMessage:
        """The message, read once; one that cannot be read is refused with the message
        its route's full decode gives."""
        limit = self.service.settings.max_request_bytes
        if len(body) > limit:
            raise too_large(limit)
        try:
            return _message.decode(body)
        except (msgspec.DecodeError, RecursionError) as exc:
            decode_body(bytes(body), self.lane.kind)  # raises with what to fix
            raise BadRequest(f"invalid message: {exc}") from None


def refuse_socket() -> dict[str, object]:
    """The message that refuses a handshake (uvicorn answers it with a 403)."""
    return {"type": "websocket.close", "code": POLICY_VIOLATION}
