"""Chat render: a chat request to one GenerateRequest, as vLLM 0.33.0's /render builds it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from app.errors import BadRequest, InvalidParameter
from app.render import sampling
from app.render.conversation import conversation
from app.render.fields import hoisted, request_fields, stream_options
from app.render.requests import ChatRenderRequest
from app.render.template import ChatTemplate
from app.tokenizer import Tokenizer
from parsers.registry import ParserFactory
from parsers.types import ParseOptions

UNTRUSTED_TEMPLATE = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)
_CORRECT_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'


def tool_choice(request: ChatRenderRequest) -> str | dict[str, Any] | None:
    """The request's tool_choice after vLLM's checks: ``auto`` when tools are given
    without one, ``none`` when neither is."""
    if request.tools == []:
        raise InvalidParameter(
            "`tools` must not be an empty array. Either provide at least one tool or omit "
            "the field entirely.",
            "tools",
        )
    choice = request.tool_choice
    if not isinstance(choice, str | dict | None):  # unset
        return "auto" if request.tools else "none"
    if choice is None or choice == "none":
        return choice
    if request.tools is None:
        raise InvalidParameter("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if isinstance(choice, str):
        if choice not in ("auto", "required"):
            raise InvalidParameter(
                f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", '
                '"auto" or "required" are supported.',
                "tool_choice",
            )
        return choice
    function = choice.get("function")
    if not isinstance(function, dict):
        raise InvalidParameter(
            f"Invalid value for `function`: `{function}` in `tool_choice`! {_CORRECT_USAGE}",
            "tool_choice.function",
        )
    name = function.get("name")
    if not any(_function(tool).get("name") == name for tool in request.tools):
        raise InvalidParameter(
            "The tool specified in `tool_choice` does not match any of the specified `tools`",
            "tool_choice",
        )
    return choice


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidParameter("each tool needs a function with a name.", "tools")
    return function


def tool_dicts(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tools as vLLM hands them to the template: type, then the function's name,
    description and parameters (null when absent)."""
    if tools is None:
        return None
    result = []
    for tool in tools:
        function = _function(tool)
        result.append(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": function.get("description"),
                    "parameters": function.get("parameters"),
                },
            }
        )
    return result


def template_kwargs(request: ChatRenderRequest, defaults: dict[str, Any]) -> dict[str, Any]:
    """The effective template kwargs: server defaults, the request's own, then the
    request's switches (``reasoning_effort`` implies ``enable_thinking``)."""
    own = request.chat_template_kwargs or {}
    extra: dict[str, Any] = {
        "add_generation_prompt": request.add_generation_prompt,
        "continue_final_message": request.continue_final_message,
        "documents": request.documents,
        "reasoning_effort": request.reasoning_effort,
    }
    if request.reasoning_effort is not None and "enable_thinking" not in own:
        extra["enable_thinking"] = request.reasoning_effort != "none"
    merged = {**own, **{k: v for k, v in extra.items() if v not in (None, "auto")}}
    return {**defaults, **merged}


class ChatRenderer:
    """Renders chat requests with one template and the server's parser configuration."""

    def __init__(
        self,
        template: ChatTemplate | None,
        parsers: ParserFactory,
        tokenizer: Tokenizer,
        *,
        max_model_len: int,
        generation: dict[str, Any],
        template_defaults: dict[str, Any],
        auto_tools: bool,
        trust_request_template: bool,
        max_chars: int,
        timeout: float,
        encode: Callable[[str], list[int]] | None = None,
    ) -> None:
        self.timeout = timeout
        self.template = template
        self.parsers = parsers
        self.tokenizer = tokenizer
        self.encode = encode or tokenizer.encode
        self.max_chars = max_chars
        self.max_model_len = max_model_len
        self.generation = generation
        self.template_defaults = template_defaults
        self.auto_tools = auto_tools
        self.trust_request_template = trust_request_template

    def check(self, request: ChatRenderRequest, choice: str | dict[str, Any] | None) -> None:
        """vLLM's checks before templating, with its messages."""
        if request.use_beam_search:
            raise BadRequest("Beam search is not supported by the render endpoint")
        if not self.parsers.has_tool_parser and choice not in (None, "none"):
            if choice == "auto" and not self.auto_tools:
                raise BadRequest(
                    '"auto" tool choice requires --enable-auto-tool-choice and '
                    "--tool-call-parser to be set"
                )
            if choice != "auto":
                named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
                described = f'function "{named}"' if named is not None else f'"{choice}"'
                raise BadRequest(f"tool_choice={described} requires --tool-call-parser to be set")
        asked_template = request.chat_template is not None or (
            (request.chat_template_kwargs or {}).get("chat_template") is not None
        )
        if asked_template and not self.trust_request_template:
            raise BadRequest(UNTRUSTED_TEMPLATE)

    def prompt(self, request: ChatRenderRequest, kwargs: dict[str, Any]) -> str:
        """The rendered prompt text."""
        template = self.template
        if request.chat_template is not None:
            assert template is not None or self.trust_request_template
            template = ChatTemplate(request.chat_template, self.tokenizer.hf, self.timeout)
        if template is None:
            raise BadRequest(
                "As of transformers v4.44, default chat template is no longer allowed, so you "
                "must provide a chat template if the tokenizer does not define one."
            )
        messages = conversation(request.messages, template.content_format)
        tools = tool_dicts(request.tools)
        return template.render(messages, tools, kwargs)

    def render(self, request: ChatRenderRequest, header_id: str | None) -> dict[str, Any]:
        choice = tool_choice(request)
        self.check(request, choice)
        if request.max_completion_tokens is not None:
            sampling.check_output_room(
                self.max_model_len, request.max_completion_tokens, "max_completion_tokens"
            )
        else:
            sampling.check_output_room(self.max_model_len, request.max_tokens, "max_tokens")
        kwargs = template_kwargs(request, self.template_defaults)
        text = self.prompt(request, kwargs)
        if len(text) > self.max_chars:
            raise BadRequest(
                f"the rendered prompt is {len(text)} characters, over the server limit of "
                f"{self.max_chars} (--max-render-chars)."
            )
        token_ids = self.encode(text)
        if not token_ids:
            raise BadRequest("No token_ids rendered")
        asked = request.max_completion_tokens
        asked = asked if asked is not None else request.max_tokens
        budget = sampling.max_tokens(self.max_model_len, asked, len(token_ids), self.generation)
        skip_special = request.skip_special_tokens
        if self.parsers.reasoning_name is not None or (
            self.parsers.has_tool_parser and request.tools and choice != "none"
        ):
            skip_special = False  # the parsers read special markers
        prompt_logprobs = request.prompt_logprobs
        if prompt_logprobs is None and request.echo:
            prompt_logprobs = request.top_logprobs
        fields = request_fields(
            request,
            self.generation,
            max_tokens=budget,
            logprobs=request.top_logprobs if request.logprobs else None,
            prompt_logprobs=prompt_logprobs,
            skip_special=skip_special,
        )
        params = sampling.sampling_params(fields)
        kv, ec = hoisted(params)
        options = ParseOptions(
            include_reasoning=request.include_reasoning, chat_template_kwargs=kwargs
        )
        parsed = self.parsers.for_request(options) if self.parsers.configured else None
        reasoning = parsed.reasoning if parsed is not None else None
        has_reasoning = self.parsers.reasoning_name is not None
        base = header_id or request.request_id or uuid.uuid4().hex
        return {
            "request_id": f"chatcmpl-{base}",
            "token_ids": token_ids,
            "token_offsets": None,
            "features": None,
            "content_parts": None,
            "sampling_params": params,
            "model": request.model,
            "reasoning_ended": _reasoning_ended(request, reasoning, token_ids),
            "reasoning_parser_kwargs": {"chat_template_kwargs": kwargs} if has_reasoning else None,
            "return_token_ids": request.return_token_ids,
            "output_mode": "tokens",
            "parse_context": {
                "tools": request.tools,
                "tool_choice": choice,
                "parallel_tool_calls": request.parallel_tool_calls,
                "include_reasoning": request.include_reasoning,
                "chat_template_kwargs": kwargs,
                "history_tool_call_cnt": _history_calls(request.messages),
            },
            "stream": bool(request.stream),
            "stream_options": stream_options(request),
            "cache_salt": request.cache_salt,
            "priority": request.priority,
            "kv_transfer_params": kv,
            "ec_transfer_params": ec,
        }


def _reasoning_ended(
    request: ChatRenderRequest, reasoning: Any, token_ids: list[int]
) -> bool | None:
    if not request.include_reasoning:
        return True
    if reasoning is not None:
        ended: bool = reasoning.is_reasoning_end(token_ids)
        return ended
    return None


def _history_calls(messages: list[dict[str, Any]]) -> int:
    return sum(
        len(message.get("tool_calls") or ())
        for message in messages
        if message.get("role") == "assistant"
    )
