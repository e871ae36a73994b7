"""vLLM's derender wire protocol as msgspec structs.

Requests decode with unknown keys ignored, as vLLM's pydantic models do. Responses
encode with every field present and nulls emitted, in vLLM's key order; the only
omitted key is an empty ``tool_calls`` (``omit_defaults`` on the two message
structs, whose other fields have no default). Fields vLLM accepts but derender never
reads (``routed_experts``, ``mm_placeholders``, ...) are not declared at all.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType, field

from parsers.types import Citation

NonNegativeInt = Annotated[int, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(gt=0)]
TokenIds = list[NonNegativeInt]
StopReason = int | str | None

PREV_TOKENS_LIMIT = 1024
LOGPROB_CONTEXT_WINDOW = 4
# Fixed bounds on client-carried state, far above anything this server emits: a
# window piece is one vocabulary entry, a tool-call id is ours or the client's.
PIECE_CHARS_LIMIT = 1024
TOOL_CALL_IDS_LIMIT = 4096
TOOL_CALL_ID_CHARS_LIMIT = 256


def random_request_id() -> str:
    return secrets.token_hex(8)


# --------------------------------------------------------------------------- engine side


class GenerateLogProb(Struct):
    """One logprob candidate: an integer ``token_id`` or a ``token`` placeholder string."""

    token_id: int | None = None
    token: str | None = None
    logprob: float = -9999.0
    rank: int | None = None

    def __post_init__(self) -> None:
        if self.token_id is None and self.token is None:
            raise ValueError("a logprob entry needs `token_id` (or a `token` string)")


class GenerateLogProbsContent(GenerateLogProb):
    # A tuple, so an entry without candidates holds no container and is not tracked
    # by the garbage collector: a long one-shot output has hundreds of thousands.
    top_logprobs: tuple[GenerateLogProb, ...] = ()


class GenerateLogProbs(Struct):
    content: list[GenerateLogProbsContent] | None = None


class UsageInput(Struct):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


class SpeculativeDecodingMetrics(Struct):
    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None


class PerRequestMetrics(Struct):
    """Passed through from the engine; every key is emitted on the way out."""

    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None


class PromptLogprob(Struct):
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


PromptLogprobs = list[dict[int, PromptLogprob] | None]


class GenerateChoice(Struct):
    index: int
    finish_reason: str | None = "stop"
    stop_reason: StopReason = None
    token_ids: TokenIds | None = None
    logprobs: GenerateLogProbs | None = None


class GenerateResponse(Struct):
    """A complete ``/inference/v1/generate`` reply in ``tokens`` mode."""

    choices: list[GenerateChoice]
    request_id: str = field(default_factory=random_request_id)
    output_mode: Literal["tokens"] = "tokens"
    usage: UsageInput | None = None
    prompt_logprobs: PromptLogprobs | None = None
    prompt_token_ids: TokenIds | None = None
    metrics: PerRequestMetrics | None = None
    kv_transfer_params: dict[str, Any] | None = None


# What a stream's every chunk builds (its chunk, request, state and reply) is plain data
# that cannot form a cycle: untracked by the garbage collector (gc=False), it costs less
# to decode and build.
class GenerateStreamChoice(Struct, gc=False):
    index: int
    finish_reason: str | None = None
    stop_reason: StopReason = None
    token_ids: list[int] | None = None
    logprobs: GenerateLogProbs | None = None


class GenerateChunk(Struct, gc=False):
    """One SSE payload of a streaming ``/inference/v1/generate`` reply."""

    choices: list[GenerateStreamChoice]
    request_id: str = field(default_factory=random_request_id)
    output_mode: Literal["tokens"] = "tokens"
    usage: UsageInput | None = None
    prompt_token_ids: TokenIds | None = None
    metrics: PerRequestMetrics | None = None


# --------------------------------------------------------------------------- original requests


class DecodeOptions(Struct, kw_only=True):
    """Sampling fields of the original request that change the derendered text."""

    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: NonNegativeInt = 0
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    return_token_ids: bool | None = None
    logprob_token_ids: list[int] | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    prompt_logprobs: int | None = None

    def stop_strings(self) -> list[str]:
        """``stop`` as a list without empty strings, as SamplingParams normalizes it."""
        if not self.stop:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]


class FunctionDefinition(Struct):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(Struct):
    function: FunctionDefinition
    type: Literal["function"] = "function"


class NamedFunction(Struct):
    name: str


class NamedToolChoice(Struct):
    function: NamedFunction
    type: Literal["function"] = "function"


class ChatRequest(DecodeOptions, kw_only=True):
    """The original chat request, as far as derender reads it.

    ``messages`` stays raw JSON: it is re-sent with every chunk and derender never
    looks inside, so it is validated as JSON but not built into objects.
    """

    messages: Raw
    model: str | None = None
    tools: list[ChatTool] | None = None
    tool_choice: str | NamedToolChoice | UnsetType | None = UNSET
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool | UnsetType = UNSET
    continue_final_message: bool = False
    reasoning_effort: str | None = None
    documents: list[dict[str, Any]] | None = None
    chat_template: str | None = None


class CompletionRequest(DecodeOptions, kw_only=True):
    """The original completion request, as far as derender reads it."""

    # A factory, not a default: a default must be plain data for the OpenAPI schema.
    prompt: Raw = field(default_factory=lambda: Raw(b"null"))
    prompt_embeds: Raw = field(default_factory=lambda: Raw(b"null"))
    model: str | None = None
    logprobs: int | None = None
    echo: bool | None = False
    max_tokens: int | None = None


# --------------------------------------------------------------------------- derender requests


class _WindowState(Struct, gc=False):  # gc=False: see GenerateStreamChoice
    """What a stream state carries in either form (full or compact) before its history:
    the decode window, whether the role was sent, and the logprob context."""

    prev_tokens: Annotated[
        list[Annotated[str, Meta(max_length=PIECE_CHARS_LIMIT)]], Meta(max_length=PREV_TOKENS_LIMIT)
    ] = []
    prefix_offset: NonNegativeInt = 0
    read_offset: NonNegativeInt = 0
    role_sent: bool = False
    logprob_context_token_ids: Annotated[list[int], Meta(max_length=LOGPROB_CONTEXT_WINDOW)] = []
    logprob_text_offset: NonNegativeInt = 0


class StreamState(_WindowState):
    """The client-carried ``stream_state`` (vLLM's ``DerenderStreamState``)."""

    output_token_ids: list[int] = []
    output_chunk_lens: list[PositiveInt] = []
    tools_streamed: bool = False
    last_tool_call_ids: Annotated[
        list[Annotated[str, Meta(max_length=TOOL_CALL_ID_CHARS_LIMIT)]],
        Meta(max_length=TOOL_CALL_IDS_LIMIT),
    ] = []

    def history_error(self) -> str | None:
        """Why ``output_chunk_lens`` does not describe ``output_token_ids``, if it does not."""
        total = sum(self.output_chunk_lens)
        if total == len(self.output_token_ids):
            return None
        return (
            "output_chunk_lens must sum to len(output_token_ids) "
            f"(got sum={total}, len(output_token_ids)={len(self.output_token_ids)})"
        )

    def window_error(self) -> str | None:
        """Why the decode window's offsets do not point into ``prev_tokens``, if they do not
        (vLLM would slice past the window and emit wrong text; its Rust port refuses)."""
        if self.prefix_offset <= self.read_offset <= len(self.prev_tokens):
            return None
        return (
            "invalid stream_state: expected prefix_offset <= read_offset <= len(prev_tokens) "
            f"(got prefix_offset={self.prefix_offset}, read_offset={self.read_offset}, "
            f"len(prev_tokens)={len(self.prev_tokens)})"
        )


class CompactStreamState(_WindowState, omit_defaults=True):
    """A parsed stream's state without what grows with it (docs/transports.md): the
    history's length, the tool-call ids' count and a digest of both in place of
    ``output_token_ids``, ``output_chunk_lens`` and ``last_tool_call_ids``. Fields at
    their defaults are left out.

    ``output_digest`` is empty on a state that is not compact (a full one read as this).
    """

    output_tokens: NonNegativeInt = 0
    output_digest: Annotated[str, Meta(max_length=64)] = ""
    tools_streamed: bool = False
    tool_calls: NonNegativeInt = 0


class BodyView(Struct):
    """One cheap pass over a body: the variant it is, and every field of a streamed
    chunk as raw bytes. A chunk that continues a kept session decodes only its small
    fields; the large ones (state, prompt, chat request) are compared, not built."""

    stream: bool = False
    generate_chunk: Raw = Raw(b"null")
    model: Raw = Raw(b"null")
    stream_state: Raw = Raw(b"null")
    prompt_tokens: Raw = Raw(b"null")
    prompt_token_ids: Raw = Raw(b"null")
    chat_request: Raw = Raw(b"null")
    completion_request: Raw = Raw(b"null")


class ChatDerenderRequest(Struct):
    generate_response: GenerateResponse
    stream: Literal[False] = False
    model: str | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: TokenIds | None = None
    chat_request: ChatRequest | None = None


class CompletionDerenderRequest(Struct):
    generate_responses: list[GenerateResponse]
    stream: Literal[False] = False
    model: str | None = None
    prompt_tokens: list[int] | None = None
    prompt_token_ids: list[TokenIds | None] | None = None
    completion_request: CompletionRequest | None = None

    def __post_init__(self) -> None:
        count = len(self.generate_responses)
        if self.prompt_tokens is not None and len(self.prompt_tokens) != count:
            raise ValueError(
                f"prompt_tokens length ({len(self.prompt_tokens)}) must equal "
                f"generate_responses length ({count}): send one count per generate response"
            )
        if self.prompt_token_ids is not None and len(self.prompt_token_ids) != count:
            raise ValueError(
                f"prompt_token_ids length ({len(self.prompt_token_ids)}) must equal "
                f"generate_responses length ({count}): send one id list (or null) per "
                "generate response"
            )


class ChatStreamDerenderRequest(Struct, gc=False):  # gc=False: see GenerateStreamChoice
    generate_chunk: GenerateChunk
    stream: Literal[True] = True
    model: str | None = None
    stream_state: StreamState | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: TokenIds | None = None
    chat_request: ChatRequest | None = None


class CompactChatStreamRequest(Struct):
    """A parsed chat chunk carrying a compact state (docs/transports.md): its context is
    the live session's, so ``prompt_token_ids`` and ``chat_request`` are read only as
    bytes, to check them when they are sent."""

    generate_chunk: GenerateChunk
    stream_state: CompactStreamState
    stream: Literal[True] = True
    model: str | None = None
    prompt_tokens: int | None = None


class CompletionStreamDerenderRequest(Struct):
    generate_chunk: GenerateChunk
    stream: Literal[True] = True
    model: str | None = None
    stream_state: StreamState | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: TokenIds | None = None
    completion_request: CompletionRequest | None = None


# --------------------------------------------------------------------------- responses


# A long one-shot output has a logprob entry per token, hundreds of thousands: they
# hold tuples and are never tracked by the garbage collector (they cannot form a
# cycle), so its full passes, which hold the GIL, stay short (docs/limits.md).
class ChatLogProb(Struct, gc=False):
    token: str
    logprob: float
    bytes: tuple[int, ...] | None


class ChatLogProbsContent(Struct, gc=False):
    token: str
    logprob: float
    bytes: tuple[int, ...] | None
    top_logprobs: tuple[ChatLogProb, ...]


class ChatLogProbs(Struct):
    content: list[ChatLogProbsContent] | None


class CompletionLogProbs(Struct):
    text_offset: list[int]
    token_logprobs: list[float | None]
    tokens: list[str]
    top_logprobs: list[dict[str, float] | None]


class Usage(Struct):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int
    prompt_tokens_details: None = None
    completion_tokens_details: None = None

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int) -> Usage:
        return cls(prompt_tokens, prompt_tokens + completion_tokens, completion_tokens)


class FunctionCall(Struct):
    name: str
    arguments: str


class ToolCall(Struct, kw_only=True):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(Struct, kw_only=True, omit_defaults=True):
    role: Literal["assistant"]
    content: str | None
    refusal: None
    annotations: None
    audio: None
    function_call: None
    tool_calls: list[ToolCall] = []
    reasoning: str | None


class ChatChoice(Struct):
    index: int
    message: ChatMessage
    logprobs: ChatLogProbs | None
    finish_reason: str | None
    stop_reason: StopReason
    token_ids: list[int] | None
    routed_experts: None = None
    weight_versions: None = None


class ChatCompletion(Struct):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    service_tier: None
    system_fingerprint: None
    usage: Usage
    prompt_logprobs: PromptLogprobs | None
    prompt_token_ids: list[int] | None
    prompt_text: None
    kv_transfer_params: dict[str, Any] | None
    ec_transfer_params: None
    metrics: PerRequestMetrics | None


class DeltaFunctionCall(Struct):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(Struct, kw_only=True):
    id: str | None = None
    type: Literal["function"] | None = None
    index: int
    function: DeltaFunctionCall | None = None


# gc=False: see GenerateStreamChoice
class DeltaMessage(Struct, kw_only=True, omit_defaults=True, gc=False):
    role: Literal["assistant"] | None
    content: str | None
    reasoning: str | None
    tool_calls: list[DeltaToolCall] = []
    citations: list[Citation] = []  # Cohere's citation spans (vLLM's CohereDeltaMessage)


class ChatStreamChoice(Struct, gc=False):
    index: int
    delta: DeltaMessage
    logprobs: ChatLogProbs | None
    finish_reason: str | None
    stop_reason: StopReason
    token_ids: list[int] | None
    weight_versions: None = None


class ChatCompletionChunk(Struct, gc=False):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatStreamChoice]
    usage: Usage | None
    system_fingerprint: None
    prompt_token_ids: list[int] | None
    prompt_text: None
    metrics: PerRequestMetrics | None
    kv_transfer_params: None = None


class CompletionChoice(Struct):
    index: int
    text: str
    logprobs: CompletionLogProbs | None
    finish_reason: str | None
    stop_reason: StopReason
    token_ids: list[int] | None
    prompt_logprobs: None
    prompt_token_ids: list[int] | None
    routed_experts: None = None
    weight_versions: None = None


class Completion(Struct):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    service_tier: None
    system_fingerprint: None
    usage: Usage
    kv_transfer_params: dict[str, Any] | None
    ec_transfer_params: None
    metrics: PerRequestMetrics | None


class CompletionStreamChoice(Struct):
    index: int
    text: str
    logprobs: CompletionLogProbs | None
    finish_reason: str | None
    stop_reason: StopReason
    prompt_token_ids: list[int] | None
    token_ids: list[int] | None
    weight_versions: None = None


class CompletionChunk(Struct):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionStreamChoice]
    usage: Usage | None
    system_fingerprint: None
    metrics: PerRequestMetrics | None
    kv_transfer_params: None = None


class ChatStreamReply(Struct, gc=False):
    """``chunk`` is the chunk or its JSON (a parsed stream's common chunk is written as
    JSON at once: app/streams/reply.py); ``stream_state`` is the state's own encoding,
    kept as the bytes a hit must match."""

    chunk: ChatCompletionChunk | Raw
    stream_state: Raw


class CompletionStreamReply(Struct):
    chunk: CompletionChunk
    stream_state: StreamState


class ErrorInfo(Struct):
    message: str
    type: str
    param: str | None
    code: int | str  # the status, or a stable name the client acts on


class ErrorBody(Struct):
    error: ErrorInfo


encoder = msgspec.json.Encoder()
