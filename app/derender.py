"""Token ids to chat and completion responses on the plain path (no parser).

One-shot responses decode each choice from the prompt-seeded window; streamed chunks
continue the window carried in ``stream_state``. Both run the same per-token
detokenizer, so any chunking yields the one-shot text. Stop handling follows vLLM
0.33.0: the token that stopped generation is left out of the text, and a stop string
cuts one-shot text where it matched.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from app import budget
from app.detokenizer import DecodeWindow, Detokenizer
from app.logprobs import (
    LogprobResolver,
    chat_top_limit,
    completion_top_limit,
    context_tail,
    to_completion_logprobs,
)
from app.parsing import parse_options, to_message, to_wire_delta
from app.protocol import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatDerenderRequest,
    ChatLogProbs,
    ChatMessage,
    ChatRequest,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    Completion,
    CompletionChoice,
    CompletionChunk,
    CompletionDerenderRequest,
    CompletionRequest,
    CompletionStreamChoice,
    CompletionStreamDerenderRequest,
    DecodeOptions,
    DeltaMessage,
    GenerateChunk,
    GenerateLogProbs,
    StopReason,
    StreamState,
    Usage,
)
from app.session import StreamSession
from app.tokenizer import Tokenizer
from cache.redis_tier import CORRUPT, OUT_OF_RANGE
from parsers.registry import ParserFactory
from parsers.stream import ChatStreamState
from parsers.types import Delta


def skip_special_tokens(request: DecodeOptions | None, preserve_special: bool = False) -> bool:
    """Whether decoding drops special tokens; a parser needs them kept as markers."""
    if preserve_special:
        return False
    return request is None or request.skip_special_tokens is not False


def chat_top_logprobs(request: ChatRequest | None) -> int | None:
    if request is None:
        return None
    return chat_top_limit(request.logprobs, request.top_logprobs, bool(request.logprob_token_ids))


def completion_top_logprobs(request: CompletionRequest | None) -> int | None:
    if request is None:
        return None
    return completion_top_limit(request.logprobs, bool(request.logprob_token_ids))


def find_stop_string(
    text: str, new_chars: int, stops: Sequence[str], include: bool
) -> tuple[str, int] | None:
    """The stop string that completes earliest in the last ``new_chars`` of ``text``.

    Returns it with the length to cut the text to (-1: no cut needed).
    """
    if not new_chars or not stops:
        return None
    best: str | None = None
    best_index = 0
    best_end = sys.maxsize
    for stop in stops:
        index = text.find(stop, 1 - new_chars - len(stop))
        if index != -1 and index + len(stop) < best_end:
            best, best_index, best_end = stop, index, index + len(stop)
    if best is None:
        return None
    if not include:
        return best, best_index
    return best, (-1 if best_end >= len(text) else best_end)


def _chat_chunk(
    request: ChatStreamDerenderRequest,
    model: str,
    choices: list[ChatStreamChoice],
    return_token_ids: bool,
) -> ChatCompletionChunk:
    chunk = request.generate_chunk
    return ChatCompletionChunk(
        id=chunk.request_id,
        object="chat.completion.chunk",
        created=int(time.time()),
        model=model,
        choices=choices,
        usage=_stream_usage(chunk, request.prompt_tokens),
        system_fingerprint=None,
        prompt_token_ids=chunk.prompt_token_ids if return_token_ids else None,
        prompt_text=None,
        metrics=chunk.metrics,
    )


def _stream_usage(chunk: GenerateChunk, prompt_tokens: int | None) -> Usage | None:
    if chunk.usage is None:
        return None
    prompt = prompt_tokens if prompt_tokens is not None else (chunk.usage.prompt_tokens or 0)
    return Usage.of(prompt, chunk.usage.completion_tokens or 0)


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


class Derenderer:
    """The derender operations over one tokenizer and the server's parsers."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        parsers: ParserFactory | None = None,
        default_chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.parsers = parsers
        self.default_chat_template_kwargs = default_chat_template_kwargs or {}

    # ------------------------------------------------------------------ shared pieces

    def drop_stop_token(
        self,
        token_ids: list[int],
        finish_reason: str | None,
        stop_reason: StopReason,
        request: DecodeOptions | None,
    ) -> tuple[list[int], StopReason]:
        """Leave out the token that stopped generation, as the engine's detokenizer does.

        An int ``stop_reason`` names that token. When none is reported, the last id is
        checked against the request's stop ids and the model's EOS ids, and a stop
        token other than the primary EOS becomes the ``stop_reason``.
        """
        if finish_reason != "stop" or isinstance(stop_reason, str) or not token_ids:
            return token_ids, stop_reason
        last = token_ids[-1]
        if stop_reason is None:
            honor_eos = request is None or not request.ignore_eos
            stop_ids = (request.stop_token_ids if request is not None else None) or ()
            if honor_eos and last == self.tokenizer.eos_token_id:
                stopped = True
            elif last in stop_ids or (honor_eos and last in self.tokenizer.model_eos_token_ids):
                stopped, stop_reason = True, last
            else:
                stopped = False
        else:
            stopped = last == stop_reason
        if not stopped or (request is not None and request.include_stop_str_in_output):
            return token_ids, stop_reason
        return token_ids[:-1], stop_reason

    def decode_output(
        self,
        token_ids: list[int],
        finish_reason: str | None,
        stop_reason: StopReason,
        request: DecodeOptions | None,
        seed: DecodeWindow,
        skip_special: bool,
    ) -> tuple[str, StopReason]:
        """Decode a complete output into the text the engine would have returned."""
        reported = stop_reason
        token_ids, stop_reason = self.drop_stop_token(
            token_ids, finish_reason, stop_reason, request
        )
        if finish_reason != "stop" or isinstance(reported, int):
            stops: list[str] = []
        elif isinstance(reported, str):
            stops = [reported]
        else:
            stops = request.stop_strings() if request is not None else []
        min_tokens = request.min_tokens if request is not None else 0
        window = DecodeWindow(list(seed.prev_tokens), seed.prefix_offset, seed.read_offset)
        detokenizer = Detokenizer(self.tokenizer, window, skip_special)
        head = detokenizer.decode(token_ids[:min_tokens])
        tail = detokenizer.decode(token_ids[min_tokens:])
        text = head + tail
        include = request is not None and request.include_stop_str_in_output
        match = find_stop_string(text, len(tail), stops, include)
        if match is None:
            return text, stop_reason
        stop, cut = match
        return (text if cut == -1 else text[:cut]), stop

    # ------------------------------------------------------------------ one-shot

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
            text, stop_reason = self.decode_output(
                token_ids, choice.finish_reason, choice.stop_reason, chat_request, seed, skip
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
                text, stop_reason = self.decode_output(
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

    # ------------------------------------------------------------------ streaming

    def _stream_window(
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

    def _resolve_stream_logprobs(
        self, logprobs: GenerateLogProbs | None, state: StreamState, top_limit: int | None
    ) -> ChatLogProbs | None:
        if logprobs is None:
            return None
        resolver = LogprobResolver(self.tokenizer, state.logprob_context_token_ids)
        return resolver.resolve(logprobs, top_limit)

    def chat_stream(
        self, request: ChatStreamDerenderRequest, model: str
    ) -> tuple[ChatCompletionChunk, StreamState]:
        """One streamed chat chunk without a parser."""
        chunk = request.generate_chunk
        chat_request = request.chat_request
        skip = skip_special_tokens(chat_request)
        state, window = self._stream_window(
            request.stream_state, request.prompt_token_ids, chunk, skip
        )
        return_token_ids = bool(chat_request is not None and chat_request.return_token_ids)
        choices = []
        for choice in chunk.choices:
            token_ids = choice.token_ids or []
            text_ids, stop_reason = self.drop_stop_token(
                token_ids, choice.finish_reason, choice.stop_reason, chat_request
            )
            text = Detokenizer(self.tokenizer, window, skip).decode(text_ids)
            logprobs = self._resolve_stream_logprobs(
                choice.logprobs, state, chat_top_logprobs(chat_request)
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
        reply = _chat_chunk(request, model, choices, return_token_ids)
        return reply, state

    def stream_session(self, request: ChatStreamDerenderRequest) -> StreamSession:
        """A session for the request's stream, rebuilt by replaying its carried history.

        The replay feeds each earlier chunk as it arrived (``output_chunk_lens``), so
        the parser ends exactly where the previous chunk left it.
        """
        session = self._new_session(request, None)
        state = request.stream_state or StreamState()
        session.replay(state.output_token_ids, state.output_chunk_lens)
        return session

    def restored_session(
        self, request: ChatStreamDerenderRequest, snapshot: bytes
    ) -> tuple[StreamSession | None, str | None]:
        """The request's stream continued from a session snapshot, without replay.

        Returns None with the reason when the bytes are not a snapshot ("corrupt") or
        not one of this stream at this point ("out_of_range"); the caller replays.
        """
        saved = StreamSession.load_snapshot(snapshot)
        if saved is None:
            return None, CORRUPT
        state = request.stream_state or StreamState()
        assert request.prompt_token_ids is not None
        if saved.problem(self.tokenizer, request.prompt_token_ids, state.output_token_ids):
            return None, OUT_OF_RANGE
        session = self._new_session(request, saved.parser)
        session.resume(saved, state.output_token_ids, state.output_chunk_lens)
        return session, None

    def _new_session(
        self, request: ChatStreamDerenderRequest, parser_state: ChatStreamState | None
    ) -> StreamSession:
        assert self.parsers is not None
        chunk = request.generate_chunk
        chat_request = request.chat_request
        assert chat_request is not None and request.prompt_token_ids is not None
        options = parse_options(chat_request, self.default_chat_template_kwargs)
        index = chunk.choices[0].index if chunk.choices else 0
        seed = f"{chunk.request_id}:{index}"
        parser = self.parsers.stream_for_request(options, seed, parser_state)
        return StreamSession(self.tokenizer, parser, request.prompt_token_ids)

    def chat_stream_parsed(
        self, request: ChatStreamDerenderRequest, model: str, session: StreamSession | None
    ) -> tuple[ChatCompletionChunk, StreamState, StreamSession | None]:
        """One parsed chunk, fed to ``session`` (rebuilt by replay when None).

        A chunk without a choice needs no parser, so no session is built for it.
        """
        chunk = request.generate_chunk
        chat_request = request.chat_request
        assert chat_request is not None
        state = request.stream_state or StreamState()
        if session is None and chunk.choices:
            session = self.stream_session(request)
        options = session.parser.options if session is not None else None
        hide_metadata = options is not None and not options.include_reasoning
        return_token_ids = bool(chat_request.return_token_ids)
        choices = []
        if chunk.choices and session is not None:
            # The carried flag is authoritative over the one the session rebuilt.
            session.parser.state.tools_streamed = state.tools_streamed
            parser = session.parser
            choice = chunk.choices[0]
            token_ids = choice.token_ids or []
            text_ids, stop_reason = self.drop_stop_token(
                token_ids, choice.finish_reason, choice.stop_reason, chat_request
            )
            delta, finish_reason = session.feed(token_ids, text_ids, choice.finish_reason)
            logprobs = None
            if not hide_metadata:
                logprobs = self._resolve_stream_logprobs(
                    choice.logprobs, state, chat_top_logprobs(chat_request)
                )
            pinned_ids = list(state.last_tool_call_ids)
            choices.append(
                ChatStreamChoice(
                    index=choice.index,
                    delta=to_wire_delta(delta or Delta(), pinned_ids, state.role_sent),
                    logprobs=logprobs,
                    finish_reason=finish_reason,
                    stop_reason=stop_reason,
                    token_ids=choice.token_ids if return_token_ids and not hide_metadata else None,
                )
            )
            state = msgspec.structs.replace(
                state,
                output_token_ids=session.output_token_ids,
                output_chunk_lens=session.output_chunk_lens,
                role_sent=True,
                tools_streamed=parser.state.tools_streamed,
                last_tool_call_ids=pinned_ids,
                logprob_context_token_ids=context_tail(state.logprob_context_token_ids, token_ids),
            )
            session.answer(request, state)
        reply = _chat_chunk(request, model, choices, return_token_ids)
        return reply, state, session

    def completion_stream(
        self, request: CompletionStreamDerenderRequest, model: str
    ) -> tuple[CompletionChunk, StreamState]:
        """One streamed completion chunk."""
        chunk = request.generate_chunk
        completion_request = request.completion_request
        skip = skip_special_tokens(completion_request)
        state, window = self._stream_window(
            request.stream_state, request.prompt_token_ids, chunk, skip
        )
        return_token_ids = bool(
            completion_request is not None and completion_request.return_token_ids
        )
        choices = []
        for choice in chunk.choices:
            token_ids = choice.token_ids or []
            text_ids, stop_reason = self.drop_stop_token(
                token_ids, choice.finish_reason, choice.stop_reason, completion_request
            )
            text = Detokenizer(self.tokenizer, window, skip).decode(text_ids)
            resolved = self._resolve_stream_logprobs(
                choice.logprobs, state, completion_top_logprobs(completion_request)
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
        reply = CompletionChunk(
            id=chunk.request_id,
            object="text_completion",
            created=int(time.time()),
            model=model,
            choices=choices,
            usage=_stream_usage(chunk, request.prompt_tokens),
            system_fingerprint=None,
            metrics=chunk.metrics,
        )
        return reply, state
