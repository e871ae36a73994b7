"""Streamed chunks without a parser: the decode window travels in ``stream_state``.

Nothing is kept between chunks; each continues the window the client carried, with
the same per-token detokenizer as a one-shot decode, so any chunking yields the
one-shot text.
"""

from __future__ import annotations

import time

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
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    CompletionChunk,
    CompletionStreamChoice,
    CompletionStreamDerenderRequest,
    DeltaMessage,
    GenerateChunk,
    StreamState,
)
from app.tokenizer import Tokenizer


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

    def chat(
        self, request: ChatStreamDerenderRequest, model: str
    ) -> tuple[ChatCompletionChunk, StreamState]:
        """One streamed chat chunk and the state its reply carries."""
        chunk = request.generate_chunk
        chat_request = request.chat_request
        skip = skip_special_tokens(chat_request)
        state, window = self._window(request.stream_state, request.prompt_token_ids, chunk, skip)
        return_token_ids = bool(chat_request is not None and chat_request.return_token_ids)
        choices = []
        for choice in chunk.choices:
            token_ids = choice.token_ids or []
            text_ids, stop_reason = drop_stop_token(
                self.tokenizer, token_ids, choice.finish_reason, choice.stop_reason, chat_request
            )
            text = Detokenizer(self.tokenizer, window, skip).decode(text_ids)
            logprobs = resolve_stream_logprobs(
                self.tokenizer, choice.logprobs, state, chat_top_logprobs(chat_request)
            )
            delta = DeltaMessage(
                role=None if state.role_sent else "assistant",
                content=text or None,
                reasoning=None,
            )
            state = msgspec.structs.replace(
                state,
                prev_tokens=window.prev_tokens,
                prefix_offset=window.prefix_offset,
                read_offset=window.read_offset,
                role_sent=True,
                logprob_context_token_ids=context_tail(state.logprob_context_token_ids, token_ids),
            )
            choices.append(
                ChatStreamChoice(
                    index=choice.index,
                    delta=delta,
                    logprobs=logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=stop_reason,
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
        choices = []
        for choice in chunk.choices:
            token_ids = choice.token_ids or []
            text_ids, stop_reason = drop_stop_token(
                self.tokenizer, token_ids, choice.finish_reason, choice.stop_reason, options
            )
            text = Detokenizer(self.tokenizer, window, skip).decode(text_ids)
            resolved = resolve_stream_logprobs(
                self.tokenizer, choice.logprobs, state, completion_top_logprobs(options)
            )
            logprobs = None
            text_offset = state.logprob_text_offset + len(text)
            if resolved is not None and choice.logprobs is not None:
                logprobs = to_completion_logprobs(
                    resolved, choice.logprobs, state.logprob_text_offset
                )
                if logprobs.tokens:
                    text_offset = logprobs.text_offset[-1] + len(logprobs.tokens[-1])
            state = msgspec.structs.replace(
                state,
                prev_tokens=window.prev_tokens,
                prefix_offset=window.prefix_offset,
                read_offset=window.read_offset,
                logprob_context_token_ids=context_tail(state.logprob_context_token_ids, token_ids),
                logprob_text_offset=text_offset,
            )
            choices.append(
                CompletionStreamChoice(
                    index=choice.index,
                    text=text,
                    logprobs=logprobs,
                    finish_reason=choice.finish_reason,
                    stop_reason=stop_reason,
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
