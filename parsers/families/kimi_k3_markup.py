"""Kimi K3's XTML markup read incrementally: its tags, found as vLLM's patterns find them.

A K3 tag is ``<|open|>`` or ``<|close|>``, a word, and ``<|sep|>``; vLLM's patterns let
whitespace stand around the word (``<|open|>\\s*tools\\s*<|sep|>``), and an opening
``call`` or ``argument`` tag holds attributes up to its first ``<|sep|>``. ``Tag.scan``
finds a tag in text that arrives in pieces, each character read once: at most one
candidate is alive at a time (a tag's lead cannot sit inside another's whitespace or
word), so a failed candidate restarts at the character that failed it, as a regex
search does, or at the ``<|`` it had read as a separator's start. ``Elements`` reads
whole elements (an opening tag, a body, the first closing tag after it), leftmost
first, as vLLM's ``finditer`` does; ``remove`` and ``first`` are the one-shot forms.
Whitespace is the regex module's ``\\s`` (Unicode White_Space), which Python's
``str.isspace`` is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from msgspec import Struct, field

OPEN = "<|open|>"
CLOSE = "<|close|>"
SEP = "<|sep|>"
SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_IDLE, _LEAD, _SPACE_BEFORE, _WORD, _SPACE_AFTER, _SEP, _ATTRS = range(7)
# vLLM's attribute pattern ``(\w+)="([^"]*)"``: a key is a whole run of word characters.
_ATTR = re.compile(r'(?<!\w)(\w++)="([^"]*+)"')


class TagState(Struct):
    """A candidate tag in progress: where it began, how far it matched, its attributes."""

    stage: int = _IDLE
    got: int = 0  # characters of the current literal matched
    start: int = 0  # where the candidate began, counted in the text scanned
    spaced: bool = False  # whitespace followed the word (an attribute tag needs it)
    attrs: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tag:
    """One tag pattern: its lead (``<|open|>`` or ``<|close|>``), its word, and whether
    attributes follow the word (``<|open|>call tool="f"<|sep|>``)."""

    lead: str
    word: str
    attributes: bool = False

    @property
    def exact(self) -> str:
        """The tag as the model writes it, without whitespace (what vLLM holds back)."""
        return f"{self.lead}{self.word}{SEP}"

    def scan(self, s: TagState, text: str, base: int, i: int = 0) -> int:
        """Read ``text`` from ``i`` (``base``: where ``text`` starts in the scanned
        whole); the index just after the tag when one completes, else -1."""
        n = len(text)
        lead, word = self.lead, self.word
        while i < n:
            stage = s.stage
            if stage == _IDLE:
                j = text.find("<", i)
                if j < 0:
                    return -1
                s.stage, s.got, s.start = _LEAD, 1, base + j
                i = j + 1
            elif stage == _ATTRS:
                i = self._attributes(s, text, i)
                if i >= 0:
                    return i
                return -1
            else:
                ch = text[i]
                if stage == _LEAD:
                    if ch != lead[s.got]:
                        s.stage = _IDLE
                        continue
                    s.got += 1
                    i += 1
                    if s.got == len(lead):
                        s.stage, s.got = _SPACE_BEFORE, 0
                elif stage == _SPACE_BEFORE:
                    if ch in SPACE:
                        i += 1
                    else:
                        s.stage = _WORD
                elif stage == _WORD:
                    if ch != word[s.got]:
                        s.stage = _IDLE
                        continue
                    s.got += 1
                    i += 1
                    if s.got == len(word):
                        s.stage, s.got, s.spaced = _SPACE_AFTER, 0, False
                elif stage == _SPACE_AFTER:
                    if ch in SPACE:
                        s.spaced = True
                        i += 1
                    elif not self.attributes:
                        s.stage = _SEP
                    elif s.spaced:
                        s.stage, s.attrs = _ATTRS, []
                    else:
                        s.stage = _IDLE
                else:  # _SEP
                    if ch != SEP[s.got]:
                        # "<|" read as the separator's start may begin the next tag.
                        if s.got == 2:
                            s.stage, s.start = _LEAD, base + i - 2
                        else:
                            s.stage = _IDLE
                        continue
                    s.got += 1
                    i += 1
                    if s.got == len(SEP):
                        s.stage, s.got = _IDLE, 0
                        return i
        return -1

    @staticmethod
    def _attributes(s: TagState, text: str, i: int) -> int:
        """Attributes run to the first ``<|sep|>``; the index after it, else -1."""
        tail = tail_of(s.attrs, len(SEP) - 1)
        at = (tail + text[i:]).find(SEP)
        if at < 0:
            s.attrs.append(text[i:])
            return -1
        kept = "".join(s.attrs)
        if at < len(tail):
            attrs = kept[: len(kept) - len(tail) + at]
        else:
            attrs = kept + text[i : i + at - len(tail)]
        s.stage, s.got, s.attrs = _IDLE, 0, [attrs]
        return i + at - len(tail) + len(SEP)


def tail_of(parts: list[str], size: int) -> str:
    """The last ``size`` characters of the joined ``parts``, joining only the last few."""
    kept: list[str] = []
    count = 0
    for part in reversed(parts):
        kept.append(part)
        count += len(part)
        if count >= size:
            break
    return "".join(reversed(kept))[-size:] if kept else ""


def attributes(attrs: str) -> dict[str, str]:
    """An opening tag's attributes, unescaped as vLLM unescapes them; a repeated key's
    last value wins."""
    return {
        key: value.replace("&quot;", '"').replace("&amp;", "&")
        for key, value in _ATTR.findall(attrs)
    }


class ElementState(Struct):
    """Where an element scan is: looking for an opening tag, or in a body."""

    opening: TagState = field(default_factory=TagState)
    closing: TagState = field(default_factory=TagState)
    in_body: bool = False
    body_start: int = 0
    body: list[str] = field(default_factory=list)
    attrs: str = ""


@dataclass(frozen=True, slots=True)
class Elements:
    """Whole elements of one word (``call``, ``argument``): attributes and body."""

    opening: Tag
    closing: Tag

    @staticmethod
    def of(word: str) -> Elements:
        return Elements(Tag(OPEN, word, attributes=True), Tag(CLOSE, word))

    def feed(self, s: ElementState, text: str, base: int) -> list[tuple[str, str]]:
        """The elements that complete in ``text`` (``base``: where it starts)."""
        found: list[tuple[str, str]] = []
        i = 0
        while i < len(text):
            if not s.in_body:
                end = self.opening.scan(s.opening, text, base, i)
                if end < 0:
                    return found
                s.in_body, s.body_start, s.body = True, base + end, []
                s.attrs = "".join(s.opening.attrs)
                s.opening.attrs = []
                s.closing = TagState()
                i = end
                continue
            end = self.closing.scan(s.closing, text, base, i)
            if end < 0:
                s.body.append(text[i:])
                return found
            s.body.append(text[i:end])
            body = "".join(s.body)[: s.closing.start - s.body_start]
            found.append((s.attrs, body))
            s.in_body, s.body, s.attrs = False, [], ""
            s.opening = TagState()
            i = end
        return found


def first(tag: Tag, text: str, start: int = 0) -> tuple[int, int] | None:
    """Where ``tag`` first occurs in ``text`` from ``start``: its start and end."""
    state = TagState()
    end = tag.scan(state, text, 0, start)
    return (state.start, end) if end >= 0 else None


def remove(tag: Tag, text: str) -> str:
    """``text`` without every occurrence of ``tag`` (vLLM's ``sub("", text)``)."""
    kept: list[str] = []
    state = TagState()
    i = 0
    while (end := tag.scan(state, text, 0, i)) >= 0:
        kept.append(text[i : state.start])
        i = end
    kept.append(text[i:])
    return "".join(kept)


def held_back(text: str, markers: tuple[str, ...]) -> int:
    """How much of the end of ``text`` may still grow into one of ``markers`` (the
    longest end that begins one, never a whole one), as vLLM holds it back."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest
