"""What a WebSocket connection holds per stream, and how a message opens or continues one.

A message that carries context (``prompt_token_ids``, the chat or completion request, a
full ``stream_state``) opens its stream, as an HTTP chunk of the full protocol would be
answered; the connection then holds what the next chunk continues, so a later message is
its generate chunk alone. A parsed chat stream is held as its session (taken out of the
store for good: the connection is the only one to continue it), a plain stream as its
last request with the state its reply carried, without what no later message reads.

What a connection holds counts against the stream cache's bounds like a session kept
between HTTP chunks (``HeldStreams``): when the cache evicts a held stream, the
connection lets its session go, and the stream's next message without context is
answered ``stream_state_required``, so the client resumes it with its full state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
from msgspec import Raw, Struct

from app.serving.service import DerenderService
from app.streams.chunk_path import ParsedChunks, carried_state
from app.streams.compact import is_compact
from app.streams.memsize import deep_size
from app.streams.parsed_stream import Continued
from app.streams.session import StreamSession, kept_chat_request
from app.streams.session_store import Source, StreamKey
from app.wire.body import Received, decode_body
from app.wire.errors import BadRequest, StateRequired
from app.wire.protocol import (
    BodyView,
    ChatStreamDerenderRequest,
    CompletionStreamDerenderRequest,
    GenerateChunk,
    StreamState,
)
from app.wire.validation import (
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
from cache.sessions import Held, SessionCache

_NULL = Raw(b"null")
_NO_CHUNK = GenerateChunk(choices=[], request_id="")


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


@dataclass(slots=True, eq=False)
class OpenStream:
    """A stream a connection holds: a plain stream's last request (its context and
    state), or a parsed chat stream's session and the digest of the fingerprint that
    names it; the ``model`` and ``prompt_tokens`` its messages last said; and its count
    in the stream cache (None once evicted: it then holds nothing)."""

    request: Any = None
    session: StreamSession | None = None
    context: bytes = b""
    model: str | None = None
    prompt_tokens: int | None = None
    held: Held | None = None
    _size: int = field(default=0, init=False)
    # The session's history length when it was last measured (0 for a plain stream).
    _measured_at: int | None = field(default=None, init=False)

    def size(self) -> int:
        """Bytes the stream keeps alive (its reply's state is not kept: the next message
        is answered from the session or request itself). Measured when it opens, then
        again whenever a session's history has grown by a sixteenth (at least 16
        tokens), so a message seldom pays for it; a plain stream's does not grow."""
        session = self.session
        if session is None:
            if self._measured_at is None:
                self._size = _OPEN_STREAM_BYTES + deep_size(self.request)
                self._measured_at = 0
            return self._size
        tokens = session.output_tokens
        last = self._measured_at
        if last is None or tokens - last >= max(16, last // 16):
            # The connection keeps no state bytes to compare: the session is its own.
            self._size = _OPEN_STREAM_BYTES + session.size(b"")
            self._measured_at = tokens
        return self._size

    def evict(self) -> None:
        """The cache evicted the stream: let go of what it holds."""
        self.held = self.request = self.session = None

    def advanced(self, message: SocketMessage) -> tuple[str | None, int | None]:
        """The ``model`` and ``prompt_tokens`` of ``message``: its own, else the stream's."""
        if message.model is not None:
            self.model = message.model
        if message.prompt_tokens is not None:
            self.prompt_tokens = message.prompt_tokens
        return self.model, self.prompt_tokens


# What holding a stream costs besides its session or request: its count in the cache
# and its place in the LRU (measured with tracemalloc, tests/test_memory.py).
_OPEN_STREAM_BYTES = 150
EVICTED = (
    "the stream cache evicted this stream's session (--stream-cache-max-bytes, "
    "--stream-cache-size, --stream-cache-ttl)"
)


class HeldStreams:
    """A connection's open streams, each counted in the stream cache while it is held,
    so they share one bound (entries, bytes, idle time) with the sessions kept between
    HTTP chunks. An evicted stream stays known, holding nothing, until its next message:
    without context, it is answered ``stream_state_required``."""

    def __init__(self, cache: SessionCache[StreamSession]) -> None:
        self._cache = cache
        self._streams: dict[StreamKey, OpenStream] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def __contains__(self, key: StreamKey) -> bool:
        return key in self._streams

    def continued(self, key: StreamKey, message: SocketMessage) -> OpenStream | None:
        """The stream ``message`` (of stream ``key``) continues; None when it opens one
        (it carries context, or its stream is not open here). Raises ``StateRequired``
        when the stream was evicted and the message carries no context to resume it."""
        stream = self._streams.get(key)
        if stream is None or message.opens:
            return None
        if stream.held is None:
            del self._streams[key]
            raise StateRequired(EVICTED)
        return stream

    def put(self, key: StreamKey, stream: OpenStream | None) -> None:
        """Hold ``stream`` (the one the key's message continued or opened) for the next
        message, measured again; None: the key's stream is over."""
        current = self._streams.get(key)
        if stream is not None and stream is current:
            self._held_again(stream)
            return
        self.drop(key)
        if stream is None:
            return
        self._streams[key] = stream
        stream.held = self._cache.hold(stream.size(), stream.evict)
        if stream.held is None:  # the cache keeps nothing this large (or nothing at all)
            stream.evict()

    def continue_with(
        self, key: StreamKey, continued: OpenStream, stream: OpenStream | None
    ) -> None:
        """``put`` for a message that continued ``continued``, the stream held under
        ``key`` (known without a lookup): ``stream`` is it again, or None once over."""
        if stream is continued:
            self._held_again(stream)
        else:
            self.put(key, stream)

    def _held_again(self, stream: OpenStream) -> None:
        """``stream`` stays held, measured again; evicted while its message was
        answered, what it took up goes."""
        if stream.held is not None:
            self._cache.touch(stream.held, stream.size())
        else:
            stream.evict()

    def drop(self, key: StreamKey) -> None:
        """The key's stream leaves the connection (it failed, or is opened anew)."""
        stream = self._streams.pop(key, None)
        if stream is not None and stream.held is not None:
            self._cache.unhold(stream.held)

    def close(self) -> None:
        """The connection is gone: its streams stop counting."""
        for key in list(self._streams):
            self.drop(key)


# A chunk's reply, the state it carries (a struct, or ``Raw`` JSON: encoded with the
# reply, in one call) and what the connection holds after it (None: the stream is over).
Answered = tuple[Any, Any, OpenStream | None]


class Lane(Protocol):
    """How one route's streams are opened and continued on a connection."""

    endpoint: str
    kind: type[Any]  # the route's chunk body

    async def open(self, received: Received) -> Answered: ...

    def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered:
        """Continue ``stream`` with ``message``; the caller runs it on the event loop or a
        worker thread by the size of its chunk (``DerenderService.run``)."""


def _finished(chunk: GenerateChunk) -> bool:
    choices = chunk.choices
    if len(choices) == 1:  # a message on a parsed stream carries one
        return choices[0].finish_reason is not None
    return any(choice.finish_reason is not None for choice in choices)


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
        context = fingerprint.digest
        carried = Raw(carried_state(state, session, context))
        held = None
        if session is not None and not _finished(request.generate_chunk):
            session.leave_store()
            held = OpenStream(None, session, context, request.model, request.prompt_tokens)
        return reply, carried, held

    def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered:
        session, context = stream.session, stream.context
        assert session is not None
        chunk = message.generate_chunk
        requested, prompt_tokens = stream.advanced(message)
        model = check_model(requested, self.limits)
        check_single_choice(chunk)
        check_chunk(chunk, self.limits)
        if not chunk.choices:
            raise BadRequest("a message on an open stream carries its choice's chunk")
        delta = chunk_tokens(chunk)
        used = len(session.prompt_token_ids), session.output_tokens
        problem = stream_length_error(*used, delta, self.limits)
        if problem is not None:
            raise BadRequest(problem)
        # The session is the connection's, none of the store's to drop if this fails.
        hit = Continued(chunk, requested, prompt_tokens)
        reply, state = self.chunks.service.parsed_stream.continued(hit, model, session)
        carried = Raw(carried_state(state, session, context))  # a plain chunk's: its frame
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
        model = self._validated(request, received.view)
        reply, state = await self._derendered(request, model)
        stream = OpenStream(model=request.model, prompt_tokens=request.prompt_tokens)
        return self._held(reply, state, self._slimmed(request), stream)

    def proceed(self, message: SocketMessage, stream: OpenStream) -> Answered:
        model, prompt_tokens = stream.advanced(message)
        request = msgspec.structs.replace(
            stream.request,
            generate_chunk=message.generate_chunk,
            model=model,
            prompt_tokens=prompt_tokens,
        )
        # The chat or completion request passed its checks when the stream opened; what
        # is held of it is what the derendering reads, which the checks need not see.
        own = "completion_request" if self.completions else "chat_request"
        checked = self._validated(msgspec.structs.replace(request, **{own: None}), BodyView())
        return self._held(*self._derender(request, checked), request, stream)

    def _slimmed(self, request: Any) -> Any:
        """The request without what no later message reads of it: the messages or the
        prompt (raw views that would keep the whole first message alive), and the chat
        request's tools and template fields."""
        if self.completions:
            options = request.completion_request
            if options is not None:
                options = msgspec.structs.replace(options, prompt=_NULL, prompt_embeds=_NULL)
            return msgspec.structs.replace(request, completion_request=options)
        chat_request = request.chat_request
        if chat_request is not None:
            chat_request = kept_chat_request(chat_request)
        return msgspec.structs.replace(request, chat_request=chat_request)

    def _validated(self, request: Any, view: BodyView) -> str:
        """The request checked; returns the reply's model name."""
        limits = self.service.limits
        if self.completions:
            return validate_completion_stream(request, limits)
        model = validate_chat_stream(request, view, limits)
        check_state_ids(request.stream_state, limits)
        return model

    def _derender(self, request: Any, model: str) -> tuple[Any, StreamState]:
        plain = self.service.plain_stream
        derender = plain.completion if self.completions else plain.chat
        result: tuple[Any, StreamState] = derender(request, model)
        return result

    async def _derendered(self, request: Any, model: str) -> tuple[Any, StreamState]:
        tokens = chunk_tokens(request.generate_chunk)
        return await self.service.run(tokens, self._derender, request, model)

    @staticmethod
    def _held(reply: Any, state: StreamState, request: Any, stream: OpenStream) -> Answered:
        """The reply, and unless its chunk ends the stream ``stream`` holding ``request``
        with the reply's state and without its chunk (the next message's own)."""
        if _finished(request.generate_chunk):
            return reply, state, None
        stream.request = msgspec.structs.replace(
            request, generate_chunk=_NO_CHUNK, stream_state=state
        )
        return reply, state, stream


class SocketReply(Struct, gc=False):  # as app/wire/protocol.py's per-chunk structs
    """A chunk's reply on a connection or in a batch frame: its stream (null when a
    batch POST's chunk names no request_id), the chunk, the state it carries (a struct,
    or ``Raw`` JSON)."""

    request_id: str | None
    index: int | None
    chunk: Any
    stream_state: Any
