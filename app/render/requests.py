"""The render requests: vLLM's chat and completion request fields this server reads.

Free-form parts (messages, tools, structured outputs, transfer params) stay plain JSON
data: they are passed to the template or through to the engine unchanged.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct, UnsetType


class Sampling(Struct, kw_only=True):
    """Fields both endpoints turn into sampling parameters."""

    model: str | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    logit_bias: dict[str, float] | None = None
    n: int = 1
    seed: int | None = None
    stop: str | list[str] | None = []
    stop_token_ids: list[int] | None = []
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    prompt_logprobs: int | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] = []
    echo: bool = False
    truncate_prompt_tokens: int | None = None
    structured_outputs: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    priority: int = 0
    request_id: str | None = None
    return_token_ids: bool | None = None
    cache_salt: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None
    thinking_token_budget: int | None = None
    stream_interval: int | None = None
    use_beam_search: bool = False


class ChatRenderRequest(Sampling, kw_only=True):
    messages: list[dict[str, Any]]
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | UnsetType | None = UNSET
    reasoning_effort: str | None = None
    include_reasoning: bool = True
    parallel_tool_calls: bool | None = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    documents: list[dict[str, str]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class CompletionRenderRequest(Sampling, kw_only=True):
    prompt: str | list[Any] | None = None
    suffix: str | None = None
    logprobs: int | None = None
    max_tokens: int | None = 16
    add_special_tokens: bool = True
