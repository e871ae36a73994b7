"""Harmony (gpt-oss) render: a chat request to the prompt ids vLLM renders for it.

gpt-oss has no chat template in vLLM: the request becomes Harmony messages (a system
message with the reasoning effort and the conversation's start date, a developer message
with the instructions and function tools, then the conversation), rendered for an
assistant completion by the ``oss-harmony`` package, the same one vLLM 0.33.0 runs.
Prior tool calls are then rewritten to the header shape gpt-oss was trained on
(``assistant to=functions.f<|channel|>commentary json``), as vLLM does.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import cached_property
from typing import Any

from openai_harmony import (
    Author,
    Conversation,
    DeveloperContent,
    Message,
    ReasoningEffort,
    RenderConversationConfig,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
)

from app.render.requests import ChatRenderRequest
from app.wire.errors import InvalidParameter

_EFFORTS = {
    "high": ReasoningEffort.HIGH,
    "medium": ReasoningEffort.MEDIUM,
    "low": ReasoningEffort.LOW,
}


class HarmonyRenderer:
    """Renders chat requests for gpt-oss with the server's Harmony encoding."""

    def __init__(self, load: Callable[[], Any], start_date: str | None) -> None:
        self._load = load
        self.start_date = start_date

    @cached_property
    def encoding(self) -> Any:
        """The Harmony encoding, loaded on the first gpt-oss render (a second's work that
        an app serving only derender never needs)."""
        return self._load()

    @cached_property
    def _markers(self) -> tuple[int, int, int, int]:
        encode = self.encoding.encode
        start, channel, constrain, message = (
            encode(token, allowed_special="all")[0]
            for token in ("<|start|>", "<|channel|>", "<|constrain|>", "<|message|>")
        )
        return start, channel, constrain, message

    def prompt_ids(self, request: ChatRenderRequest, with_tools: bool) -> list[int]:
        messages = list(request.messages)
        instructions = None
        if messages and messages[0].get("role") in ("system", "developer"):
            instructions = _flat_text(messages.pop(0).get("content"))
        tools = request.tools if with_tools else None
        harmony = [*self._preamble(instructions, tools, request.reasoning_effort)]
        names = {
            call.get("id"): (call.get("function") or {}).get("name")
            for message in messages
            for call in message.get("tool_calls") or ()
        }
        for message in messages:
            harmony.extend(_messages(message, names))
        conversation = Conversation.from_messages(_drop_old_analysis(harmony))
        ids: list[int] = self.encoding.render_conversation_for_completion(
            conversation, Role.ASSISTANT, config=RenderConversationConfig(auto_drop_analysis=False)
        )
        return self._legacy_call_headers(ids)

    def _preamble(
        self, instructions: str | None, tools: list[dict[str, Any]] | None, effort: str | None
    ) -> list[Message]:
        system = SystemContent.new()
        if effort == "none":
            raise InvalidParameter(
                f"Harmony does not support reasoning_effort={effort!r}", "reasoning_effort"
            )
        if effort is not None:
            if effort not in _EFFORTS:
                raise InvalidParameter(
                    f"reasoning_effort={effort!r} is not supported by Harmony. Supported "
                    f"values are: {', '.join(_EFFORTS)}.",
                    "reasoning_effort",
                )
            system = system.with_reasoning_effort(_EFFORTS[effort])
        date = self.start_date or datetime.datetime.now().strftime("%Y-%m-%d")
        preamble = [
            Message.from_role_and_content(Role.SYSTEM, system.with_conversation_start_date(date))
        ]
        if instructions or tools:
            preamble.append(_developer(instructions, tools))
        return preamble

    def _legacy_call_headers(self, ids: list[int]) -> list[int]:
        """``<|start|>assistant<|channel|>C to=R <|constrain|>T<|message|>`` becomes
        ``<|start|>assistant to=R<|channel|>C T<|message|>``; other headers stay."""
        decode, encode = self.encoding.decode, self.encoding.encode
        start, channel_token, _, message = self._markers
        result: list[int] = []
        index = 0
        while index < len(ids):
            header = self._header(ids, index)
            if header is None:
                result.append(ids[index])
                index += 1
                continue
            channel_at, constrain_at, end = header
            author = decode(ids[index + 1 : channel_at])
            middle = decode(ids[channel_at + 1 : constrain_at])
            kind = decode(ids[constrain_at + 1 : end])
            channel, _, recipient = middle[:-1].partition(" to=")
            legacy = author == "assistant" and middle.endswith(" ")
            if not (legacy and channel and recipient and kind):
                result.extend(ids[index : end + 1])
            else:
                result += [start, *encode(f"assistant to={recipient}"), channel_token]
                result += [*encode(f"{channel} {kind}"), message]
            index = end + 1
        return result

    def _header(self, ids: list[int], index: int) -> tuple[int, int, int] | None:
        """For a ``<|start|>`` at ``index``: where its header's channel, constrain and
        message tokens are, when it has all three in that order."""
        start, channel, constrain, message = self._markers
        if ids[index] != start:
            return None
        channel_at = constrain_at = None
        for at in range(index + 1, len(ids)):
            token = ids[at]
            if token == message:
                if channel_at is None or constrain_at is None:
                    return None
                return channel_at, constrain_at, at
            if token == channel and channel_at is None:
                channel_at = at
            elif token == constrain and channel_at is not None and constrain_at is None:
                constrain_at = at
            elif token == start:
                return None
        return None


def _flat_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("text") is not None:
            texts.append(str(part["text"]))
    return "".join(texts) if texts else None


def _developer(instructions: str | None, tools: list[dict[str, Any]] | None) -> Message:
    content = DeveloperContent.new()
    if instructions is not None:
        content = content.with_instructions(instructions)
    functions = []
    for tool in tools or ():
        kind = tool.get("type", "function")
        if kind == "function":
            function = tool.get("function") or {}
            functions.append(
                ToolDescription.new(
                    name=function.get("name"),
                    description=function.get("description") or "",
                    parameters=function.get("parameters"),
                )
            )
        elif kind not in ("web_search_preview", "code_interpreter", "container"):
            raise InvalidParameter(f"tool type {kind!r} is not supported.", "tools")
    if functions:
        content = content.with_function_tools(functions)
    return Message.from_role_and_content(Role.DEVELOPER, content)


def _assistant(text: str, channel: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)


def _messages(message: dict[str, Any], names: dict[Any, Any]) -> list[Message]:
    """One chat message as Harmony messages."""
    role = message.get("role")
    calls = message.get("tool_calls") or []
    reasoning = message.get("reasoning")
    if role == "assistant" and calls:
        result = []
        content = _flat_text(message.get("content"))
        if content:
            result.append(_assistant(content, "commentary"))
        if reasoning:
            result.append(_assistant(reasoning, "analysis"))
        for call in calls:
            function = call.get("function") or {}
            arguments = function.get("arguments") or ""
            result.append(
                _assistant(arguments, "commentary")
                .with_recipient(f"functions.{function.get('name', '')}")
                .with_content_type("json")
            )
        return result
    if role == "tool":
        name = names.get(message.get("tool_call_id", ""), "")
        text = _flat_text(message.get("content")) or ""
        author = Author.new(Role.TOOL, f"functions.{name}")
        return [
            Message.from_author_and_content(author, text)
            .with_channel("commentary")
            .with_recipient("assistant")
        ]
    result = [_assistant(reasoning, "analysis")] if role == "assistant" and reasoning else []
    content = message.get("content") or ""
    parts = (
        [TextContent(text=content)]
        if isinstance(content, str)
        else [TextContent(text=part.get("text", "")) for part in content]
    )
    if role == "assistant" and parts and parts[0].text:
        result.append(Message.from_role_and_contents(role, parts).with_channel("final"))
    elif role in ("system", "developer"):
        instructions = _flat_text(message.get("content"))
        if instructions is not None:
            result.append(_developer(instructions, None))
    elif role != "assistant":
        result.append(Message.from_role_and_contents(role, parts))
    return result


def _drop_old_analysis(messages: list[Message]) -> list[Message]:
    """Reasoning before the last final answer is dropped, as gpt-oss expects."""
    last_final = -1
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].author.role == "assistant" and messages[index].channel == "final":
            last_final = index
            break
    return [
        message
        for index, message in enumerate(messages)
        if not (index < last_final and message.channel == "analysis")
    ]
