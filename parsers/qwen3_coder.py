"""``qwen3_coder`` tool calls: ``<function=NAME>`` with ``<parameter=K>V</parameter>``.

The marker engine turns text into call events; this layer turns call events into
tool-call deltas as vLLM's engine parser does: the name once known, then the JSON
of the parameters (coerced to the tool's schema) as a growing prefix. Parameters
are scanned once per character and kept as JSON entries; a string value still
being written streams through an extender that escapes each new piece, and a
parameter boundary costs what it changed, never a pass over the whole body
(model output is untrusted). A one-shot parse is the same machinery fed the whole
content at once.
"""

from __future__ import annotations

import json
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
from parsers.hermes import KeyMatch
from parsers.ids import chat_tool_call_id
from parsers.qwen3 import Qwen3Grammar
from parsers.schema import coerce_arguments, coerce_string, schema_types
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ParseOptions

_NAME_KEY = "name"
_WORD = "parameter"
# TagScan steps besides the word's progress (1..9 characters matched).
_AFTER_LT, _AFTER_SLASH = -1, -2
# ParamScan phases.
_SEEK_OPEN, _SEEK_NAME_END, _SEEK_VALUE_END = 0, 1, 2


def _trim_wrapping_newlines(value: str) -> str:
    """One leading and one trailing newline belong to the template's markup."""
    return value.removeprefix("\n").removesuffix("\n")


class TagScan(Struct):
    """Finds ``<\\s*parameter\\s*=`` and ``<\\s*/\\s*parameter\\s*>`` a character at a time.

    Neither tag contains a ``<`` past its first character, so one candidate at a
    time is live and each character is looked at once (a backtracking regex would
    restart at every ``<``).
    """

    start: int = -1  # the live candidate's ``<``; -1 when there is none
    step: int = 0
    closing: bool = False

    def feed(self, ch: str, pos: int) -> bool:
        """Advance by ``ch`` (at ``pos``); True when a tag ends with it."""
        if self.start >= 0:
            step = self.step
            if step in (_AFTER_LT, _AFTER_SLASH):
                if ch.isspace():
                    return False
                if ch == "/" and step == _AFTER_LT:
                    self.step, self.closing = _AFTER_SLASH, True
                    return False
                if ch == "p":
                    self.step = 1
                    return False
            elif step < len(_WORD):
                if ch == _WORD[step]:
                    self.step = step + 1
                    return False
            else:
                if ch.isspace():
                    return False
                if ch == (">" if self.closing else "="):
                    return True
            self.start = -1
        if ch == "<":
            self.start, self.step, self.closing = pos, _AFTER_LT, False
        return False


class ParamScan(Struct):
    """vLLM's ``<parameter=K>V`` matching (a value ends at ``</parameter>`` or the next
    opener), done once per character as the call body grows.

    A match, once found, never changes; and once an opener finds no end, no later
    one can, so the open parameter is always the last one.
    """

    scanned: int = 0
    phase: int = _SEEK_OPEN
    tag: TagScan = field(default_factory=TagScan)
    name_start: int = 0
    name_end: int = 0  # the ``>`` after the name

    def advance(self, raw: str) -> list[tuple[str, str]]:
        """The parameters ``raw`` completes since the last call: (name, trimmed value)."""
        found: list[tuple[str, str]] = []
        pos, size, tag = self.scanned, len(raw), self.tag
        while pos < size:
            if self.phase == _SEEK_NAME_END:
                end = raw.find(">", pos)
                if end < 0:
                    pos = size
                    break
                self.phase, self.name_end, tag.start = _SEEK_VALUE_END, end, -1
                pos = end + 1
                continue
            if tag.start < 0:
                pos = raw.find("<", pos)
                if pos < 0:
                    pos = size
                    break
            start = tag.start
            ended = tag.feed(raw[pos], pos)
            pos += 1
            if not ended:
                continue
            tag.start = -1
            if self.phase == _SEEK_VALUE_END:
                name = raw[self.name_start : self.name_end].lstrip()
                found.append((name, _trim_wrapping_newlines(raw[self.name_end + 1 : start])))
                if tag.closing:
                    self.phase = _SEEK_OPEN
                    continue
            elif tag.closing:
                continue
            self.phase, self.name_start = _SEEK_NAME_END, pos
        self.scanned = pos
        return found

    def open_parameter(self, raw: str) -> tuple[str, str] | None:
        """The unterminated last parameter (name, raw value), if its name is not empty."""
        if self.phase != _SEEK_VALUE_END or self.name_end == self.name_start:
            return None
        spelled = raw[self.name_start : self.name_end]
        return spelled.lstrip() or spelled[-1], raw[self.name_end + 1 :]


class OpenValue(Struct):
    """An open string parameter value being streamed piece by piece."""

    started: bool
    held: str


def open_value(value: str) -> OpenValue:
    """The streaming state of an open value whose text so far is ``value``."""
    return OpenValue(bool(value), "\n" if value.endswith("\n") and value != "\n" else "")


def extend_value(value: OpenValue, delta: str) -> str:
    """The JSON-escaped text ``delta`` adds to the open value (one wrapping newline held)."""
    text = value.held + delta
    if not value.started and text:
        value.started = True
        text = text.removeprefix("\n")
    value.held = "\n" if text.endswith("\n") else ""
    text = text[: len(text) - len(value.held)]
    return json.dumps(text, ensure_ascii=False)[1:-1]


class Slot(Struct):
    """One call: its name, raw body, parameters so far, and what of their JSON was sent.

    The arguments JSON is ``{`` + entries joined by ``, `` + ``}``, one ``"key": value``
    entry per parameter (a repeated key keeps its first place, takes the last
    value). What was sent is kept as the entries it covers plus the head of the
    next one, so checking that new JSON still extends it costs only what changed.
    """

    id: str = ""
    name: str = ""
    args: str = ""
    name_sent: bool = False
    string_keys: list[str] | None = None
    scan: ParamScan = field(default_factory=ParamScan)
    json_name: KeyMatch = field(default_factory=KeyMatch)
    names: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    coerced_as: str = ""  # the call name the entries were typed for
    sent_entries: list[str] = field(default_factory=list)  # entries the sent text covers
    sent_tail: str = ""  # sent text past them: the head of the next entry
    sent_final: bool = False  # the closed object was sent: nothing can follow
    stale: int = 0  # covered entries that no longer read as they were sent
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
        self._properties_by_name: dict[str, dict[str, Any]] = {}

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
            calls = coalesce_calls(calls)
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
                self._announce(index, calls, json_name(slot.args, slot.json_name))
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
            name = slot.name or json_name(slot.args, slot.json_name)
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
        """The arguments text this body piece adds, as vLLM's engine streams it.

        While a new string parameter is open its text streams through the extender;
        otherwise the JSON is re-derived, but only from what changed: parameters
        completed by this piece and the open one.
        """
        completed = self._complete(slot)
        if slot.open_value is not None and not completed:
            piece = extend_value(slot.open_value, raw)
            if not piece or not slot.open_value_streams:
                return None
            slot.sent_tail += piece
            return piece
        slot.open_value = None
        open_parameter = slot.scan.open_parameter(slot.args)
        if (not completed and open_parameter is None) or slot.sent_final:
            return None  # the parameters read as before, so does their JSON
        entries = slot.entries
        last_name = slot.names[-1] if slot.names else ""
        overlaid = -1
        if open_parameter is not None:
            name, value = open_parameter
            entry = self._entry(slot.name, name, _trim_wrapping_newlines(value))
            overlaid = slot.positions.get(name, len(entries))
            entries = list(entries) if overlaid < len(entries) else [*entries, entry]
            entries[overlaid] = entry
            if overlaid == len(slot.entries):
                last_name = name
        if not entries:
            return None
        head, value_streams = _head(entries[-1], last_name, slot.string_keys)
        added = self._extend_sent(slot, entries, head, overlaid)
        if added is not None and open_parameter is not None and overlaid == len(slot.entries):
            slot.open_value = open_value(open_parameter[1])
            slot.open_value_streams = value_streams
        return added or None

    def _final_arguments(self, slot: Slot) -> str | None:
        """What the closed object adds to the arguments sent (None if it does not extend them)."""
        self._complete(slot)
        if slot.sent_final:
            return None
        piece = self._extend_sent(slot, slot.entries, None, -1)
        if piece is not None:
            slot.sent_final = True
        return piece or None

    def _extend_sent(
        self, slot: Slot, entries: list[str], head: str | None, overlaid: int
    ) -> str | None:
        """The text by which the JSON of ``entries`` extends what was sent, recorded as sent.

        The JSON is every entry but the last, then ``head`` (no head: the closed
        object). None when it does not start with what was sent (vLLM then sends
        nothing); that is decided from the entries past the ones already covered.
        """
        sent = slot.sent_entries
        covered = len(sent)
        if head is None:
            rest = ", ".join(entries[covered:]) + "}"
        else:
            rest = "".join(entry + ", " for entry in entries[covered:-1]) + head
        if slot.sent_tail or covered:
            stale = slot.stale
            if 0 <= overlaid < covered:
                stale += (entries[overlaid] != sent[overlaid]) - (
                    slot.entries[overlaid] != sent[overlaid]
                )
            if stale or len(entries) <= covered or not rest.startswith(slot.sent_tail):
                return None
            if head is None and len(rest) == len(slot.sent_tail):
                return None
            piece = rest[len(slot.sent_tail) :]
        else:
            piece = "{" + rest
        if head is not None:
            for i in range(covered, len(entries) - 1):
                sent.append(entries[i])
                if i < len(slot.entries) and slot.entries[i] != entries[i]:
                    slot.stale += 1
            slot.sent_tail = head
        return piece

    def _complete(self, slot: Slot) -> bool:
        """Read the body's new text; whether any parameter was completed by it."""
        if slot.coerced_as != slot.name:
            slot.coerced_as = slot.name
            self._recoerce(slot)
        found = slot.scan.advance(slot.args)
        for name, value in found:
            entry = self._entry(slot.name, name, value)
            position = slot.positions.get(name)
            if position is None:
                slot.positions[name] = len(slot.entries)
                slot.names.append(name)
                slot.values.append(value)
                slot.entries.append(entry)
                continue
            slot.values[position] = value
            if position < len(slot.sent_entries):
                sent = slot.sent_entries[position]
                slot.stale += (entry != sent) - (slot.entries[position] != sent)
            slot.entries[position] = entry
        return bool(found)

    def _recoerce(self, slot: Slot) -> None:
        """Re-type every parameter for the call's (changed) name."""
        slot.entries = [
            self._entry(slot.name, name, value)
            for name, value in zip(slot.names, slot.values, strict=True)
        ]
        slot.stale = sum(
            entry != sent for entry, sent in zip(slot.entries, slot.sent_entries, strict=False)
        )

    def _entry(self, call_name: str, key: str, value: str) -> str:
        """One ``"key": value`` of the arguments JSON, the value typed per the tool's schema."""
        typed: Any = value
        if self.options.tools and call_name:
            schema = self._properties(call_name).get(key)
            if isinstance(schema, dict):
                typed = coerce_string(value, schema_types(schema))
        try:
            value_json = json.dumps(typed, ensure_ascii=False)
        except RecursionError:  # parsed, but too deep to write back: keep the text
            value_json = json.dumps(value, ensure_ascii=False)
        return json.dumps(key, ensure_ascii=False) + ": " + value_json

    def _properties(self, name: str) -> dict[str, Any]:
        properties = self._properties_by_name.get(name)
        if properties is None:
            tool = self.options.tool(name)
            properties = tool.properties() if tool is not None else {}
            self._properties_by_name[name] = properties
        return properties

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
            name, arguments = name_and_arguments(raw)
            arguments = self._coerce(arguments, name)
        elif raw.strip():
            self._complete(slot)
            entries = slot.entries
            if name != slot.coerced_as:
                pairs = zip(slot.names, slot.values, strict=True)
                entries = [self._entry(name, key, value) for key, value in pairs]
            arguments = "{" + ", ".join(entries) + "}"
        else:
            arguments = "{}"
        if not name:
            return None
        self._ensure_id(index, slot)
        return FunctionCall(name, arguments)


def _head(entry: str, name: str, string_keys: list[str] | None) -> tuple[str, bool]:
    """What of the last entry later text cannot change, and whether that runs into its value.

    The key and colon; the open text of a string value too when the key allows only
    strings (keys are compared JSON-escaped, as vLLM compares them).
    """
    key = json.dumps(name, ensure_ascii=False)
    colon_end = len(key) + 2
    allowed = string_keys is None or key[1:-1] in string_keys
    if allowed and entry[colon_end : colon_end + 1] == '"':
        return entry[:-1], True
    return entry[:colon_end], False


def coalesce_calls(calls: list[DeltaToolCall]) -> list[DeltaToolCall]:
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


def json_name(args: str, match: KeyMatch) -> str | None:
    """The first ``"name": "..."`` in a call body (None if empty), found incrementally."""
    match.advance(args, _NAME_KEY, want_value=True, empty_is_match=True)
    if match.phase != "done" or match.value_end == match.value_start:
        return None
    return args[match.value_start : match.value_end]


def name_and_arguments(raw: str) -> tuple[str, str]:
    """A JSON body that names its function: ``{"name": ..., "arguments": ...}``."""
    raw = raw.strip()
    try:
        parsed: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return "", raw
    if not isinstance(parsed, dict) or not isinstance(name := parsed.get("name", ""), str):
        return "", raw
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    rest = {k: v for k, v in parsed.items() if k != "name"}
    return name, json.dumps(rest, ensure_ascii=False)
