"""Streamed chunks without a parser: the decode window travels in ``stream_state``.

Nothing is kept between chunks; each continues the window the client carried, with
the same per-token detokenizer as a one-shot decode, so any chunking yields the
one-shot text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import msgspec

from app.streams.derender import (
    chat_chunk,
    chat_top_logprobs,
    completion_chunk,
    completion_top_logprobs,
    drop_stop_token,
    resolve_stream_logprobs,
    skip_special_tokens,
)
from app.tokens.detokenizer import DecodeWindow, Detokenizer
from app.tokens.logprobs import context_tail, to_completion_logprobs
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
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


class _Decoded(NamedTuple):
    token_ids: list[int]
    text: str
    stop_reason: StopReason
    logprobs: ChatLogProbs | None


_Choice = TypeVar("_Choice", ChatStreamChoice, CompletionStreamChoice)

# What a stream kind makes of one decoded choice: its reply choice, and the carried
# state with that kind's own fields moved past it (the window and the logprob context
# move alike for every kind, in ``_advanced``).
_Reply = Callable[[GenerateStreamChoice, _Decoded, StreamState], tuple[_Choice, StreamState]]


def _advanced(state: StreamState, window: DecodeWindow, token_ids: list[int]) -> StreamState:
    """``state`` past a choice's tokens: the window where decoding left it, and the
    logprob context grown by the tokens."""
    return msgspec.structs.replace(
        state,
        prev_tokens=window.prev_tokens,
        prefix_offset=window.prefix_offset,
        read_offset=window.read_offset,
        logprob_context_token_ids=context_tail(state.logprob_context_token_ids, token_ids),
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

    def _decode_choices(
        self,
        request: ChatStreamDerenderRequest | CompletionStreamDerenderRequest,
        options: DecodeOptions | None,
        top_limit: int | None,
        reply: _Reply[_Choice],
    ) -> tuple[list[_Choice], StreamState]:
        """Each choice decoded in turn from the carried window, ``reply`` making its reply
        choice; the state that comes out is past all of them."""
        chunk = request.generate_chunk
        skip = skip_special_tokens(options)
        state, window = self._window(request.stream_state, request.prompt_token_ids, chunk, skip)
        choices: list[_Choice] = []
        for choice in chunk.choices:
            decoded = self._decode(choice, state, window, skip, options, top_limit)
            made, state = reply(choice, decoded, state)
            choices.append(made)
            state = _advanced(state, window, decoded.token_ids)
        return choices, state

    def chat(
        self, request: ChatStreamDerenderRequest, model: str
    ) -> tuple[ChatCompletionChunk, StreamState]:
        """One streamed chat chunk and the state its reply carries."""
        options = request.chat_request
        return_token_ids = bool(options is not None and options.return_token_ids)

        def reply(
            choice: GenerateStreamChoice, decoded: _Decoded, state: StreamState
        ) -> tuple[ChatStreamChoice, StreamState]:
            delta = DeltaMessage(
                role=None if state.role_sent else "assistant",
                content=decoded.text or None,
                reasoning=None,
            )
            made = ChatStreamChoice(
                index=choice.index,
                delta=delta,
                logprobs=decoded.logprobs,
                finish_reason=choice.finish_reason,
                stop_reason=decoded.stop_reason,
                token_ids=choice.token_ids if return_token_ids else None,
            )
            return made, msgspec.structs.replace(state, role_sent=True)

        choices, state = self._decode_choices(request, options, chat_top_logprobs(options), reply)
        return chat_chunk(request, model, choices, return_token_ids), state

    def completion(
        self, request: CompletionStreamDerenderRequest, model: str
    ) -> tuple[CompletionChunk, StreamState]:
        """One streamed completion chunk and the state its reply carries."""
        options = request.completion_request
        return_token_ids = bool(options is not None and options.return_token_ids)
        prompt_token_ids = request.generate_chunk.prompt_token_ids if return_token_ids else None

        def reply(
            choice: GenerateStreamChoice, decoded: _Decoded, state: StreamState
        ) -> tuple[CompletionStreamChoice, StreamState]:
            logprobs = None
            text_offset = state.logprob_text_offset + len(decoded.text)
            if decoded.logprobs is not None and choice.logprobs is not None:
                logprobs = to_completion_logprobs(
                    decoded.logprobs, choice.logprobs, state.logprob_text_offset
                )
                if logprobs.tokens:
                    text_offset = logprobs.text_offset[-1] + len(logprobs.tokens[-1])
            made = CompletionStreamChoice(
                index=choice.index,
                text=decoded.text,
                logprobs=logprobs,
                finish_reason=choice.finish_reason,
                stop_reason=decoded.stop_reason,
                prompt_token_ids=prompt_token_ids,
                token_ids=choice.token_ids if return_token_ids else None,
            )
            return made, msgspec.structs.replace(state, logprob_text_offset=text_offset)

        top_limit = completion_top_logprobs(options)
        choices, state = self._decode_choices(request, options, top_limit, reply)
        return completion_chunk(request, model, choices), state
