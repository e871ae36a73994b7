"""Gemma 4's parsers (``gemma4`` reasoning and tools), declared on the marker engine.

Gemma 4 writes reasoning in a thought channel and calls in its own markup::

    <|channel>thought
    ...reasoning...<channel|><|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>

The four markers count by id; ``call:``, ``:``, ``{`` and ``(`` are lexed from text
(``:`` alone opens a call's name too; ``(`` its arguments). Arguments are read by
parsers/families/gemma4_args.py and streamed as vLLM's engine streams them: the JSON
prefix later text cannot change, an open string extended by each piece's escaped text.
Reasoning loses its ``thought`` label line; an output that starts with it (or shows a
``<channel|>``) without opening the channel is read as if it had. Thinking is off unless
``enable_thinking`` says otherwise; the prompt's last turn (``<|turn>``,
``<|tool_response>``) decides whether reasoning is open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_END,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    STATE_EVENTS,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_END,
    TOOL_NAME,
    TOOL_PREAMBLE,
    TOOL_START,
    EngineState,
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import (
    HeldReasoningState,
    HoldingReasoning,
    ThinkMarkers,
    hold_trailing_reasoning,
)
from parsers.engine.tools import (
    BodyTools,
    CallSlot,
    ReasoningToolState,
    entry_head,
    json_name,
    tool_builders,
)
from parsers.families import gemma4_args as args
from parsers.families.hermes import KeyMatch
from parsers.families.qwen3 import Qwen3Reasoning
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.readers.schema import coerce_value
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, ParseOptions, Vocabulary

CHANNEL_START = "<|channel>"
CHANNEL_END = "<channel|>"
TOOL_CALL_START = "<|tool_call>"
TOOL_CALL_END = "<tool_call|>"
TURN_BOUNDARIES = ("<|turn>", "<|tool_response>")
THOUGHT_PREFIX = "thought\n"

# Terminals beyond the engine's own.
CALL_PREFIX = "CALL_PREFIX"
COLON = "COLON"
OPEN_BRACE = "OPEN_BRACE"
OPEN_PAREN = "OPEN_PAREN"

_TRANSITIONS = {
    (CONTENT, THINK_START): Transition(REASONING, ()),
    (REASONING, THINK_START): Transition(REASONING, ()),
    (REASONING, THINK_END): Transition(CONTENT, (REASONING_END,)),
    (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (TOOL_PREAMBLE, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (TOOL_PREAMBLE, CALL_PREFIX): Transition(TOOL_NAME, ()),
    (TOOL_PREAMBLE, COLON): Transition(TOOL_NAME, ()),
    (TOOL_NAME, OPEN_BRACE): Transition(TOOL_ARGS, ()),
    (TOOL_NAME, OPEN_PAREN): Transition(TOOL_ARGS, ()),
    (TOOL_NAME, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (TOOL_ARGS, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (CONTENT, TOOL_END): Transition(CONTENT, ()),
    (CONTENT, THINK_END): Transition(CONTENT, ()),
}
GEMMA4_FORMAT = Format(_TRANSITIONS, STATE_EVENTS, frozenset({TOOL_PREAMBLE, TOOL_NAME, TOOL_ARGS}))
_MARKERS = {
    THINK_START: CHANNEL_START,
    THINK_END: CHANNEL_END,
    TOOL_START: TOOL_CALL_START,
    TOOL_END: TOOL_CALL_END,
}
_LITERALS = {**_MARKERS, CALL_PREFIX: "call:", COLON: ":", OPEN_BRACE: "{", OPEN_PAREN: "("}
# What an argument piece must hold for vLLM to read the arguments again.
_STRUCTURAL = frozenset(",:{}[]<")


class Gemma4Markers(ThinkMarkers):
    """Gemma 4's grammar for one tokenizer; ``<|"|>`` is kept in the text, never dropped."""

    def __init__(self, vocab: Vocabulary) -> None:
        grammar = Grammar(
            _LITERALS,
            _MARKERS,
            vocab.special_tokens - set(_LITERALS.values()) - {args.DELIM},
            dict(vocab.token_ids),
            vocab.token_text,
            markup=GEMMA4_FORMAT,
        )
        super().__init__(
            grammar,
            vocab,
            start=CHANNEL_START,
            end=CHANNEL_END,
            implicit_ends=(TOOL_CALL_START,),
            boundaries=TURN_BOUNDARIES,
        )
        # What closes a channel the prompt opened (vLLM's ``adjust_initial_state_from_prompt``).
        self.open_boundaries = self.end_ids | self.boundary_ids

    def prompt_opens_reasoning(self, prompt_token_ids: Sequence[int]) -> bool:
        """Whether the prompt ends inside a ``<|channel>`` it opened."""
        if self.start_id is None:
            return False
        for token_id in reversed(prompt_token_ids):
            if token_id == self.start_id:
                return True
            if token_id in self.open_boundaries:
                return False
        return False

    def first_feed(self, text: str, token_ids: Sequence[int]) -> tuple[str, list[int]]:
        """An output's first text, opened as a channel when it reads as one that was not."""
        ids = list(token_ids)
        if not text or self.start_id is None or self.end_id is None or CHANNEL_START in text:
            return text, ids
        if CHANNEL_END in text or text.startswith(THOUGHT_PREFIX) or text == "thought":
            return CHANNEL_START + text, [self.start_id, *ids] if ids else ids
        return text, ids


class ThoughtLabel(Struct):
    """The ``thought`` label line at the start of reasoning, dropped from the deltas."""

    seen: str = ""
    done: bool = False

    def strip(self, delta: Delta | None, finished: bool) -> Delta | None:
        """The delta without the label (vLLM's reading, a delta held whole while the
        reasoning so far may still be the label)."""
        if delta is None or delta.reasoning is None or self.done:
            return delta
        before = len(self.seen)
        self.seen += delta.reasoning
        if self.seen.startswith(THOUGHT_PREFIX):
            rest = delta.reasoning[len(THOUGHT_PREFIX) - before :]
            self.done, self.seen = True, ""
            delta.reasoning = rest or None
            if rest or delta.content is not None or delta.tool_calls:
                return delta
            return None
        if THOUGHT_PREFIX.startswith(self.seen):
            self.done = finished
            return None
        delta.reasoning, self.done, self.seen = self.seen, True, ""
        return delta


def _without_label(reasoning: str | None) -> str | None:
    if reasoning and reasoning.startswith(THOUGHT_PREFIX):
        reasoning = reasoning[len(THOUGHT_PREFIX) :]
    elif reasoning == THOUGHT_PREFIX.rstrip():
        reasoning = None
    return reasoning or None


class Gemma4ReasoningState(HeldReasoningState, tag="gemma4_reasoning"):
    label: ThoughtLabel = field(default_factory=ThoughtLabel)
    fed: bool = False


class Gemma4Reasoning(HoldingReasoning):
    """``gemma4`` reasoning: the engine from content, a channel the prompt opened read on."""

    def __init__(
        self, markers: Gemma4Markers, options: ParseOptions, state: Gemma4ReasoningState
    ) -> None:
        super().__init__(markers, options, state)
        self.markers = markers
        self.gemma = state
        self.thinking = bool(options.chat_template_kwargs.get("enable_thinking", False))

    def _start_state(self) -> str:
        return CONTENT

    def continue_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        if self.markers.prompt_opens_reasoning(prompt_token_ids):
            self.gemma.engine = EngineState(REASONING)

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.gemma
        if not state.fed:
            state.fed = True
            if state.engine is None or state.engine.state == CONTENT:
                text, token_ids = self.markers.first_feed(text, token_ids)
        delta = state.label.strip(Qwen3Reasoning.stream(self, text, token_ids), finished=False)
        return hold_trailing_reasoning(delta, state, state.ended)

    def finish(self) -> Delta | None:
        return self.gemma.label.strip(super().finish(), finished=True)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output read from content; the label line goes."""
        reasoning, content = self._split(self.markers.first_feed(text, ())[0], CONTENT)
        return _without_label(reasoning), content


# ---------------------------------------------------------------------------- tools


class Gemma4Slot(CallSlot):
    """One call: its body as it grows, the pairs read of it as JSON entries, what was sent.

    What was sent is ``{`` plus the covered entries (each followed by ``, ``) plus
    ``sent_tail`` and ``streamed``; ``stale`` counts covered entries a repeated key has
    changed since. ``ext_*``: the open string being extended piece by piece.
    """

    json_name: KeyMatch = field(default_factory=KeyMatch)
    string_keys: list[str] | None = None
    scan: args.FieldScan = field(default_factory=args.FieldScan)
    opens: int = 0
    closes: int = 0
    trailing_space: int = 0
    keys: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    sent_any: bool = False
    sent_entries: list[str] = field(default_factory=list)
    sent_tail: str = ""
    streamed: list[str] = field(default_factory=list)
    stale: int = 0
    extending: bool = False
    extends_sent: bool = False
    ext_core: str = ""
    ext_space: GrowingText = field(default_factory=GrowingText)


class Gemma4ToolState(ReasoningToolState[Gemma4Slot], tag="gemma4"):
    label: ThoughtLabel = field(default_factory=ThoughtLabel)
    fed: bool = False


def _sent_tail(slot: Gemma4Slot) -> str:
    if slot.streamed:
        slot.sent_tail += "".join(slot.streamed)
        slot.streamed = []
    return slot.sent_tail


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class Gemma4Tools(BodyTools[Gemma4Slot, Gemma4ToolState]):
    """Gemma 4's tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    reasoning_format = GEMMA4_FORMAT

    def __init__(self, markers: Gemma4Markers, options: ParseOptions, **kwargs: Any) -> None:
        super().__init__(markers, options, **kwargs)
        self.markers = markers

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        state = self.state
        if not state.fed:
            state.fed = True
            if state.engine.state == CONTENT:
                text, token_ids = self.markers.first_feed(text, token_ids or [])
        return super().stream(text, token_ids)

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        self.state.fed = True
        return super().extract(self.markers.first_feed(content, ())[0], id_seed)

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        return self.state.label.strip(super()._delta(events, finished), finished)

    # ------------------------------------------------------------------ the body

    def _grow(self, event: Event) -> Gemma4Slot:
        slot = self._slot(event.call)
        piece = event.value
        if piece:
            slot.args.append(piece)
            slot.opens += piece.count("(")
            slot.closes += piece.count(")")
            kept = piece.rstrip()
            slot.trailing_space = (
                slot.trailing_space + len(piece) if not kept else len(piece) - len(kept)
            )
        return slot

    def _bounds(self, slot: Gemma4Slot) -> tuple[int, int]:
        """How far the body is settled (no later text changes it), and where the body
        the converter reads ends now (its trailing space and closer left out)."""
        end = len(slot.args) - slot.trailing_space
        last = slot.args[end - 1] if end > 0 else ""
        settled = end - 1 if last in ("}", ")") else end
        dropped = last == "}" or (last == ")" and slot.opens < slot.closes)
        return settled, end - 1 if dropped else end

    def _named(self, slot: Gemma4Slot, name: str) -> None:
        slot.string_keys = self._string_keys(name)

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        index = event.call
        slot = self._grow(event)
        if not slot.name_sent:
            name: str | None = slot.name
            if not name and event.value:
                name = json_name_of(slot)
            if name and self._accepts(name):
                calls.append(self._announce(index, slot, name, None))
            return
        if event.value:
            piece = self._piece(slot, event.value)
            if piece:
                calls.append(DeltaToolCall(index=index, arguments=piece))

    def _ending(self, index: int, slot: Gemma4Slot, calls: list[DeltaToolCall]) -> str | None:
        """The whole body read at the call's end: what its JSON adds to what was sent."""
        final = self._body_arguments(slot, slot.name)
        sent = ""
        if slot.sent_any:
            sent = "{" + "".join(e + ", " for e in slot.sent_entries) + _sent_tail(slot)
        if len(final) <= len(sent) or (sent and not final.startswith(sent)):
            return None
        return final[len(sent) :]

    def _body_arguments(self, slot: Gemma4Slot, name: str) -> str:
        raw = slot.args.text()
        start, end = args.body_bounds(raw, slot.opens, slot.closes)
        fields = args.read_fields(raw, start, end, partial=False)[0]
        properties = self._properties(name) if self.options.tools and name else {}
        for key, value in fields.items():
            schema = properties.get(key)
            if isinstance(schema, dict):
                fields[key] = coerce_value(value, schema)
        return _dumps(fields)

    def _entry_of(self, name: str, key: str, value: Any) -> str:
        """One ``"key": value`` of the arguments, the value typed by the tool's schema."""
        if self.options.tools and name:
            schema = self._properties(name).get(key)
            if isinstance(schema, dict):
                value = coerce_value(value, schema)
        return _dumps(key) + ": " + _dumps(value)

    # ------------------------------------------------------------------ streaming the arguments

    def _piece(self, slot: Gemma4Slot, piece: str) -> str | None:
        """What the arguments sent grow by with ``piece`` (already in the body)."""
        if slot.extending:
            out = self._extend(slot, piece)
            if out is not None:
                if not out or not slot.extends_sent:
                    return None
                slot.streamed.append(out)
                return out
            slot.extending = False
        elif _STRUCTURAL.isdisjoint(piece):
            return None
        return self._convert(slot)

    def _record(self, slot: Gemma4Slot, key: str, value: Any) -> None:
        """A completed pair: a new entry, or a repeated key's new value."""
        entry = self._entry_of(slot.name, key, value)
        position = slot.positions.get(key)
        if position is None:
            slot.positions[key] = len(slot.entries)
            slot.keys.append(key)
            slot.entries.append(entry)
            return
        if position < len(slot.sent_entries):
            sent = slot.sent_entries[position]
            slot.stale += (entry != sent) - (slot.entries[position] != sent)
        slot.entries[position] = entry

    def _convert(self, slot: Gemma4Slot) -> str | None:
        """vLLM's conversion of the body so far: the JSON prefix no later text changes
        (the entries, the last one's key, an open string's text), less what was sent."""
        settled, body_end = self._bounds(slot)
        for key, value in slot.scan.advance(slot.args, settled):
            self._record(slot, key, value)
        if slot.stale:
            return None
        opened = slot.scan.open_value(slot.args, body_end)
        entries = slot.entries
        if opened is not None:
            key, text = opened
            if key in slot.positions:
                return None  # a repeated key open inside the object (docs/parity.md)
            last = self._entry_of(slot.name, key, text) if text is not None else _dumps(key) + ": {"
            lead, last_key = entries, key
        elif entries:
            last, lead, last_key = entries[-1], entries[:-1], slot.keys[-1]
        else:
            return None
        head, streams = entry_head(last, last_key, slot.string_keys)
        covered = len(slot.sent_entries)
        if slot.sent_any:
            rest = "".join(e + ", " for e in lead[covered:]) + head
            sent_tail = _sent_tail(slot)
            if len(lead) < covered or not rest.startswith(sent_tail):
                return None
            piece = rest[len(sent_tail) :]
        else:
            piece = "{" + "".join(e + ", " for e in lead) + head
        slot.sent_any = True
        slot.sent_entries += lead[covered:]
        slot.sent_tail = head
        if opened is not None and opened[1] is not None:
            self._start_extending(slot, body_end, streams)
        return piece or None

    def _start_extending(self, slot: Gemma4Slot, body_end: int, streams: bool) -> None:
        """The open string is the arguments' last value: later pieces extend it as they
        come, holding back its tail (space, a closer, a delimiter's start) as vLLM does."""
        end = len(slot.args) - slot.trailing_space
        held_from = body_end - args.partial_delim(slot.args[max(0, body_end - 4) : body_end])
        slot.extending, slot.extends_sent = True, streams
        slot.ext_core = slot.args[held_from:end]
        slot.ext_space = GrowingText()
        slot.ext_space.append(slot.args[end:])

    def _extend(self, slot: Gemma4Slot, piece: str) -> str | None:
        """The open string's escaped growth by ``piece`` ("" if it is all held back), or
        None when the piece closes it (a delimiter)."""
        if not piece.strip():
            slot.ext_space.append(piece)
            return ""
        text = slot.ext_core + slot.ext_space.text() + piece
        if args.DELIM in text:
            return None
        trimmed = text.rstrip()
        visible = args.strip_partial_delim(args.drop_closer(trimmed, slot.opens < slot.closes))
        slot.ext_core = trimmed[len(visible) :]
        slot.ext_space = GrowingText()
        slot.ext_space.append(text[len(trimmed) :])
        return _escaped(visible)


def json_name_of(slot: Gemma4Slot) -> str | None:
    """The ``"name"`` a call without one may give in its body."""
    return json_name(slot.args, slot.json_name)


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:  # nested past what JSON can write back: vLLM fails too
        return "null"


# ---------------------------------------------------------------------------- the family


def _markers(_: str, vocab: Vocabulary) -> Gemma4Markers:
    return Gemma4Markers(vocab)


def _thinking(options: ParseOptions) -> bool:
    return bool(options.chat_template_kwargs.get("enable_thinking", False))


def _reasoning(markers: Gemma4Markers, request: Request) -> Gemma4Reasoning:
    return Gemma4Reasoning(markers, request.options, Gemma4ReasoningState())


def _reasoning_stream(
    markers: Gemma4Markers, request: Request, kept: object
) -> tuple[Gemma4Reasoning, Gemma4ReasoningState]:
    state = reuse(kept, Gemma4ReasoningState)
    return Gemma4Reasoning(markers, request.options, state), state


_tools, _tools_stream = tool_builders(Gemma4Tools)


FAMILY = Family(
    title="Gemma 4",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("gemma4",),
            engine_based=True,
            states=(Gemma4ReasoningState,),
            thinking=_thinking,
            prepare=_markers,
            one_shot=_reasoning,
            stream=_reasoning_stream,
            golden=("A1",),
        ),
    ),
    tools=(
        Tools(
            names=("gemma4",),
            engine_based=True,
            states=(Gemma4ToolState,),
            thinking=_thinking,
            prepare=_markers,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("A1",),
        ),
    ),
)
