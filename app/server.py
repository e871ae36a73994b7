"""The HTTP face: Starlette routes for the derender endpoints, health, models, metrics.

A request is read under the size limit, its ``stream`` flag picks the variant, the
body is decoded once into msgspec structs, then validated in vLLM's order. Decoding
runs on the event loop when the request is small and on a bounded thread pool when
it decodes (or replays) more tokens than ``--inline-tokens``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.derender import Derenderer
from app.errors import (
    BadRequest,
    BodyTooLarge,
    DerenderError,
    InternalError,
    InvalidBody,
    NotFound,
)
from app.metrics import Metrics
from app.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    CompletionStreamReply,
    GenerateChunk,
    StreamState,
    encoder,
)
from app.routing import STREAM_ID_HEADER, check_stream_id
from app.session import StreamSession
from app.settings import Settings
from app.tokenizer import Tokenizer, load_tokenizer
from app.validation import (
    CHAT_REQUEST_REQUIRED,
    PROMPT_IDS_REQUIRED,
    STREAM_STOP_STRINGS,
    check_chat_request,
    check_completion_request,
    check_generate_bounds,
    check_prompt_length,
    check_token_ids_present,
)
from cache.sessions import ERROR, FINISHED, SessionCache
from parsers.registry import ParserFactory

logger = logging.getLogger("derender_server")

T = TypeVar("T")
S = TypeVar("S", ChatStreamDerenderRequest, CompletionStreamDerenderRequest)


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}

# Session size estimate: a history token costs a list slot and an int object, plus
# its share of parser text; the rest is the detokenizer window and parser objects.
_BYTES_PER_TOKEN = 48
_SESSION_OVERHEAD = 4096


def decode_body(body: bytes, kind: type[T]) -> T:
    """Decode and type-check a JSON body; any failure is the client's 400."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        result: T = decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise InvalidBody.from_validation(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise InvalidBody(f"1 validation error:\n  JSON decode error: {exc}") from None
    return result


def check_history(state: StreamState | None) -> None:
    """The carried history's chunk lengths must add up to its token ids."""
    problem = state.history_error() if state is not None else None
    if problem is not None:
        raise InvalidBody(f"1 validation error:\n  {problem}", "body.stream_state")


def decode_stream_request(body: bytes, kind: type[S], *, history_checked: bool = True) -> S:
    """Decode a streaming request; its carried history is checked unless told not to."""
    request = decode_body(body, kind)
    if history_checked:
        check_history(request.stream_state)
    return request


def json_response(value: Any) -> Response:
    return Response(encoder.encode(value), media_type="application/json")


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
        )
        parser_settings = (
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            settings.default_chat_template_kwargs,
        )
        self._settings_digest = json.dumps(parser_settings, sort_keys=True).encode()

    # ------------------------------------------------------------------ plumbing

    async def _read_body(self, request: Request) -> bytes:
        limit = self.settings.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(f"request body exceeds the server limit of {limit} bytes")
        media_type = request.headers.get("content-type", "").lower().split(";", 1)[0].strip()
        if media_type != "application/json":
            raise InvalidBody(
                "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
            )
        parts = []
        size = 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise BodyTooLarge(f"request body exceeds the server limit of {limit} bytes")
            parts.append(part)
        return b"".join(parts)

    async def _run(self, tokens: int, func: Callable[..., T], *args: Any) -> T:
        """Run decoding inline when small, else on the worker pool off the event loop."""
        if tokens <= self.settings.inline_tokens:
            return func(*args)
        return await anyio.to_thread.run_sync(functools.partial(func, *args), limiter=self._limiter)

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
        request: Request,
        endpoint: str,
        handle: Callable[[bytes, BodyView, str | None], Awaitable[Response]],
    ) -> Response:
        started = time.perf_counter()
        mode = "unknown"
        try:
            body = await self._read_body(request)
            view = decode_body(body, BodyView)
            mode = "stream" if view.stream else "oneshot"
            response = await handle(body, view, request.headers.get(STREAM_ID_HEADER))
        except DerenderError as exc:
            response = exc.response()
        except Exception:
            logger.exception("unexpected failure on %s", endpoint)
            response = InternalError("internal error while derendering").response()
        self.metrics.observe(endpoint, mode, response.status_code, time.perf_counter() - started)
        return response

    # ------------------------------------------------------------------ endpoints

    async def chat(self, request: Request) -> Response:
        return await self._respond(request, "chat", self._chat)

    async def completions(self, request: Request) -> Response:
        return await self._respond(request, "completions", self._completions)

    async def _chat(self, body: bytes, view: BodyView, stream_id: str | None) -> Response:
        if view.stream:
            # A session hit proves the history consistent; the parsed path checks
            # it only when the session has to be rebuilt.
            stream_request = decode_stream_request(
                body, ChatStreamDerenderRequest, history_checked=not self.parsers.configured
            )
            check_stream_id(stream_id, stream_request.generate_chunk.request_id)
            return await self._chat_stream(stream_request, view)
        request = decode_body(body, ChatDerenderRequest)
        if request.chat_request is not None:
            check_chat_request(request.chat_request)
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
        tokens = sum(len(c.token_ids or ()) for c in gen.choices)
        return json_response(await self._run(tokens, self.derenderer.chat, request, model))

    async def _chat_stream(self, request: ChatStreamDerenderRequest, view: BodyView) -> Response:
        chat_request = request.chat_request
        if chat_request is not None:
            check_chat_request(chat_request)
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
        if self.parsers.configured:
            return await self._parsed_chunk(request, model, view, history, delta)
        try:
            reply, state = await self._run(delta, self.derenderer.chat_stream, request, model)
        except Exception:
            logger.debug("chat stream chunk failed", exc_info=True)
            raise BadRequest("invalid stream_state: derender failed") from None
        return json_response(ChatStreamReply(reply, state))

    async def _parsed_chunk(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        view: BodyView,
        history: int,
        delta: int,
    ) -> Response:
        """A parsed chunk: continue the stream's kept session, or rebuild it by replay.

        The session is checked out while the chunk is processed, so a concurrent
        duplicate replays instead of sharing it, and it is checked back in for the
        next chunk unless this one ends the stream or fails.
        """
        chunk = request.generate_chunk
        state = request.stream_state or StreamState()
        key = (chunk.request_id, chunk.choices[0].index if chunk.choices else 0)
        cache = self.sessions
        keep = cache.enabled and bool(chunk.choices)  # a usage-only chunk needs no session
        fingerprint = self._fingerprint(view) if keep else b""
        session = None
        if keep:
            session, miss = cache.checkout(
                key, fingerprint, state.output_token_ids, state.output_chunk_lens
            )
            if session is None:
                self.metrics.cache_misses.labels(miss).inc()
            else:
                self.metrics.cache_hits.inc()
        hit = session is not None
        if not hit:
            check_history(request.stream_state)
        if not hit and chunk.choices:
            self.metrics.replays.inc()
            self.metrics.replayed_tokens.inc(history)
        try:
            reply, state, session = await self._run(
                delta if hit else delta + history,
                self.derenderer.chat_stream_parsed,
                request,
                model,
                session,
            )
        except Exception:
            cache.release(key)
            if hit:
                self.metrics.cache_evictions.labels(ERROR).inc()
            logger.debug("parsed chat stream chunk failed", exc_info=True)
            raise BadRequest("invalid stream_state: derender failed") from None
        if session is not None and keep:
            if chunk.choices[0].finish_reason is not None:
                cache.release(key)
                self.metrics.cache_evictions.labels(FINISHED).inc()
            else:
                size = _SESSION_OVERHEAD + _BYTES_PER_TOKEN * len(session.output_token_ids)
                cache.checkin(
                    key,
                    session,
                    fingerprint,
                    session.output_token_ids,
                    session.output_chunk_lens,
                    size,
                )
        self._cache_gauges()
        response = json_response(ChatStreamReply(reply, state))
        if chunk.choices:
            response.headers["x-derender-cache"] = "hit" if hit else "miss"
        return response

    def _fingerprint(self, view: BodyView) -> bytes:
        """A digest of what a session depends on besides its history.

        The server's parser settings, and the request's ``chat_request`` and
        ``prompt_token_ids`` as sent (raw bytes: hashing them is cheaper than
        comparing decoded objects, and equal requests send equal bytes).
        """
        digest = hashlib.blake2b(self._settings_digest, digest_size=16)
        digest.update(bytes(view.chat_request))
        digest.update(b"\x00")
        digest.update(bytes(view.prompt_token_ids))
        return digest.digest()

    def _cache_gauges(self) -> None:
        self.metrics.cache_sessions.set(len(self.sessions))
        self.metrics.cache_bytes.set(self.sessions.bytes)

    async def sweep_sessions(self) -> None:
        """Drop idle sessions now and then (lookups also expire them lazily)."""
        interval = max(0.05, min(self.settings.stream_cache_ttl / 2, 30.0))
        while True:
            await anyio.sleep(interval)
            self.sessions.sweep()
            self._cache_gauges()

    async def _completions(self, body: bytes, view: BodyView, stream_id: str | None) -> Response:
        if view.stream:
            stream_request = decode_stream_request(body, CompletionStreamDerenderRequest)
            check_stream_id(stream_id, stream_request.generate_chunk.request_id)
            return await self._completion_stream(stream_request)
        request = decode_body(body, CompletionDerenderRequest)
        if request.completion_request is not None:
            check_completion_request(request.completion_request)
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
        tokens = sum(len(c.token_ids or ()) for gen in responses for c in gen.choices)
        return json_response(await self._run(tokens, self.derenderer.completion, request, model))

    async def _completion_stream(self, request: CompletionStreamDerenderRequest) -> Response:
        completion_request = request.completion_request
        if completion_request is not None:
            check_completion_request(completion_request)
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
        try:
            reply, state = await self._run(delta, self.derenderer.completion_stream, request, model)
        except Exception:
            logger.debug("completion stream chunk failed", exc_info=True)
            raise BadRequest("invalid stream_state: detokenization failed") from None
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


def build_app(settings: Settings) -> Starlette:
    """Load the tokenizer, check the parser flags against it, and build the app.

    Raises TokenizerLoadError or ParserConfigError with a message for the operator.
    """
    return create_app(settings, load_tokenizer(settings.model, settings.tokenizer))


def create_app(settings: Settings, tokenizer: Tokenizer) -> Starlette:
    """Build the ASGI app around an already loaded tokenizer."""
    service = DerenderService(settings, tokenizer)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            if service.sessions.enabled:
                tasks.start_soon(service.sweep_sessions)
            yield
            tasks.cancel_scope.cancel()

    routes = [
        Route("/v1/chat/completions/derender", service.chat, methods=["POST"]),
        Route("/v1/completions/derender", service.completions, methods=["POST"]),
        Route("/health", service.health, methods=["GET"]),
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/metrics", service.metrics_endpoint, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.service = service
    return app
