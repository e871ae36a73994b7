"""GLM-4.5 / GLM-4.7's parsers (``glm45``, ``glm47`` and Ling 3's ``ling3``: one format),
declared on the engine.

GLM writes reasoning in ``<think>`` and each call as::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

``<think>``, ``</think>``, ``<tool_call>`` and ``</tool_call>`` count by id; the
argument tags are lexed from text. A call's arguments are the JSON object of its
key/value pairs (values are text, typed by the tool's schema), streamed as vLLM's
engine streams them: the JSON's prefix that later text cannot change, with an open
string value extended by each piece's escaped text. Names must be tools of the
request (vLLM validates them for this format); the prompt is read back to its last
turn marker (``<|user|>``, ``<|assistant|>``...). Ling 3 writes GLM-4.7's format and reads
the same thinking switches (on unless ``thinking`` / ``enable_thinking`` say otherwise).
"""

from __future__ import annotations

import json

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    REOPENING_THINK,
    STATE_EVENTS,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_END,
    TOOL_NAME,
    TOOL_START,
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import (
    EngineReasoning,
    EngineReasoningState,
    ThinkMarkers,
    thinking_from_kwargs,
)
from parsers.engine.tools import (
    BodyTools,
    CallSlot,
    ReasoningToolState,
    entry_head,
    json_name,
    tool_builders,
)
from parsers.families.hermes import KeyMatch
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.growing_text import Text
from parsers.types import DeltaToolCall, ParseOptions, Vocabulary

KEY_OPEN_TAG = "<arg_key>"
KEY_CLOSE_TAG = "</arg_key>"
VALUE_OPEN_TAG = "<arg_value>"
VALUE_CLOSE_TAG = "</arg_value>"
TURN_BOUNDARIES = ("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")

# Terminals beyond the engine's own.
KEY_OPEN = "KEY_OPEN"
KEY_CLOSE = "KEY_CLOSE"
VALUE_OPEN = "VALUE_OPEN"
VALUE_CLOSE = "VALUE_CLOSE"
_ARG_TAGS = (KEY_OPEN, KEY_CLOSE, VALUE_OPEN, VALUE_CLOSE)

_TOOLS = {
    (REASONING, TOOL_START): Transition(TOOL_NAME, (REASONING_END, CALL_START)),
    (CONTENT, TOOL_START): Transition(TOOL_NAME, (CALL_START,)),
    (TOOL_NAME, KEY_OPEN): Transition(TOOL_ARGS, (CALL_ARGS,)),
    (TOOL_NAME, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (TOOL_ARGS, TOOL_END): Transition(CONTENT, (CALL_END,)),
    # The tags are part of the call body the arguments are read from.
    **{(TOOL_ARGS, tag): Transition(TOOL_ARGS, (CALL_ARGS,)) for tag in _ARG_TAGS},
}
_CALL_STATES = frozenset({TOOL_NAME, TOOL_ARGS})
GLM_FORMAT = Format({**_TOOLS, **REOPENING_THINK}, STATE_EVENTS, _CALL_STATES)
GLM_PLAIN_FORMAT = Format(_TOOLS, STATE_EVENTS, _CALL_STATES)
_LITERALS = {
    TOOL_START: "<tool_call>",
    TOOL_END: "</tool_call>",
    KEY_OPEN: KEY_OPEN_TAG,
    KEY_CLOSE: KEY_CLOSE_TAG,
    VALUE_OPEN: VALUE_OPEN_TAG,
    VALUE_CLOSE: VALUE_CLOSE_TAG,
}
_THINK_LITERALS = {THINK_START: "<think>", THINK_END: "</think>"}
_BY_ID = (THINK_START, THINK_END, TOOL_START, TOOL_END)


def _markers(vocab: Vocabulary, thinking: bool) -> ThinkMarkers:
    literals = {**_THINK_LITERALS, **_LITERALS} if thinking else dict(_LITERALS)
    grammar = Grammar(
        literals,
        {name: text for name, text in literals.items() if name in _BY_ID},
        vocab.special_tokens - set(literals.values()),
        dict(vocab.token_ids),
        vocab.token_text,
        markup=GLM_FORMAT if thinking else GLM_PLAIN_FORMAT,
    )
    return ThinkMarkers(
        grammar,
        vocab,
        start="<think>" if thinking else None,
        end="</think>" if thinking else None,
        implicit_ends=("<tool_call>",),
        boundaries=TURN_BOUNDARIES,
    )


class GlmGrammars:
    """GLM's two grammars for one tokenizer: thinking on (the default) and off."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.thinking = _markers(vocab, True)
        self.plain = _markers(vocab, False)

    def of(self, thinking: bool) -> ThinkMarkers:
        return self.thinking if thinking else self.plain


# ---------------------------------------------------------------------------- arguments

_SEEK, _KEY, _VALUE = 0, 1, 2
_EXTENDER_TAIL = len(VALUE_CLOSE_TAG) - 1


class PairScan(Struct):
    """vLLM's ``<arg_key>K</arg_key>\\s*<arg_value>V</arg_value>`` pairs, found once per
    character as the body grows.

    A key runs to the first ``</arg_key>`` that whitespace and ``<arg_value>`` follow, a
    value to the first ``</arg_value>``; the open pair is the one after the last
    complete pair, its value running to the end of the body.
    """

    phase: int = _SEEK
    cursor: int = 0
    key_start: int = 0
    key_end: int = -1  # the candidate ``</arg_key>`` being checked (-1: none yet)
    value_start: int = 0

    def advance(self, raw: Text) -> list[tuple[str, str]]:
        """The pairs ``raw`` completes since the last call."""
        found: list[tuple[str, str]] = []
        size = len(raw)
        while True:
            if self.phase == _SEEK:
                at = raw.find(KEY_OPEN_TAG, self.cursor)
                if at < 0:
                    self.cursor = max(self.cursor, size - len(KEY_OPEN_TAG) + 1)
                    return found
                self.phase, self.key_start = _KEY, at + len(KEY_OPEN_TAG)
                self.cursor, self.key_end = self.key_start, -1
            elif self.phase == _KEY:
                if self.key_end < 0:
                    at = raw.find(KEY_CLOSE_TAG, self.cursor)
                    if at < 0:
                        self.cursor = max(self.cursor, size - len(KEY_CLOSE_TAG) + 1)
                        return found
                    self.key_end, self.cursor = at, at + len(KEY_CLOSE_TAG)
                while self.cursor < size and raw[self.cursor].isspace():
                    self.cursor += 1
                rest = raw[self.cursor : self.cursor + len(VALUE_OPEN_TAG)]
                if rest == VALUE_OPEN_TAG:
                    self.phase, self.value_start = _VALUE, self.cursor + len(VALUE_OPEN_TAG)
                    self.cursor = self.value_start
                elif VALUE_OPEN_TAG.startswith(rest):
                    return found  # whitespace or the tag may still come
                else:  # the key runs on to a later closing tag
                    self.cursor, self.key_end = self.key_end + 1, -1
            else:
                at = raw.find(VALUE_CLOSE_TAG, self.cursor)
                if at < 0:
                    self.cursor = max(self.cursor, size - len(VALUE_CLOSE_TAG) + 1)
                    return found
                key = raw[self.key_start : self.key_end].strip()
                found.append((key, raw[self.value_start : at]))
                self.phase, self.cursor = _SEEK, at + len(VALUE_CLOSE_TAG)

    def open_key(self, raw: Text) -> str | None:
        """The open pair's key, if a pair is open and its key is not empty (its value
        so far runs from ``value_start`` to the end of the body)."""
        if self.phase != _VALUE:
            return None
        return raw[self.key_start : self.key_end].strip() or None


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class GlmSlot(CallSlot):
    """One call: name, raw body, its pairs as JSON entries, and what was sent of them.

    What was sent is ``{`` plus the covered entries (each followed by ``, ``) plus
    ``sent_tail`` and ``streamed``; ``stale`` counts covered entries a repeated key has
    changed since.
    """

    string_keys: list[str] | None = None
    json_name: KeyMatch = field(default_factory=KeyMatch)
    scan: PairScan = field(default_factory=PairScan)
    keys: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    version: int = 0
    sent_any: bool = False
    sent_entries: list[str] = field(default_factory=list)
    sent_tail: str = ""
    # Pieces an open value streamed past sent_tail, joined to it when it is next read
    # (appending to a long string held by a struct copies it every time).
    streamed: list[str] = field(default_factory=list)
    stale: int = 0
    # The open value's extender: live, whether its text is sent, the body's tail.
    extending: bool = False
    extends_sent: bool = False
    extender_tail: str = ""
    # The conversion last made (pairs completed, open value's start): converting again
    # with nothing new reads the same JSON.
    dead_at: tuple[int, int] = (-1, -1)
    # A last key open again behind what was sent of its earlier value: how much of the
    # sent text its value has matched so far (-1: not behind).
    behind: int = -1


class GlmToolState(ReasoningToolState[GlmSlot], tag="glm"): ...


def _sent_tail(slot: GlmSlot) -> str:
    """What was sent past the covered entries, the streamed pieces joined to it."""
    if slot.streamed:
        slot.sent_tail += "".join(slot.streamed)
        slot.streamed = []
    return slot.sent_tail


class GlmTools(BodyTools[GlmSlot, GlmToolState]):
    """GLM's tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    reasoning_format = GLM_FORMAT

    # ------------------------------------------------------------------ names

    def _accepts(self, name: str) -> bool:
        """A name, and one of the request's tools when it has any."""
        return bool(name) and (not self.options.tools or self.options.tool(name) is not None)

    def _named(self, slot: GlmSlot, name: str) -> None:
        slot.string_keys = self._string_keys(name)

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        index = event.call
        slot = self._grow(event)
        if not slot.name_sent:
            if slot.name:
                name: str | None = slot.name.strip()
            else:
                found = json_name(slot.args, slot.json_name) if event.value else None
                name = found.strip() if found else None
            if name and self._accepts(name):
                calls.append(self._announce(index, slot, name, None))
            return
        if event.value:
            piece = self._piece(slot, event.value)
            if piece:
                calls.append(DeltaToolCall(index=index, arguments=piece))

    def _ending(self, index: int, slot: GlmSlot, calls: list[DeltaToolCall]) -> str | None:
        """The call's name loses its whitespace as it ends; then the closed object."""
        slot.name = slot.name.strip()
        return self._final(slot)

    # ------------------------------------------------------------------ arguments

    def _piece(self, slot: GlmSlot, delta: str) -> str | None:
        """What the arguments sent grow by with ``delta`` (already in the body)."""
        if slot.extending:
            text = slot.extender_tail + delta
            if VALUE_CLOSE_TAG not in text:
                slot.extender_tail = text[-_EXTENDER_TAIL:]
                if not slot.extends_sent:
                    return None
                piece = _escaped(delta)
                if piece:
                    slot.streamed.append(piece)
                return piece or None
            slot.extending = False
        elif slot.behind >= 0:
            if VALUE_CLOSE_TAG not in delta:
                return self._catch_up(slot, _escaped(delta))
            slot.behind = -1
        self._read(slot)
        scan = slot.scan
        opened = scan.open_key(slot.args)
        marker = (slot.version, scan.value_start if opened is not None else -1)
        if marker == slot.dead_at:
            return None  # converting again reads what the last conversion read
        slot.dead_at = marker
        entries, keys = slot.entries, slot.keys
        sent_tail = _sent_tail(slot)
        if opened is not None:
            key, value = opened, slot.args[scan.value_start :]
            position = slot.positions.get(key)
            if position is not None and position < len(entries) - 1:
                return None  # a repeated key open inside the object (docs/parity.md)
            last_entry = self._entry(slot.name, key, value)
            lead = entries if position is None else entries[:-1]
            last_key = key
        elif entries:
            last_entry, lead, last_key = entries[-1], entries[:-1], keys[-1]
        else:
            return None
        head, streams = entry_head(last_entry, last_key, slot.string_keys)
        covered = len(slot.sent_entries)
        if slot.sent_any:
            if len(lead) < covered or slot.stale:
                return None
            rest = "".join(e + ", " for e in lead[covered:]) + head
            if not rest.startswith(sent_tail):
                if opened is not None and streams and sent_tail.startswith(rest):
                    slot.behind = len(rest)  # may catch up with what was sent
                return None
            piece = rest[len(sent_tail) :]
        else:
            piece = "{" + "".join(e + ", " for e in lead) + head
        slot.sent_any = True
        slot.sent_entries += lead[covered:]
        slot.sent_tail = head
        if opened is not None:
            slot.extending, slot.extends_sent = True, streams
            slot.extender_tail = slot.args[-_EXTENDER_TAIL:]
        return piece or None

    @staticmethod
    def _catch_up(slot: GlmSlot, piece: str) -> str | None:
        """The open value grows by ``piece`` (escaped) while behind the text sent: once
        it passes that text the JSON extends it again, and the rest streams."""
        sent, at = _sent_tail(slot), slot.behind
        left = len(sent) - at
        if len(piece) < left:
            slot.behind = at + len(piece) if sent.startswith(piece, at) else -1
            return None
        slot.behind = -1
        if not sent.startswith(piece[:left], at):
            return None
        slot.extending, slot.extends_sent = True, True
        slot.extender_tail = slot.args[-_EXTENDER_TAIL:]
        out = piece[left:]
        slot.sent_tail += out
        return out or None

    def _final(self, slot: GlmSlot) -> str | None:
        """What the closed object adds at the call's end (None if it does not extend)."""
        self._read(slot)
        entries = slot.entries
        if not slot.sent_any:
            return "{" + ", ".join(entries) + "}"
        covered = len(slot.sent_entries)
        if covered >= len(entries) or slot.stale:
            return None
        sent_tail = _sent_tail(slot)
        rest = ", ".join(entries[covered:]) + "}"
        if len(rest) <= len(sent_tail) or not rest.startswith(sent_tail):
            return None
        piece = rest[len(sent_tail) :]
        slot.sent_entries = list(entries)
        slot.sent_tail = "}"
        return piece

    def _read(self, slot: GlmSlot) -> None:
        """Keep the pairs the body completed: a new entry, or a repeated key's new value."""
        for key, value in slot.scan.advance(slot.args):
            slot.version += 1
            entry = self._entry(slot.name, key, value)
            position = slot.positions.get(key)
            if position is None:
                slot.positions[key] = len(slot.entries)
                slot.keys.append(key)
                slot.entries.append(entry)
                continue
            if position < len(slot.sent_entries):
                sent = slot.sent_entries[position]
                slot.stale += (entry != sent) - (slot.entries[position] != sent)
            slot.entries[position] = entry

    def _body_arguments(self, slot: GlmSlot, name: str) -> str:
        self._read(slot)
        return "{" + ", ".join(slot.entries) + "}"


# ---------------------------------------------------------------------------- the family
# One declaration on the shared engine: the request's thinking switch picks the grammar.


def _grammars(_: str, vocab: Vocabulary) -> GlmGrammars:
    return GlmGrammars(vocab)


def _thinking(options: ParseOptions) -> bool:
    return thinking_from_kwargs(options.chat_template_kwargs)


def _reasoning(grammars: GlmGrammars, request: Request) -> EngineReasoning:
    return EngineReasoning(grammars.of(bool(request.thinking)), request.options)


def _reasoning_stream(
    grammars: GlmGrammars, request: Request, kept: object
) -> tuple[EngineReasoning, EngineReasoningState]:
    state = reuse(kept, EngineReasoningState)
    markers = grammars.of(bool(request.thinking))
    return EngineReasoning(markers, request.options, state), state


def _grammar_of(grammars: GlmGrammars, request: Request) -> ThinkMarkers:
    """The grammar of the request's thinking switch."""
    return grammars.of(bool(request.thinking))


_tools, _tools_stream = tool_builders(GlmTools, _grammar_of)


FAMILY = Family(
    title="GLM-4.5, GLM-4.7, Ling 3",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("glm45", "glm47", "ling3"),
            engine_based=True,
            states=(EngineReasoningState,),
            thinking=_thinking,
            prepare=_grammars,
            one_shot=_reasoning,
            stream=_reasoning_stream,
            golden=("Z1", "W1"),
        ),
    ),
    tools=(
        Tools(
            names=("glm45", "glm47", "ling3"),
            engine_based=True,
            states=(GlmToolState,),
            thinking=_thinking,
            prepare=_grammars,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("Z1", "W1"),
        ),
    ),
)
