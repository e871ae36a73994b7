"""Gemma 4's call arguments: ``key:value`` pairs, strings in ``<|"|>`` delimiters.

A call's body is ``location:<|"|>Paris<|"|>,days:3,opts:{unit:<|"|>C<|"|>},tags:[a,b]``:
keys run to the first ``:``, a value is a delimited string, an object, an array, or a
bare word up to ``,`` ``}`` ``]`` (kept as text; the tool's schema types it). vLLM reads
it with a recursive parser; this one keeps an explicit stack, and its choices are
vLLM's: an object's or array's extent is found by counting its own brackets (strings
skipped) and what lies inside is read apart; a value cut off by the end is read as
far as it goes ("partial"), except a bare word, which partial reading withholds (and a
bare word ending in ``.`` stops partial reading). The streaming reader
(``FieldScan``) finds the top-level pairs once per character as the body grows.
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct

from parsers.growing_text import Text

DELIM = '<|"|>'
_DELIM_LEN = len(DELIM)
_SEPARATORS = " ,\n\t"
_SPACES = " \n\t"
# Objects and arrays nested deeper than this keep their text (vLLM's recursive reader
# fails near a thousand levels; each level costs a pass over the text after it).
MAX_DEPTH = 16
# A nested value's own brackets and the strings inside it (skipped whole).
_OBJECT_MARKS = re.compile(r'<\|"\|>|[{}]')
_ARRAY_MARKS = re.compile(r'<\|"\|>|[\[\]]')
_FIELD_END = re.compile(r"[,}\]]")
_ITEM_END = re.compile(r"[,\]]")


def strip_partial_delim(value: str) -> str:
    """``value`` without a trailing start of ``<|"|>`` (it may still grow into one)."""
    for k in range(_DELIM_LEN - 1, 0, -1):
        if value.endswith(DELIM[:k]):
            return value[:-k]
    return value


def drop_closer(text: str, paren_excess: bool) -> str:
    """The body without its call's closer: a trailing ``}``, or ``)`` when there are more
    ``)`` than ``(`` (a value ending in one loses it until more text comes, as in vLLM)."""
    if text.endswith("}") or (text.endswith(")") and paren_excess):
        return text[:-1]
    return text


def extent(s: str, i: int, end: int, is_array: bool) -> tuple[int, bool]:
    """From just past an opener: where its bracket depth returns to zero (just past the
    closer) and whether it does before ``end``; strings are skipped whole. Text between
    strings is counted at once, and read bracket by bracket only where it may close."""
    opener, closer = ("[", "]") if is_array else ("{", "}")
    depth = 1
    while i < end:
        string = s.find(DELIM, i, end)
        stop = end if string < 0 else string
        closes = s.count(closer, i, stop)
        if closes < depth:
            depth += s.count(opener, i, stop) - closes
        else:
            for at in range(i, stop):
                ch = s[at]
                if ch == opener:
                    depth += 1
                elif ch == closer:
                    depth -= 1
                    if depth == 0:
                        return at + 1, True
        if string < 0:
            return end, False
        close = s.find(DELIM, string + _DELIM_LEN, end)
        if close < 0:
            return end, False
        i = close + _DELIM_LEN
    return end, False


class _Frame:
    """One object or array being read: its span of the text and what it holds so far."""

    __slots__ = ("depth", "end", "i", "is_array", "key", "open_key", "partial", "value")

    def __init__(self, start: int, end: int, is_array: bool, partial: bool, depth: int = 0) -> None:
        self.i, self.end, self.is_array, self.partial = start, end, is_array, partial
        self.depth = depth
        self.value: Any = [] if is_array else {}
        self.key = ""
        self.open_key: str | None = None

    def put(self, value: Any) -> None:
        if self.is_array:
            self.value.append(value)
        else:
            self.value[self.key] = value


def _nested(s: str, frame: _Frame, is_array: bool) -> _Frame | None:
    """The nested object or array at the frame's position, to be read next (None: too
    deep, its text kept as it is)."""
    start = frame.i + 1
    frame.i, closed = extent(s, start, frame.end, is_array)
    if frame.depth >= MAX_DEPTH:
        frame.put(s[start - 1 : frame.i])
        return None
    if closed:
        return _Frame(start, frame.i - 1, is_array, False, frame.depth + 1)
    return _Frame(start, frame.i, is_array, True, frame.depth + 1)


def _bare(s: str, frame: _Frame) -> bool:
    """A bare word at the frame's position; False when reading stops there."""
    ends = _ITEM_END if frame.is_array else _FIELD_END
    start = frame.i
    found = ends.search(s, start, frame.end)
    stop = found.start() if found is not None else frame.end
    if (frame.partial and stop >= frame.end) or stop == start:
        return False
    raw = s[start:stop].strip()
    if frame.partial and raw.endswith("."):
        return False  # digits may still come
    frame.put(raw)
    frame.i = stop
    return True


def _key(s: str, frame: _Frame) -> bool:
    """An object's next key and its value's start; False when reading stops there."""
    colon = s.find(":", frame.i, frame.end)
    if colon < 0:
        return False
    frame.key = _unwrap(s[frame.i : colon].strip())
    i = colon + 1
    while i < frame.end and s[i] in _SPACES:
        i += 1
    frame.i = i
    if i >= frame.end:
        if not frame.partial:
            frame.put("")
        return False
    return True


def _step(s: str, frame: _Frame) -> _Frame | None:
    """Read on until a nested value needs reading (given back) or the frame is done."""
    end = frame.end
    while True:
        i = frame.i
        while i < end and s[i] in _SEPARATORS:
            i += 1
        frame.i = i
        if i >= end or (not frame.is_array and not _key(s, frame)):
            frame.i = end
            return None
        i = frame.i
        if s.startswith(DELIM, i, end):
            close = s.find(DELIM, i + _DELIM_LEN, end)
            if close < 0:
                value = s[i + _DELIM_LEN : end]
                if frame.partial and not frame.is_array:
                    value = strip_partial_delim(value)
                frame.put(value)
                frame.open_key = None if frame.is_array else frame.key
                frame.i = end
                return None
            frame.put(s[i + _DELIM_LEN : close])
            frame.i = close + _DELIM_LEN
        elif s[i] in "{[":
            child = _nested(s, frame, s[i] == "[")
            if child is not None:
                return child
        elif not _bare(s, frame):
            frame.i = end
            return None


def read_fields(s: str, start: int, end: int, partial: bool) -> tuple[dict[str, Any], str | None]:
    """The object in ``s[start:end]`` and the key of a top-level string left open, if any."""
    top = _Frame(start, end, False, partial)
    stack = [top]
    while stack:
        child = _step(s, stack[-1])
        if child is not None:
            stack.append(child)
            continue
        done = stack.pop()
        if stack:
            stack[-1].put(done.value)
    fields: dict[str, Any] = top.value
    return fields, top.open_key


def read_nested(s: str, start: int, end: int, is_array: bool, partial: bool) -> Any:
    """The object or array in ``s[start:end]`` (its brackets excluded)."""
    frame = _Frame(start, end, is_array, partial)
    stack = [frame]
    while stack:
        child = _step(s, stack[-1])
        if child is not None:
            stack.append(child)
            continue
        done = stack.pop()
        if stack:
            stack[-1].put(done.value)
    return frame.value


def body_bounds(raw: str, opens: int, closes: int) -> tuple[int, int]:
    """Where the body the converter reads lies in ``raw``: stripped, its closer dropped."""
    start = len(raw) - len(raw.lstrip())
    end = len(raw.rstrip())
    if end > start and (raw[end - 1] == "}" or (raw[end - 1] == ")" and opens < closes)):
        end -= 1
    return start, max(start, end)


# ---------------------------------------------------------------------------- streaming

SEP, KEY, AFTER, STRING, NESTED, BARE, STOPPED = range(7)


class _Window:
    """The body's new text (and a few characters before it, where a delimiter may
    have started), read by absolute position; older text is sliced from the body."""

    def __init__(self, body: Text, start: int, stop: int) -> None:
        self.base = max(0, start - _DELIM_LEN)
        self.text = body[self.base : stop]
        self.body = body
        self.stop = stop

    def char(self, i: int) -> str:
        return self.text[i - self.base]

    def find(self, sub: str, start: int) -> int:
        at = self.text.find(sub, max(start, self.base) - self.base)
        return at + self.base if at >= 0 else -1

    def starts(self, prefix: str, i: int) -> bool:
        return self.text.startswith(prefix, i - self.base)

    def search(self, pattern: re.Pattern[str], start: int) -> re.Match[str] | None:
        return pattern.search(self.text, max(start, self.base) - self.base)

    def at(self, match: re.Match[str]) -> tuple[int, int]:
        return match.start() + self.base, match.end() + self.base


class FieldScan(Struct):
    """The top-level pairs of a growing body, found once per character.

    ``advance`` reads up to the part of the body no later text can change (not its
    trailing whitespace or a closer that may be dropped); each completed pair comes
    out once, its value read whole. ``STOPPED``: partial reading stops (a malformed
    value, or a bare word ending in ``.``), so the streamed arguments stop growing
    until the call ends.
    """

    phase: int = SEP
    pos: int = 0
    key_start: int = 0
    key: str = ""
    value_start: int = 0
    searched: int = 0
    is_array: bool = False
    depth: int = 0
    in_string: bool = False

    def advance(self, body: Text, stable: int) -> list[tuple[str, Any]]:
        """The pairs ``body[:stable]`` completes since the last call."""
        found: list[tuple[str, Any]] = []
        if self.pos >= stable or self.phase == STOPPED:
            return found
        w = _Window(body, self.pos, stable)
        while self.pos < stable and self.phase != STOPPED:
            if not self._move(w, found):
                break
        return found

    def _move(self, w: _Window, found: list[tuple[str, Any]]) -> bool:
        """One step; False when the text so far cannot decide the next one."""
        phase = self.phase
        if phase == SEP:
            while self.pos < w.stop and w.char(self.pos) in _SEPARATORS:
                self.pos += 1
            if self.pos < w.stop:
                self.phase, self.key_start = KEY, self.pos
            return True
        if phase == KEY:
            return self._read_key(w)
        if phase == AFTER:
            return self._value_start(w)
        if phase == STRING:
            return self._read_string(w, found)
        if phase == NESTED:
            return self._read_nested(w, found)
        return self._read_bare(w, found)

    def _read_key(self, w: _Window) -> bool:
        colon = w.find(":", self.pos)
        if colon < 0:
            self.pos = w.stop
            return False
        self.key = _unwrap(w.body[self.key_start : colon].strip())
        self.pos, self.phase = colon + 1, AFTER
        return True

    def _value_start(self, w: _Window) -> bool:
        while self.pos < w.stop and w.char(self.pos) in _SPACES:
            self.pos += 1
        pos = self.pos
        if pos >= w.stop:
            return False
        if w.starts(DELIM, pos):
            self.phase = STRING
            self.value_start = self.searched = self.pos = pos + _DELIM_LEN
        elif w.stop - pos < _DELIM_LEN and DELIM.startswith(w.text[pos - w.base :]):
            return False  # a delimiter may be coming
        elif w.char(pos) in "{[":
            self.phase, self.is_array = NESTED, w.char(pos) == "["
            self.value_start = self.pos = pos + 1
            self.depth, self.in_string = 1, False
        else:
            self.phase, self.value_start = BARE, pos
        return True

    def _read_string(self, w: _Window, found: list[tuple[str, Any]]) -> bool:
        close = w.find(DELIM, max(self.value_start, self.searched - _DELIM_LEN + 1))
        if close < 0:
            self.searched = self.pos = w.stop
            return False
        found.append((self.key, w.body[self.value_start : close]))
        self.phase, self.pos, self.searched = SEP, close + _DELIM_LEN, 0
        return True

    def _read_nested(self, w: _Window, found: list[tuple[str, Any]]) -> bool:
        marks = _ARRAY_MARKS if self.is_array else _OBJECT_MARKS
        opener = "[" if self.is_array else "{"
        while True:
            if self.in_string:
                close = w.find(DELIM, self.searched - _DELIM_LEN + 1)
                if close < 0:
                    self.searched = self.pos = w.stop
                    return False
                self.in_string, self.pos, self.searched = False, close + _DELIM_LEN, 0
            mark = w.search(marks, self.pos)
            if mark is None:
                self.pos = max(self.pos, w.stop - partial_delim(w.text))
                return False
            self.pos = w.at(mark)[1]
            if mark.group() == DELIM:
                self.in_string, self.searched = True, self.pos
                continue
            self.depth += 1 if mark.group() == opener else -1
            if self.depth == 0:
                text = w.body[self.value_start : self.pos - 1]
                found.append((self.key, read_nested(text, 0, len(text), self.is_array, False)))
                self.phase = SEP
                return True

    def _read_bare(self, w: _Window, found: list[tuple[str, Any]]) -> bool:
        end = w.search(_FIELD_END, self.pos)
        if end is None:
            self.pos = w.stop
            return False
        stop = w.at(end)[0]
        raw = w.body[self.value_start : stop].strip()
        if stop == self.value_start or raw.endswith("."):
            self.phase = STOPPED
            return False
        found.append((self.key, raw))
        self.phase, self.pos = SEP, stop
        return True

    def open_value(self, body: Text, body_end: int) -> tuple[str, str | None] | None:
        """The pair the body's end leaves open, if partial reading keeps one: its key and,
        for a string, its text so far (None for an object or array)."""
        if self.phase == STRING:
            return self.key, strip_partial_delim(body[self.value_start : body_end])
        if self.phase == NESTED:
            return self.key, None
        return None


def _unwrap(key: str) -> str:
    """A key written as a delimited string loses its delimiters (as vLLM reads them)."""
    if key.startswith(DELIM) and key.endswith(DELIM):
        return key[_DELIM_LEN:-_DELIM_LEN]
    return key


def partial_delim(text: str) -> int:
    """How many characters at the end of ``text`` may be the start of a delimiter."""
    for k in range(_DELIM_LEN - 1, 0, -1):
        if text.endswith(DELIM[:k]):
            return k
    return 0
