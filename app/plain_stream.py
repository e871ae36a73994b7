"""Streamed chunks without a parser: the decode window travels in ``stream_state``.

Nothing is kept between chunks; each continues the window the client carried, with
the same per-token detokenizer as a one-shot decode, so any chunking yields the
one-shot text.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import msgspec

from app.derender import (
    chat_chunk,
    chat_top_logprobs,
    completion_top_logprobs,
    drop_stop_token,
    resolve_stream_logprobs,
    skip_special_tokens,
    stream_usage,
)
from app.detokenizer import DecodeWindow, Detokenizer
from app.logprobs import context_tail, to_completion_logprobs
from app.protocol import (
    ChatCompletionChunk,
    ChatLogProbs,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    CompletionChunk,
    CompletionStreamChoice,
    CompletionStreamDerenderRequest,
    DecodeOptions,
    DeltaMessage,
    GenerateChunk,
    GenerateStreamChoice,
    StopReason,
    StreamState,
)
from app.tokenizer import Tokenizer


class _Decoded(NamedTuple):
    token_ids: list[int]
    text: str
    stop_reason: StopReason
    logprobs: ChatLogProbs | None


def _advanced(
    state: StreamState, window: DecodeWindow, token_ids: list[int], **changes: Any
) -> StreamState:
    """``state`` past a choice's tokens: the window where decoding left it, the logprob
    context grown by the tokens, and ``changes``."""
    return msgspec.structs.replace(
        state,
        prev_tokens=window.prev_tokens,
        prefix_offset=window.prefix_offset,
        read_offset=window.read_offset,
        logprob_context_token_ids=context_tail(state.logprob_context_token_ids, token_ids),
        **changes,
    )


class PlainStreamDerenderer:
    """Chat and completion chunks, decoded from the carried window."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def _window(
        self,
        state: StreamState | None,
        prompt_token_ids: list[int] | None,
        chunk: GenerateChunk,
        skip: bool,
    ) -> tuple[StreamState, DecodeWindow]:
        """The carried state, or on a stream's first call one seeded from the prompt."""
        if state is None:
            seed_ids = prompt_token_ids if prompt_token_ids is not None else chunk.prompt_token_ids
            window = DecodeWindow.seeded(self.tokenizer, seed_ids, skip)
            state = StreamState(window.prev_tokens, window.prefix_offset, window.read_offset)
        window = DecodeWindow(list(state.prev_tokens), state.prefix_offset, state.read_offset)
        return state, window

    def _decode(
        self,
        choice: GenerateStreamChoice,
        state: StreamState,
        window: DecodeWindow,
        skip: bool,
        options: DecodeOptions | None,
        top_limit: int | None,
    ) -> _Decoded:
        """One choice's text (the window advanced past it) and resolved logprobs."""
        token_ids = choice.token_ids or []
        text_ids, stop_reason = drop_stop_token(
            self.tokenizer, token_ids, choice.finish_reason, choice.stop_reason, options
        )
        text = Detokenizer(self.tokenizer, window, skip).decode(text_ids)
        logprobs = resolve_stream_logprobs(self.tokenizer, choice.logprobs, state, top_limit)
        return _Decoded(token_ids, text, stop_reason, logprobs)

    def chat(
        self, request: ChatStreamDerenderRequest, model: str
    ) -> tuple[ChatCompletionChunk, StreamState]:
        """One streamed chat chunk and the state its reply carries."""
        chunk = request.generate_chunk
        chat_request = request.chat_request
        skip = skip_special_tokens(chat_request)
        state, window = self._window(request.stream_state, request.prompt_token_ids, chunk, skip)
        return_token_ids = bool(chat_request is not None and chat_request.return_token_ids)
        top_limit = chat_top_logprobs(chat_request)
        choices = []
        for choice in chunk.choices:
            decoded = self._decode(choice, state, window, skip, chat_request, top_limit)
            delta = DeltaMessage(
                role=None if state.role_sent else "assistant",
                content=decoded.text or None,
                reasoning=None,
            )
            state = _advanced(state, window, decoded.token_ids, role_sent=True)
            choices.append(
                ChatStreamChoice(
                    index=choice.index,
                    delta=delta,
                    logprobs=decoded.logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=decoded.stop_reason,
                    token_ids=choice.token_ids if return_token_ids else None,
                )
            )
        return chat_chunk(request, model, choices, return_token_ids), state

    def completion(
        self, request: CompletionStreamDerenderRequest, model: str
    ) -> tuple[CompletionChunk, StreamState]:
        """One streamed completion chunk and the state its reply carries."""
        chunk = request.generate_chunk
        options = request.completion_request
        skip = skip_special_tokens(options)
        state, window = self._window(request.stream_state, request.prompt_token_ids, chunk, skip)
        return_token_ids = bool(options is not None and options.return_token_ids)
        top_limit = completion_top_logprobs(options)
        choices = []
        for choice in chunk.choices:
            decoded = self._decode(choice, state, window, skip, options, top_limit)
            logprobs = None
            text_offset = state.logprob_text_offset + len(decoded.text)
            if decoded.logprobs is not None and choice.logprobs is not None:
                logprobs = to_completion_logprobs(
                    decoded.logprobs, choice.logprobs, state.logprob_text_offset
                )
                if logprobs.tokens:
                    text_offset = logprobs.text_offset[-1] + len(logprobs.tokens[-1])
            state = _advanced(state, window, decoded.token_ids, logprob_text_offset=text_offset)
            choices.append(
                CompletionStreamChoice(
                    index=choice.index,
                    text=decoded.text,
                    logprobs=logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=decoded.stop_reason,
                    prompt_token_ids=chunk.prompt_token_ids if return_token_ids else None,
                    token_ids=choice.token_ids if return_token_ids else None,
                )
            )
        return self._completion_chunk(request, model, choices), state

    @staticmethod
    def _completion_chunk(
        request: CompletionStreamDerenderRequest, model: str, choices: list[CompletionStreamChoice]
    ) -> CompletionChunk:
        chunk = request.generate_chunk
        return CompletionChunk(
            id=chunk.request_id,
            object="text_completion",
            created=int(time.time()),
            model=model,
            choices=choices,
            usage=stream_usage(chunk, request.prompt_tokens),
            system_fingerprint=None,
            metrics=chunk.metrics,
        )
