"""What every derender path shares: decode options, stop handling, a chunk's envelope.

Stop handling follows vLLM 0.33.0: the token that stopped generation is left out of
the text, and a stop string cuts one-shot text where it matched. The paths themselves
live in app/streams/oneshot.py (whole outputs), app/streams/plain_stream.py (chunks without a
parser) and app/streams/parsed_stream.py (chunks through a session's parser).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TypedDict

from app.tokens.detokenizer import DecodeWindow, Detokenizer
from app.tokens.logprobs import LogprobResolver, chat_top_limit, completion_top_limit
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatCompletionChunk,
    ChatLogProbs,
    ChatRequest,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    CompletionChunk,
    CompletionRequest,
    CompletionStreamChoice,
    CompletionStreamDerenderRequest,
    DecodeOptions,
    GenerateChunk,
    GenerateLogProbs,
    PerRequestMetrics,
    StopReason,
    StreamState,
    Usage,
)


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


def drop_stop_token(
    tokenizer: Tokenizer,
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
        if honor_eos and last == tokenizer.eos_token_id:
            stopped = True
        elif last in stop_ids or (honor_eos and last in tokenizer.model_eos_token_ids):
            stopped, stop_reason = True, last
        else:
            stopped = False
    else:
        stopped = last == stop_reason
    if not stopped or (request is not None and request.include_stop_str_in_output):
        return token_ids, stop_reason
    return token_ids[:-1], stop_reason


def decode_output(
    tokenizer: Tokenizer,
    token_ids: list[int],
    finish_reason: str | None,
    stop_reason: StopReason,
    request: DecodeOptions | None,
    seed: DecodeWindow,
    skip_special: bool,
) -> tuple[str, StopReason]:
    """Decode a complete output into the text the engine would have returned."""
    reported = stop_reason
    token_ids, stop_reason = drop_stop_token(
        tokenizer, token_ids, finish_reason, stop_reason, request
    )
    if finish_reason != "stop" or isinstance(reported, int):
        stops: list[str] = []
    elif isinstance(reported, str):
        stops = [reported]
    else:
        stops = request.stop_strings() if request is not None else []
    min_tokens = request.min_tokens if request is not None else 0
    window = DecodeWindow(list(seed.prev_tokens), seed.prefix_offset, seed.read_offset)
    detokenizer = Detokenizer(tokenizer, window, skip_special)
    head = detokenizer.decode(token_ids[:min_tokens])
    tail = detokenizer.decode(token_ids[min_tokens:])
    text = head + tail
    include = request is not None and request.include_stop_str_in_output
    match = find_stop_string(text, len(tail), stops, include)
    if match is None:
        return text, stop_reason
    stop, cut = match
    return (text if cut == -1 else text[:cut]), stop


def resolve_stream_logprobs(
    tokenizer: Tokenizer,
    logprobs: GenerateLogProbs | None,
    state: StreamState,
    top_limit: int | None,
) -> ChatLogProbs | None:
    """A chunk's logprobs, their token strings decoded after the carried context."""
    if logprobs is None:
        return None
    resolver = LogprobResolver(tokenizer, state.logprob_context_token_ids)
    return resolver.resolve(logprobs, top_limit)


def stream_usage(chunk: GenerateChunk, prompt_tokens: int | None) -> Usage | None:
    if chunk.usage is None:
        return None
    prompt = prompt_tokens if prompt_tokens is not None else (chunk.usage.prompt_tokens or 0)
    return Usage.of(prompt, chunk.usage.completion_tokens or 0)


class ChunkEnvelope(TypedDict):
    """The fields a streamed chunk of either kind takes from its request, not its choices."""

    id: str
    created: int
    model: str
    usage: Usage | None
    system_fingerprint: None
    metrics: PerRequestMetrics | None


def chunk_envelope(
    request: ChatStreamDerenderRequest | CompletionStreamDerenderRequest, model: str
) -> ChunkEnvelope:
    """What chat and completion chunks alike carry around their choices."""
    chunk = request.generate_chunk
    return ChunkEnvelope(
        id=chunk.request_id,
        created=int(time.time()),
        model=model,
        usage=stream_usage(chunk, request.prompt_tokens),
        system_fingerprint=None,
        metrics=chunk.metrics,
    )


def chat_chunk(
    request: ChatStreamDerenderRequest,
    model: str,
    choices: list[ChatStreamChoice],
    return_token_ids: bool,
) -> ChatCompletionChunk:
    """A streamed chat chunk around its choices (made field by field: it is made once
    per chunk of every stream)."""
    chunk = request.generate_chunk
    return ChatCompletionChunk(  # by position: keywords cost a lookup each
        chunk.request_id,
        "chat.completion.chunk",
        int(time.time()),
        model,
        choices,
        stream_usage(chunk, request.prompt_tokens) if chunk.usage is not None else None,
        None,  # system_fingerprint
        chunk.prompt_token_ids if return_token_ids else None,
        None,  # prompt_text
        chunk.metrics,
    )


def completion_chunk(
    request: CompletionStreamDerenderRequest, model: str, choices: list[CompletionStreamChoice]
) -> CompletionChunk:
    """A streamed completion chunk around its choices."""
    return CompletionChunk(
        object="text_completion", choices=choices, **chunk_envelope(request, model)
    )
