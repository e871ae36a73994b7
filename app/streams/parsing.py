"""From the wire's chat request to what parsers read, and their result to the wire."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from app.wire.protocol import (
    ChatMessage,
    ChatRequest,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    FunctionCall,
    NamedToolChoice,
    ToolCall,
)
from parsers.types import Delta, ParsedMessage, ParseOptions, ToolSpec


def chat_template_kwargs(request: ChatRequest, defaults: dict[str, Any]) -> dict[str, Any]:
    """The template kwargs the request rendered with, as far as parsers read them.

    The request's own kwargs win, but for ``reasoning_effort``, which the request's field
    sets over them (and implies ``enable_thinking`` when the request does not set it);
    server defaults fill what is left.
    """
    own = request.chat_template_kwargs or {}
    kwargs = {**defaults, **own}
    if request.reasoning_effort is not None and "enable_thinking" not in own:
        kwargs["enable_thinking"] = request.reasoning_effort != "none"
    if request.reasoning_effort not in (None, "auto"):
        kwargs["reasoning_effort"] = request.reasoning_effort  # over the kwargs', as vLLM
    return kwargs


def parse_options(request: ChatRequest, default_kwargs: dict[str, Any]) -> ParseOptions:
    tools = None
    if request.tools is not None:
        tools = tuple(ToolSpec(t.function.name, t.function.parameters) for t in request.tools)
    choice = request.tool_choice
    if choice is UNSET:
        choice = "auto" if request.tools else "none"
    named = choice.function.name if isinstance(choice, NamedToolChoice) else None
    return ParseOptions(
        tools=tools,
        tool_choice=choice if isinstance(choice, str) else None,
        named_tool=named,
        parallel_tool_calls=request.parallel_tool_calls,
        include_reasoning=request.include_reasoning,
        chat_template_kwargs=chat_template_kwargs(request, default_kwargs),
        logprobs=bool(request.logprobs),
    )


def to_message(parsed: ParsedMessage) -> ChatMessage:
    return ChatMessage(
        role="assistant",
        content=parsed.content,
        refusal=None,
        annotations=None,
        audio=None,
        function_call=None,
        tool_calls=[
            ToolCall(id=call.id or "", function=FunctionCall(call.name, call.arguments))
            for call in parsed.tool_calls
        ],
        reasoning=parsed.reasoning,
    )


def to_wire_delta(delta: Delta, pinned_ids: list[str], role_sent: bool) -> DeltaMessage:
    """A parser delta on the wire, with each call's id pinned to the first one sent.

    ``pinned_ids`` (the stream state's ``last_tool_call_ids``) grows by the ids of
    calls seen for the first time, so a replayed or retried chunk keeps its ids.
    """
    if not delta.tool_calls:  # most chunks: text only
        return DeltaMessage(
            role=None if role_sent else "assistant",
            content=delta.content,
            reasoning=delta.reasoning,
            citations=delta.citations,
        )
    calls = []
    for call in delta.tool_calls:
        call_id = call.id
        if call_id is not None:
            if call.index < len(pinned_ids):
                call_id = pinned_ids[call.index]
            else:
                pinned_ids.append(call_id)
        calls.append(
            DeltaToolCall(
                id=call_id,
                type="function" if call.type is not None else None,
                index=call.index,
                function=DeltaFunctionCall(call.name, call.arguments),
            )
        )
    return DeltaMessage(
        role=None if role_sent else "assistant",
        content=delta.content,
        reasoning=delta.reasoning,
        tool_calls=calls,
        citations=delta.citations,
    )
