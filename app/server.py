"""The HTTP face: Starlette routes for the derender endpoints, health, models, metrics.

A request is read under the size limit, its ``stream`` flag picks the variant, the
body is decoded once into msgspec structs, then validated in vLLM's order. Decoding
runs on the event loop when the request is small and on a bounded thread pool when
it decodes (or replays) more tokens than ``--inline-tokens``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec
from msgspec import Raw
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app import body_errors
from app.auth import ApiKeyGuard
from app.budget import CpuBudgetExceeded, run_within
from app.derender import Derenderer, Lazy
from app.docs_page import docs_endpoint
from app.errors import (
    BadRequest,
    BodyTooLarge,
    DerenderError,
    InternalError,
    InvalidBody,
    NotFound,
    RoutingError,
)
from app.metrics import Metrics
from app.openapi import openapi_document
from app.pieces import encode_response, free_in_slices
from app.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatRequest,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    CompletionStreamReply,
    GenerateChunk,
    GenerateResponse,
    StreamState,
    encoder,
)
from app.routing import STREAM_ID_HEADER, check_stream_id
from app.session import Fingerprint, StreamSession
from app.settings import Settings
from app.tokenizer import Tokenizer, load_tokenizer
from app.validation import (
    CHAT_REQUEST_REQUIRED,
    PROMPT_IDS_REQUIRED,
    STREAM_STOP_STRINGS,
    chat_free_form,
    check_chat_request,
    check_chat_request_bytes,
    check_chat_request_utf8,
    check_choice_vocabulary,
    check_chunk_bounds,
    check_completion_request,
    check_depth,
    check_generate_bounds,
    check_history_length,
    check_prompt_length,
    check_state_vocabulary,
    check_token_ids_present,
    check_tool_count,
    check_vocabulary,
)
from cache.redis_tier import (
    CORRUPT,
    DELETED,
    FORGED,
    OUT_OF_RANGE,
    OVERSIZED,
    TOO_LARGE,
    WRITTEN,
    RedisTier,
)
from cache.redis_tier import ERROR as REDIS_ERROR
from cache.sessions import ERROR, FINISHED, HISTORY, SessionCache
from parsers.registry import ParserFactory

logger = logging.getLogger("derender_server")

_STREAM_ID_KEY = STREAM_ID_HEADER.lower().encode()  # ASGI header names are lower case
CHAT_PATH = "/v1/chat/completions/derender"
COMPLETIONS_PATH = "/v1/completions/derender"

T = TypeVar("T")
S = TypeVar("S", ChatStreamDerenderRequest, CompletionStreamDerenderRequest)


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_chunk_decoder = msgspec.json.Decoder(GenerateChunk)
_optional_str = msgspec.json.Decoder(str | None)
_optional_int = msgspec.json.Decoder(int | None)

# One-shot bodies up to this size are answered on the event loop (a few hundred
# tokens); larger ones on the worker pool.
_INLINE_BODY_BYTES = 4096

# Redis values refused as untrustworthy: not ours, not whole, or not this stream's.
UNTRUSTED = (FORGED, OVERSIZED, CORRUPT, OUT_OF_RANGE)

# Set on a reply to a chunk that started its live stream over (see _report_restart).
WARNING_HEADER = "x-derender-warning"
RESTART_WARNING = (
    "restarted: this chunk has no stream_state, but its request_id and choice index had a "
    "live stream, so it started over. To continue a stream, send the stream_state of its "
    "previous reply."
)

# Where a parsed chunk's session came from: the ``x-derender-cache`` header.
HIT = "hit"
RESTORED = "redis"
MISS = "miss"


# The endpoint each request body belongs to, and whether it is the streamed one.
_BODY_KINDS: dict[type[Any], tuple[str, bool]] = {
    ChatDerenderRequest: (body_errors.CHAT, False),
    ChatStreamDerenderRequest: (body_errors.CHAT, True),
    CompletionDerenderRequest: (body_errors.COMPLETIONS, False),
    CompletionStreamDerenderRequest: (body_errors.COMPLETIONS, True),
}


def decode_body(body: bytes, kind: type[T], endpoint: str = body_errors.CHAT) -> T:
    """Decode and type-check a JSON body; any failure is the client's 400, whose message
    says what to send (``endpoint`` names the path for a ``BodyView``)."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        result: T = decoder.decode(body)
    except msgspec.ValidationError as exc:
        endpoint, streamed = _BODY_KINDS.get(kind, (endpoint, False))
        raise body_errors.invalid(body, str(exc), endpoint, streamed) from None
    except msgspec.DecodeError as exc:
        endpoint, _ = _BODY_KINDS.get(kind, (endpoint, False))
        raise body_errors.malformed(body, str(exc), endpoint) from None
    except RecursionError:
        raise body_errors.too_deep() from None
    return result


def check_history(state: StreamState | None) -> None:
    """The carried history's chunk lengths must add up to its token ids, and the decode
    window's offsets must point into it."""
    if state is None:
        return
    problem = state.history_error()
    if problem is not None:
        raise InvalidBody(
            f"1 validation error:\n  {problem}. Send {body_errors.STATE}.", "body.stream_state"
        )
    problem = state.window_error()
    if problem is not None:
        raise BadRequest(f"{problem}. Send {body_errors.STATE}.", "stream_state")


def decode_stream_request(body: bytes, kind: type[S], *, history_checked: bool = True) -> S:
    """Decode a streaming request; its carried history is checked unless told not to."""
    request = decode_body(body, kind)
    if history_checked:
        check_history(request.stream_state)
    return request


class _Named(msgspec.Struct):
    request_id: str | None = None


class _RequestIds(msgspec.Struct):
    generate_chunk: _Named | None = None
    generate_response: _Named | None = None
    generate_responses: list[_Named] | None = None


_request_ids = msgspec.json.Decoder(_RequestIds)


def request_id_of(body: bytes) -> str:
    """The request id a body names, for a log line ("?" when it names none)."""
    try:
        ids = _request_ids.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return "?"
    named = ids.generate_chunk or ids.generate_response
    if named is None and ids.generate_responses:
        named = ids.generate_responses[0]
    return (named.request_id if named is not None else None) or "?"


def redis_secret(settings: Settings) -> bytes:
    """The key of the snapshots' MAC: the replicas' shared secret, or without one a
    random key of this process, so no snapshot another process wrote is ever used."""
    if settings.redis_secret:
        return settings.redis_secret.encode()
    if settings.redis_url:
        logger.warning(
            "--redis-url without --redis-secret: snapshots are signed with a random key "
            "of this process, so replicas cannot restore each other's. Give every "
            "replica the same secret ($DERENDER_REDIS_SECRET) to share them."
        )
    return secrets.token_bytes(32)


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"request body exceeds the server limit of {limit} bytes (--max-request-bytes). "
        "Send fewer choices, tokens or logprobs per request, or raise the limit."
    )


def json_response(value: Any) -> Response:
    return Response(encoder.encode(value), media_type="application/json")


def _with_history_json(state: StreamState, session: StreamSession) -> StreamState:
    """``state`` with its history as the session's ready JSON, which encodes verbatim."""
    ids, lens = session.history_json()
    return msgspec.structs.replace(state, output_token_ids=ids, output_chunk_lens=lens)


def _chunk_tokens(chunk: GenerateChunk) -> int:
    return sum(len(c.token_ids) for c in chunk.choices if c.token_ids)


class DerenderService:
    """Holds what every request shares: settings, tokenizer, metrics, the worker pool."""

    def __init__(self, settings: Settings, tokenizer: Tokenizer) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.max_model_len = settings.max_model_len or tokenizer.default_max_model_len
        self.parsers = ParserFactory(
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            tokenizer.vocabulary,
        )
        self.derenderer = Derenderer(tokenizer, self.parsers, settings.default_chat_template_kwargs)
        self.metrics = Metrics()
        self._limiter = anyio.CapacityLimiter(settings.replay_workers)
        self.sessions: SessionCache[StreamSession] = SessionCache(
            settings.stream_cache_size,
            settings.stream_cache_max_bytes,
            settings.stream_cache_ttl,
            on_evict=lambda reason: self.metrics.cache_evictions.labels(reason).inc(),
            on_collision=self.metrics.request_id_collisions.inc,
        )
        parser_settings = (
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            settings.default_chat_template_kwargs,
        )
        self._settings_digest = json.dumps(parser_settings, sort_keys=True).encode()
        self.redis = (
            RedisTier(
                settings.redis_url,
                secret=redis_secret(settings),
                ttl=settings.redis_ttl,
                timeout=settings.redis_timeout_ms / 1000,
                max_snapshot_bytes=settings.redis_max_snapshot_bytes,
            )
            if settings.redis_url
            else None
        )
        # Gauges are read when /metrics is scraped, not kept up to date per chunk.
        self.metrics.cache_sessions.set_function(lambda: len(self.sessions))
        self.metrics.cache_bytes.set_function(lambda: self.sessions.bytes)
        if self.redis is not None:
            breaker = self.redis.breaker
            self.metrics.redis_breaker_open.set_function(lambda: int(breaker.open))

    # ------------------------------------------------------------------ plumbing

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes:
        limit = self.settings.max_request_bytes
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if content_type.lower().split(";", 1)[0].strip() != "application/json":
            raise InvalidBody(
                "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
            )
        parts = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect
            part = message.get("body", b"")
            size += len(part)
            if size > limit:
                raise _too_large(limit)
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _run(self, tokens: int, func: Callable[..., T], *args: Any) -> T:
        """Run decoding inline when small, else on the worker pool off the event loop;
        either way within the request's CPU budget."""
        bounded = functools.partial(run_within, self.settings.max_request_cpu_seconds, func, *args)
        if tokens <= self.settings.inline_tokens:
            return bounded()
        return await anyio.to_thread.run_sync(bounded, limiter=self._limiter)

    async def _one_shot(self, body: bytes, answer: Callable[..., bytes], *args: Any) -> Response:
        """A one-shot request, decoded, checked, derendered and encoded in one call:
        off the event loop unless the body is small (a large one takes as long to
        decode and its response to encode as it takes to derender), within the CPU
        budget either way."""
        bounded = functools.partial(run_within, self.settings.max_request_cpu_seconds, answer)
        if len(body) <= _INLINE_BODY_BYTES:
            encoded = bounded(*args)
        else:
            encoded = await anyio.to_thread.run_sync(bounded, *args, limiter=self._limiter)
        return Response(encoded, media_type="application/json")

    def _encoded(self, response: Lazy[Any, Any]) -> bytes:
        """The response's bytes, encoded a choice (and a slice of a long list) at a time
        as each choice is derendered, so neither one encode call nor the objects alive
        at once grow with the whole response (see app/pieces.py)."""
        limit = self.settings.max_response_bytes
        pieces, size = [], 0
        for piece in encode_response(response.envelope, response.choices):
            size += len(piece)
            if size > limit:  # refused before the rest is derendered and encoded
                raise BadRequest(
                    f"the response would be over the server limit of {limit} bytes "
                    "(--max-response-bytes). Send fewer choices or tokens per request, or "
                    "ask for fewer logprobs."
                )
            pieces.append(piece)
        return b"".join(pieces)

    def _model_name(self, requested: str | None) -> str:
        served = self.settings.served_names
        if not requested:
            return served[0]
        if requested not in served:
            raise NotFound(
                f"The model `{requested}` does not exist. Valid aliases: {', '.join(served)}.",
                "model",
            )
        return requested

    async def _respond(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        endpoint: str,
        handle: Callable[[bytes, BodyView, str | None], Awaitable[Response]],
    ) -> None:
        started = time.perf_counter()
        mode = "unknown"
        body = b""
        try:
            headers = dict(scope["headers"])
            body = await self._read_body(headers, receive)
            view = decode_body(body, BodyView, endpoint)
            mode = "stream" if view.stream else "oneshot"
            stream_id = headers.get(_STREAM_ID_KEY)
            response = await handle(
                body, view, None if stream_id is None else stream_id.decode("latin-1")
            )
        except ClientDisconnect:
            return
        except CpuBudgetExceeded as exc:
            self.metrics.cpu_budget_exceeded.labels(endpoint).inc()
            logger.warning("request %s on %s: %s", request_id_of(body), endpoint, exc.message)
            response = exc.response()
        except DerenderError as exc:
            response = exc.response()
        except Exception:
            # Ours, never the client's: logged with its traceback, counted, a plain 500.
            self.metrics.internal_errors.labels(endpoint).inc()
            logger.exception("internal error on %s, request %s", endpoint, request_id_of(body))
            response = InternalError("internal error while derendering").response()
        self.metrics.observe(endpoint, mode, response.status_code, time.perf_counter() - started)
        await response(scope, receive, send)

    # ------------------------------------------------------------------ our limits

    def _known(self, ids: list[int] | None, where: str) -> None:
        """Refuse ids outside the vocabulary, unless the server allows them."""
        if not self.settings.allow_out_of_vocab:
            check_vocabulary(ids, where, self.tokenizer.vocab_size)

    def _check_chunk(self, chunk: GenerateChunk) -> None:
        """Everything a streamed chunk carries besides its context: checked on the
        kept-session path and the full path alike."""
        check_chunk_bounds(
            chunk, max_model_len=self.max_model_len, max_logprobs=self.settings.max_logprobs
        )
        if not self.settings.allow_out_of_vocab:
            check_choice_vocabulary(chunk.choices, "generate_chunk", self.tokenizer.vocab_size)
        self._known(chunk.prompt_token_ids, "generate_chunk.prompt_token_ids")

    def _check_state_ids(self, state: StreamState | None) -> None:
        if not self.settings.allow_out_of_vocab:
            check_state_vocabulary(state, self.tokenizer.vocab_size)

    def _check_responses(
        self, field: str, responses: list[GenerateResponse], prompts: list[list[int] | None]
    ) -> None:
        """One-shot generate responses: ids in the vocabulary, pass-through JSON bounded."""
        for index, (gen, prompt) in enumerate(zip(responses, prompts, strict=True)):
            where = f"generate_responses.{index}" if field == "generate_responses" else field
            if not self.settings.allow_out_of_vocab:
                check_choice_vocabulary(gen.choices, where, self.tokenizer.vocab_size)
            self._known(gen.prompt_token_ids, f"{where}.prompt_token_ids")
            self._known(prompt, "prompt_token_ids")
            check_depth(
                [(f"{where}.kv_transfer_params", gen.kv_transfer_params)],
                self.settings.max_json_depth,
            )

    def _check_chat_limits(self, request: ChatRequest, view: BodyView) -> None:
        check_chat_request_bytes(len(view.chat_request), self.settings.max_chat_request_bytes)
        check_chat_request_utf8(view.chat_request)
        check_tool_count(request, self.settings.max_tools)
        check_depth(chat_free_form(request), self.settings.max_json_depth)

    def _check_stream_options(self, options: dict[str, Any] | None) -> None:
        check_depth([("completion_request.stream_options", options)], self.settings.max_json_depth)

    # ------------------------------------------------------------------ endpoints

    async def chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._respond(scope, receive, send, "chat", self._chat)

    async def completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._respond(scope, receive, send, "completions", self._completions)

    async def _chat(self, body: bytes, view: BodyView, stream_id: str | None) -> Response:
        if view.stream:
            if self.parsers.configured and self.sessions.enabled:
                continued = await self._continue_session(view, stream_id)
                if continued is not None:
                    return continued
            # A session hit proves the history consistent; the parsed path checks
            # it only when the session has to be rebuilt.
            stream_request = decode_stream_request(
                body, ChatStreamDerenderRequest, history_checked=not self.parsers.configured
            )
            check_stream_id(stream_id, stream_request.generate_chunk.request_id)
            return await self._chat_stream(stream_request, view)
        return await self._one_shot(body, self._chat_one_shot, body, view)

    def _chat_one_shot(self, body: bytes, view: BodyView) -> bytes:
        request = decode_body(body, ChatDerenderRequest)
        if request.chat_request is not None:
            check_chat_request(request.chat_request)
            self._check_chat_limits(request.chat_request, view)
        model = self._model_name(request.model)
        gen = request.generate_response
        check_generate_bounds(
            [gen],
            max_model_len=self.max_model_len,
            max_logprobs=self.settings.max_logprobs,
            max_n=self.settings.max_n_sequences,
        )
        check_prompt_length(request.prompt_token_ids, self.max_model_len)
        if self.parsers.configured and request.chat_request is None:
            raise BadRequest(CHAT_REQUEST_REQUIRED)
        check_token_ids_present([gen], completion=False)
        self._check_responses("generate_response", [gen], [request.prompt_token_ids])
        try:
            return self._encoded(self.derenderer.chat_lazily(request, model))
        finally:  # refused or failed too: the request is as large either way
            free_in_slices([gen])

    async def _chat_stream(self, request: ChatStreamDerenderRequest, view: BodyView) -> Response:
        chat_request = request.chat_request
        if chat_request is not None:
            check_chat_request(chat_request)
            self._check_chat_limits(chat_request, view)
        model = self._model_name(request.model)
        if chat_request is not None and chat_request.stop:
            raise BadRequest(STREAM_STOP_STRINGS)
        if self.parsers.configured and chat_request is None:
            raise BadRequest(CHAT_REQUEST_REQUIRED)
        if self.parsers.configured and request.prompt_token_ids is None:
            raise BadRequest(PROMPT_IDS_REQUIRED)
        chunk = request.generate_chunk
        if len(chunk.choices) > 1:
            raise BadRequest(
                "derender_chat_stream expects at most one choice per chunk "
                f"(got {len(chunk.choices)})."
            )
        prompt_len = len(request.prompt_token_ids or ())
        history = len(request.stream_state.output_token_ids) if request.stream_state else 0
        delta = _chunk_tokens(chunk)
        if prompt_len + history + delta > self.max_model_len:
            raise BadRequest(
                f"prompt_token_ids length ({prompt_len}) plus output_token_ids length "
                f"({history}) plus delta ({delta}) exceeds max_model_len ({self.max_model_len})."
            )
        self._check_chunk(chunk)
        self._known(request.prompt_token_ids, "prompt_token_ids")
        if self.parsers.configured:
            return await self._parsed_chunk(request, model, view, history, delta)
        self._check_state_ids(request.stream_state)
        reply, state = await self._run(delta, self.derenderer.chat_stream, request, model)
        return json_response(ChatStreamReply(reply, Raw(encoder.encode(state))))

    async def _continue_session(self, view: BodyView, stream_id: str | None) -> Response | None:
        """Answer a chunk that continues its kept session exactly, from the body's view.

        The re-sent state, prompt and chat request are compared as raw bytes with
        what the session was built from and last sent, never decoded; only the small
        fields are. The state may come back as sent or as ``json.dumps`` re-encodes it
        (app/state_json.py): the session knows both byte forms. Anything else (a miss,
        a field that fails to decode or check) returns None and the chunk takes the
        full path, which also gives any error its exact message.
        """
        try:
            chunk = _chunk_decoder.decode(view.generate_chunk)
            requested = _optional_str.decode(view.model)
            prompt_tokens = _optional_int.decode(view.prompt_tokens)
            check_stream_id(stream_id, chunk.request_id)
            model = self._model_name(requested)
        except (msgspec.DecodeError, DerenderError):
            return None
        if len(chunk.choices) != 1:
            return None
        try:
            self._check_chunk(chunk)
        except DerenderError:
            return None
        key = (chunk.request_id, chunk.choices[0].index)
        fingerprint = Fingerprint(self._settings_digest, view.chat_request, view.prompt_token_ids)
        found = self.sessions.peek(key, fingerprint)
        if found is None:
            return None
        session, kept = found
        state = bytes(view.stream_state)
        if session.answered is None or (state != kept and state != session.json_dumps_echo()):
            return None
        delta = _chunk_tokens(chunk)
        used = len(session.prompt_token_ids) + len(session.output_token_ids)
        if used + delta > self.max_model_len:
            return None
        request = msgspec.structs.replace(
            session.answered, generate_chunk=chunk, model=requested, prompt_tokens=prompt_tokens
        )
        self.sessions.checkout(key, fingerprint, kept)
        self.metrics.cache_hits.inc()
        return await self._answer(request, model, key, fingerprint, session, HIT, delta)

    async def _parsed_chunk(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        view: BodyView,
        history: int,
        delta: int,
    ) -> Response:
        """A parsed chunk on the full path: its kept session if the decoded state is
        the one the session last sent (a client may re-encode it), else a snapshot
        restored from Redis, else a replay."""
        chunk = request.generate_chunk
        key = (chunk.request_id, chunk.choices[0].index if chunk.choices else 0)
        fingerprint = None
        session = None
        source = MISS
        restarted = False
        # A usage-only chunk needs no session.
        if chunk.choices and (self.sessions.enabled or self.redis is not None):
            fingerprint = Fingerprint(
                self._settings_digest, view.chat_request, view.prompt_token_ids
            )
            carried = encoder.encode(request.stream_state)
            if self.sessions.enabled:
                session, miss = self.sessions.checkout(key, fingerprint, carried)
                if session is None:
                    self.metrics.cache_misses.labels(miss).inc()
                    # No state, same request, live stream: a restart or a forgotten state.
                    restarted = miss == HISTORY and request.stream_state is None
                else:
                    self.metrics.cache_hits.inc()
                    source = HIT
            if session is None and self.redis is not None and history:
                session = await self._restore(request, key, fingerprint, carried, history)
                if session is not None:
                    source = RESTORED
        if session is None:
            check_history(request.stream_state)
            self._check_state_ids(request.stream_state)
            if chunk.choices:
                self.metrics.replays.inc()
                self.metrics.replayed_tokens.inc(history)
        tokens = delta if session else delta + history
        response = await self._answer(request, model, key, fingerprint, session, source, tokens)
        if restarted:
            self._report_restart(key, response)
        return response

    def _report_restart(self, key: tuple[str, int], response: Response) -> None:
        """Say that a chunk without ``stream_state`` started a live stream over.

        It is answered as a first chunk, as vLLM answers it (not refused): a restart or a
        retried first chunk under the same request id is legitimate, and a refusal would
        make the reply depend on what this replica's cache holds. The lookup dropped the
        kept session; its Redis snapshot, if any, serves only a chunk carrying its exact
        state, and this stream's own snapshot replaces it under the same key. A client
        that meant to continue is told here.
        """
        self.metrics.stream_restarts.inc()
        response.headers[WARNING_HEADER] = RESTART_WARNING
        logger.info(  # not a warning: any client can cause it, as often as it likes
            "request %r choice %d: a chunk without stream_state started a live stream over. "
            "To continue a stream send the stream_state its previous reply returned; give a "
            "new stream a new request_id.",
            *key,
        )

    async def _restore(
        self,
        request: ChatStreamDerenderRequest,
        key: tuple[str, int],
        fingerprint: Fingerprint,
        carried: bytes,
        history: int,
    ) -> StreamSession | None:
        """The session from the stream's Redis snapshot, if it continues ``carried``."""
        assert self.redis is not None
        snapshot, outcome = await self.redis.take(key, fingerprint.digest, carried, history)
        session = None
        if snapshot is not None:
            session, problem = self.derenderer.restored_session(request, snapshot)
            outcome = problem or "hit"
        if session is None:
            self.metrics.redis_misses.labels(outcome).inc()
            if outcome in UNTRUSTED:
                self.metrics.redis_rejected.labels(outcome).inc()
        else:
            self.metrics.redis_hits.inc()
        self._redis_outcome(outcome)
        return session

    async def _answer(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        key: tuple[str, int],
        fingerprint: Fingerprint | None,
        session: StreamSession | None,
        source: str,
        tokens: int,
    ) -> Response:
        """Feed the chunk to ``session`` (rebuilt by replay when None) and reply.

        The session is checked out while the chunk is processed, so a concurrent
        duplicate replays instead of sharing it. Unless this chunk ends the stream
        or fails, it is checked back in for the next chunk and its snapshot offered
        to Redis.
        """
        chunk = request.generate_chunk
        cache = self.sessions
        try:
            reply, state, session = await self._run(
                tokens, self.derenderer.chat_stream_parsed, request, model, session
            )
        except BaseException:
            # Any failure or cancellation drops the checked-out session; the error itself
            # is re-raised and answered by _respond (a failure of ours: a logged 500).
            cache.release(key, fingerprint)
            if source == HIT:
                self.metrics.cache_evictions.labels(ERROR).inc()
            raise
        carried = encoder.encode(state if session is None else _with_history_json(state, session))
        if session is not None and fingerprint is not None:
            if chunk.choices[0].finish_reason is not None:
                cache.release(key, fingerprint)
                self.metrics.cache_evictions.labels(FINISHED).inc()
                if self.redis is not None:
                    self._redis_outcome(await self.redis.drop(key, fingerprint.digest))
            else:
                if session.fingerprint is None:  # a hit's session holds an equal one
                    session.fingerprint = fingerprint.detached()
                kept = session.fingerprint
                size = session.size(carried)
                cache.checkin(key, session, kept, carried, size)
                if self.redis is not None:
                    await self._offer_snapshot(key, kept, carried, session)
        response = json_response(ChatStreamReply(reply, Raw(carried)))
        if chunk.choices:
            response.headers["x-derender-cache"] = source
        return response

    async def _offer_snapshot(
        self,
        key: tuple[str, int],
        fingerprint: Fingerprint,
        carried: bytes,
        session: StreamSession,
    ) -> None:
        assert self.redis is not None
        snapshot = session.snapshot()
        self.metrics.redis_snapshot_bytes.observe(len(snapshot))
        history = len(session.output_token_ids)
        outcome = await self.redis.put(key, fingerprint.digest, carried, history, snapshot)
        self._redis_outcome(outcome)

    def _redis_outcome(self, outcome: str) -> None:
        """Count a Redis call's outcome: writes by outcome, errors on their own."""
        if outcome in (WRITTEN, DELETED, TOO_LARGE):
            self.metrics.redis_writes.labels(outcome).inc()
        if outcome == REDIS_ERROR:
            self.metrics.redis_errors.inc()

    async def sweep_sessions(self) -> None:
        """Drop idle sessions now and then (lookups also expire them lazily)."""
        interval = max(0.05, min(self.settings.stream_cache_ttl / 2, 30.0))
        while True:
            await anyio.sleep(interval)
            self.sessions.sweep()

    async def _completions(self, body: bytes, view: BodyView, stream_id: str | None) -> Response:
        if view.stream:
            stream_request = decode_stream_request(body, CompletionStreamDerenderRequest)
            check_stream_id(stream_id, stream_request.generate_chunk.request_id)
            return await self._completion_stream(stream_request)
        return await self._one_shot(body, self._completion_one_shot, body)

    def _completion_one_shot(self, body: bytes) -> bytes:
        request = decode_body(body, CompletionDerenderRequest)
        if request.completion_request is not None:
            check_completion_request(request.completion_request)
            self._check_stream_options(request.completion_request.stream_options)
        model = self._model_name(request.model)
        responses = request.generate_responses
        if not responses:
            raise BadRequest("generate_responses must not be empty")
        check_generate_bounds(
            responses,
            max_model_len=self.max_model_len,
            max_logprobs=self.settings.max_logprobs,
            max_n=self.settings.max_n_sequences,
        )
        for prompt_ids in request.prompt_token_ids or ():
            check_prompt_length(prompt_ids, self.max_model_len)
        check_token_ids_present(responses, completion=True)
        prompts = request.prompt_token_ids or [None] * len(responses)
        self._check_responses("generate_responses", responses, prompts)
        try:
            return self._encoded(self.derenderer.completion_lazily(request, model))
        finally:  # refused or failed too: the request is as large either way
            free_in_slices(responses)

    async def _completion_stream(self, request: CompletionStreamDerenderRequest) -> Response:
        completion_request = request.completion_request
        if completion_request is not None:
            check_completion_request(completion_request)
            self._check_stream_options(completion_request.stream_options)
        model = self._model_name(request.model)
        if completion_request is not None and completion_request.stop:
            raise BadRequest(STREAM_STOP_STRINGS)
        check_prompt_length(request.prompt_token_ids, self.max_model_len)
        chunk = request.generate_chunk
        if len(chunk.choices) > 1:
            raise BadRequest("derender_completion_stream expects at most one choice per chunk")
        delta = _chunk_tokens(chunk)
        if delta > self.max_model_len:
            raise BadRequest(
                f"delta token_ids length ({delta}) exceeds max_model_len ({self.max_model_len})."
            )
        check_history_length(request.stream_state, self.max_model_len)
        self._check_chunk(chunk)
        self._known(request.prompt_token_ids, "prompt_token_ids")
        self._check_state_ids(request.stream_state)
        reply, state = await self._run(delta, self.derenderer.completion_stream, request, model)
        return json_response(CompletionStreamReply(reply, state))

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def models(self, request: Request) -> Response:
        data = [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "derender-server",
                "root": self.settings.model,
                "parent": None,
                "max_model_len": self.max_model_len,
            }
            for name in self.settings.served_names
        ]
        return json_response({"object": "list", "data": data})

    async def metrics_endpoint(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4")


def build_app(settings: Settings) -> DerenderApp:
    """Load the tokenizer, check the parser flags against it, and build the app.

    Raises TokenizerLoadError or ParserConfigError with a message for the operator.
    """
    return create_app(settings, load_tokenizer(settings.model, settings.tokenizer))


class DerenderApp:
    """The ASGI app: POSTs to the two derender paths are answered directly, the rest
    (health, models, metrics, lifespan, errors) by Starlette.

    Once a chunk's parsing costs O(chunk), routing, middleware and request objects
    cost as much as the chunk itself; the direct lane skips them (see bench/).
    """

    def __init__(self, service: DerenderService, routes: Starlette) -> None:
        self.service = service
        self.routes = routes
        self.state = routes.state
        self._direct = {
            CHAT_PATH: service.chat,
            COMPLETIONS_PATH: service.completions,
        }
        key = service.settings.api_key
        self._guard = ApiKeyGuard(key) if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._guard is not None and not self._guard.allows(scope):
            await self._guard.refuse(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self._direct.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.routes(scope, receive, send)


def create_app(settings: Settings, tokenizer: Tokenizer) -> DerenderApp:
    """Build the ASGI app around an already loaded tokenizer."""
    service = DerenderService(settings, tokenizer)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            if service.sessions.enabled:
                tasks.start_soon(service.sweep_sessions)
            yield
            tasks.cancel_scope.cancel()
        if service.redis is not None:
            await service.redis.close()

    routes = [
        # Reached only by methods other than POST: Starlette answers 405.
        Route(CHAT_PATH, _post_only, methods=["POST"]),
        Route(COMPLETIONS_PATH, _post_only, methods=["POST"]),
        Route("/health", service.health, methods=["GET"]),
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/metrics", service.metrics_endpoint, methods=["GET"]),
        Route("/openapi.json", _openapi(settings), methods=["GET"]),
        Route("/docs", docs_endpoint(secured=bool(settings.api_key)), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _routing_error}
    )
    app.state.service = service
    return DerenderApp(service, app)


def _openapi(settings: Settings) -> Callable[[Request], Awaitable[Response]]:
    document = encoder.encode(openapi_document(secured=bool(settings.api_key)))

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    return openapi


async def _routing_error(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 as OpenAI-style errors that name the routes to use."""
    assert isinstance(exc, HTTPException)
    method, path = request.method, request.url.path
    headers = exc.headers or {}
    if exc.status_code == 405 and path in (CHAT_PATH, COMPLETIONS_PATH):
        message = f"{method} is not allowed on {path}: send a POST with a JSON body."
    elif exc.status_code == 405:
        message = f"{method} is not allowed on {path}: use {headers.get('Allow', 'GET')}."
    elif exc.status_code == 404:
        message = (
            f"there is no route {path}: the derender endpoints are POST {CHAT_PATH} and "
            f"POST {COMPLETIONS_PATH}."
        )
    else:
        message = exc.detail
    response = RoutingError(exc.status_code, message).response()
    response.headers.update(headers)
    return response


async def _post_only(request: Request) -> Response:
    raise AssertionError("POSTs to the derender paths never reach Starlette")
