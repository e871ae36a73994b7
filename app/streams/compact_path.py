"""A parsed chat chunk that carries a compact state (docs/transports.md).

Such a chunk has no history to replay and may have no context, so it is answered only
by the live session that continues exactly its state; any other case is a 409 that
asks for the chunk in full. A 409 takes nothing from the store: the full re-send finds
what this chunk found.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Literal

import msgspec
from msgspec import Raw, Struct
from starlette.responses import Response

from app.streams.chunk_path import (
    Found,
    ParsedChunks,
    answers_now,
    reply_response,
    respond_now,
)
from app.streams.parsed_stream import ChunkRequest, Continued
from app.streams.session import Fingerprint, StreamSession
from app.streams.session_store import Acquired, Source, StreamKey
from app.wire.body import Received, decode_body
from app.wire.errors import BadRequest, DerenderError, StateRequired
from app.wire.protocol import (
    ChatCompletionChunk,
    CompactChatStreamRequest,
    GenerateChunk,
    encoder,
)
from app.wire.routing import check_stream_id
from app.wire.validation import (
    check_chunk,
    check_model,
    check_single_choice,
    chunk_tokens,
    stream_length_error,
)
from cache.sessions import Eviction

_NULL = b"null"
_RAW_NULL = Raw(_NULL)
# What every compact state has, and a full state never has, as we encode it.
_DIGEST_KEY = b'"output_digest":'


class _Continuing(Struct):
    """A compact chunk read as far as continuing its kept session: its chunk, its state
    as the bytes sent (compared with the ones the session's last reply carried, never
    decoded) and whether it carries context."""

    generate_chunk: GenerateChunk
    stream_state: Raw = _RAW_NULL
    stream: Literal[True] = True
    model: str | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: Raw = _RAW_NULL
    chat_request: Raw = _RAW_NULL


_continuing = msgspec.json.Decoder(_Continuing)


class CompactReply(Struct):
    """A compact chunk's answer: its stream, reply chunk and encoded state, and where its
    session came from (None for a usage-only chunk, which takes none)."""

    key: StreamKey
    chunk: ChatCompletionChunk | Raw
    stream_state: bytes
    source: Source | None


class CompactChunks:
    """Answers compact chunks from the sessions of ``chunks``' store."""

    def __init__(self, chunks: ParsedChunks) -> None:
        self.chunks = chunks
        self.store = chunks.store
        self.limits = chunks.limits

    async def answer(self, received: Received) -> Response:
        replied = await self.replied(received)
        response = reply_response(replied.chunk, replied.stream_state)
        if replied.source is not None:
            response.headers["x-derender-cache"] = replied.source
        return response

    async def replied(self, received: Received) -> CompactReply:
        """The chunk's reply before it is a response (a batch entry's is not one)."""
        request = decode_body(received.body, CompactChatStreamRequest)
        chunk = request.generate_chunk
        check_stream_id(received.stream_id, chunk.request_id)
        model = check_model(request.model, self.limits)
        check_single_choice(chunk)
        check_chunk(chunk, self.limits)
        key = (chunk.request_id, chunk.choices[0].index if chunk.choices else 0)
        sent = encoder.encode(request.stream_state)
        fingerprint = self._fingerprint(received, key, sent)
        if not chunk.choices:  # usage only: the session is the context, left in place
            kept = self.store.cache.peek(key, fingerprint)
            if kept is None or kept[1] != sent:
                raise StateRequired("no live session of this stream continues its stream_state")
            reply = self._usage(request, model, kept[0])
            return CompactReply(key, reply, sent, None)
        session = self.store.acquire_compact(key, fingerprint, sent)
        if session is None:
            raise StateRequired("no live session of this stream continues its stream_state")
        delta = chunk_tokens(chunk)
        problem = stream_length_error(
            len(session.prompt_token_ids), session.output_tokens, delta, self.limits
        )
        if problem is not None:
            await self.store.drop(key, fingerprint, Eviction.ERROR)
            raise BadRequest(problem)
        hit = Continued(chunk, request.model, request.prompt_tokens)
        found = Found(key, fingerprint, Acquired(session, Source.HIT), delta)
        reply, carried = await self.chunks.respond_parts(hit, model, found, compact=True)
        return CompactReply(key, reply, carried, Source.HIT)

    def continued(self, body: bytes | Raw) -> CompactReply | Awaitable[CompactReply] | None:
        """A compact chunk's reply in one decode of its body, when it continues a live
        session with the very state bytes its last reply carried (the common batch
        entry; the caller counts its hit): at once when ``answers_now`` says so, else
        to await. Else None, nothing taken or counted, and the caller answers it with
        ``replied``, which gives any error its exact message. The state is compared as
        bytes: they are ours, so they need no decode."""
        try:
            request = _continuing.decode(body)
        except (msgspec.DecodeError, RecursionError):
            return None
        chunk = request.generate_chunk
        sent = bytes(request.stream_state)
        if (
            len(chunk.choices) != 1
            or request.prompt_token_ids != _RAW_NULL
            or request.chat_request != _RAW_NULL
            or _DIGEST_KEY not in sent
        ):
            return None
        try:
            model = check_model(request.model, self.limits)
            check_chunk(chunk, self.limits)
        except DerenderError:
            return None
        key = (chunk.request_id, chunk.choices[0].index)
        found = self.store.acquire_compact_state(key, sent)
        if found is None:
            return None
        session, fingerprint = found
        delta = chunk_tokens(chunk)
        problem = stream_length_error(
            len(session.prompt_token_ids), session.output_tokens, delta, self.limits
        )
        if problem is not None:
            self.store.drop_here(key, fingerprint, Eviction.ERROR)  # no snapshot to drop
            raise BadRequest(problem)
        continued = Continued(chunk, request.model, request.prompt_tokens)
        if answers_now(self.chunks, delta):
            answer = respond_now(self.chunks, continued, model, key, fingerprint, session, True)
            return CompactReply(key, *answer, Source.HIT)
        hit = Found(key, fingerprint, Acquired(session, Source.HIT), delta)
        return self._responded(continued, model, hit)

    async def _responded(self, request: ChunkRequest, model: str, found: Found) -> CompactReply:
        reply, carried = await self.chunks.respond_parts(request, model, found, compact=True)
        return CompactReply(found.key, reply, carried, Source.HIT)

    def _fingerprint(self, received: Received, key: tuple[str, int], sent: bytes) -> Fingerprint:
        """The request's own when it sends its context, else the one of the session kept
        under ``sent`` (the state's digest names the context)."""
        view = received.view
        if bytes(view.prompt_token_ids) != _NULL or bytes(view.chat_request) != _NULL:
            return self.chunks.fingerprint(view)
        fingerprint = self.store.cache.fingerprint_of(key, sent)
        if not isinstance(fingerprint, Fingerprint):
            raise StateRequired("no live session of this stream continues its stream_state")
        return fingerprint

    def _usage(
        self, request: CompactChatStreamRequest, model: str, session: StreamSession
    ) -> ChatCompletionChunk | Raw:
        full = session.request_for(request.generate_chunk, request.model, request.prompt_tokens)
        reply, _ = self.chunks.service.parsed_stream.chunk(full, model, None)
        return reply
