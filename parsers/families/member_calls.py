"""Calls whose body is a JSON object naming the function and holding its arguments in
one member (Inkling's ``{"name": ..., "args": {...}}``, Granite's ``"arguments"``), on the
marker engine, streamed as vLLM's engine streams them.

vLLM carves the member's object out of the body as written and, after every character,
sends the part of it later text cannot change (parsers/families/inkling_args.py reads
that once per character); a closing bracket that may end the body waits for the next
character; once the object closes it is typed by the tool's schema, and where that
writes it out again differently the rest no longer extends what was sent.
"""

from __future__ import annotations

from typing import Any, TypeVar

from msgspec import field

from parsers.engine.core import Event
from parsers.engine.tools import BodyTools, CallSlot, EngineToolState, json_name, name_and_arguments
from parsers.families.hermes import KeyMatch
from parsers.families.inkling_args import (
    DONE,
    NOT_OBJECT,
    OBJECT,
    ArgsReading,
    member_arguments,
    safe_prefix,
)
from parsers.families.kimi_k2 import JsonHold
from parsers.readers.schema import coerce_arguments
from parsers.types import DeltaToolCall


class MemberSlot(CallSlot):
    """One call: its body as written, the body's ``"name"`` search, the bracket vLLM
    holds back, the member's reading, and what of the arguments was sent."""

    json_name: KeyMatch = field(default_factory=KeyMatch)
    hold: JsonHold = field(default_factory=JsonHold)
    reading: ArgsReading = field(default_factory=ArgsReading)
    sent: int = 0  # arguments sent: a prefix this long of the args text (or of ``typed``)
    typed: str | None = None  # the closed args object typed by the schema, where that moved it
    settled: bool = False  # the closed object was compared with what was sent


MemberSlotT = TypeVar("MemberSlotT", bound=MemberSlot)
StateT = TypeVar("StateT", bound=EngineToolState[Any])


class MemberTools(BodyTools[MemberSlotT, StateT]):
    """The streaming and one-shot reading of such calls; a format names its slot (with
    its member's reading) and state types."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._keys_by_name: dict[str, list[str] | None] = {}

    def _string_keys(self, name: str) -> list[str] | None:
        """The tool's string-only keys, read once per name (asked after every chunk)."""
        if name not in self._keys_by_name:
            self._keys_by_name[name] = super()._string_keys(name)
        return self._keys_by_name[name]

    # ------------------------------------------------------------------ streaming

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        slot = self._slot(event.call)
        released = slot.hold.feed(event.value)
        if released:
            self._take(event.call, slot, released, calls)

    def _take(self, index: int, slot: MemberSlotT, text: str, calls: list[DeltaToolCall]) -> None:
        """Released body text, read as vLLM reads it a character at a time: the name
        once its value closes (that character sends the name alone), then after every
        later character the arguments, whole once the args object closes."""
        base = len(slot.args)
        end = base + len(text)
        slot.args.append(text)
        reading = slot.reading
        start = base  # the first character after which the arguments are read
        if not slot.name_sent:
            name = json_name(slot.args, slot.json_name)
            if name is None:
                reading.read(slot.args, text, base)
                return
            start = slot.json_name.value_end + 1
            calls.append(self._announce(index, slot, name, None))
        closing = reading.read(slot.args, text, base, stop_before_end=True)
        if start <= closing < end:
            # The arguments as they stood before the closing character, then whole.
            if closing > start:
                self._send(index, slot, calls)
            reading.read(slot.args, text, base)
            self._send(index, slot, calls)
            return
        reading.read(slot.args, text, base)
        if end > start:
            self._send(index, slot, calls)

    def _sent_text(self, slot: MemberSlotT) -> str:
        if not slot.sent:
            return ""
        if slot.typed is not None:
            return slot.typed[: slot.sent]
        start = slot.reading.start
        return slot.args[start : start + slot.sent]

    def _send(self, index: int, slot: MemberSlotT, calls: list[DeltaToolCall]) -> None:
        """The arguments after a character: what extends those sent, if anything."""
        reading = slot.reading
        if reading.phase not in (OBJECT, DONE) or slot.settled:
            return
        string_keys = self._string_keys(slot.name)
        if reading.phase == OBJECT:
            end = reading.safe_end(string_keys) - reading.start
            if end > slot.sent:
                start = reading.start
                calls.append(
                    DeltaToolCall(index=index, arguments=slot.args[start + slot.sent : start + end])
                )
                slot.sent = end
            return
        # The object closed: it is read whole and typed; later characters change nothing.
        slot.settled = True
        span = slot.args[reading.start : reading.end]
        typed = coerce_arguments(span, self._properties(slot.name)) if self.options.tools else span
        if typed == span:
            end = reading.safe_end(string_keys) - reading.start
            safe = span[:end]
        else:
            safe = safe_prefix(typed, string_keys)
        sent = self._sent_text(slot)
        if not safe or not safe.startswith(sent):
            return
        if typed != span:
            slot.typed = typed
        if len(safe) > slot.sent:
            calls.append(DeltaToolCall(index=index, arguments=safe[slot.sent :]))
        slot.sent = len(safe)

    def _ending(self, index: int, slot: MemberSlotT, calls: list[DeltaToolCall]) -> str | None:
        """The held bracket goes out, then what the whole reading adds to those sent."""
        released = slot.hold.release()
        if released:
            self._take(index, slot, released, calls)
        reading = slot.reading
        if reading.phase == NOT_OBJECT:
            return None
        if reading.phase == DONE:
            final = slot.typed if slot.typed is not None else slot.args[reading.start : reading.end]
            if slot.typed is None and slot.name and self.options.tools:
                final = coerce_arguments(final, self._properties(slot.name))
        elif reading.phase == OBJECT:
            final = slot.args[reading.start : reading.pos]
        else:
            final = "{}"
        if len(final) <= slot.sent:
            return None
        sent = self._sent_text(slot)
        if sent and not final.startswith(sent):
            return None
        rest = final[slot.sent :]
        slot.sent = len(final)
        return rest

    # ------------------------------------------------------------------ one-shot

    def _body_arguments(self, slot: MemberSlotT, name: str) -> str:
        raw = slot.args.text()
        arguments = member_arguments(raw, type(slot.reading))
        if arguments is None:
            arguments = name_and_arguments(raw, self.argument_keys)[1]
        return coerce_arguments(arguments, self._properties(name))
