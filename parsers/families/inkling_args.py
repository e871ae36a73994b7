"""How vLLM 0.33.0 reads an Inkling call body's ``args`` member, kept as the body grows.

An Inkling call body is ``{"name": ..., "args": {...}}``. vLLM's engine carves the
``args`` object out of the body as written (a verbatim span, possibly unterminated) and,
after every character, streams the part of it later text cannot change: up to the last
top-level key's colon, and the open text of a string value where the tool's schema
allows only strings. It reads the whole body again each time; ``ArgsReading`` reads each
character once and answers the same questions from what it kept.
"""

from __future__ import annotations

from typing import ClassVar

from msgspec import Struct

from parsers.growing_text import Text

_WS = " \t\r\n"
ARGS_KEY = "args"

# Phases.
SEARCH = "search"  # the member's key and colon not yet read
VALUE = "value"  # after the colon: whitespace until the value starts
OBJECT = "object"  # inside the args object
DONE = "done"  # the args object closed
NOT_OBJECT = "not_object"  # the member's value is no object: nothing is ever carved

# What follows the last top-level colon of the args object.
AFTER_WS = "ws"
AFTER_STRING = "string"
AFTER_OTHER = "other"


class ArgsReading(Struct):
    """The reading of one body; positions count from the body's start. ``member`` is
    the key whose object is carved out (Granite's calls name it ``arguments``)."""

    member: ClassVar[str] = ARGS_KEY

    phase: str = SEARCH
    pos: int = 0  # characters read
    in_string: bool = False
    escape: bool = False
    string_start: int = -1
    # The body's top level (SEARCH): depth, and whether the last string closed there is
    # the member's key.
    depth: int = 0
    after_key: bool = False
    # The args object: where it starts and ends, its depth in braces (its end) and in
    # braces and brackets (its top level).
    start: int = -1
    end: int = -1
    braces: int = 0
    level: int = 0
    # Its last top-level string (a key, once a colon follows), the last top-level colon,
    # its key, and what follows it: where its whitespace ends and its string closes.
    pending_key: str | None = None
    colon: int = -1
    key: str | None = None
    after: str = AFTER_WS
    value_at: int = -1
    value_close: int = -1

    def read(self, body: Text, text: str, base: int, *, stop_before_end: bool = False) -> int:
        """Read ``text`` (the body's characters from ``base``); returns where reading
        stopped: the text's end, or with ``stop_before_end`` the character that would
        close the args object."""
        size = len(text)
        if self.phase in (DONE, NOT_OBJECT):
            return base + size
        i = max(self.pos - base, 0)
        while i < size and self.phase not in (DONE, NOT_OBJECT):
            at = base + i
            ch = text[i]
            if self.phase == OBJECT:
                closes = ch == "}" and not self.in_string and not self.escape and self.braces == 1
                if closes and stop_before_end:
                    self.pos = at
                    return at
                self._object_char(body, ch, at)
            elif self.phase == SEARCH:
                self._search_char(body, ch, at)
            elif ch not in _WS:  # VALUE
                if ch != "{":
                    self.phase = NOT_OBJECT
                else:
                    self.phase, self.start, self.braces, self.level = OBJECT, at, 1, 1
            i += 1
        self.pos = max(self.pos, base + i)
        return base + size

    def _string_char(self, ch: str) -> bool:
        """Whether ``ch`` continues or closes an open string (False: it is outside one)."""
        if self.escape:
            self.escape = False
            return True
        if not self.in_string:
            return False
        if ch == "\\":
            self.escape = True
        elif ch == '"':
            self.in_string = False
        return True

    def _search_char(self, body: Text, ch: str, at: int) -> None:
        if self._string_char(ch):
            if not self.in_string and self.depth == 1:
                length = at - self.string_start - 1
                member = self.member
                self.after_key = (
                    length == len(member) and body[self.string_start + 1 : at] == member
                )
            return
        if ch == '"':
            self.in_string, self.string_start = True, at
        elif ch == ":" and self.depth == 1 and self.after_key:
            self.phase = VALUE
        elif ch in "{[":
            self.depth += 1
        elif ch in "}]":
            self.depth -= 1

    def _object_char(self, body: Text, ch: str, at: int) -> None:
        if self.colon >= 0 and self.after == AFTER_WS and ch not in _WS:
            self.value_at = at
            self.after = AFTER_STRING if ch == '"' and not self.in_string else AFTER_OTHER
        if self._string_char(ch):
            if not self.in_string and self.level == 1:
                self.pending_key = body[self.string_start + 1 : at]
                if self.after == AFTER_STRING and self.value_close < 0:
                    self.value_close = at
            return
        if ch == '"':
            self.in_string, self.string_start = True, at
        elif ch == "{":
            self.braces += 1
            self.level += 1
        elif ch == "[":
            self.level += 1
        elif ch == "]":
            self.level -= 1
        elif ch == "}":
            self.level -= 1
            self.braces -= 1
            if self.braces == 0:
                self.phase, self.end = DONE, at + 1
        elif ch == ":" and self.level == 1:
            self.colon, self.key, self.pending_key = at, self.pending_key, None
            self.after, self.value_at, self.value_close = AFTER_WS, -1, -1

    def span_end(self) -> int:
        """Where the carved text ends (the object's end, else what was read)."""
        return self.end if self.phase == DONE else self.pos

    def safe_end(self, string_keys: list[str] | None) -> int:
        """Where the part later text cannot change ends (``start``: none of it)."""
        if self.colon < 0:
            return self.start
        if self.after == AFTER_WS:
            return self.span_end()
        if self.after == AFTER_OTHER:
            return self.value_at
        if string_keys is not None and self.key not in string_keys:
            return self.value_at
        return self.value_close if self.value_close >= 0 else self.span_end()


def safe_prefix(arguments: str, string_keys: list[str] | None) -> str:
    """The same part of a whole arguments object written out again (schema-typed)."""
    reading = ArgsReading(phase=OBJECT, start=0, braces=1, level=1, pos=1)
    reading.read(arguments, arguments, 0)
    return arguments[: reading.safe_end(string_keys)]


def member_arguments(raw: str, reading_type: type[ArgsReading] = ArgsReading) -> str | None:
    """One-shot: the member's object as written, ``{}`` without one, None when the
    member is no object (vLLM then reads the body as JSON)."""
    reading = reading_type()
    reading.read(raw, raw, 0)
    if reading.phase == NOT_OBJECT:
        return None
    if reading.phase in (SEARCH, VALUE):
        return "{}"
    return raw[reading.start : reading.span_end()]
