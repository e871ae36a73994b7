"""Completion render: a completion request to one GenerateRequest per prompt."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from app.render import sampling
from app.render.fields import hoisted, request_fields, stream_options
from app.render.requests import CompletionRenderRequest
from app.tokens.tokenizer import Tokenizer
from app.wire.errors import BadRequest, InvalidBody


def prompts(request: CompletionRenderRequest) -> list[str | list[int]]:
    """The request's prompts, one text or one list of ids each."""
    prompt = request.prompt
    if prompt is None:
        raise BadRequest("Either prompt or prompt_embeds must be provided and non-empty.")
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise BadRequest("Either prompt or prompt_embeds must be provided and non-empty.")
    if all(isinstance(p, int) for p in prompt):
        return [_non_negative(prompt)]
    if all(isinstance(p, str) for p in prompt):
        return list(prompt)
    if all(_is_ids(p) for p in prompt):
        return [_non_negative(p) for p in prompt]
    raise BadRequest(
        "prompt must be a string, a list of strings, a list of token ids or a list of "
        "lists of token ids."
    )


def filled_in(
    request: CompletionRenderRequest, fill_in_middle: Callable[[str, str], str] | None
) -> CompletionRenderRequest:
    """The request with its ``suffix`` made fill-in-the-middle prompts, where the
    model has a format for them (vLLM's checks and messages)."""
    suffix = request.suffix
    if suffix is None:
        return request
    if request.echo:
        raise BadRequest("Echo is unsupported with suffix.", "suffix")
    if request.truncate_prompt_tokens is not None:
        raise BadRequest("suffix is not supported with truncate_prompt_tokens", "suffix")
    prompt = request.prompt
    texts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise BadRequest("suffix requires text prompt input for FIM completion rendering", "suffix")
    if fill_in_middle is None:
        raise BadRequest(
            "suffix is only supported for models with FIM completion rendering", "suffix"
        )
    filled = [fill_in_middle(text, suffix) for text in texts]
    return msgspec.structs.replace(request, prompt=filled[0] if isinstance(prompt, str) else filled)


def _non_negative(ids: list[int]) -> list[int]:
    if any(token < 0 for token in ids):
        raise InvalidBody("1 validation error:\n  prompt token ids must be >= 0", "body.prompt")
    return ids


def _is_ids(prompt: Any) -> bool:
    return isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    )


class CompletionRenderer:
    """Tokenizes each prompt (ids pass as they are) and derives its sampling."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        max_model_len: int,
        generation: dict[str, Any],
        fast: Callable[[str], list[int]] | None,
        fill_in_middle: Callable[[str, str], str] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.fill_in_middle = fill_in_middle
        self.max_model_len = max_model_len
        self.generation = generation
        self.fast = fast
        hf = tokenizer.hf
        # Whether add_special_tokens adds anything (a BOS), which the fast path leaves out.
        self.adds_specials = hf.encode("a", add_special_tokens=True) != hf.encode(
            "a", add_special_tokens=False
        )

    def ids(self, prompt: str | list[int], add_special: bool) -> list[int]:
        if not isinstance(prompt, str):  # ids pass unchecked against the vocabulary, as in vLLM
            return prompt
        if self.fast is not None and not (add_special and self.adds_specials):
            return self.fast(prompt)
        encoded: list[int] = self.tokenizer.hf.encode(prompt, add_special_tokens=add_special)
        return encoded

    def render(
        self, request: CompletionRenderRequest, header_id: str | None
    ) -> list[dict[str, Any]]:
        if request.use_beam_search:
            raise BadRequest("Beam search is not supported by the render endpoint")
        sampling.check_output_room(self.max_model_len, request.max_tokens, "max_tokens")
        texts = prompts(filled_in(request, self.fill_in_middle))
        base = f"cmpl-{header_id or request.request_id or uuid.uuid4().hex}"
        rendered = []
        for index, prompt in enumerate(texts):
            token_ids = self.ids(prompt, request.add_special_tokens)
            if not token_ids:
                raise BadRequest("No token_ids rendered")
            rendered.append(
                self._one(request, token_ids, base if len(texts) == 1 else f"{base}-{index}")
            )
        return rendered

    def _one(
        self, request: CompletionRenderRequest, token_ids: list[int], request_id: str
    ) -> dict[str, Any]:
        budget = sampling.max_tokens(
            self.max_model_len, request.max_tokens, len(token_ids), self.generation
        )
        prompt_logprobs = request.prompt_logprobs
        if prompt_logprobs is None and request.echo:
            prompt_logprobs = request.logprobs
        if request.echo and request.max_tokens == 0:
            budget = 1
        fields = request_fields(
            request,
            self.generation,
            max_tokens=budget,
            logprobs=request.logprobs,
            prompt_logprobs=prompt_logprobs,
            skip_special=request.skip_special_tokens,
        )
        params = sampling.sampling_params(fields)
        kv, ec = hoisted(params)
        return {
            "request_id": request_id,
            "token_ids": token_ids,
            "token_offsets": None,
            "features": None,
            "content_parts": None,
            "sampling_params": params,
            "model": request.model,
            "reasoning_ended": None,
            "reasoning_parser_kwargs": None,
            "return_token_ids": request.return_token_ids,
            "output_mode": "tokens",
            "parse_context": None,
            "stream": bool(request.stream),
            "stream_options": stream_options(request),
            "cache_salt": request.cache_salt,
            "priority": request.priority,
            "kv_transfer_params": kv,
            "ec_transfer_params": ec,
        }
