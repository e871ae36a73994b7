"""Qwen3's marker grammar: ``<think>`` reasoning and ``<tool_call>`` XML tool calls.

One state machine serves both vLLM parsers built on it: ``qwen3`` reasoning (tool
markup passes through as content, for the tool parser) and ``qwen3_coder`` tools
(``<function=NAME>`` with ``<parameter=KEY>VALUE</parameter>`` bodies, values coerced
to the tool's schema types). Special tokens other than the markers are deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import Enum
from typing import Any

from parsers.markers import MarkerSet
from parsers.schema import coerce_arguments
from parsers.types import ExtractedToolCalls, FunctionCall, ParseOptions, Vocabulary

THINK_START = "<think>"
THINK_END = "</think>"
TOOL_START = "<tool_call>"
TOOL_END = "</tool_call>"
FUNC_PREFIX = "<function="
FUNC_END = "</function>"
PARAM_START = "<parameter="
PARAM_END = "</parameter>"
CLOSE_ANGLE = ">"
TURN_BOUNDARIES = ("<|im_start|>", "<|im_end|>")

_GRAMMAR = (
    THINK_START, THINK_END, TOOL_START, TOOL_END, FUNC_PREFIX, FUNC_END,
    PARAM_START, PARAM_END, CLOSE_ANGLE,
)  # fmt: skip


class State(Enum):
    REASONING = "reasoning"
    CONTENT = "content"
    TOOL_PREAMBLE = "tool_preamble"
    TOOL_NAME = "tool_name"
    TOOL_ARGS = "tool_args"
    TOOL_BETWEEN = "tool_between"


_TOOL_STATES = frozenset(
    {State.TOOL_PREAMBLE, State.TOOL_NAME, State.TOOL_ARGS, State.TOOL_BETWEEN}
)

# Tool-mode transitions: (state, marker) -> (next state, ends a call, starts a call).
_TOOL_TRANSITIONS: dict[tuple[State, str], tuple[State, bool, bool]] = {
    (State.CONTENT, TOOL_START): (State.TOOL_PREAMBLE, False, True),
    (State.CONTENT, FUNC_PREFIX): (State.TOOL_NAME, False, True),
    (State.TOOL_PREAMBLE, TOOL_END): (State.CONTENT, True, False),
    (State.TOOL_PREAMBLE, FUNC_PREFIX): (State.TOOL_NAME, False, False),
    (State.TOOL_NAME, CLOSE_ANGLE): (State.TOOL_ARGS, False, False),
    (State.TOOL_NAME, FUNC_END): (State.TOOL_BETWEEN, True, False),
    (State.TOOL_NAME, TOOL_END): (State.CONTENT, True, False),
    (State.TOOL_NAME, TOOL_START): (State.TOOL_PREAMBLE, True, True),
    (State.TOOL_NAME, FUNC_PREFIX): (State.TOOL_NAME, True, True),
    (State.TOOL_ARGS, FUNC_END): (State.TOOL_BETWEEN, True, False),
    (State.TOOL_ARGS, FUNC_PREFIX): (State.TOOL_NAME, True, True),
    (State.TOOL_BETWEEN, TOOL_END): (State.CONTENT, False, False),
    (State.TOOL_BETWEEN, TOOL_START): (State.TOOL_PREAMBLE, False, True),
    (State.TOOL_BETWEEN, FUNC_PREFIX): (State.TOOL_NAME, False, True),
}

_PARAM_RE = re.compile(
    r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s*=))",
    re.DOTALL,
)
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]*)"')


def _trim_wrapping_newlines(value: str) -> str:
    """One leading and one trailing newline belong to the template's markup."""
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


def parameters_to_json(raw: str) -> str:
    """``<parameter=k>v</parameter>`` bodies as a JSON object of string values."""
    params = {m.group(1): _trim_wrapping_newlines(m.group(2)) for m in _PARAM_RE.finditer(raw)}
    return json.dumps(params, ensure_ascii=False)


class Qwen3Grammar:
    """Tokenizer-dependent facts of the grammar, computed once per server."""

    def __init__(self, vocab: Vocabulary) -> None:
        drops = vocab.special_tokens - set(_GRAMMAR)
        self.drops = frozenset(drops)
        self.markers = MarkerSet([*_GRAMMAR, *drops])
        self.start_id = vocab.id_of(THINK_START)
        self.end_ids = frozenset(
            i for i in (vocab.id_of(THINK_END), vocab.id_of(TOOL_START)) if i is not None
        )
        self.boundary_ids = frozenset(
            i for i in (vocab.id_of(t) for t in TURN_BOUNDARIES) if i is not None
        )

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool:
        """Whether the prompt's last turn already ended reasoning.

        Scans back to the last turn boundary: a ``</think>`` or ``<tool_call>`` closes
        it, a ``<think>`` leaves it open; with neither, thinking decides.
        """
        for token_id in reversed(prompt_token_ids):
            if token_id in self.end_ids:
                return True
            if token_id == self.start_id:
                return not thinking
            if token_id in self.boundary_ids:
                break
        return not thinking


class Qwen3Reasoning:
    """``qwen3`` reasoning: the grammar with tool markup passed through as content."""

    def __init__(self, grammar: Qwen3Grammar, options: ParseOptions) -> None:
        self.grammar = grammar
        self.thinking = bool(options.chat_template_kwargs.get("enable_thinking", True))

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.grammar.prompt_closes_reasoning(prompt_token_ids, self.thinking)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """Split a whole output into reasoning and content."""
        if not self.thinking:
            return None, text
        closed = bool(self.grammar.boundary_ids) and prompt_token_ids is not None
        closed = closed and self.is_reasoning_end(prompt_token_ids or ())
        in_reasoning = not closed
        reasoning: list[str] = []
        content: list[str] = []
        for marker, piece in self.grammar.markers.split(text):
            if marker in self.grammar.drops:
                continue
            if in_reasoning:
                if marker == THINK_START:
                    continue
                if marker == THINK_END:
                    in_reasoning = False
                    continue
                if marker == TOOL_START:
                    in_reasoning = False
                    content.append(piece)
                    continue
                reasoning.append(piece)
            elif marker != THINK_END:
                content.append(piece)
        return "".join(reasoning) or None, "".join(content) or None


class _Slot:
    __slots__ = ("args", "name")

    def __init__(self) -> None:
        self.name = ""
        self.args = ""


class Qwen3CoderTools:
    """``qwen3_coder`` tool calls, read from reasoning-free content."""

    supports_required_and_named = False

    def __init__(
        self, grammar: Qwen3Grammar, options: ParseOptions, reasoning_markup_is_text: bool
    ) -> None:
        self.grammar = grammar
        self.options = options
        self.reasoning_markup_is_text = reasoning_markup_is_text
        self.suppress = options.tool_choice == "none" and bool(options.tools)

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Calls and the content around them, as vLLM's one-shot engine pass gives them.

        Content after the first call is dropped when a call was recognized.
        """
        state = State.CONTENT
        slots: list[_Slot] = []
        before: list[str] = []
        after: list[str] = []
        for marker, piece in self.grammar.markers.split(content):
            if marker in self.grammar.drops:
                continue
            transition = _TOOL_TRANSITIONS.get((state, marker)) if marker else None
            # A stray </think> in content is dropped, unless no reasoning parser runs.
            if marker == THINK_END and state is State.CONTENT and not self.reasoning_markup_is_text:
                continue
            if transition is None:
                if state is State.CONTENT:
                    (after if slots else before).append(piece)
                elif state is State.TOOL_NAME and not self.suppress:
                    slots[-1].name += piece
                elif state is State.TOOL_ARGS and not self.suppress:
                    slots[-1].args += piece
                continue
            next_state, _, starts = transition
            if starts and not self.suppress:
                slots.append(_Slot())
            state = next_state
        calls = [call for slot in slots if (call := self._call(slot)) is not None]
        # Text after the first call is kept only when no call got as far as a name.
        named = any(slot.name or _json_name(slot.args) for slot in slots)
        text = "".join(before if named else before + after)
        if not text.strip() and slots:
            text = ""
        if calls:
            text = text.strip()
        return ExtractedToolCalls(bool(calls), calls, text or None)

    def _call(self, slot: _Slot) -> FunctionCall | None:
        name = slot.name.strip()
        raw = slot.args
        if not name and raw.strip():
            name, arguments = _name_and_arguments(raw)
        elif raw.strip():
            arguments = parameters_to_json(raw)
        else:
            arguments = "{}"
        if not name:
            return None
        tool = self.options.tool(name)
        if tool is not None:
            arguments = coerce_arguments(arguments, tool.properties())
        return FunctionCall(name, arguments)


def _json_name(raw: str) -> str:
    match = _NAME_RE.search(raw)
    return match.group(1) if match else ""


def _name_and_arguments(raw: str) -> tuple[str, str]:
    """A JSON body that names its function: ``{"name": ..., "arguments": ...}``."""
    raw = raw.strip()
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError:
        return "", raw
    if not isinstance(parsed, dict):
        return "", raw
    name = parsed.get("name", "")
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    rest = {k: v for k, v in parsed.items() if k != "name"}
    return name, json.dumps(rest, ensure_ascii=False)
