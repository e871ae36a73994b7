"""Where text first is one JSON value by Rust's ``serde_json`` rules, read incrementally.

Cohere's output filter (a Rust package vLLM runs) ends a call's parameters at the first
prefix ``serde_json`` parses. Its rules are stricter than Python's ``json.loads``, which
``jsonscan`` follows: no ``NaN`` or ``Infinity``, no number out of a double's range, no
unpaired UTF-16 surrogate escape, no nesting 128 deep, only JSON's four white space
characters. This reader feeds ``jsonscan``'s scanner and adds those checks, one character
at a time, so finding the end costs the text's length once.
"""

from __future__ import annotations

import math

from msgspec import Struct, field

from parsers.readers.jsonscan import (
    FIRST_ITEM,
    MINUS,
    NUMBER_PHASES,
    UNICODE,
    VALUE,
    WS,
    JsonScanner,
    JsonScanState,
)

MAX_DEPTH = 127  # serde_json's recursion limit (128) counts the value it is in
_HIGH = range(0xD800, 0xDC00)
_LOW = range(0xDC00, 0xE000)


class SerdeJsonState(Struct, tag="serde_json"):
    scan: JsonScanState = field(default_factory=JsonScanState)
    failed: bool = False
    number: str = ""  # the number being read, to check its range at its end
    hex: str = ""  # a \\u escape's digits so far
    low_owed: str = ""  # after a high surrogate: what of "\\u" + a low one is still owed


class SerdeJson:
    """Feed characters; ``end`` says where the text first was one whole value."""

    def __init__(self, state: SerdeJsonState) -> None:
        self.s = state
        self.scanner = JsonScanner(state.scan)

    def first_end(self, text: str, start: int = 0) -> int:
        """Feed ``text`` from ``start`` up to where all fed so far is one JSON value;
        where in ``text`` that is, or -1 (all of it fed) when it is not yet (or never
        will be). A start spares the caller a copy of the rest of its text."""
        for at in range(start, len(text)):
            if self.s.failed:
                return -1
            self._feed(text[at])
            if self._complete():
                return at + 1
        return -1

    def _complete(self) -> bool:
        s = self.s
        if s.failed or not self.scanner.complete:
            return False
        return not s.number or _in_range(s.number)

    def _feed(self, char: str) -> None:
        s = self.s
        scan = s.scan
        before = scan.phase
        if not scan.started and char.isspace() and char not in WS:
            s.failed = True
            return
        if char in "NI" and before in (VALUE, FIRST_ITEM, MINUS):
            s.failed = True  # NaN, Infinity, -Infinity
            return
        if s.low_owed and not self._owed(char, before):
            s.failed = True
            return
        self.scanner.feed(char)
        after = scan.phase
        if self.scanner.failed or len(scan.stack) > MAX_DEPTH:
            s.failed = True
            return
        self._number(char, before, after)
        if after == UNICODE or before == UNICODE:
            self._escape(char, before, after)

    def _owed(self, char: str, before: str) -> bool:
        """Whether ``char`` goes on with the low surrogate a high one asks for."""
        s = self.s
        if before == UNICODE:
            return True
        if s.low_owed == "\\u":
            if char != "\\":
                return False
            s.low_owed = "u"
            return True
        if char != "u":
            return False
        s.low_owed = "low"
        return True

    def _number(self, char: str, before: str, after: str) -> None:
        s = self.s
        if after in NUMBER_PHASES:
            s.number += char
            return
        if before in NUMBER_PHASES and s.number:
            if not _in_range(s.number):
                s.failed = True
            s.number = ""

    def _escape(self, char: str, before: str, after: str) -> None:
        s = self.s
        if before != UNICODE:
            s.hex = ""  # the 'u' that opened it
            return
        s.hex += char
        if after == UNICODE:
            return
        code = int(s.hex, 16)
        s.hex = ""
        if s.low_owed == "low":
            s.low_owed = ""
            if code not in _LOW:
                s.failed = True
        elif code in _HIGH:
            s.low_owed = "\\u"
        elif code in _LOW:
            s.failed = True


def _in_range(number: str) -> bool:
    return math.isfinite(float(number))
