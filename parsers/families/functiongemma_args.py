r"""FunctionGemma's call text as vLLM 0.33.0's patterns find it, in one resumable pass.

vLLM reads arguments with ``(\w+):<escape>(.*?)<escape>`` and calls with
``<start_function_call>call:(\w+)\{(.*?)\}<end_function_call>`` (or, with no end, the
rest of the text), searched again over the whole text at every chunk. The scanners
here keep their place in the text instead and read each character once. vLLM's stream
also reads a chunk's text after text it held back twice (``View``): a scanner reads
such a view between ``mark`` and ``rewind`` and then goes on over the kept text.

What the patterns find, without backtracking: an argument's key is the word run just
before the first ``:<escape>`` that has one (cut at where the search resumed), its
value the text up to the next ``<escape>``; with no such ``<escape>`` no later argument
can match either. A call opens at ``<start_function_call>call:`` followed by a word run
and ``{``, and ends at the first ``}<end_function_call>`` after it.
"""

from __future__ import annotations

import json
from typing import Protocol

import regex
from msgspec import Struct, field

START = "<start_function_call>"
END = "<end_function_call>"
ESCAPE = "<escape>"
KEY_END = ":" + ESCAPE
CALL = "call:"
CALL_END = "}" + END
# How much of the kept text's end a ``View`` holds as a string: more than any pattern
# piece searched for across a chunk's start.
EDGE = 32
# Python's ``re`` and the ``regex`` module vLLM uses disagree on ``\w`` (marks, newer
# Unicode); these are the module's own.
_WORD = regex.compile(r"\w")
_WORD_RUN = regex.compile(r"\w*")
_WORD_RUN_BEFORE = regex.compile(r"(?r)\w+")
# What an undo log keeps of one argument reading: the key, and its entry before.
Undo = list[tuple[str, str | None]]


class Readable(Protocol):
    """What a scanner reads: a ``str``, a ``GrowingText`` or a ``View``."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> str: ...

    def find(self, sub: str, start: int = ..., /) -> int: ...


class View:
    """The kept text followed by ``tail``, read as one text without joining them.
    ``edge`` is the kept text's end (at least a marker's length but one, where it has
    as much): reads near the end, where scanners mostly are, stay in plain strings."""

    def __init__(self, kept: Readable, tail: str, edge: str) -> None:
        self.kept = kept
        self.tail = tail
        self.base = len(kept)
        self.near = edge + tail  # the text from ``base - len(edge)`` on
        self.near_at = self.base - len(edge)

    def __len__(self) -> int:
        return self.base + len(self.tail)

    def __getitem__(self, key: slice) -> str:
        start, stop, _ = key.indices(len(self))
        if start >= self.near_at:
            return self.near[start - self.near_at : stop - self.near_at]
        if stop <= self.base:
            return self.kept[start:stop]
        return self.kept[start : self.base] + self.tail[: stop - self.base]

    def find(self, sub: str, start: int = 0) -> int:
        if start >= self.near_at:
            at = self.near.find(sub, start - self.near_at)
            return at + self.near_at if at >= 0 else -1
        at = self.kept.find(sub, start)
        if at >= 0:
            return at
        resume = max(start, self.base - len(sub) + 1)
        at = self[resume : len(self)].find(sub)
        return resume + at if at >= 0 else -1


def value_json(text: str) -> str:
    """An argument value as vLLM dumps it: its JSON where ``json.loads`` reads it, else
    the string (also where vLLM's reading fails outright: nesting past the recursion
    limit, an integer past Python's digit limit; docs/parity.md, nesting-too-deep)."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, RecursionError):
        return json.dumps(text, ensure_ascii=False)


class Arguments(Struct):
    """The ``key:<escape>value<escape>`` arguments found from ``pos`` on, as the JSON
    entries of vLLM's dict (a key found again keeps its place, its value replaced).
    ``key_at`` >= 0: a key is found and its value is open from ``value_at``."""

    pos: int
    searched: int
    key_at: int = -1
    key: str = ""
    entries: dict[str, str] = field(default_factory=dict)
    size: int = 0  # the entries' characters

    def advance(self, text: Readable, undo: Undo | None = None) -> None:
        """Read on to the end of ``text``; ``undo`` logs the entries changed."""
        while True:
            if self.key_at < 0:
                at = text.find(KEY_END, self.searched)
                if at < 0:
                    self.searched = max(self.searched, len(text) - len(KEY_END) + 1)
                    return
                self.searched = at + 1
                # The word run before it, read only when there is one (a failed candidate
                # costs nothing; a found key moves ``pos`` past what was read).
                if at <= self.pos or not _WORD.match(text[at - 1 : at]):
                    continue
                run = _WORD_RUN_BEFORE.match(text[self.pos : at])
                if run is None:
                    continue
                self.key_at, self.key = self.pos + run.start(), run.group()
                self.searched = at + len(KEY_END)
            end = text.find(ESCAPE, self.searched)
            if end < 0:
                self.searched = max(self.searched, len(text) - len(ESCAPE) + 1)
                return
            value_at = self.key_at + len(self.key) + len(KEY_END)
            self._put(self.key, value_json(text[value_at:end]), undo)
            self.pos = self.searched = end + len(ESCAPE)
            self.key_at, self.key = -1, ""

    def _put(self, key: str, value: str, undo: Undo | None) -> None:
        entry = json.dumps(key, ensure_ascii=False) + ": " + value
        before = self.entries.get(key)
        if undo is not None:
            undo.append((key, before))
        self.size += len(entry) - (len(before) if before is not None else 0)
        self.entries[key] = entry

    def mark(self) -> tuple[int, int, int, str, int]:
        return self.pos, self.searched, self.key_at, self.key, self.size

    def rewind(self, mark: tuple[int, int, int, str, int], undo: Undo) -> None:
        self.pos, self.searched, self.key_at, self.key, self.size = mark
        for key, before in reversed(undo):
            if before is None:
                del self.entries[key]
            else:
                self.entries[key] = before

    def dump_length(self) -> int:
        """The length of ``json.dumps`` of the arguments (0: none found)."""
        count = len(self.entries)
        return 2 + self.size + 2 * (count - 1) if count else 0

    def dump_from(self, start: int) -> str:
        """``json.dumps`` of the arguments from ``start`` on, read from the last entry
        back (the entries it spans, not the whole dump)."""
        pieces = ["}"]
        at = self.dump_length() - 1
        for entry in reversed(self.entries.values()):
            if at <= start:
                break
            at -= len(entry)
            pieces.append(entry)
            if at > 1:
                pieces.append(", ")
                at -= 2
        if at == 1 and start < 1:
            pieces.append("{")
            at = 0
        return "".join(reversed(pieces))[start - at :]

    def dump(self) -> str:
        return self.dump_from(0) if self.entries else "{}"


def read_arguments(text: str) -> str:
    """``json.dumps`` of the arguments vLLM finds in ``text`` (``{}`` for none)."""
    arguments = Arguments(0, 0)
    arguments.advance(text)
    return arguments.dump()


class Calls(Struct):
    """The calls ``tool_call_regex`` finds: ``found`` holds each closed one's name start,
    ``{`` and ``}<end_function_call>`` positions. ``at`` >= 0: a ``<start_function_call>``
    whose opening is being read (its name run up to ``name_end``); ``open_at`` >= 0: an
    opened call, read to the end of the text while no end is found (the pattern's second
    branch)."""

    searched: int = 0
    at: int = -1
    name_end: int = -1
    open_at: int = -1
    found: list[tuple[int, int, int]] = field(default_factory=list)

    def advance(self, text: Readable) -> None:
        while True:
            if self.at < 0:
                at = text.find(START, self.searched)
                if at < 0:
                    self.searched = max(self.searched, len(text) - len(START) + 1)
                    return
                self.at, self.name_end, self.open_at = at, -1, -1
            if self.open_at < 0 and not self._opens(text):
                if self.at >= 0:
                    return  # the opening is not all in yet
                continue
            end = text.find(CALL_END, self.searched)
            if end < 0:
                self.searched = max(self.searched, len(text) - len(CALL_END) + 1)
                return
            name = self.at + len(START) + len(CALL)
            self.found.append((name, self.open_at - 1, end))
            self.at, self.open_at = -1, -1
            self.searched = end + len(CALL_END)

    def _opens(self, text: Readable) -> bool:
        """Whether the call at ``at`` is opened; False with ``at`` reset where it is not
        a call (the search goes on after its marker), or kept while it may still be."""
        head = self.at + len(START)
        if self.name_end < 0:
            if len(text) < head + len(CALL):
                return False
            if text[head : head + len(CALL)] != CALL:
                return self._not_a_call(head)
            self.name_end = head + len(CALL)
        run = _WORD_RUN.match(text[self.name_end : len(text)])
        self.name_end += run.end() if run is not None else 0
        if self.name_end == len(text):
            return False
        if self.name_end == head + len(CALL) or text[self.name_end : self.name_end + 1] != "{":
            return self._not_a_call(head)
        self.open_at = self.searched = self.name_end + 1
        return True

    def _not_a_call(self, head: int) -> bool:
        self.at, self.searched = -1, head
        return False

    def mark(self) -> tuple[int, int, int, int, int]:
        return self.searched, self.at, self.name_end, self.open_at, len(self.found)

    def rewind(self, mark: tuple[int, int, int, int, int]) -> None:
        self.searched, self.at, self.name_end, self.open_at, count = mark
        del self.found[count:]

    def all(self, length: int) -> list[tuple[int, int, int]]:
        """Every call found in a text of ``length``: the closed ones and an opened one."""
        if self.at >= 0 and self.open_at >= 0:
            return [*self.found, (self.at + len(START) + len(CALL), self.open_at - 1, length)]
        return list(self.found)
