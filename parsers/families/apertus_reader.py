"""Apertus' call block ``[{"name": {args}}, ...]`` read incrementally, as vLLM reads it.

vLLM 0.33.0 reads the block again on every chunk with partial_json_parser (numbers at
the end of the text left out while the block is open) and dumps each element's first
member's value, the call's arguments. Here the block is read once, left to right: the
array's structure by a small scanner, each element by the incremental partial-JSON
reader of parsers/readers/partialjson.py with the element's first key as the name and
its value as the arguments. An element's dump is kept as a settled head that only grows
(``ElementDump.head``) plus a volatile end asked of the reader at each chunk.

Text the reader does not read exactly (a raw control character in a string, a key twice,
a number over ``MAX_NUMBER`` characters, nesting past ``MAX_DEPTH``, a key over
``MAX_KEY`` characters, an element that is no object, an unpaired surrogate escape once
it settles) kills the block: no reading of it sends anything any more, as vLLM's fails
on invalid JSON (docs/parity.md, apertus-unread-block).
"""

from __future__ import annotations

import json
import re

from msgspec import Struct, field

from parsers.growing_text import GrowingText
from parsers.readers.jsonscan import COLON, ESCAPE, NUMBER_PHASES, STRING, UNICODE, WS
from parsers.readers.partialjson import CallReader, CallReading, Irregular

# What vLLM strips from the end of an open block's arguments dump.
STRIPPED = '}"] ,'
# Past these the block is no longer read (docs/parity.md, apertus-unread-block).
MAX_DEPTH = 200
MAX_KEY = 4096
_ARGS = "arguments"  # the reader's role for the first member's value
_SURROGATE = re.compile("[\ud800-\udfff]")

LEAD, ARRAY, ITEM, AFTER = "lead", "array", "item", "after"
ELEMENT, DONE, DEAD = "element", "done", "dead"


class ElementReading(CallReading):
    """The reader's state plus where the arguments' last number began, while it may
    still end the text (vLLM's open reading leaves it out, with its key)."""

    trailing_number: bool = False
    number_root: bool = False  # that number is the whole arguments
    number_pieces: int = -1  # its member starts after this many pending pieces
    args_null: bool = False  # the arguments are ``null`` (vLLM sends none)


class ElementReader(CallReader):
    """The partial-JSON reader with Apertus' roles: the first key names the call, its
    value is the arguments, later members are read for structure only."""

    r: ElementReading

    def _string_closed(self, text: str, at: int) -> None:
        r = self.r
        if r.role != "key" or len(r.stack) != 1:
            super()._string_closed(text, at)
            return
        key = json.loads('"' + text[r.token : at] + '"')
        if r.name is None:
            r.name, r.top_key = key, _ARGS
        elif key == r.name:
            raise Irregular  # a later value would replace the arguments
        else:
            r.top_key = ""
        r.phase, r.role = COLON, ""

    def _keep(self, text: str) -> None:
        r = self.r
        if not text:  # a number starts: its member goes out with it
            r.trailing_number = True
            r.number_root = len(r.stack) == 1
            r.number_pieces = len(r.pieces)
        elif text == "null" and len(r.stack) == 1:
            r.args_null = True
        super()._keep(text)

    def _char(self, ch: str, text: str, at: int) -> None:
        r = self.r
        if r.trailing_number and ch not in WS and r.phase not in NUMBER_PHASES:
            r.trailing_number = False
        super()._char(ch, text, at)


class ElementDump(Struct):
    """One element's reading as the stream diffs it: the name (once its value has
    started), the settled head of the arguments' dump, where its trailing run of
    ``STRIPPED`` characters starts, and where the head stood before a trailing number.
    ``sent``/``over``: the arguments sent are ``head[:sent] + over``."""

    name: str | None = None
    null: bool = False
    head: GrowingText = field(default_factory=GrowingText)
    strip_from: int = 0
    number_strip: int = -1  # the head's stripped length before a trailing number
    root_number: bool = False
    volatile: str = ""
    sent: int = 0
    over: str = ""

    def extend(self, piece: str) -> None:
        if not piece:
            return
        kept = piece.rstrip(STRIPPED)
        if kept:
            self.strip_from = len(self.head) + len(kept)
        self.head.append(piece)

    def named(self, final: bool) -> str | None:
        """The name, if vLLM's reading has the element as a non-empty object."""
        if self.root_number and not final:
            return None
        return self.name

    def arguments(self, final: bool) -> tuple[int, str]:
        """The arguments' dump vLLM compares: its length, and what it has past the head."""
        if final:
            return len(self.head) + len(self.volatile), self.volatile
        if self.number_strip >= 0:
            return self.number_strip, ""
        end = self.volatile.rstrip(STRIPPED)
        if end:
            return len(self.head) + len(end), end
        return self.strip_from, ""


class BlockState(Struct):
    """The reading of the text after one ``<|tools_prefix|>``.

    ``phase``: ``lead`` (whitespace before the value), ``array`` (after ``[``: an
    element or ``]``), ``item`` (after ``,``: an element), ``after`` (after an element:
    ``,`` or ``]``), ``element``, ``done`` (the value is complete: vLLM's ``raw_decode``
    succeeds), ``dead``.
    """

    phase: str = LEAD
    single: bool = False  # the value is one object, not an array
    lead_ws: bool = False
    junk: bool = False  # non-whitespace after the complete value
    read: int = 0  # characters of the block read
    end: int = -1  # the value's end, in the block's characters
    reading: ElementReading | None = None
    window: str = ""  # the open element's text still sliced by its reading
    elements: list[ElementDump] = field(default_factory=list)
    first: int = 0  # the index of ``elements[0]``

    def count(self, final: bool) -> int:
        """How many elements vLLM's reading of the block has (a lone object counts
        while it is not empty)."""
        total = self.first + len(self.elements)
        if self.single and self.elements and self.elements[-1].named(final) is None:
            return total - 1
        return total


class BlockReader:
    """Reads a block's text as it comes; every character once."""

    def __init__(self, state: BlockState) -> None:
        self.b = state

    def feed(self, text: str) -> None:
        b = self.b
        i = 0
        while i < len(text) and b.phase != DEAD:
            if b.phase == ELEMENT:
                i = self._element(text, i)
                continue
            ch = text[i]
            if b.phase == DONE:
                b.junk = b.junk or bool(text[i:].strip(WS))
                return
            i += 1
            b.read += 1
            self._structure(ch)

    def _structure(self, ch: str) -> None:
        b = self.b
        if ch in WS:
            b.lead_ws = b.lead_ws or b.phase == LEAD
            return
        if b.phase == LEAD and ch == "[":
            b.phase = ARRAY
        elif ch == "{" and b.phase in (LEAD, ARRAY, ITEM):
            b.single = b.phase == LEAD
            b.phase, b.reading, b.window = ELEMENT, ElementReading(pos=0), "{"
            b.elements.append(ElementDump())
            self._read()
        elif ch == "]" and b.phase in (ARRAY, AFTER):
            b.phase, b.end = DONE, b.read
        elif ch == "," and b.phase == AFTER:
            b.phase = ITEM
        else:
            b.phase = DEAD

    def _element(self, text: str, i: int) -> int:
        """Read the open element from ``i``; where the array's text resumes."""
        b = self.b
        reading = b.reading
        assert reading is not None
        start = len(b.window)
        b.window += text[i:]
        self._read()
        if b.phase == DEAD:
            return len(text)
        if reading.done:
            used = reading.end - start
            b.read += used
            b.reading, b.window = None, ""
            if b.single:
                b.phase, b.end = DONE, b.read
            else:
                b.phase = AFTER
            return i + used
        b.read += len(text) - i
        return len(text)

    def _read(self) -> None:
        """Read what the window gained; settle the element's dump; drop what no later
        reading looks at again."""
        b = self.b
        r = b.reading
        assert r is not None
        reader = ElementReader(r)
        try:
            reader.read(b.window)
        except Irregular:
            self._die()
            return
        if r.muted or r.max_depth > MAX_DEPTH or _SURROGATE.search(r.name or ""):
            self._die()
            return
        if _SURROGATE.search(r.tail):
            r.tail = ""  # a high surrogate escape waits for its pair
        dump = b.elements[-1]
        pieces = r.pieces
        if any(_SURROGATE.search(piece) for piece in pieces):
            self._die()  # an unpaired surrogate: vLLM's reply fails to encode
            return
        if r.trailing_number and r.number_pieces >= 0:
            for piece in pieces[: r.number_pieces]:
                dump.extend(piece)
            dump.number_strip, dump.root_number = dump.strip_from, r.number_root
            pieces = pieces[r.number_pieces :]
            r.number_pieces = -1
        elif not r.trailing_number:
            dump.number_strip, dump.root_number = -1, False
        for piece in pieces:
            dump.extend(piece)
        r.pieces.clear()
        dump.name = r.name if r.args_kept else None
        dump.null = r.args_null
        dump.volatile = "" if r.done else reader.volatile()
        if not r.done:
            self._rebase(r)

    def _die(self) -> None:
        b = self.b
        b.phase, b.reading, b.window = DEAD, None, ""

    def _rebase(self, r: ElementReading) -> None:
        """Keep the window from the first position a later reading slices."""
        b = self.b
        keep = r.pos
        if r.phase in NUMBER_PHASES:
            keep = min(keep, r.token)
        elif r.phase in (STRING, ESCAPE, UNICODE):
            if r.role in ("key", "name"):
                if r.pos - r.token > MAX_KEY:
                    self._die()
                    return
                keep = min(keep, r.token)
            elif r.role == "args":
                keep = min(keep, r.settled_at)
        if keep <= 0:
            return
        b.window = b.window[keep:]
        r.pos -= keep
        r.token = max(r.token - keep, 0)
        r.settled_at = max(r.settled_at - keep, 0)
