"""Checks that run after decoding and before any tokenizer work, per endpoint.

Each raises a ``BadRequest`` (or ``NotFound`` for a model) whose message says what to
fix. vLLM 0.33.0's own checks come first, in its order, so a request fails here
exactly when it fails there; our bounds (``Limits``, from the settings) follow. The
per-endpoint functions at the end are the order; the rules above them are the checks.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from app.serving.settings import Settings
from app.wire import body_errors
from app.wire.errors import BadRequest, InvalidBody, InvalidParameter, NotFound
from app.wire.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatRequest,
    ChatStreamDerenderRequest,
    CompletionDerenderRequest,
    CompletionRequest,
    CompletionStreamDerenderRequest,
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
    # Where an id is named only once one is out: a streamed chunk passes here per token.
    for choice in choices:
        ids = choice.token_ids
        if ids and (min(ids) < 0 or max(ids) >= vocab_size):
            check_vocabulary(ids, f"{where} choice {choice.index} token_ids", vocab_size)
        if choice.logprobs is not None:
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


def check_history(state: StreamState | None) -> None:
    """The carried history's chunk lengths must add up to its token ids, and the decode
    window's offsets must point into it."""
    if state is None:
        return
    problem = state.history_error()
    if problem is not None:
        raise InvalidBody(
            f"1 validation error:\n  {problem}. Send {body_errors.STATE}.", "body.stream_state"
        )
    problem = state.window_error()
    if problem is not None:
        raise BadRequest(f"{problem}. Send {body_errors.STATE}.", "stream_state")


# --------------------------------------------------------------------------- per endpoint


@dataclass(frozen=True, slots=True)
class Limits:
    """What the checks need of the server: its model, bounds and parser configuration."""

    served_names: tuple[str, ...]
    max_model_len: int
    max_logprobs: int
    max_n: int
    vocab_size: int | None  # None: ids outside the vocabulary are allowed
    max_chat_request_bytes: int
    max_tools: int
    max_json_depth: int
    parsed: bool  # a parser is configured: chat needs its request and prompt ids

    @classmethod
    def of(cls, settings: Settings, max_model_len: int, vocab_size: int, parsed: bool) -> Limits:
        return cls(
            served_names=settings.served_names,
            max_model_len=max_model_len,
            max_logprobs=settings.max_logprobs,
            max_n=settings.max_n_sequences,
            vocab_size=None if settings.allow_out_of_vocab else vocab_size,
            max_chat_request_bytes=settings.max_chat_request_bytes,
            max_tools=settings.max_tools,
            max_json_depth=settings.max_json_depth,
            parsed=parsed,
        )


def check_model(requested: str | None, limits: Limits) -> str:
    """The model name a reply carries: the one asked for, if this server serves it."""
    served = limits.served_names
    if not requested:
        return served[0]
    if requested not in served:
        raise NotFound(
            f"The model `{requested}` does not exist. Valid aliases: {', '.join(served)}.",
            "model",
        )
    return requested


def _known(ids: Sequence[int] | None, where: str, limits: Limits) -> None:
    if limits.vocab_size is not None:
        check_vocabulary(ids, where, limits.vocab_size)


def _check_chat_limits(request: ChatRequest, view: BodyView, limits: Limits) -> None:
    check_chat_request_bytes(len(view.chat_request), limits.max_chat_request_bytes)
    check_chat_request_utf8(view.chat_request)
    check_tool_count(request, limits.max_tools)
    check_depth(chat_free_form(request), limits.max_json_depth)


def _check_responses(
    field: str,
    responses: list[GenerateResponse],
    prompts: Sequence[list[int] | None],
    limits: Limits,
) -> None:
    """One-shot generate responses: ids in the vocabulary, pass-through JSON bounded."""
    for index, (gen, prompt) in enumerate(zip(responses, prompts, strict=True)):
        where = f"generate_responses.{index}" if field == "generate_responses" else field
        if limits.vocab_size is not None:
            check_choice_vocabulary(gen.choices, where, limits.vocab_size)
        _known(gen.prompt_token_ids, f"{where}.prompt_token_ids", limits)
        _known(prompt, "prompt_token_ids", limits)
        check_depth(
            [(f"{where}.kv_transfer_params", gen.kv_transfer_params)], limits.max_json_depth
        )


def check_chunk(chunk: GenerateChunk, limits: Limits) -> None:
    """Everything a streamed chunk carries besides its context: checked on the kept
    session's path and the full path alike."""
    choices = chunk.choices
    if len(choices) == 1 and choices[0].logprobs is None and chunk.prompt_token_ids is None:
        # The common chunk (one choice, its ids alone): only its ids to check, without
        # the calls that find nothing else to check (a streamed chunk passes per token).
        ids, vocab_size = choices[0].token_ids, limits.vocab_size
        if ids and vocab_size is not None and (min(ids) < 0 or max(ids) >= vocab_size):
            check_choice_vocabulary(choices, "generate_chunk", vocab_size)  # says which
        return
    check_chunk_bounds(chunk, max_model_len=limits.max_model_len, max_logprobs=limits.max_logprobs)
    if limits.vocab_size is not None:
        check_choice_vocabulary(chunk.choices, "generate_chunk", limits.vocab_size)
    _known(chunk.prompt_token_ids, "generate_chunk.prompt_token_ids", limits)


def check_state_ids(state: StreamState | None, limits: Limits) -> None:
    if limits.vocab_size is not None:
        check_state_vocabulary(state, limits.vocab_size)


def check_carried_state(state: StreamState | None, limits: Limits) -> None:
    """The history a chunk carries, before a replay reads it."""
    check_history(state)
    check_state_ids(state, limits)


def check_single_choice(chunk: GenerateChunk) -> None:
    """A parsed chat chunk carries one choice: its stream is one ``(request_id, index)``."""
    if len(chunk.choices) > 1:
        raise BadRequest(
            f"derender_chat_stream expects at most one choice per chunk (got {len(chunk.choices)})."
        )


def stream_length_error(prompt: int, history: int, delta: int, limits: Limits) -> str | None:
    """Why a chunk of ``delta`` tokens does not fit its stream, if it does not."""
    if prompt + history + delta <= limits.max_model_len:
        return None
    return (
        f"prompt_token_ids length ({prompt}) plus output_token_ids length ({history}) "
        f"plus delta ({delta}) exceeds max_model_len ({limits.max_model_len})."
    )


def chunk_tokens(chunk: GenerateChunk) -> int:
    choices = chunk.choices
    if len(choices) == 1:  # a streamed chunk's one choice: asked of every chunk, twice
        ids = choices[0].token_ids
        return len(ids) if ids else 0
    return sum(len(c.token_ids) for c in choices if c.token_ids)


def validate_chat(request: ChatDerenderRequest, view: BodyView, limits: Limits) -> str:
    """A one-shot chat request; returns the reply's model name."""
    if request.chat_request is not None:
        check_chat_request(request.chat_request)
        _check_chat_limits(request.chat_request, view, limits)
    model = check_model(request.model, limits)
    gen = request.generate_response
    check_generate_bounds(
        [gen],
        max_model_len=limits.max_model_len,
        max_logprobs=limits.max_logprobs,
        max_n=limits.max_n,
    )
    check_prompt_length(request.prompt_token_ids, limits.max_model_len)
    if limits.parsed and request.chat_request is None:
        raise BadRequest(CHAT_REQUEST_REQUIRED)
    check_token_ids_present([gen], completion=False)
    _check_responses("generate_response", [gen], [request.prompt_token_ids], limits)
    return model


def validate_chat_stream(request: ChatStreamDerenderRequest, view: BodyView, limits: Limits) -> str:
    """A streamed chat chunk on the full path, but its carried history (checked where a
    replay reads it); returns the reply's model name."""
    chat_request = request.chat_request
    if chat_request is not None:
        check_chat_request(chat_request)
        _check_chat_limits(chat_request, view, limits)
    model = check_model(request.model, limits)
    if chat_request is not None and chat_request.stop:
        raise BadRequest(STREAM_STOP_STRINGS)
    if limits.parsed and chat_request is None:
        raise BadRequest(CHAT_REQUEST_REQUIRED)
    if limits.parsed and request.prompt_token_ids is None:
        raise BadRequest(PROMPT_IDS_REQUIRED)
    chunk = request.generate_chunk
    check_single_choice(chunk)
    prompt_len = len(request.prompt_token_ids or ())
    history = len(request.stream_state.output_token_ids) if request.stream_state else 0
    problem = stream_length_error(prompt_len, history, chunk_tokens(chunk), limits)
    if problem is not None:
        raise BadRequest(problem)
    check_chunk(chunk, limits)
    _known(request.prompt_token_ids, "prompt_token_ids", limits)
    return model


def validate_completion(request: CompletionDerenderRequest, limits: Limits) -> str:
    """A one-shot completion request; returns the reply's model name."""
    if request.completion_request is not None:
        check_completion_request(request.completion_request)
        _check_stream_options(request.completion_request, limits)
    model = check_model(request.model, limits)
    responses = request.generate_responses
    if not responses:
        raise BadRequest("generate_responses must not be empty")
    check_generate_bounds(
        responses,
        max_model_len=limits.max_model_len,
        max_logprobs=limits.max_logprobs,
        max_n=limits.max_n,
    )
    for prompt_ids in request.prompt_token_ids or ():
        check_prompt_length(prompt_ids, limits.max_model_len)
    check_token_ids_present(responses, completion=True)
    prompts = request.prompt_token_ids or [None] * len(responses)
    _check_responses("generate_responses", responses, prompts, limits)
    return model


def validate_completion_stream(request: CompletionStreamDerenderRequest, limits: Limits) -> str:
    """A streamed completion chunk with its carried state; returns the model name."""
    completion_request = request.completion_request
    if completion_request is not None:
        check_completion_request(completion_request)
        _check_stream_options(completion_request, limits)
    model = check_model(request.model, limits)
    if completion_request is not None and completion_request.stop:
        raise BadRequest(STREAM_STOP_STRINGS)
    check_prompt_length(request.prompt_token_ids, limits.max_model_len)
    chunk = request.generate_chunk
    if len(chunk.choices) > 1:
        raise BadRequest("derender_completion_stream expects at most one choice per chunk")
    delta = chunk_tokens(chunk)
    if delta > limits.max_model_len:
        raise BadRequest(
            f"delta token_ids length ({delta}) exceeds max_model_len ({limits.max_model_len})."
        )
    check_history_length(request.stream_state, limits.max_model_len)
    check_chunk(chunk, limits)
    _known(request.prompt_token_ids, "prompt_token_ids", limits)
    check_state_ids(request.stream_state, limits)
    return model


def _check_stream_options(request: CompletionRequest, limits: Limits) -> None:
    options = request.stream_options
    check_depth([("completion_request.stream_options", options)], limits.max_json_depth)
