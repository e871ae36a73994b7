"""One-shot parsing of a whole chat output: reasoning, then tool calls, then the message.

This is vLLM's delegating parser followed by its message assembly: the reasoning
parser splits off reasoning, the tool parser reads calls out of the rest as
``tool_choice`` directs, and the result is shaped into the assistant message
(``include_reasoning``, ``parallel_tool_calls``, ``content`` "" for forced calls).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from parsers.family import WholeWithRequest
from parsers.ids import chat_tool_call_id
from parsers.rewrite import Rewrites
from parsers.types import ExtractedToolCalls, FunctionCall, ParsedMessage, ParseOptions

if TYPE_CHECKING:
    from parsers.family import WholeStream


class ReasoningParser(Protocol):
    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool: ...

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]: ...


class ToolParser(Protocol):
    supports_required_and_named: bool

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls: ...


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _required_calls(content: str) -> list[FunctionCall]:
    """``tool_choice: required`` output: a JSON list of ``{name, parameters}``."""
    try:
        data: Any = json.loads(content)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, list):
        return []
    calls = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return []
        parameters = entry.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            return []
        if not isinstance(entry.get("description", ""), str | None):
            return []
        try:
            arguments = json.dumps(parameters, ensure_ascii=False)
        except RecursionError:
            return []
        calls.append(FunctionCall(entry["name"], arguments))
    return calls


class ChatParser:
    """A reasoning parser and a tool parser composed for one request."""

    def __init__(
        self,
        options: ParseOptions,
        reasoning: ReasoningParser | None,
        tools: ToolParser | None,
        *,
        engine_based: bool,
        harmony: WholeStream | None = None,
    ) -> None:
        self.options = options
        self.reasoning = reasoning
        self.tools = tools
        self.engine_based = engine_based
        # A format read whole (gpt-oss's Harmony, Cohere's); calls kept as tool_choice says.
        self.harmony = harmony
        self.has_tool_parser = tools is not None or (harmony is not None and harmony.tools)

    def parse(
        self,
        text: str,
        prompt_token_ids: Sequence[int] | None,
        id_seed: str,
        token_ids: Sequence[int] = (),
    ) -> ParsedMessage:
        """Split a whole output; tool-call ids derive from ``id_seed``."""
        if self.harmony is not None:
            if isinstance(self.harmony, WholeWithRequest) and prompt_token_ids is not None:
                self.harmony.continue_prompt(prompt_token_ids)
            return self._assemble(*self.harmony.parse(text, token_ids), id_seed)
        reasoning: str | None = None
        content: str | None = text
        if self.reasoning is not None:
            reasoning, content = self.reasoning.extract(text, prompt_token_ids)
        calls, content = self._tool_calls(content, id_seed)
        if isinstance(self.reasoning, Rewrites):
            reasoning = self.reasoning.rewrite_text(reasoning)
            content = self.reasoning.rewrite_text(content)
        return self._assemble(reasoning, content, calls, id_seed)

    def _tool_calls(
        self, content: str | None, id_seed: str
    ) -> tuple[list[FunctionCall] | None, str | None]:
        tools = self.tools
        options = self.options
        if tools is None:
            return [], content
        if options.tool_choice == "none":
            if self.engine_based:
                return [], tools.extract(content or "", id_seed).content
            return [], content
        supported = tools.supports_required_and_named
        named = options.named_tool is not None
        required = options.tool_choice == "required"
        if named and supported:
            if _blank(content):
                return [], None
            return [FunctionCall(options.named_tool or "", content or "")], None
        if required and supported:
            return _required_calls(content or ""), None
        if options.tool_choice in ("auto", None) or named or required:
            found = tools.extract(content or "", id_seed)
            if found.tools_called:
                # vLLM keeps "" and turns only whitespace-only content into None.
                blank = bool(found.content) and _blank(found.content)
                return found.calls, None if blank else found.content
            if (required or named) and _blank(content):
                return [], None
            if self.engine_based:
                return None, found.content or None
            return None, content
        return [], content

    def _assemble(
        self,
        reasoning: str | None,
        content: str | None,
        calls: list[FunctionCall] | None,
        id_seed: str,
    ) -> ParsedMessage:
        options = self.options
        if not options.include_reasoning:
            reasoning = None
        if not options.forces_tool_calls:
            if not self.has_tool_parser or options.tool_choice != "auto" or not options.tools:
                return ParsedMessage(reasoning, content, [])
        else:
            content = content or ""
        calls = calls or []
        if options.parallel_tool_calls is False:
            calls = calls[:1]
        for index, call in enumerate(calls):
            if call.id is None:
                call.id = chat_tool_call_id(id_seed, index)
        return ParsedMessage(reasoning, content, calls)
