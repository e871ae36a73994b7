"""Checks that run after decoding and before any tokenizer work.

Each raises a ``BadRequest`` whose message says what to fix. The checks and their
order follow vLLM 0.33.0's derender server, so a request fails here exactly when it
fails there.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence
from typing import Any

from msgspec import UNSET

from app import body_errors
from app.errors import BadRequest, InvalidParameter
from app.protocol import (
    ChatRequest,
    CompletionRequest,
    DecodeOptions,
    GenerateChoice,
    GenerateChunk,
    GenerateLogProbs,
    GenerateResponse,
    GenerateStreamChoice,
    StreamState,
)

STREAM_STOP_STRINGS = (
    "stop strings are not supported by streaming derender because text already sent "
    "cannot be cut. Use non-streaming derender or output_mode=text on "
    "/inference/v1/generate which holds stop strings back."
)
CHAT_REQUEST_REQUIRED = (
    "chat_request is required when a tool or reasoning parser is configured because "
    "plain detokenization would leak raw parser markup into content."
)
PROMPT_IDS_REQUIRED = (
    "prompt_token_ids is required when a tool or reasoning parser is configured. Without "
    "it parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat "
    "template that pre-opens <think>) and would misclassify reasoning content as plain "
    "content."
)


def check_generate_bounds(
    responses: Sequence[GenerateResponse],
    *,
    max_model_len: int,
    max_logprobs: int,
    max_n: int,
) -> None:
    """Bound caller-supplied structures before anything is decoded."""
    if len(responses) > max_n:
        raise BadRequest(
            f"generate_responses count ({len(responses)}) exceeds server maximum ({max_n})."
        )
    for gen in responses:
        if len(gen.choices) > max_n:
            raise BadRequest(
                f"choices count ({len(gen.choices)}) in response '{gen.request_id}' "
                f"exceeds server maximum ({max_n})."
            )
        for choice in gen.choices:
            if choice.token_ids and len(choice.token_ids) > max_model_len:
                raise BadRequest(
                    f"token_ids length ({len(choice.token_ids)}) in choice {choice.index} "
                    f"exceeds max_model_len ({max_model_len})."
                )
            _check_logprob_bounds(choice, max_model_len, max_logprobs)
        if gen.prompt_logprobs and len(gen.prompt_logprobs) > max_model_len:
            raise BadRequest(
                f"prompt_logprobs length ({len(gen.prompt_logprobs)}) in response "
                f"'{gen.request_id}' exceeds max_model_len ({max_model_len})."
            )


def _check_logprob_bounds(
    choice: GenerateChoice | GenerateStreamChoice, max_model_len: int, max_logprobs: int
) -> None:
    content = choice.logprobs.content if choice.logprobs else None
    if not content:
        return
    if len(content) > max_model_len:
        raise BadRequest(
            f"logprobs.content length ({len(content)}) in choice {choice.index} "
            f"exceeds max_model_len ({max_model_len})."
        )
    if max_logprobs >= 0:
        for entry in content:
            if len(entry.top_logprobs) > max_logprobs:
                raise BadRequest(
                    f"top_logprobs count ({len(entry.top_logprobs)}) in choice "
                    f"{choice.index} exceeds max_logprobs ({max_logprobs})."
                )


def check_chunk_bounds(chunk: GenerateChunk, *, max_model_len: int, max_logprobs: int) -> None:
    """The non-streaming logprob bounds, applied to a streamed chunk (vLLM has none there)."""
    for choice in chunk.choices:
        _check_logprob_bounds(choice, max_model_len, max_logprobs)


def check_prompt_length(prompt_token_ids: Sequence[int] | None, max_model_len: int) -> None:
    if prompt_token_ids is not None and len(prompt_token_ids) > max_model_len:
        raise BadRequest(
            f"prompt_token_ids length ({len(prompt_token_ids)}) exceeds "
            f"max_model_len ({max_model_len})."
        )


def check_token_ids_present(responses: Sequence[GenerateResponse], *, completion: bool) -> None:
    """Non-streaming outputs must carry ids: there is nothing to derender otherwise."""
    for gen in responses:
        for choice in gen.choices:
            if not choice.token_ids:
                where = f" in response {gen.request_id}" if completion else ""
                raise BadRequest(f"choice {choice.index}{where} has empty or null token_ids")


def _check_logprob_fields(options: DecodeOptions) -> None:
    prompt_logprobs = options.prompt_logprobs
    if prompt_logprobs is not None:
        if options.stream and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise InvalidParameter(
                "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs"
            )
        if prompt_logprobs < -1:
            raise InvalidParameter(
                "`prompt_logprobs` must be a positive value or -1.",
                "prompt_logprobs",
                prompt_logprobs,
            )
    if options.stream_options and not options.stream:
        raise InvalidParameter(
            "Stream options can only be defined when `stream=True`.", "stream_options"
        )


def check_chat_request(request: ChatRequest) -> None:
    """The validators of vLLM's ChatCompletionRequest that a client can trip."""
    if not bytes(request.messages).startswith(b"["):
        raise InvalidParameter("`messages` must be a list of messages.", "messages")
    _check_logprob_fields(request)
    if request.logprob_token_ids and not request.logprobs:
        raise InvalidParameter(
            "when using `logprob_token_ids`, `logprobs` must be set to true.",
            "logprob_token_ids",
        )
    top = request.top_logprobs
    if top is not None:
        if top < -1:
            raise InvalidParameter(
                "`top_logprobs` must be a positive value or -1.", "top_logprobs", top
            )
        if (top == -1 or top > 0) and not request.logprobs:
            raise InvalidParameter(
                "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs"
            )
    if request.tools is not None and not request.tools:
        raise InvalidParameter(
            "`tools` must not be an empty array. Either provide at least one tool or omit "
            "the field entirely.",
            "tools",
        )
    choice = request.tool_choice
    if choice is not UNSET and choice is not None and choice != "none":
        if request.tools is None:
            raise InvalidParameter("When using `tool_choice`, `tools` must be set.", "tool_choice")
        if isinstance(choice, str) and choice not in ("auto", "required"):
            raise InvalidParameter(
                f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", '
                '"auto" or "required" are supported.',
                "tool_choice",
            )
        if not isinstance(choice, str) and all(
            tool.function.name != choice.function.name for tool in request.tools
        ):
            raise InvalidParameter(
                "The tool specified in `tool_choice` does not match any of the specified `tools`",
                "tool_choice",
            )
    if request.continue_final_message and request.add_generation_prompt is True:
        raise InvalidParameter(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
        )


def check_completion_request(request: CompletionRequest) -> None:
    """The validators of vLLM's CompletionRequest that a client can trip."""
    prompt_empty = bytes(request.prompt) in (b"null", b'""')
    embeds_empty = bytes(request.prompt_embeds) in (b"null", b"[]")
    if prompt_empty and embeds_empty:
        raise InvalidParameter(
            "Either prompt or prompt_embeds must be provided and non-empty.", "prompt"
        )
    _check_logprob_fields(request)
    if request.logprob_token_ids and request.logprobs is None:
        raise InvalidParameter(
            "when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids"
        )
    if request.logprobs is not None and request.logprobs < -1:
        raise InvalidParameter(
            "`logprobs` must be a positive value or -1.", "logprobs", request.logprobs
        )


# --------------------------------------------------------------------------- our limits
# Bounds vLLM does not have, checked after its own checks so that a request vLLM
# rejects gets vLLM's error first.


def check_vocabulary(ids: Sequence[int] | None, where: str, vocab_size: int) -> None:
    """Every id must name a vocabulary entry (vLLM's engine message for prompt ids)."""
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        bad = next(t for t in ids if not 0 <= t < vocab_size)
        raise BadRequest(
            f"Token id {bad} is out of vocabulary: {where} takes ids from 0 to "
            f"{vocab_size - 1}. Send ids of the served model's tokenizer."
        )


def _logprob_ids(logprobs: GenerateLogProbs | None) -> list[int]:
    ids: list[int] = []
    for entry in (logprobs.content if logprobs else None) or ():
        ids.extend(top.token_id for top in entry.top_logprobs if top.token_id is not None)
        if entry.token_id is not None:
            ids.append(entry.token_id)
    return ids


def check_choice_vocabulary(
    choices: Iterable[GenerateChoice | GenerateStreamChoice], where: str, vocab_size: int
) -> None:
    for choice in choices:
        check_vocabulary(choice.token_ids, f"{where} choice {choice.index} token_ids", vocab_size)
        ids = _logprob_ids(choice.logprobs)
        check_vocabulary(ids, f"{where} choice {choice.index} logprobs", vocab_size)


def check_state_vocabulary(state: StreamState | None, vocab_size: int) -> None:
    if state is not None:
        check_vocabulary(state.output_token_ids, "stream_state.output_token_ids", vocab_size)
        check_vocabulary(
            state.logprob_context_token_ids, "stream_state.logprob_context_token_ids", vocab_size
        )


def check_history_length(state: StreamState | None, max_model_len: int) -> None:
    """Bound a carried history that the plain paths copy through without reading."""
    if state is not None and len(state.output_token_ids) > max_model_len:
        raise BadRequest(
            f"stream_state.output_token_ids length ({len(state.output_token_ids)}) exceeds "
            f"max_model_len ({max_model_len})."
        )


def check_chat_request_bytes(size: int, limit: int) -> None:
    if size > limit:
        raise BadRequest(
            f"chat_request is {size} bytes, over the server limit of {limit} bytes "
            "(--max-chat-request-bytes).",
            "chat_request",
        )


def check_chat_request_utf8(raw: bytes) -> None:
    """The chat request's messages are kept as raw JSON, which the decoder does not
    check as text: refuse invalid UTF-8 there as it is refused everywhere else."""
    try:
        codecs.utf_8_decode(raw, "strict", True)
    except UnicodeDecodeError:
        raise body_errors.not_utf8("body.chat_request") from None


def check_tool_count(request: ChatRequest, limit: int) -> None:
    """The limit OpenAI's API puts on ``tools`` (128), with its message."""
    count = len(request.tools or ())
    if count > limit:
        raise BadRequest(
            f"Invalid 'tools': array too long. Expected an array with maximum length {limit}, "
            f"but got an array with length {count} instead.",
            "tools",
        )


def nesting_depth(value: Any, limit: int) -> int:
    """How deep a decoded JSON value nests (a scalar is 0), counted up to ``limit + 1``."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > limit:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_depth(values: Iterable[tuple[str, Any]], limit: int) -> None:
    """The free-form JSON a request carries (decoded as plain objects) must nest at most
    ``limit`` levels: parsers and the encoder walk it recursively."""
    for where, value in values:
        depth = nesting_depth(value, limit)
        if depth > limit:
            raise BadRequest(
                f"{where} nests deeper than the server limit of {limit} levels (--max-json-depth).",
                where,
            )


def chat_free_form(request: ChatRequest) -> list[tuple[str, Any]]:
    """The fields of a chat request that hold free-form JSON."""
    values: list[tuple[str, Any]] = [
        ("chat_request.chat_template_kwargs", request.chat_template_kwargs),
        ("chat_request.documents", request.documents),
        ("chat_request.stream_options", request.stream_options),
    ]
    for index, tool in enumerate(request.tools or ()):
        values.append((f"chat_request.tools.{index}.function.parameters", tool.function.parameters))
    return values
