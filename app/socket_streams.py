"""What a WebSocket connection holds per stream, and how a message opens or continues one.

A message that carries context (``prompt_token_ids``, the chat or completion request, a
full ``stream_state``) opens its stream, as an HTTP chunk of the full protocol would be
answered; the connection then holds what the next chunk continues, so a later message is
its generate chunk alone. A parsed chat stream is held as its session (taken out of the
store for good: the connection is the only one to continue it), a plain stream as its
last request with the state its reply carried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from msgspec import Raw, Struct

from app.body import Received, decode_body
from app.chunk_path import Found, ParsedChunks
from app.compact import is_compact
from app.errors import BadRequest, StateRequired
from app.protocol import (
    BodyView,
    ChatStreamDerenderRequest,
    CompletionStreamDerenderRequest,
    GenerateChunk,
    StreamState,
    encoder,
)
from app.service import DerenderService
from app.session import Fingerprint, StreamSession
from app.session_store import Acquired, Source, StreamKey
from app.validation import (
    check_chunk,
    check_history,
    check_model,
    check_single_choice,
    check_state_ids,
    chunk_tokens,
    stream_length_error,
    validate_chat_stream,
    validate_completion_stream,
)

_NULL = Raw(b"null")


class SocketMessage(Struct):
    """A message as a connection first reads it: its chunk, and its context as bytes (a
    message that carries any opens its stream; its body is then read as a whole one).
    ``model`` and ``prompt_tokens``, when left out of a message that continues a stream,
    stay what its last message said."""

    generate_chunk: GenerateChunk
    model: str | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: Raw = _NULL
    chat_request: Raw = _NULL
    completion_request: Raw = _NULL
    stream_state: Raw = _NULL

    @property
    def opens(self) -> bool:
        """Whether it (re)opens its stream: it carries a prompt, a request or a state."""
        return (
            self.prompt_token_ids != _NULL
            or self.chat_request != _NULL
            or self.completion_request != _NULL
            or self.stream_state != _NULL
        )

    @property
    def key(self) -> StreamKey:
        chunk = self.generate_chunk
        return chunk.request_id, chunk.choices[0].index if chunk.choices else 0


@dataclass(slots=True)
class OpenStream:
    """A stream a connection holds: a plain stream's last request (its context and
    state), or a parsed chat stream's session and the fingerprint that names it; and the
    ``model`` and ``prompt_tokens`` its messages last said."""

    request: Any = None
    session: StreamSession | None = None
    fingerprint: Fingerprint | None = None
    model: str | None = None
    prompt_tokens: int | None = None

    def advanced(self, message: SocketMessage) -> tuple[str | None, int | None]:
        """The ``model`` and ``prompt_tokens`` of ``message``: its own, else the stream's."""
        if message.model is not None:
            self.model = message.model
        if message.prompt_tokens is not None:
            self.prompt_tokens = message.prompt_tokens
        return self.model, self.prompt_tokens


# A chunk's reply, the state it carries (encoded) and what the connection holds after it
# (None: the stream is over).
Answered = tuple[Any, bytes, OpenStream | None]


class Lane(Protocol):
    """How one route's streams are opened and continued on a connection."""

    endpoint: str
    kind: type[Any]  # the route's chunk body

    async def open(self, received: Received) -> Answered: ...

    async def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered: ...


def _finished(chunk: GenerateChunk) -> bool:
    return any(choice.finish_reason is not None for choice in chunk.choices)


class ParsedChatLane:
    """Chat streams through the configured parsers: the session stays on the connection."""

    endpoint = "chat"
    kind = ChatStreamDerenderRequest

    def __init__(self, chunks: ParsedChunks) -> None:
        self.chunks = chunks
        self.limits = chunks.limits

    async def open(self, received: Received) -> Answered:
        view = received.view
        if view.prompt_token_ids == _NULL and view.chat_request == _NULL:
            raise StateRequired("this connection holds no open stream of this request_id")
        if is_compact(view.stream_state):
            raise StateRequired("a stream opens on a WebSocket connection with a full state")
        request = decode_body(received.body, ChatStreamDerenderRequest)
        model = validate_chat_stream(request, received.view, self.limits)
        found = await self.chunks.find(request, received.view, True)
        fingerprint = found.fingerprint
        assert fingerprint is not None  # found for a compact reply
        if found.acquired.source is Source.HIT:
            self.chunks.store.release(found.key, fingerprint)
        reply, state, session = await self.chunks.derendered(request, model, found)
        carried = self.chunks.carried(state, session, fingerprint)
        held = None
        if session is not None and not _finished(request.generate_chunk):
            detached = fingerprint.detached()
            held = OpenStream(None, session, detached, request.model, request.prompt_tokens)
        return reply, carried, held

    async def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered:
        session, fingerprint = stream.session, stream.fingerprint
        assert session is not None and fingerprint is not None
        chunk = message.generate_chunk
        requested, prompt_tokens = stream.advanced(message)
        model = check_model(requested, self.limits)
        check_single_choice(chunk)
        check_chunk(chunk, self.limits)
        if not chunk.choices:
            raise BadRequest("a message on an open stream carries its choice's chunk")
        delta = chunk_tokens(chunk)
        used = len(session.prompt_token_ids), len(session.output_token_ids)
        problem = stream_length_error(*used, delta, self.limits)
        if problem is not None:
            raise BadRequest(problem)
        request = session.request_for(chunk, requested, prompt_tokens)
        key = (chunk.request_id, chunk.choices[0].index)
        found = Found(key, fingerprint, Acquired(session, Source.HIT), delta)
        reply, state, _ = await self.chunks.derendered(request, model, found)
        carried = self.chunks.carried(state, session, fingerprint)
        return reply, carried, None if _finished(chunk) else stream


class PlainLane:
    """Streams without a parser (plain chat, completions): the connection holds the last
    request, with the state its reply carried, and continues it as the next one."""

    def __init__(self, service: DerenderService, completions: bool) -> None:
        self.service = service
        self.completions = completions
        self.endpoint = "completions" if completions else "chat"
        self.kind: type[Any] = (
            CompletionStreamDerenderRequest if completions else ChatStreamDerenderRequest
        )

    async def open(self, received: Received) -> Answered:
        request: Any = decode_body(received.body, self.kind)
        check_history(request.stream_state)
        return await self._answer(request, received)

    async def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered:
        model, prompt_tokens = stream.advanced(message)
        request = msgspec.structs.replace(
            stream.request,
            generate_chunk=message.generate_chunk,
            model=model,
            prompt_tokens=prompt_tokens,
        )
        return await self._answer(request, None)

    async def _answer(self, request: Any, received: Received | None) -> Answered:
        limits, plain = self.service.limits, self.service.plain_stream
        derender: Callable[[Any, str], tuple[Any, StreamState]]
        if self.completions:
            model = validate_completion_stream(request, limits)
            derender = plain.completion
        else:
            view = received.view if received is not None else BodyView()
            model = validate_chat_stream(request, view, limits)
            check_state_ids(request.stream_state, limits)
            derender = plain.chat
        chunk = request.generate_chunk
        reply, state = await self.service.run(chunk_tokens(chunk), derender, request, model)
        held = None
        if not _finished(chunk):
            kept = msgspec.structs.replace(request, stream_state=state)
            held = OpenStream(kept, model=request.model, prompt_tokens=request.prompt_tokens)
        return reply, encoder.encode(state), held


class SocketReply(Struct):
    """A chunk's reply on a connection: its stream, the chunk, the state it carries."""

    request_id: str
    index: int
    chunk: Any
    stream_state: Raw
