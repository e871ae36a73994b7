"""Streaming for forced tool choice, where the output is the call itself.

With a named ``tool_choice`` every character is argument text of that one call;
with ``required`` the output is a JSON array of ``{"name", "parameters"}``
objects. vLLM uses these for tool parsers that support them (``xlam``,
``pythonic``); the others read their native format instead.
"""

from __future__ import annotations

import json

from msgspec import Struct, field

from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall


def named_call_delta(text: str, name: str, announced: bool, id_seed: str) -> Delta:
    """The whole delta is arguments of the named call; the first one carries its id."""
    if announced:
        return Delta(tool_calls=[DeltaToolCall(index=0, arguments=text)])
    return Delta(tool_calls=[opening_call_delta(id_seed, 0, name, text)])


class Span(Struct):
    """One array element: its name once closed, and where its parameters sit."""

    name: str | None = None
    name_end: int = -1
    args_start: int = -1
    args_end: int = -1

    @property
    def ready(self) -> bool:
        return self.name is not None and self.args_start >= 0

    def ready_at(self, length: int) -> bool:
        return self.ready and 0 <= self.name_end <= length and self.args_start < length


# Scanner expectations inside an element object.
_KEY, _COLON, _VALUE, _STRING, _CONTAINER, _SCALAR, _AFTER = range(7)


class RequiredState(Struct, tag="required"):
    # The output so far, grown a chunk at a time (never copied whole per chunk).
    text: GrowingText = field(default_factory=GrowingText)
    spans: list[Span] = field(default_factory=list)
    scanned: int = 0
    stopped: bool = False
    depth: int = 0
    element_open: bool = False
    in_string: bool = False
    escaped: bool = False
    string_start: int = 0
    expect: int = _KEY
    key: str | None = None
    value_start: int = 0
    # Leading elements whose arguments are all sent: later chunks have nothing for them.
    settled: int = 0
    announced: bool = False


class RequiredCalls:
    """``tool_choice: required``: stream each element once its name is complete.

    The element scan is prefix-stable, so it runs once over each new character.
    """

    def __init__(self, id_seed: str, state: RequiredState) -> None:
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str) -> tuple[Delta | None, bool]:
        """The delta, and whether any call has been announced so far."""
        s = self.s
        sent = len(s.text)
        s.text.append(text)
        if not s.text:
            return None, False
        # The scan only ever changes the last element and adds new ones.
        changed = max(len(s.spans) - 1, 0)
        self._scan()
        s.announced = s.announced or any(span.ready for span in s.spans[changed:])
        current = s.text
        calls: list[DeltaToolCall] = []
        for index in range(s.settled, len(s.spans)):
            span = s.spans[index]
            if not span.ready:
                break
            end = span.args_end if span.args_end >= 0 else len(current)
            if span.ready_at(sent):
                new = current[min(end, sent) : end]
                if new:
                    calls.append(DeltaToolCall(index=index, arguments=new))
            else:
                calls.append(
                    opening_call_delta(
                        self.id_seed, index, span.name, current[span.args_start : end]
                    )
                )
            if index == s.settled and span.args_end >= 0:
                s.settled += 1
        return (Delta(tool_calls=calls) if calls else None), s.announced

    def _scan(self) -> None:
        """Read what was added since the last scan (a slice of the new text only)."""
        s = self.s
        text = s.text
        for i, ch in enumerate(text[s.scanned :], s.scanned):
            if s.stopped:
                break
            self._char(text, i, ch)
        s.scanned = len(text)

    def _end_value(self, text: GrowingText, pos: int) -> None:
        s = self.s
        span = s.spans[-1]
        if s.key == "parameters":
            span.args_end = pos
        elif s.key == "name" and s.expect == _STRING:
            try:
                span.name, span.name_end = json.loads(text[s.value_start : pos]), pos
            except ValueError:
                span.name = None
        s.expect = _AFTER

    def _start_value(self, pos: int, expect: int) -> None:
        s = self.s
        s.value_start = pos
        if s.key == "parameters":
            s.spans[-1].args_start = pos
        s.expect = expect

    def _char(self, text: GrowingText, i: int, ch: str) -> None:
        s = self.s
        in_element = s.depth == 2 and s.element_open
        if s.in_string:
            if s.escaped:
                s.escaped = False
            elif ch == "\\":
                s.escaped = True
            elif ch == '"':
                s.in_string = False
                if in_element:
                    if s.expect == _KEY:
                        s.key, s.expect = text[s.string_start + 1 : i], _COLON
                    elif s.expect == _STRING:
                        self._end_value(text, i + 1)
            return
        if ch == '"':
            s.in_string, s.string_start = True, i
            if in_element and s.expect == _VALUE:
                self._start_value(i, _STRING)
            return
        if ch in "{[":
            if s.depth == 0 and ch != "[":
                s.stopped = True
                return
            if s.depth == 1:
                if ch != "{":
                    s.stopped = True
                    return
                s.spans.append(Span())
                s.element_open = True
                s.expect, s.key = _KEY, None
            elif in_element and s.expect == _VALUE:
                self._start_value(i, _CONTAINER)
            s.depth += 1
            return
        if ch in "}]":
            if in_element and s.expect == _SCALAR:
                self._end_value(text, i)
            s.depth -= 1
            if s.depth == 2 and s.element_open and s.expect == _CONTAINER:
                self._end_value(text, i + 1)
            elif s.depth == 1:
                s.element_open = False
            elif s.depth <= 0:
                s.stopped = True
            return
        if not in_element:
            return
        if ch == ":":
            if s.expect == _COLON:
                s.expect = _VALUE
        elif ch == ",":
            if s.expect == _SCALAR:
                self._end_value(text, i)
            s.expect, s.key = _KEY, None
        elif ch.isspace():
            if s.expect == _SCALAR:
                self._end_value(text, i)
        elif s.expect == _VALUE:
            self._start_value(i, _SCALAR)
