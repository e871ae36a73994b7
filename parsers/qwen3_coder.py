"""``qwen3_coder`` tool calls: ``<function=NAME>`` with ``<parameter=K>V</parameter>``.

The marker engine turns text into call events; this layer turns call events into
tool-call deltas as vLLM's engine parser does: the name once known, then the JSON
of the parameters (coerced to the tool's schema) as a growing prefix. A string
value still being written streams through an extender that escapes each new
piece, so the common case costs O(delta); the whole body is converted again only
at parameter boundaries. A one-shot parse is the same machinery fed the whole
content at once.
"""

from __future__ import annotations

import json
import re
from typing import Any

from msgspec import Struct, field

from parsers.engine import (
    CALL_ARGS,
    CALL_END,
    CALL_NAME,
    CALL_START,
    CONTENT,
    REASONING_END,
    REASONING_TEXT,
    TEXT,
    EngineState,
    Event,
    MarkerEngine,
)
from parsers.ids import chat_tool_call_id
from parsers.qwen3 import Qwen3Grammar
from parsers.schema import coerce_arguments, schema_types
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ParseOptions

_PARAM_RE = re.compile(
    r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s*=))",
    re.DOTALL,
)
_PARTIAL_PARAM_RE = re.compile(r"<\s*parameter\s*=\s*([^>]+)>(.*)$", re.DOTALL)
_VALUE_END_RE = re.compile(r"<\s*/\s*parameter\s*>|<\s*parameter\s*=")
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]*)"')


def _trim_wrapping_newlines(value: str) -> str:
    """One leading and one trailing newline belong to the template's markup."""
    return value.removeprefix("\n").removesuffix("\n")


def parameters_to_json(raw: str, partial: bool) -> str:
    """The parameter bodies as a JSON object of strings; ``partial`` adds an open one."""
    params = {m.group(1): _trim_wrapping_newlines(m.group(2)) for m in _PARAM_RE.finditer(raw)}
    if partial:
        match = _PARTIAL_PARAM_RE.search(_PARAM_RE.sub("", raw))
        if match and match.group(1):
            params[match.group(1)] = _trim_wrapping_newlines(match.group(2))
    return json.dumps(params, ensure_ascii=False)


def _may_end_value(tail: str) -> bool:
    """Whether ``tail`` (starting at a ``<``) is, or may grow into, a value's end marker.

    The markers are ``<\\s*/\\s*parameter\\s*>`` and ``<\\s*parameter\\s*=``.
    """
    i, n = 1, len(tail)

    def skip_space(i: int) -> int:
        while i < n and tail[i].isspace():
            i += 1
        return i

    i = skip_space(i)
    closing = i < n and tail[i] == "/"
    if closing:
        i = skip_space(i + 1)
    word = "parameter"
    if tail[i : i + len(word)] != word[: n - i]:
        return False
    i = skip_space(i + len(word))
    if i >= n:
        return True
    return i == n - 1 and tail[i] == (">" if closing else "=")


def _end_window(text: str) -> str:
    """The suffix of a value that may still grow into its end marker."""
    start = text.rfind("<")
    if start < 0:
        return ""
    tail = text[start:]
    return tail if _may_end_value(tail) else ""


class OpenValue(Struct):
    """An open string parameter value being streamed piece by piece."""

    window: str
    started: bool
    held: str


def open_value(raw_args: str) -> OpenValue | None:
    """The trailing ``<parameter=...>`` value of ``raw_args``, if it is still open."""
    match = _PARTIAL_PARAM_RE.search(_PARAM_RE.sub("", raw_args))
    if match is None:
        return None
    name, value = match.group(1), match.group(2)
    if any(m.group(1) == name for m in _PARAM_RE.finditer(raw_args)):
        return None
    held = "\n" if value.endswith("\n") and value != "\n" else ""
    return OpenValue(_end_window(value), bool(value), held)


def extend_value(value: OpenValue, delta: str) -> str | None:
    """The JSON-escaped text ``delta`` adds to the value; None once the value ends."""
    text = value.window + delta
    if _VALUE_END_RE.search(text):
        return None
    value.window = _end_window(text)
    text = value.held + delta
    if not value.started and text:
        value.started = True
        text = text.removeprefix("\n")
    value.held = "\n" if text.endswith("\n") else ""
    text = text[: len(text) - len(value.held)]
    return json.dumps(text, ensure_ascii=False)[1:-1]


def safe_prefix(json_text: str, string_keys: list[str] | None) -> tuple[str, bool]:
    """The prefix of the arguments JSON that later text cannot change.

    It ends before the last top-level value, unless that value is a string of a
    key whose schema allows only strings (then its open content is included, and
    the second result says the prefix ends inside it).
    """
    last_colon = -1
    last_key: str | None = None
    pending_key: str | None = None
    in_string = escape = False
    string_start = -1
    depth = 0
    for i, c in enumerate(json_text):
        if escape:
            escape = False
        elif in_string:
            if c == "\\":
                escape = True
            elif c == '"':
                in_string = False
                if depth == 1 and string_start >= 0:
                    pending_key = json_text[string_start + 1 : i]
        elif c == '"':
            in_string, string_start = True, i
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == ":" and depth == 1:
            last_colon, last_key, pending_key = i, pending_key, None
    if last_colon < 0:
        return "", False
    end = last_colon + 1
    while end < len(json_text) and json_text[end] in " \t\n\r":
        end += 1
    if end >= len(json_text) or json_text[end] != '"':
        return json_text[:end], False
    if string_keys is not None and last_key not in string_keys:
        return json_text[:end], False
    escape = False
    for i in range(end + 1, len(json_text)):
        c = json_text[i]
        if escape:
            escape = False
        elif c == "\\":
            escape = True
        elif c == '"':
            return json_text[:i], True
    return json_text, True


class Slot(Struct):
    id: str = ""
    name: str = ""
    args: str = ""
    name_sent: bool = False
    string_keys: list[str] | None = None
    streamed: str = ""
    open_value: OpenValue | None = None
    open_value_streams: bool = False


class Qwen3CoderState(Struct, tag="qwen3_coder"):
    engine: EngineState = field(default_factory=lambda: EngineState(CONTENT))
    slots: list[Slot] = field(default_factory=list)
    deferred_content: str = ""
    content_has_nonws: bool = False


class Qwen3CoderTools:
    """Tool calls in Qwen3's XML format, streamed or one-shot."""

    supports_required_and_named = False
    engine_based = True

    def __init__(
        self,
        grammar: Qwen3Grammar,
        options: ParseOptions,
        *,
        reasoning_markup_is_text: bool,
        id_seed: str = "",
        state: Qwen3CoderState | None = None,
    ) -> None:
        self.options = options
        self.id_seed = id_seed
        self.state = state if state is not None else Qwen3CoderState()
        self.engine = MarkerEngine(
            grammar.grammar, self.state.engine, skip_reasoning=reasoning_markup_is_text
        )
        self.suppress = options.tool_choice == "none" and bool(options.tools)

    # ------------------------------------------------------------------ entry points

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        return self._delta(self.engine.feed(text, token_ids or []), finished=False)

    def finish(self) -> Delta | None:
        events = self.engine.finish()
        if events or self.state.deferred_content:
            return self._delta(events, finished=True)
        return None

    def remaining_arguments(self) -> str:
        return ""

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """One-shot: the whole content through the streaming machinery, then finish."""
        self.id_seed = id_seed
        events = self.engine.feed(content, []) + self.engine.finish()
        delta = self._delta(events, finished=True)
        calls = [call for i, slot in enumerate(self.state.slots) if (call := self._call(i, slot))]
        text = delta.content if delta is not None else None
        if text and calls:
            text = text.strip() or None
        return ExtractedToolCalls(bool(calls), calls, text or None)

    # ------------------------------------------------------------------ events to deltas

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        state = self.state
        if not events and not state.deferred_content:
            return None
        calls: list[DeltaToolCall] = []
        content: list[str] = []
        reasoning: list[str] = []
        carried = state.deferred_content
        in_calls = False
        for event in events:
            kind = event.kind
            if kind == TEXT:
                if in_calls:
                    state.deferred_content += event.value
                else:
                    content.append(event.value)
            elif kind == REASONING_TEXT:
                reasoning.append(event.value)
            elif kind == REASONING_END or self.suppress:
                continue
            elif kind == CALL_START:
                in_calls = True
                self._slot(event.call)
            elif kind == CALL_NAME:
                in_calls = True
                self._slot(event.call).name += event.value
            elif kind == CALL_ARGS:
                in_calls = True
                self._arguments(event, calls)
            elif kind == CALL_END:
                in_calls = True
                self._end(event.call, calls)
        if len(calls) > 1:
            calls = _coalesce(calls)
        if state.deferred_content and (not in_calls or not calls):
            now = state.deferred_content[len(carried) :]
            if carried:
                content.insert(0, carried)
            if now:
                content.append(now)
            state.deferred_content = ""
        text = "".join(content)
        if not state.content_has_nonws and text:
            if text.strip():
                state.content_has_nonws = True
            elif state.slots:
                text = ""
            elif not finished:
                state.deferred_content = text
                text = ""
        thought = "".join(reasoning)
        if text or calls or thought:
            return Delta(content=text or None, reasoning=thought or None, tool_calls=calls)
        return None

    def _slot(self, index: int) -> Slot:
        slots = self.state.slots
        while len(slots) <= index:
            slots.append(Slot())
        return slots[index]

    def _announce(self, index: int, calls: list[DeltaToolCall], name: str | None) -> None:
        if not name:
            return
        slot = self.state.slots[index]
        slot.name = name
        slot.name_sent = True
        slot.string_keys = self._string_keys(name)
        self._ensure_id(index, slot)
        calls.append(DeltaToolCall(id=slot.id, type="function", index=index, name=name))

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        index = event.call
        slot = self._slot(index)
        if event.value:
            slot.args += event.value
        if not slot.name_sent:
            if slot.name:
                self._announce(index, calls, slot.name)
            elif event.value:
                self._announce(index, calls, _json_name(slot.args))
        elif event.value:
            piece = self._argument_delta(slot, event.value)
            if piece:
                calls.append(DeltaToolCall(index=index, arguments=piece))

    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        if index >= len(self.state.slots):
            return
        remaining = self._final_arguments(self.state.slots[index])
        slot = self.state.slots[index]
        if not slot.name_sent:
            name = slot.name or _json_name(slot.args)
            if name:
                slot.name = name
                slot.name_sent = True
                slot.string_keys = self._string_keys(name)
                self._ensure_id(index, slot)
                calls.append(
                    DeltaToolCall(
                        id=slot.id,
                        type="function",
                        index=index,
                        name=name,
                        arguments=remaining or "",
                    )
                )
                remaining = None
        if remaining and slot.name_sent:
            calls.append(DeltaToolCall(index=index, arguments=remaining))

    def _ensure_id(self, index: int, slot: Slot) -> None:
        if not slot.id:
            slot.id = chat_tool_call_id(self.id_seed, index)

    # ------------------------------------------------------------------ arguments

    def _argument_delta(self, slot: Slot, raw: str) -> str | None:
        if slot.open_value is not None:
            piece = extend_value(slot.open_value, raw)
            if piece is not None:
                if not piece or not slot.open_value_streams:
                    return None
                slot.streamed += piece
                return piece
            slot.open_value = None
        current = parameters_to_json(slot.args, partial=True)
        if slot.name:
            current = self._coerce(current, slot.name)
        previous = slot.streamed
        safe, value_streams = safe_prefix(current, slot.string_keys)
        if not safe or (previous and not safe.startswith(previous)):
            return None
        slot.streamed = safe
        slot.open_value = open_value(slot.args)
        slot.open_value_streams = value_streams
        return safe[len(previous) :] or None

    def _final_arguments(self, slot: Slot) -> str | None:
        final = parameters_to_json(slot.args, partial=False)
        final = self._coerce(final, slot.name)
        previous = slot.streamed
        if len(final) > len(previous):
            if previous and not final.startswith(previous):
                return None
            slot.streamed = final
            return final[len(previous) :]
        return None

    def _properties(self, name: str) -> dict[str, Any]:
        tool = self.options.tool(name)
        return tool.properties() if tool is not None else {}

    def _coerce(self, arguments: str, name: str) -> str:
        if not self.options.tools or not name:
            return arguments
        return coerce_arguments(arguments, self._properties(name))

    def _string_keys(self, name: str) -> list[str] | None:
        """Keys whose values can only be strings, so their open text may stream."""
        properties = self._properties(name)
        if not properties:
            return None
        return [
            key for key, schema in properties.items() if set(schema_types(schema)) == {"string"}
        ]

    def _call(self, index: int, slot: Slot) -> FunctionCall | None:
        if not slot.name and not slot.args:
            return None
        name = slot.name.strip()
        raw = slot.args
        if not name and raw.strip():
            name, arguments = _name_and_arguments(raw)
        elif raw.strip():
            arguments = parameters_to_json(raw, partial=False)
        else:
            arguments = "{}"
        if not name:
            return None
        self._ensure_id(index, slot)
        return FunctionCall(name, self._coerce(arguments, name))


def _coalesce(calls: list[DeltaToolCall]) -> list[DeltaToolCall]:
    """One delta per call index, later pieces merged into the first."""
    merged: dict[int, DeltaToolCall] = {}
    for call in calls:
        first = merged.get(call.index)
        if first is None:
            merged[call.index] = call
            continue
        if first.id is None:
            first.id = call.id
        if first.type is None:
            first.type = call.type
        if first.name is None:
            first.name = call.name
        if call.arguments is not None:
            first.arguments = (first.arguments or "") + call.arguments
    return calls if len(merged) == len(calls) else list(merged.values())


def _json_name(raw: str) -> str | None:
    match = _NAME_RE.search(raw)
    return match.group(1) if match and match.group(1) else None


def _name_and_arguments(raw: str) -> tuple[str, str]:
    """A JSON body that names its function: ``{"name": ..., "arguments": ...}``."""
    raw = raw.strip()
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError:
        return "", raw
    if not isinstance(parsed, dict) or not isinstance(name := parsed.get("name", ""), str):
        return "", raw
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    rest = {k: v for k, v in parsed.items() if k != "name"}
    return name, json.dumps(rest, ensure_ascii=False)
