"""The render side's shared parts, built once beside the derender service."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from app.render.chat import ChatLimits, ChatRenderer
from app.render.completion import CompletionRenderer
from app.render.fast_encode import fast_encoder
from app.render.harmony import HarmonyRenderer
from app.render.prompt_encoders import prompt_encoder
from app.render.sampling import generation_defaults
from app.render.template import ChatTemplate, RenderTimeout, load_source
from app.serving.service import INLINE_BODY_BYTES, DerenderService
from app.tokens.tokenizer import TokenizerLoadError, read_json, resolve_model_dir
from app.wire.errors import BadRequest
from parsers.families.harmony import harmony_encoding

T = TypeVar("T")

# vLLM's template kwargs default: the Cohere renderer's format, present in every request.
_VLLM_TEMPLATE_DEFAULTS = {"cohere_format": "cmd4"}


class RenderService:
    """Template, sampling defaults and the two renderers; the endpoints call ``run``."""

    def __init__(self, service: DerenderService) -> None:
        settings, tokenizer = service.settings, service.tokenizer
        self.service = service
        self.settings = settings
        model_dir = resolve_model_dir(settings.model)
        try:
            source = load_source(model_dir, tokenizer.hf, settings.chat_template)
        except OSError as exc:
            raise TokenizerLoadError(f"--chat-template {settings.chat_template}: {exc}") from exc
        timeout = settings.render_timeout
        self.template = ChatTemplate(source, tokenizer.hf, timeout) if source else None
        generation = generation_defaults(model_dir, read_json)
        defaults = dict(settings.default_chat_template_kwargs)
        for key, value in _VLLM_TEMPLATE_DEFAULTS.items():
            defaults.setdefault(key, value)
        fast = fast_encoder(tokenizer)
        limits = ChatLimits(
            max_model_len=service.max_model_len,
            max_chars=settings.max_render_chars,
            timeout=timeout,
            generation=generation,
            template_defaults=defaults,
            auto_tools=settings.enable_auto_tool_choice,
            trust_request_template=settings.trust_request_chat_template,
        )
        config = read_json(model_dir / "config.json")
        harmony = None
        if config.get("model_type") == "gpt_oss":
            vocabulary = tokenizer.vocabulary
            harmony = HarmonyRenderer(
                lambda: harmony_encoding(vocabulary), settings.system_start_date
            )
        encoder = prompt_encoder(config, timeout)
        self.chat = ChatRenderer(
            self.template, service.parsers, tokenizer, limits, fast, harmony, encoder
        )
        self.completion = CompletionRenderer(
            tokenizer,
            service.max_model_len,
            generation,
            fast,
            encoder.fill_in_middle if encoder is not None else None,
        )
        self._limiter = anyio.CapacityLimiter(settings.replay_workers)

    async def run(self, endpoint: str, size: int, func: Callable[..., T], *args: Any) -> T:
        """Render a small body inline, a larger one off the event loop within
        ``--render-timeout``; the time and the prompt's tokens go to /metrics."""
        started = time.perf_counter()
        try:
            if size <= INLINE_BODY_BYTES:
                result = func(*args)
            else:
                with anyio.fail_after(self.settings.render_timeout):
                    result = await anyio.to_thread.run_sync(
                        func, *args, limiter=self._limiter, abandon_on_cancel=True
                    )
        except TimeoutError:
            raise RenderTimeout(
                f"rendering took longer than {self.settings.render_timeout:g} s "
                "(--render-timeout); the template or the request is too large."
            ) from None
        except RecursionError:
            raise BadRequest("the request is nested too deeply to render.") from None
        seconds = time.perf_counter() - started
        self.service.metrics.observe_render(endpoint, seconds, _tokens(result))
        return result


def _tokens(result: Any) -> int:
    if isinstance(result, list):
        return sum(len(entry["token_ids"]) for entry in result)
    return len(result["token_ids"])
