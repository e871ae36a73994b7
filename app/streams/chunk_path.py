"""The chunk path of a parsed chat stream (../shared/DESIGN.md), in one place.

A chunk is answered from its stream's session: the one kept since the previous
chunk, else one restored from Redis, else one rebuilt by replaying the carried
history. Whichever it is, the reply is the same bytes. The direct lane answers a
chunk that continues its kept session, or its Redis snapshot, from the body's raw
fields, without decoding the carried history; anything else takes the full path.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import msgspec
from msgspec import Raw
from starlette.responses import Response

from app.serving.metrics import Metrics
from app.serving.service import DerenderService
from app.streams.compact import compact_of
from app.streams.parsed_stream import ChunkRequest, Continued
from app.streams.reply import reply_json
from app.streams.session import Fingerprint, StreamSession
from app.streams.session_store import Acquired, Carried, Source, StreamKey
from app.streams.state_json import (
    HistoryJson,
    LiftedHistory,
    canonical,
    compact_state_digest,
    encoded_state,
    lifted_state,
    state_digest,
)
from app.wire.advisories import DIVERGED_WARNING, WARNING_HEADER, Advisory, advise, diverges
from app.wire.body import Received
from app.wire.errors import BadRequest, DerenderError
from app.wire.protocol import (
    BodyView,
    ChatCompletionChunk,
    ChatRequest,
    ChatStreamDerenderRequest,
    GenerateChunk,
    StreamState,
    TokenIds,
    encoder,
)
from app.wire.routing import check_stream_id
from app.wire.validation import (
    check_carried_state,
    check_chunk,
    check_model,
    chunk_tokens,
    stream_length_error,
    validate_chat_stream,
)
from cache.sessions import Eviction, Miss

logger = logging.getLogger("derender_server")

_chunk_decoder = msgspec.json.Decoder(GenerateChunk)
_optional_str = msgspec.json.Decoder(str | None)
_optional_int = msgspec.json.Decoder(int | None)
_prompt_decoder = msgspec.json.Decoder(TokenIds | None)
_chat_request_decoder = msgspec.json.Decoder(ChatRequest | None)

# Set on a reply to a chunk that started its live stream over (see report_restart).
RESTART_WARNING = (
    "restarted: this chunk has no stream_state, but its request_id and choice index had a "
    "live stream, so it started over. To continue a stream, send the stream_state of its "
    "previous reply."
)


class Found(NamedTuple):
    """A chunk's session as the store gave it, and the tokens its derendering reads."""

    key: StreamKey
    fingerprint: Fingerprint | None
    acquired: Acquired
    tokens: int
    # The carried history continues neither way from the one this replica last answered.
    diverged: bool = False


class Asked(NamedTuple):
    """The store asked on the direct lane, with nothing to continue the chunk: the full
    path replays it without asking again."""

    acquired: Acquired
    diverged: bool


def json_response(value: object) -> Response:
    return Response(encoder.encode(value), media_type="application/json")


def reply_response(chunk: ChatCompletionChunk | Raw, carried: bytes) -> Response:
    """A streamed chat chunk's response: its reply chunk and the state it carries."""
    return Response(reply_json(chunk, carried), media_type="application/json")


class ParsedChunks:
    """Answers parsed chat chunks with the service's session store."""

    def __init__(self, service: DerenderService) -> None:
        self.service = service
        self.store = service.store
        self.limits = service.limits
        self.metrics = service.metrics

    def fingerprint(self, view: BodyView) -> Fingerprint:
        digest = self.service.settings_digest
        return Fingerprint(digest, view.chat_request, view.prompt_token_ids)

    async def continue_echoed(self, received: Received) -> Response | Asked | None:
        """Answer a chunk that continues its kept session exactly, or its Redis
        snapshot, from the body's view.

        The re-sent state, prompt and chat request are compared as raw bytes with
        what the session was built from and last sent, never decoded; only the small
        fields are. Anything else (a miss, a field that fails to decode or check)
        returns None and the chunk takes the full path, which also gives any error
        its exact message; or ``Asked`` when the store was asked and had nothing.
        """
        view = received.view
        try:
            chunk = _chunk_decoder.decode(view.generate_chunk)
            requested = _optional_str.decode(view.model)
            prompt_tokens = _optional_int.decode(view.prompt_tokens)
            check_stream_id(received.stream_id, chunk.request_id)
            model = check_model(requested, self.limits)
            if len(chunk.choices) != 1:
                return None
            check_chunk(chunk, self.limits)
        except (msgspec.DecodeError, DerenderError):
            return None
        key = (chunk.request_id, chunk.choices[0].index)
        fingerprint = self.fingerprint(view)
        delta = chunk_tokens(chunk)

        def fits(session: StreamSession) -> bool:
            used = len(session.prompt_token_ids) + session.output_tokens
            return used + delta <= self.limits.max_model_len

        sent = bytes(view.stream_state)
        history = received.history
        session = None
        if self.store.cache.enabled:
            session = self.store.acquire_echoed(key, fingerprint, sent, history, fits)
        if session is not None:
            hit = Continued(chunk, requested, prompt_tokens)
            acquired = Acquired(session, Source.HIT)
            return await self.respond(hit, model, Found(key, fingerprint, acquired, delta))
        if self.store.redis is None or history is None:
            return None
        state = lifted_state(sent)
        if state is None or not canonical(history):
            return None  # a state we did not encode: the full path reads it
        try:
            request = ChatStreamDerenderRequest(
                chunk,
                model=requested,
                stream_state=state,
                prompt_tokens=prompt_tokens,
                prompt_token_ids=_prompt_decoder.decode(view.prompt_token_ids),
                chat_request=_chat_request_decoder.decode(view.chat_request),
            )
            validate_chat_stream(request, view, self.limits)  # but the history's length
        except (msgspec.DecodeError, DerenderError):
            return None
        return await self.restore_echoed(request, model, key, fingerprint, sent, history)

    async def restore_echoed(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        key: StreamKey,
        fingerprint: Fingerprint,
        sent: bytes,
        history: LiftedHistory,
    ) -> Response | Asked:
        """Continue a chunk from the stream's Redis snapshot, its carried state (``sent``,
        its history lifted out as ``history``) in our encoding: the history is copied
        and hashed once to name the snapshot, then adopted as the restored session's,
        never decoded into ints (its ids are counted, for the snapshot's range checks).
        The digest covers every byte of the state, so a history that is not the
        snapshot's misses and the chunk replays."""
        state = request.stream_state
        assert state is not None
        adopted = HistoryJson.adopted(history)
        tokens = history.tokens()  # for the range checks, as a decoded history's length
        digest = state_digest(sent, adopted.digest())
        whole = msgspec.structs.replace(
            state,
            output_token_ids=Raw(history.token_ids),
            output_chunk_lens=Raw(history.chunk_lens),
        )
        carried = Carried(encoder.encode(whole), lambda: digest, tokens)
        known = self.store.cache.peek(key, fingerprint)
        acquired = await self.store.acquire(
            key,
            fingerprint,
            carried,
            lambda snapshot: self.service.sessions.restored(request, snapshot, (adopted, tokens)),
        )
        diverged = (
            acquired.miss is Miss.HISTORY
            and known is not None
            and known[0].history_diverges(adopted)
        )
        session = acquired.session
        if session is None:
            return Asked(acquired, diverged)
        delta = chunk_tokens(request.generate_chunk)
        used = len(session.prompt_token_ids), session.output_tokens
        problem = stream_length_error(*used, delta, self.limits)
        if problem is not None:  # the length the full path checks first, now known
            await self.store.drop(key, fingerprint, Eviction.ERROR)
            raise BadRequest(problem)
        found = Found(key, fingerprint, acquired, delta, diverged)
        response = await self.respond(request, model, found)
        if diverged:
            advise(response, self.metrics, Advisory.DIVERGED_STATE, DIVERGED_WARNING)
        return response

    async def answer(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        view: BodyView,
        compact: bool,
        asked: Asked | None = None,
    ) -> Response:
        """A chunk on the full path: its session from the store, else a replay. With
        ``compact``, its reply carries a compact state, and the sessions it may continue
        are those kept under one (docs/transports.md). ``asked``: the direct lane asked
        the store already."""
        found = await self.find(request, view, compact, asked)
        response = await self.respond(request, model, found, compact)
        # No state, same request, live stream: a restart or a forgotten state.
        if found.acquired.miss is Miss.HISTORY and request.stream_state is None:
            report_restart(self.metrics, found.key, response)
        elif found.diverged:
            advise(response, self.metrics, Advisory.DIVERGED_STATE, DIVERGED_WARNING)
        return response

    async def find(
        self,
        request: ChatStreamDerenderRequest,
        view: BodyView,
        compact: bool,
        asked: Asked | None = None,
    ) -> Found:
        """The session of a chunk on the full path, from the store (None: it replays),
        and what its derendering costs in tokens."""
        chunk = request.generate_chunk
        key = (chunk.request_id, chunk.choices[0].index if chunk.choices else 0)
        history = len(request.stream_state.output_token_ids) if request.stream_state else 0
        fingerprint = self.fingerprint(view) if compact else None
        acquired = Acquired(None, Source.MISS)
        known = None
        # A usage-only chunk needs no session.
        if chunk.choices and self.store.enabled:
            fingerprint = fingerprint or self.fingerprint(view)
            if asked is not None:
                acquired = asked.acquired
            else:
                known = self.store.cache.peek(key, fingerprint)
                acquired = await self.store.acquire(
                    key,
                    fingerprint,
                    carried_as_sent(request, fingerprint, compact),
                    lambda snapshot: self.service.sessions.restored(request, snapshot),
                )
        if acquired.session is None:
            check_carried_state(request.stream_state, self.limits)
            if chunk.choices:
                self.metrics.replays.inc()
                self.metrics.replayed_tokens.inc(history)
        delta = chunk_tokens(chunk)
        tokens = delta if acquired.session else delta + history
        diverged = (
            asked.diverged
            if asked is not None
            else acquired.miss is Miss.HISTORY
            and known is not None
            and request.stream_state is not None
            and diverges(known[0].output_token_ids, request.stream_state.output_token_ids)
        )
        return Found(key, fingerprint, acquired, tokens, diverged)

    async def respond(
        self, request: ChunkRequest, model: str, found: Found, compact: bool = False
    ) -> Response:
        """Feed the chunk to its session and reply, with a compact state if ``compact``.

        The session is checked out while the chunk is processed, so a concurrent
        duplicate replays instead of sharing it. Unless this chunk ends the stream
        or fails, the store keeps it for the next chunk.
        """
        reply, carried = await self.respond_parts(request, model, found, compact)
        response = reply_response(reply, carried)
        if request.generate_chunk.choices:
            response.headers["x-derender-cache"] = found.acquired.source
        return response

    async def respond_parts(
        self, request: ChunkRequest, model: str, found: Found, compact: bool
    ) -> tuple[ChatCompletionChunk | Raw, bytes]:
        """``respond``'s reply chunk and encoded state, before they are a response."""
        chunk = request.generate_chunk
        key, fingerprint = found.key, found.fingerprint
        reply, state, session = await self.derendered(request, model, found)
        context = fingerprint.digest if compact and fingerprint is not None else None
        carried = carried_state(state, session, context)
        if session is not None and fingerprint is not None:
            if chunk.choices[0].finish_reason is not None:
                await self.store.drop(key, fingerprint, Eviction.FINISHED)
            else:
                kept = session
                digest = (
                    (lambda: compact_state_digest(carried))
                    if context is not None
                    else (lambda: kept.state_digest(state))
                )
                await self.store.keep(key, fingerprint, session, carried, digest)
        return reply, carried

    async def derendered(
        self, request: ChunkRequest, model: str, found: Found
    ) -> tuple[ChatCompletionChunk | Raw, StreamState, StreamSession | None]:
        """The chunk fed to the found session (or a replay; a hit, ``Continued``,
        continues it without its request built first). Any failure or cancellation
        drops the checked-out session; the error itself is re-raised and answered as
        ours (a logged 500)."""
        session = found.acquired.session
        try:
            args = (self.service, request, model, session)
            return await self.service.run(found.tokens, derender, *args)
        except BaseException:
            if found.fingerprint is not None:
                await self.store.drop(found.key, found.fingerprint, Eviction.ERROR)
            raise


def answers_now(chunks: ParsedChunks, tokens: int) -> bool:
    """Whether a chunk of ``tokens`` that found its session is answered by
    ``respond_now``: small enough to derender on the event loop, and no Redis tier to
    write to."""
    return chunks.store.redis is None and chunks.service.inline(tokens)


def respond_now(
    chunks: ParsedChunks,
    request: ChunkRequest,
    model: str,
    key: StreamKey,
    fingerprint: Fingerprint,
    session: StreamSession,
    compact: bool,
) -> tuple[ChatCompletionChunk | Raw, bytes]:
    """``ParsedChunks.respond_parts`` without an await, for a chunk that continues its
    found ``session`` and ``answers_now`` (a batch POST's common entry): the same
    reply and state, the session kept or dropped the same way, without a coroutine per
    step and without its ``Found``."""
    store, service = chunks.store, chunks.service
    try:
        reply, state, fed = service.run_now(derender, service, request, model, session)
    except BaseException:
        store.drop_here(key, fingerprint, Eviction.ERROR)
        raise
    carried = carried_state(state, fed, fingerprint.digest if compact else None)
    if fed is not None:
        if request.generate_chunk.choices[0].finish_reason is not None:
            store.drop_here(key, fingerprint, Eviction.FINISHED)
        else:
            store.keep_here(key, fingerprint, fed, carried)
    return reply, carried


def derender(
    service: DerenderService, request: ChunkRequest, model: str, session: StreamSession | None
) -> tuple[ChatCompletionChunk | Raw, StreamState, StreamSession | None]:
    """The chunk fed to ``session``, rebuilt by replay when None (on a worker thread when
    the replay is long); a hit (``Continued``) continues it."""
    if isinstance(request, Continued):
        assert session is not None  # a hit's
        reply, state = service.parsed_stream.continued(request, model, session)
        return reply, state, session
    if session is None and request.generate_chunk.choices:
        session = service.sessions.replayed(request)
    reply, state = service.parsed_stream.chunk(request, model, session)
    return reply, state, session


def carried_as_sent(
    request: ChatStreamDerenderRequest, fingerprint: Fingerprint, compact: bool
) -> Carried:
    """A decoded chunk's state as the store looks it up: encoded as we encode it
    (compact, with ``compact``), and named as its snapshot's envelope names it."""
    state = request.stream_state or StreamState()
    history = len(state.output_token_ids)
    if compact:
        encoded = encoder.encode(compact_of(state, fingerprint.digest))
        return Carried(encoded, lambda: compact_state_digest(encoded), history)
    encoded, digest = encoded_state(state)
    return Carried(encoded, digest, history)


def carried_state(
    state: StreamState, session: StreamSession | None, compact_under: bytes | None
) -> bytes:
    """The encoded state a reply carries: the full one, its history from the
    session's ready JSON (never encoded again), or with ``compact_under`` (a
    fingerprint's digest) the compact one, its history named under it."""
    if session is None:  # a usage-only chunk
        if compact_under is not None:
            return encoder.encode(compact_of(state, compact_under))
        return encoder.encode(state)
    if compact_under is None:
        return session.full_state(state)
    frame = session.frame
    if frame is not None and frame.state is state:  # a plain chunk's: written in its frame
        name = session.history_name(compact_under, state.last_tool_call_ids)
        return frame.compact(session.output_tokens, name)
    return encoder.encode(session.compact_state(state, compact_under))


def report_restart(metrics: Metrics, key: StreamKey, response: Response) -> None:
    """Say that a chunk without ``stream_state`` started a live stream over.

    It is answered as a first chunk, as vLLM answers it (not refused): a restart or a
    retried first chunk under the same request id is legitimate, and a refusal would
    make the reply depend on what this replica's cache holds. The lookup dropped the
    kept session; its Redis snapshot, if any, serves only a chunk carrying its exact
    state, and this stream's own snapshot replaces it under the same key. A client
    that meant to continue is told here.
    """
    metrics.stream_restarts.inc()
    response.headers[WARNING_HEADER] = RESTART_WARNING
    logger.info(  # not a warning: any client can cause it, as often as it likes
        "request %r choice %d: a chunk without stream_state started a live stream over. "
        "To continue a stream send the stream_state of its previous reply; give a "
        "new stream a new request_id.",
        *key,
    )
