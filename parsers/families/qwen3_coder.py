"""``qwen3_coder`` tool calls: ``<function=NAME>`` with ``<parameter=K>V</parameter>``.

The marker engine turns text into call events; this layer turns call events into
tool-call deltas as vLLM's engine parser does: the name once known, then the JSON
of the parameters (coerced to the tool's schema) as a growing prefix. Parameters
are scanned once per character and kept as JSON entries; a string value still
being written streams through an extender that escapes each new piece, and a
parameter boundary costs what it changed, never a pass over the whole body
(model output is untrusted). A one-shot parse is the same machinery fed the whole
content at once.

Where vLLM's stream depends on where chunks end, every chunking here sends the
same arguments: what is sent is decided at each parameter end, a tag still being
spelled (``< parameter =``) is held back from the open value, and a repeated key
open inside the JSON sends nothing until it ends (docs/parity.md).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from typing import Any, Protocol, TypeVar

from msgspec import Struct, field

from parsers.engine.core import (
    Event,
)
from parsers.engine.tools import (
    BodyTools,
    CallSlot,
    EngineToolState,
    entry_head,
    json_name,
    tool_builders,
)
from parsers.families.hermes import KeyMatch
from parsers.families.qwen3 import Qwen3Grammar
from parsers.family import Family, Tools
from parsers.growing_text import Text
from parsers.readers.schema import coerce_arguments
from parsers.types import DeltaToolCall

_WORD = "parameter"
# TagScan steps besides the word's progress (1..9 characters matched).
_AFTER_LT, _AFTER_SLASH = -1, -2
# ParamScan phases.
_SEEK_OPEN, _SEEK_NAME_END, _SEEK_VALUE_END = 0, 1, 2
# How an open value's text reaches the client (OpenValue.mode).
_SENDS, _BEHIND, _SILENT = 0, 1, 2


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

    def next_parameter(self, raw: Text) -> tuple[str, str] | None:
        """The next parameter ``raw`` completes (name, trimmed value); None when no more."""
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
            completed = None
            if self.phase == _SEEK_VALUE_END:
                name = raw[self.name_start : self.name_end].lstrip()
                completed = name, self._value(raw[self.name_end + 1 : start])
            if tag.closing:
                self.phase = _SEEK_OPEN
            else:
                self.phase, self.name_start = _SEEK_NAME_END, pos
            if completed is not None:
                self.scanned = pos
                return completed
        self.scanned = pos
        return None

    def _value(self, value: str) -> str:
        """A completed value as the format's converter keeps it."""
        return _trim_wrapping_newlines(value)

    def open_name(self, raw: Text) -> str | None:
        """The name of the unterminated last parameter, if it has one.

        Its value starts past ``name_end``; a whitespace name keeps its last character,
        as vLLM's open-parameter pattern reads it.
        """
        if self.phase != _SEEK_VALUE_END or self.name_end == self.name_start:
            return None
        spelled = raw[self.name_start : self.name_end]
        return spelled.lstrip() or spelled[-1]

    def settled(self) -> int:
        """How far the scanned text is final: up to a tag still being spelled.

        Such text (``<``, ``</ para``...) may yet end the open value, or turn out to be
        part of it: it is held back until it does one or the other.
        """
        return self.tag.start if self.tag.start >= 0 else self.scanned


class OpenValue(Struct):
    """The open parameter's value: how far it was read, and how its text reaches the client.

    ``SENDS``: its JSON-escaped text streams as it comes. ``BEHIND``: the same key's
    earlier value was sent and this one has matched ``matched`` characters of what
    was sent so far; it streams once it passes that. ``SILENT``: nothing of it can
    be sent before the parameter ends.
    """

    read_to: int  # the body position its text was read up to
    mode: int = _SILENT
    matched: int = 0
    started: bool = False
    held: str = ""  # a trailing newline, which may be the template's markup
    # Pieces streamed past the sent head, joined to it when the value ends (appending
    # to a long string held by a struct copies it every time).
    sent: list[str] = field(default_factory=list)


def read_value(value: OpenValue, raw: Text, end: int, *, trim: bool = True) -> str:
    """The JSON-escaped text ``raw[value.read_to:end]`` adds to the open value; with
    ``trim``, one leading newline dropped and a trailing one held (they may be the
    template's)."""
    text = value.held + raw[value.read_to : end]
    value.read_to = end
    if not trim:
        return json.dumps(text, ensure_ascii=False)[1:-1]
    if not value.started and text:
        value.started = True
        text = text.removeprefix("\n")
    value.held = "\n" if text.endswith("\n") else ""
    text = text[: len(text) - len(value.held)]
    return json.dumps(text, ensure_ascii=False)[1:-1]


class ParamScanner(Protocol):
    """A format's parameter syntax, matched once per character as a call body grows."""

    @property
    def name_end(self) -> int:
        """Where the open parameter's head ends (its value starts just past it)."""
        ...

    def next_parameter(self, raw: Text) -> tuple[str, str] | None: ...

    def open_name(self, raw: Text) -> str | None: ...

    def settled(self) -> int: ...


class ParamSlot(CallSlot):
    """One call: its name, raw body, parameters so far, and what of their JSON was sent.

    The arguments JSON is ``{`` + entries joined by ``, `` + ``}``, one ``"key": value``
    entry per parameter (a repeated key keeps its first place, takes the last
    value). What was sent is kept as the entries it covers plus the head of the
    next one, so checking that new JSON still extends it costs only what changed.
    """

    string_keys: list[str] | None = None
    json_name: KeyMatch = field(default_factory=KeyMatch)
    names: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    coerced_as: str = ""  # the call name the entries were typed for
    sent_entries: list[str] = field(default_factory=list)  # entries the sent text covers
    sent_tail: str = ""  # sent text past them: the head of the next entry (+ open_value.sent)
    sent_final: bool = False  # the closed object was sent: nothing can follow
    stale: int = 0  # covered entries that no longer read as they were sent
    tail_ok: bool = True  # the entry after the covered ones still starts as sent_tail
    open_value: OpenValue | None = None


class Slot(ParamSlot):
    """A Qwen3-Coder call: ``<parameter=K>`` parameters."""

    scan: ParamScan = field(default_factory=ParamScan)


SlotT = TypeVar("SlotT", bound=ParamSlot)
StateT = TypeVar("StateT", bound=EngineToolState[Any])


class Qwen3CoderState(EngineToolState[Slot], tag="qwen3_coder"): ...


class ParamTools(BodyTools[SlotT, StateT]):
    """XML-style calls whose body is parameters read as strings (Qwen3-Coder, MiniMax):
    the JSON of the parameters, typed by the tool's schema, streamed as a growing
    prefix. A format says how parameters are spelled (``_scan``), whether a value's
    wrapping newlines are markup, and which call names it accepts."""

    # One leading and one trailing newline of a value belong to the template.
    trims_newlines = True
    # Names absent from the request's tools are not calls (when it has tools).
    validates_names = False

    @abstractmethod
    def _scan(self, slot: SlotT) -> ParamScanner:
        """The slot's parameter scanner."""

    def _accepts(self, name: str) -> bool:
        """Whether a call of this name is one (vLLM checks names against the tools)."""
        if not name:
            return False
        if not self.validates_names or not self.options.tools:
            return True
        return self.options.tool(name) is not None

    def _trimmed(self, value: str) -> str:
        return _trim_wrapping_newlines(value) if self.trims_newlines else value

    # ------------------------------------------------------------------ format hooks

    def _named(self, slot: SlotT, name: str) -> None:
        slot.string_keys = self._string_keys(name)

    def _announce_name(
        self, index: int, slot: SlotT, calls: list[DeltaToolCall], name: str | None
    ) -> None:
        """The name, once read, opens the call (if it is one): no arguments with it yet."""
        if name is not None and self._accepts(name):
            calls.append(self._announce(index, slot, name, None))

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        index = event.call
        slot = self._grow(event)
        if not slot.name_sent:
            if slot.name:
                self._announce_name(index, slot, calls, slot.name)
            elif event.value:
                self._announce_name(index, slot, calls, json_name(slot.args, slot.json_name))
            if not slot.name_sent:
                return
        elif not event.value:
            return
        piece = self._argument_delta(slot)
        if piece:
            calls.append(DeltaToolCall(index=index, arguments=piece))

    def _ending(self, index: int, slot: SlotT, calls: list[DeltaToolCall]) -> str | None:
        # A tag still being spelled when the call ends never ends the value: it is text.
        released = self._read_open(slot, len(slot.args)) if slot.name_sent else None
        remaining = self._final_arguments(slot)
        if released:
            return released + (remaining or "")
        return remaining

    # ------------------------------------------------------------------ arguments

    def _argument_delta(self, slot: SlotT) -> str | None:
        """The arguments text the body's new text adds, as vLLM's engine streams it.

        The JSON is re-derived where it can change, and only from what changed: at
        each parameter the text completes, then for the open one; in between, the open
        value's text streams as its OpenValue says. Deciding at every parameter end,
        not only where a chunk happens to end, is what makes every chunking send the
        same arguments (vLLM decides per chunk, see docs/parity.md).
        """
        if slot.sent_final:
            return None
        self._retype(slot)
        pieces: list[str] = []
        scan = self._scan(slot)
        while (parameter := scan.next_parameter(slot.args)) is not None:
            self._record(slot, *parameter)
            pending = slot.entries[len(slot.sent_entries) :] if self._extends(slot) else None
            if pending:
                head, _ = entry_head(pending[-1], slot.names[-1], slot.string_keys)
                pieces.append(self._send(slot, pending, head))
        name = scan.open_name(slot.args)
        if name is not None:
            opened = slot.open_value is None
            piece = self._open(slot, name) if opened else self._read_open(slot, scan.settled())
            if piece:
                pieces.append(piece)
        return "".join(pieces) or None

    def _open(self, slot: SlotT, name: str) -> str | None:
        """What the JSON with a newly open parameter adds; how its value goes on from there.

        A repeated key keeps its first place, so while it is open again its value sits
        inside the JSON, not at its end: unless it is the last entry, nothing is sent
        until it ends. Its text read in the meantime changes nothing that can be sent.
        """
        scan = self._scan(slot)
        value = OpenValue(scan.name_end + 1)
        slot.open_value = value
        position = slot.positions.get(name, len(slot.entries))
        last = len(slot.entries) - 1
        if position < last or slot.stale:
            return None
        raw = slot.args[value.read_to : scan.settled()]
        read_value(value, slot.args, scan.settled(), trim=self.trims_newlines)
        entry = self._entry(slot.name, name, self._trimmed(raw))
        head, streams = entry_head(entry, name, slot.string_keys)
        covered = len(slot.sent_entries)
        if position == covered and slot.sent_tail:  # the same key's head was sent last
            if head.startswith(slot.sent_tail):
                piece = head[len(slot.sent_tail) :]
                slot.sent_tail = head
            elif streams and slot.sent_tail.startswith(head):
                value.mode, value.matched = _BEHIND, len(head)
                return None
            else:
                return None
        elif not slot.tail_ok:
            return None
        else:
            pending = slot.entries[covered : min(position, last + 1)]
            piece = self._send(slot, [*pending, entry], head)
        if streams:
            value.mode = _SENDS
        return piece

    def _read_open(self, slot: SlotT, end: int) -> str | None:
        """The JSON-escaped text the open value adds up to ``end``, if it is sent."""
        value = slot.open_value
        if value is None or value.mode == _SILENT:
            return None
        text = read_value(value, slot.args, end, trim=self.trims_newlines)
        if not text:
            return None
        if value.mode == _BEHIND:
            sent, left = slot.sent_tail, len(slot.sent_tail) - value.matched
            if len(text) <= left:
                if sent.startswith(text, value.matched):
                    value.matched += len(text)
                else:
                    value.mode = _SILENT
                return None
            if not sent.startswith(text[:left], value.matched):
                value.mode = _SILENT
                return None
            value.mode, text = _SENDS, text[left:]
        value.sent.append(text)
        return text

    def _final_arguments(self, slot: SlotT) -> str | None:
        """What the closed object adds to the arguments sent (None if it does not extend them)."""
        self._complete(slot)
        self._close_open_value(slot)
        covered = len(slot.sent_entries)
        if slot.sent_final or not self._extends(slot):
            return None
        if slot.sent_tail or covered:
            if covered >= len(slot.entries):
                return None
            piece = (", ".join(slot.entries[covered:]) + "}")[len(slot.sent_tail) :]
        else:
            piece = "{" + ", ".join(slot.entries) + "}"
        slot.sent_final = True
        return piece

    @staticmethod
    def _extends(slot: SlotT) -> bool:
        """Whether the entries now still read as what was sent (else nothing more is)."""
        return not slot.stale and slot.tail_ok

    @staticmethod
    def _send(slot: SlotT, pending: list[str], head: str) -> str:
        """Send the JSON of the entries past the covered ones, the last as ``head`` only.

        The caller has checked that it extends what was sent; returns what it adds.
        """
        rest = "".join(entry + ", " for entry in pending[:-1]) + head
        piece = rest[len(slot.sent_tail) :] if slot.sent_tail or slot.sent_entries else "{" + rest
        slot.sent_entries += pending[:-1]
        slot.sent_tail = head
        slot.tail_ok = True
        return piece

    def _complete(self, slot: SlotT) -> None:
        """Read the rest of the body's parameters, sending nothing in between."""
        self._retype(slot)
        while (parameter := self._scan(slot).next_parameter(slot.args)) is not None:
            self._record(slot, *parameter)

    def _record(self, slot: SlotT, name: str, value: str) -> None:
        """Keep a completed parameter: a new entry, or the new value of a repeated key."""
        self._close_open_value(slot)
        entry = self._entry(slot.name, name, value)
        position = slot.positions.get(name)
        if position is None:
            position = slot.positions[name] = len(slot.entries)
            slot.names.append(name)
            slot.values.append(value)
            slot.entries.append(entry)
        else:
            slot.values[position] = value
            if position < len(slot.sent_entries):
                sent = slot.sent_entries[position]
                slot.stale += (entry != sent) - (slot.entries[position] != sent)
            slot.entries[position] = entry
        if position == len(slot.sent_entries) and slot.sent_tail:
            slot.tail_ok = entry[:-1].startswith(slot.sent_tail)

    @staticmethod
    def _close_open_value(slot: SlotT) -> None:
        """The open value ended: what of it was streamed joins the sent head."""
        value = slot.open_value
        if value is None:
            return
        slot.open_value = None
        if value.sent:
            slot.sent_tail += "".join(value.sent)
            covered = len(slot.sent_entries)
            entries = slot.entries
            slot.tail_ok = covered < len(entries) and entries[covered][:-1].startswith(
                slot.sent_tail
            )

    def _retype(self, slot: SlotT) -> None:
        """Re-type every parameter when the call's name changed since they were typed."""
        if slot.coerced_as == slot.name:
            return
        slot.coerced_as = slot.name
        slot.entries = [
            self._entry(slot.name, name, value)
            for name, value in zip(slot.names, slot.values, strict=True)
        ]
        slot.stale = sum(
            entry != sent for entry, sent in zip(slot.entries, slot.sent_entries, strict=False)
        )
        covered = len(slot.sent_entries)
        if covered < len(slot.entries) and slot.sent_tail:
            slot.tail_ok = slot.entries[covered][:-1].startswith(slot.sent_tail)

    def _coerce(self, arguments: str, name: str) -> str:
        """Without tools (or a name) the body's arguments stay as written."""
        if not self.options.tools or not name:
            return arguments
        return coerce_arguments(arguments, self._properties(name))

    def _body_arguments(self, slot: SlotT, name: str) -> str:
        self._complete(slot)
        entries = slot.entries
        if name != slot.coerced_as:
            pairs = zip(slot.names, slot.values, strict=True)
            entries = [self._entry(name, key, value) for key, value in pairs]
        return "{" + ", ".join(entries) + "}"


class Qwen3CoderTools(ParamTools[Slot, Qwen3CoderState]):
    """Tool calls in Qwen3's XML format, streamed or one-shot."""

    def _scan(self, slot: Slot) -> ParamScan:
        return slot.scan


class VerbatimParamScan(ParamScan):
    """MiMo's reading of the same tags: a value keeps its wrapping newlines."""

    def _value(self, value: str) -> str:
        return value


class MiMoSlot(ParamSlot):
    """A MiMo call: Qwen3-Coder's parameters, values verbatim."""

    scan: VerbatimParamScan = field(default_factory=VerbatimParamScan)


class MiMoState(EngineToolState[MiMoSlot], tag="mimo"): ...


class MiMoTools(ParamTools[MiMoSlot, MiMoState]):
    """MiMo's calls: Qwen3-Coder's format, each value sent and kept as written (vLLM's
    MiMo converter and value extender do not trim the newlines around it)."""

    trims_newlines = False

    def _scan(self, slot: MiMoSlot) -> VerbatimParamScan:
        return slot.scan


class Step5Tools(Qwen3CoderTools):
    """Step-5 writes Qwen3-Coder's calls and keeps the whitespace of the content beside
    them, where Qwen3-Coder strips it."""

    strip_content_beside_calls = False
    drop_whitespace_beside_calls = False


# ------------------------------------------------------------------ the family


_tools, _stream = tool_builders(Qwen3CoderTools)
_step5_tools, _step5_stream = tool_builders(Step5Tools)
_mimo_tools, _mimo_stream = tool_builders(MiMoTools)


FAMILY = Family(
    title="Qwen3-Coder, Step-3.5, Step-5, MiMo (XML parameters)",
    tokenizer="bundled qwen3 (same vocabulary); the others: model directory",
    tools=(
        Tools(
            names=("qwen3_coder",),
            aliases={"qwen3_xml": "qwen3_coder", "step3p5": "qwen3_coder"},
            engine_based=True,
            states=(Qwen3CoderState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=_tools,
            stream=_stream,
            golden=("C3", "Q3", "N2", "A2", "M5"),
        ),
        Tools(
            names=("step5",),
            engine_based=True,
            states=(Qwen3CoderState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=_step5_tools,
            stream=_step5_stream,
            golden=("Q2",),
        ),
        Tools(
            names=("mimo",),
            engine_based=True,
            states=(MiMoState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=_mimo_tools,
            stream=_mimo_stream,
            golden=("W4",),
        ),
    ),
)
