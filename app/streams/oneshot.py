"""Whole outputs to chat completions and text completions, one request at a time.

Each choice is decoded from the prompt-seeded window (and parsed, for chat, when the
server has parsers) as the response's choices are iterated, so the server encodes one
choice while the next is not yet built (app/streams/pieces.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from app.serving import budget
from app.streams.derender import (
    chat_top_logprobs,
    completion_top_logprobs,
    decode_output,
    skip_special_tokens,
)
from app.streams.parsing import parse_options, to_message
from app.tokens.detokenizer import DecodeWindow
from app.tokens.logprobs import LogprobResolver, to_completion_logprobs
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatChoice,
    ChatCompletion,
    ChatDerenderRequest,
    ChatMessage,
    Completion,
    CompletionChoice,
    CompletionDerenderRequest,
    Usage,
)
from parsers.registry import ParserFactory

R = TypeVar("R", bound=msgspec.Struct)
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Lazy(Generic[R, C]):
    """A one-shot response whose choices are derendered as they are iterated.

    The server encodes each choice as it comes, so a large response never has all its
    objects alive at once (millions of them make the garbage collector's full passes,
    which hold the GIL, last hundreds of milliseconds).
    """

    envelope: R  # the response with no choices
    choices: Iterator[C]

    def finished(self) -> R:
        """The whole response, every choice derendered."""
        return msgspec.structs.replace(self.envelope, choices=list(self.choices))


class OneShotDerenderer:
    """One-shot derendering over one tokenizer and the server's parsers (if any)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        parsers: ParserFactory | None = None,
        default_chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.parsers = parsers
        self.default_chat_template_kwargs = default_chat_template_kwargs or {}

    def chat(self, request: ChatDerenderRequest, model: str) -> ChatCompletion:
        """A one-shot chat completion, parsed when the server has parsers."""
        return self.chat_lazily(request, model).finished()

    def chat_lazily(
        self, request: ChatDerenderRequest, model: str
    ) -> Lazy[ChatCompletion, ChatChoice]:
        """``chat``, its choices derendered one by one as they are iterated."""
        gen = request.generate_response
        chat_request = request.chat_request
        return_token_ids = bool(chat_request is not None and chat_request.return_token_ids)
        completion_tokens = sum(len(c.token_ids) for c in gen.choices if c.token_ids)
        envelope = ChatCompletion(
            id=gen.request_id,
            object="chat.completion",
            created=int(time.time()),
            model=model,
            choices=[],
            service_tier=None,
            system_fingerprint=None,
            usage=Usage.of(request.prompt_tokens or 0, completion_tokens),
            prompt_logprobs=gen.prompt_logprobs,
            prompt_token_ids=gen.prompt_token_ids if return_token_ids else None,
            prompt_text=None,
            kv_transfer_params=gen.kv_transfer_params,
            ec_transfer_params=None,
            metrics=gen.metrics,
        )
        return Lazy(envelope, self._chat_choices(request))

    def _chat_choices(self, request: ChatDerenderRequest) -> Iterator[ChatChoice]:
        gen = request.generate_response
        chat_request = request.chat_request
        parser = None
        if self.parsers is not None and self.parsers.configured and chat_request is not None:
            options = parse_options(chat_request, self.default_chat_template_kwargs)
            parser = self.parsers.for_request(options)
        skip = skip_special_tokens(chat_request, preserve_special=parser is not None)
        seed_ids = request.prompt_token_ids
        if seed_ids is None:
            seed_ids = gen.prompt_token_ids
        seed = DecodeWindow.seeded(self.tokenizer, seed_ids, skip)
        # Hidden reasoning would leak through per-token metadata, so it goes too.
        hide_metadata = parser is not None and not parser.options.include_reasoning
        return_token_ids = bool(chat_request is not None and chat_request.return_token_ids)
        top_limit = chat_top_logprobs(chat_request)
        for choice in gen.choices:
            token_ids = choice.token_ids or []
            logprobs = None
            if choice.logprobs is not None and not hide_metadata:
                logprobs = LogprobResolver(self.tokenizer).resolve(choice.logprobs, top_limit)
            text, stop_reason = decode_output(
                self.tokenizer,
                token_ids,
                choice.finish_reason,
                choice.stop_reason,
                chat_request,
                seed,
                skip,
            )
            budget.check()
            finish_reason = choice.finish_reason or "stop"
            if parser is None:
                message = ChatMessage(
                    role="assistant",
                    content=text,
                    refusal=None,
                    annotations=None,
                    audio=None,
                    function_call=None,
                    reasoning=None,
                )
            else:
                seed_text = f"{gen.request_id}:{choice.index}"
                message = to_message(parser.parse(text, gen.prompt_token_ids, seed_text, token_ids))
                forced_name = parser.options.named_tool is not None
                if message.tool_calls and finish_reason == "stop" and not forced_name:
                    finish_reason = "tool_calls"
            yield ChatChoice(
                index=choice.index,
                message=message,
                logprobs=logprobs,
                finish_reason=finish_reason,
                stop_reason=stop_reason,
                token_ids=token_ids if return_token_ids and not hide_metadata else None,
            )

    def completion(self, request: CompletionDerenderRequest, model: str) -> Completion:
        """A one-shot text completion over one generate response per prompt."""
        return self.completion_lazily(request, model).finished()

    def completion_lazily(
        self, request: CompletionDerenderRequest, model: str
    ) -> Lazy[Completion, CompletionChoice]:
        """``completion``, its choices derendered one by one as they are iterated."""
        responses = request.generate_responses
        count = len(responses)
        prompt_tokens = request.prompt_tokens or [0] * count
        completion_tokens = sum(
            len(choice.token_ids or ()) for gen in responses for choice in gen.choices
        )
        first = responses[0]
        kv_params = first.kv_transfer_params
        if any(r.kv_transfer_params != kv_params for r in responses[1:]):
            kv_params = None
        envelope = Completion(
            id=first.request_id,
            object="text_completion",
            created=int(time.time()),
            model=model,
            choices=[],
            service_tier=None,
            system_fingerprint=None,
            usage=Usage.of(sum(prompt_tokens), completion_tokens),
            kv_transfer_params=kv_params,
            ec_transfer_params=None,
            # Metrics describe one prompt; several cannot be merged.
            metrics=first.metrics if count == 1 else None,
        )
        return Lazy(envelope, self._completion_choices(request))

    def _completion_choices(self, request: CompletionDerenderRequest) -> Iterator[CompletionChoice]:
        responses = request.generate_responses
        prompt_ids = request.prompt_token_ids or [None] * len(responses)
        completion_request = request.completion_request
        skip = skip_special_tokens(completion_request)
        top_limit = completion_top_logprobs(completion_request)
        return_token_ids = bool(
            completion_request is not None and completion_request.return_token_ids
        )
        index = 0
        for gen, seed_override in zip(responses, prompt_ids, strict=True):
            seed_ids = seed_override if seed_override is not None else gen.prompt_token_ids
            seed = DecodeWindow.seeded(self.tokenizer, seed_ids, skip)
            for choice in gen.choices:
                token_ids = choice.token_ids or []
                text, stop_reason = decode_output(
                    self.tokenizer,
                    token_ids,
                    choice.finish_reason,
                    choice.stop_reason,
                    completion_request,
                    seed,
                    skip,
                )
                budget.check()
                logprobs = None
                if choice.logprobs is not None:
                    resolved = LogprobResolver(self.tokenizer).resolve(choice.logprobs, top_limit)
                    logprobs = to_completion_logprobs(resolved, choice.logprobs)
                yield CompletionChoice(
                    index=index,
                    text=text,
                    logprobs=logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=stop_reason,
                    token_ids=token_ids if return_token_ids else None,
                    prompt_logprobs=None,
                    prompt_token_ids=gen.prompt_token_ids if return_token_ids else None,
                )
                index += 1
