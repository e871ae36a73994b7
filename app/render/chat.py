"""Chat render: a chat request to one GenerateRequest, as vLLM 0.33.0's /render builds it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.render import sampling
from app.render.conversation import conversation
from app.render.fields import hoisted, request_fields, stream_options
from app.render.harmony import HarmonyRenderer
from app.render.prompt_encoders import PromptEncoder
from app.render.requests import ChatRenderRequest
from app.render.structural_tag import forced_calls
from app.render.template import ChatTemplate
from app.tokens.tokenizer import Tokenizer
from app.wire.errors import BadRequest, InvalidParameter
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
    return {"function": {"name": name}, "type": "function"}  # as vLLM's model dumps it


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
        shown = {
            "name": function["name"],
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        if function.get("strict") is not None:  # vLLM's model keeps it only when set
            shown["strict"] = function["strict"]
        result.append({"type": "function", "function": shown})
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
    merged = {**own, **_set(extra)}
    return {**defaults, **_set(merged)}


def _set(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kwargs that override: vLLM treats None and "auto" as unset when merging."""
    return {k: v for k, v in kwargs.items() if not _unset(v)}


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "auto")


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """The server's bounds and defaults a chat render applies."""

    max_model_len: int
    max_chars: int
    timeout: float
    generation: dict[str, Any]
    template_defaults: dict[str, Any]
    auto_tools: bool
    trust_request_template: bool


class ChatRenderer:
    """Renders chat requests with the model's template (or Harmony, for gpt-oss) and
    the server's parser configuration."""

    def __init__(
        self,
        template: ChatTemplate | None,
        parsers: ParserFactory,
        tokenizer: Tokenizer,
        limits: ChatLimits,
        encode: Callable[[str], list[int]] | None = None,
        harmony: HarmonyRenderer | None = None,
        encoder: PromptEncoder | None = None,
    ) -> None:
        self.template = template
        self.parsers = parsers
        self.tokenizer = tokenizer
        self.limits = limits
        self.encode = encode or tokenizer.encode
        self.harmony = harmony
        self.encoder = encoder

    def check(self, request: ChatRenderRequest, choice: str | dict[str, Any] | None) -> None:
        """vLLM's checks before templating, with its messages (Harmony skips the tool
        parser's and the template's: it has its own tools and no template)."""
        if request.use_beam_search:
            raise BadRequest("Beam search is not supported by the render endpoint")
        if self.harmony is not None:
            return
        if not self.parsers.has_tool_parser and choice not in (None, "none"):
            if choice == "auto" and not self.limits.auto_tools:
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
        if asked_template and not self.limits.trust_request_template:
            raise BadRequest(UNTRUSTED_TEMPLATE)

    def prompt_ids(self, request: ChatRenderRequest, kwargs: dict[str, Any]) -> list[int]:
        """The prompt's token ids: Harmony's, or the prompt encoder's or the template's
        text tokenized."""
        if self.harmony is not None:
            return self.harmony.prompt_ids(request, with_tools=request.tools is not None)
        if self.encoder is not None:
            text = self._encoded(request)
        else:
            template = self.template
            if request.chat_template is not None:
                template = ChatTemplate(
                    request.chat_template, self.tokenizer.hf, self.limits.timeout
                )
            if template is None:
                raise BadRequest(
                    "As of transformers v4.44, default chat template is no longer allowed, so "
                    "you must provide a chat template if the tokenizer does not define one."
                )
            messages = conversation(request.messages, template.content_format)
            text = template.render(messages, tool_dicts(request.tools), kwargs)
        if len(text) > self.limits.max_chars:
            raise BadRequest(
                f"the rendered prompt is {len(text)} characters, over the server limit of "
                f"{self.limits.max_chars} (--max-render-chars)."
            )
        if request.add_special_tokens:  # a BOS on top of the template's, if asked
            ids: list[int] = self.tokenizer.hf.encode(text, add_special_tokens=True)
            return ids
        return self.encode(text)

    def _encoded(self, request: ChatRenderRequest) -> str:
        """The prompt encoder's text. It takes the request's tools as a kwarg under the
        request's own (vLLM's order), and any template is ignored."""
        assert self.encoder is not None
        own = (request.chat_template_kwargs or {}).keys() & _ENCODER_ARGUMENTS
        if own:  # vLLM passes these beside the kwargs: a clash refuses the request
            raise BadRequest(f"Found unexpected chat template kwargs from request: {own}")
        tools = _set({"tools": tool_dicts(request.tools)})
        kwargs = template_kwargs(request, {**self.limits.template_defaults, **tools})
        messages = conversation(request.messages, self.encoder.content_format)
        return self.encoder.render(messages, kwargs)

    def render(self, request: ChatRenderRequest, header_id: str | None) -> dict[str, Any]:
        choice = tool_choice(request)
        self.check(request, choice)
        room: tuple[int | None, str]
        if request.max_completion_tokens is not None:
            room = (request.max_completion_tokens, "max_completion_tokens")
        else:
            room = (request.max_tokens, "max_tokens")
        sampling.check_output_room(self.limits.max_model_len, *room)
        kwargs = template_kwargs(request, self.limits.template_defaults)
        token_ids = self.prompt_ids(request, kwargs)
        if not token_ids:
            raise BadRequest("No token_ids rendered")
        params = self._sampling(request, choice, len(token_ids))
        kv, ec = hoisted(params)
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
            "reasoning_ended": self._reasoning_ended(request, kwargs, token_ids),
            "reasoning_parser_kwargs": {"chat_template_kwargs": kwargs} if has_reasoning else None,
            "return_token_ids": request.return_token_ids,
            "output_mode": "tokens",
            "parse_context": {
                "tools": tool_dicts(request.tools),
                "tool_choice": choice,
                "parallel_tool_calls": request.parallel_tool_calls,
                "include_reasoning": request.include_reasoning,
                # Harmony output is parsed without template kwargs, as vLLM's derender does.
                "chat_template_kwargs": {} if self.harmony is not None else kwargs,
                "history_tool_call_cnt": _history_calls(request.messages),
            },
            "stream": bool(request.stream),
            "stream_options": stream_options(request),
            "cache_salt": request.cache_salt,
            "priority": request.priority,
            "kv_transfer_params": kv,
            "ec_transfer_params": ec,
        }

    def _sampling(
        self, request: ChatRenderRequest, choice: str | dict[str, Any] | None, prompt_len: int
    ) -> dict[str, Any]:
        asked = request.max_completion_tokens
        asked = asked if asked is not None else request.max_tokens
        generation = self.limits.generation
        budget = sampling.max_tokens(self.limits.max_model_len, asked, prompt_len, generation)
        skip_special = request.skip_special_tokens
        parsers = self.parsers
        if self.harmony is None and (
            parsers.reasoning_name is not None
            or (parsers.has_tool_parser and request.tools and choice != "none")
        ):
            skip_special = False  # the parsers read special markers
        prompt_logprobs = request.prompt_logprobs
        if prompt_logprobs is None and request.echo:
            prompt_logprobs = request.top_logprobs
        fields = request_fields(
            request,
            generation,
            max_tokens=budget,
            logprobs=request.top_logprobs if request.logprobs else None,
            prompt_logprobs=prompt_logprobs,
            skip_special=skip_special,
        )
        tags = parsers.call_tags() if request.tools and self.harmony is None else None
        if tags is not None:
            forced = forced_calls(
                tool_dicts(request.tools) or [], choice, request.parallel_tool_calls, tags
            )
            asked_format = fields["structured_outputs"] is not None
            if forced is not None and not (choice == "auto" and asked_format):
                # it replaces whatever response format was asked
                fields["structured_outputs"] = sampling.structured({"structural_tag": forced})
        return sampling.sampling_params(fields)

    def _reasoning_ended(
        self, request: ChatRenderRequest, kwargs: dict[str, Any], token_ids: list[int]
    ) -> bool | None:
        """True when output is constrained from its first token; None leaves the
        engine to look at the prompt."""
        if not request.include_reasoning:
            return True
        if self.parsers.reasoning_name is None:
            return None
        if self.harmony is not None:
            return True  # Harmony's reasoning parser only marks boundaries: always ended
        options = ParseOptions(include_reasoning=True, chat_template_kwargs=kwargs)
        reasoning = self.parsers.for_request(options).reasoning
        return None if reasoning is None else bool(reasoning.is_reasoning_end(token_ids))


# The arguments vLLM hands a prompt encoder beside the template kwargs.
_ENCODER_ARGUMENTS = frozenset({"conversation", "messages"})


def _history_calls(messages: list[dict[str, Any]]) -> int:
    return sum(
        len(message.get("tool_calls") or ())
        for message in messages
        if message.get("role") == "assistant"
    )
