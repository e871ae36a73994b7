"""What every request shares: settings, tokenizer, parsers, derenderers, metrics, the
session store and the worker pool, wired once at start-up."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from app.serving.budget import run_within
from app.serving.metrics import Metrics
from app.serving.settings import Settings
from app.streams.oneshot import Lazy, OneShotDerenderer
from app.streams.parsed_stream import ParsedStreamDerenderer
from app.streams.pieces import encode_response
from app.streams.plain_stream import PlainStreamDerenderer
from app.streams.session import SessionBuilder
from app.streams.session_store import SessionStore
from app.tokens.tokenizer import Tokenizer
from app.wire.errors import BadRequest
from app.wire.validation import Limits
from parsers.registry import ParserFactory

T = TypeVar("T")

# One-shot bodies up to this size are answered on the event loop (a few hundred
# tokens); larger ones on the worker pool.
INLINE_BODY_BYTES = 4096


class DerenderService:
    """The server's shared parts; the endpoints (app/transports/endpoints.py) use them."""

    def __init__(self, settings: Settings, tokenizer: Tokenizer) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        max_model_len = settings.max_model_len or tokenizer.default_max_model_len
        self.max_model_len = max_model_len
        self.parsers = ParserFactory(
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            tokenizer.vocabulary,
        )
        self.limits = Limits.of(
            settings, max_model_len, tokenizer.vocab_size, self.parsers.configured
        )
        template_defaults = settings.default_chat_template_kwargs
        self.one_shot = OneShotDerenderer(tokenizer, self.parsers, template_defaults)
        self.plain_stream = PlainStreamDerenderer(tokenizer)
        self.parsed_stream = ParsedStreamDerenderer(tokenizer)
        self.sessions = SessionBuilder(tokenizer, self.parsers, template_defaults)
        self.metrics = Metrics()
        self.metrics.cache_max_bytes.set(settings.stream_cache_max_bytes)
        self.store = SessionStore(settings, self.metrics)
        parser_settings = (
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            template_defaults,
        )
        # What a session depends on of the server (part of every fingerprint).
        self.settings_digest = json.dumps(parser_settings, sort_keys=True).encode()
        self._limiter = anyio.CapacityLimiter(settings.replay_workers)

    async def run(self, tokens: int, func: Callable[..., T], *args: Any) -> T:
        """Run decoding inline when small, else on the worker pool off the event loop;
        either way within the request's CPU budget."""
        if self.inline(tokens):
            return self.run_now(func, *args)
        bounded = functools.partial(run_within, self.settings.max_request_cpu_seconds, func, *args)
        return await anyio.to_thread.run_sync(bounded, limiter=self._limiter)

    def inline(self, tokens: int) -> bool:
        """Whether decoding ``tokens`` is small enough to run on the event loop."""
        return tokens <= self.settings.inline_tokens

    def run_now(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func`` here and now, within the request's CPU budget (for work that
        ``inline`` says is small)."""
        return run_within(self.settings.max_request_cpu_seconds, func, *args)

    async def run_one_shot(self, body: bytes, answer: Callable[..., bytes], *args: Any) -> bytes:
        """A one-shot request, decoded, checked, derendered and encoded in one call:
        off the event loop unless the body is small (a large one takes as long to
        decode and its response to encode as it takes to derender), within the CPU
        budget either way."""
        bounded = functools.partial(run_within, self.settings.max_request_cpu_seconds, answer)
        if len(body) <= INLINE_BODY_BYTES:
            return bounded(*args)
        return await anyio.to_thread.run_sync(bounded, *args, limiter=self._limiter)

    def encoded(self, response: Lazy[Any, Any]) -> bytes:
        """The response's bytes, encoded a choice (and a slice of a long list) at a time
        as each choice is derendered, so neither one encode call nor the objects alive
        at once grow with the whole response (see app/streams/pieces.py)."""
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
