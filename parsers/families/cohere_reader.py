"""Cohere Command's output filter, as vLLM 0.33.0 runs it (the ``cohere_melody`` package,
presets ``cmd3`` and ``cmd4``).

Command models write their turn in marked sections::

    <|START_THINKING|>...<|END_THINKING|><|START_RESPONSE|>... <co>cited</co: 0:[1]>
    <|END_RESPONSE|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f",
    "parameters": {...}}]<|END_ACTION|>

The filter holds back what may still turn into a marker, trailing whitespace (it is sent
only once more text follows), and an open citation's closing tag; it drops citation tags
from the text, and reads an action block's calls by their keys: the id, then the name,
then the parameters' raw text (up to where it first is one JSON value), less up to eight
columns of indentation per line. What reaches a marker still held is dropped with it.
These quirks are the package's (vLLM streams and parses one-shot through it), kept here
so the bytes match; the state is plain data, and what is held is only what may still
change.

Text held across chunks (an open citation, a closing tag cut short, an action block's
junk) is read again by each chunk: up to ``REREAD_WINDOW`` characters of it for free (a
bounded cost per chunk, so citations of ordinary length never count), beyond that
within ``REREAD_PER_CHAR`` characters per character of output plus ``REREAD_FREE``,
past which the stream keeps its chunks unread until the end, which reads them as one
write (docs/parity.md, cohere-reread-budget). Within one write the filter reads on from
a cursor where the package reads the rest as a new text (after a marker, a citation, a
step of the action reader), so a write costs its length, however many of those it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from msgspec import Struct

from parsers.readers.serdejson import SerdeJson, SerdeJsonState

START_THINKING = "<|START_THINKING|>"
END_THINKING = "<|END_THINKING|>"
START_ACTION = "<|START_ACTION|>"
END_ACTION = "<|END_ACTION|>"

# Sections.
ANSWER = "answer"  # text, citations read
THINKING = "thinking"  # the same, as reasoning
ACTION = "action"  # tool calls
IGNORE = "ignore"

# The markers of each preset and the section each opens.
PRESETS: dict[str, dict[str, str]] = {
    "cmd3": {
        "<|START_RESPONSE|>": ANSWER,
        "<|END_RESPONSE|>": IGNORE,
        START_THINKING: THINKING,
        END_THINKING: ANSWER,
        START_ACTION: ACTION,
        END_ACTION: IGNORE,
    },
    "cmd4": {
        "<|START_TEXT|>": ANSWER,
        "<|END_TEXT|>": IGNORE,
        START_THINKING: THINKING,
        END_THINKING: ANSWER,
        START_ACTION: ACTION,
        END_ACTION: IGNORE,
        "<|START_RESPONSE|>": ANSWER,
        "<|END_RESPONSE|>": IGNORE,
    },
}
# Where each preset starts: Command A's prompt ends in its answer, Command 4's in thinking.
FIRST_SECTION = {"cmd3": ANSWER, "cmd4": THINKING}

CITE_OPEN = "<co>"
CITE_CLOSE = "</co: "

# Unicode White_Space, what the package trims (Python's isspace also counts _NOT_SPACE).
_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_SPACE_SET = frozenset(_SPACE)
_NOT_SPACE = "\x1c\x1d\x1e\x1f"
# An action block's keys, found in what is held.
_S = f"[{re.escape(_SPACE)}]*"
_CALL_ID = re.compile(f'"tool_call_id":{_S}"')
_NAME = re.compile(f'"tool_name":{_S}"')
_PARAMETERS_OBJECT = re.compile(f'"parameters":{_S}\\{{{_S}"')
_PARAMETERS = re.compile(f'"parameters":{_S}')
# What held text may be read again: per chunk for free, then per character of output
# and from the start.
REREAD_WINDOW = 1 << 12
REREAD_PER_CHAR = 8
REREAD_FREE = 1 << 16
_INDENT = 8  # columns of indentation dropped per line of the parameters' text

# Where the action reader is.
BEFORE_CALL = "before_call"  # looking for the next call's id
IN_ID = "in_id"
BEFORE_NAME = "before_name"
IN_NAME = "in_name"
BEFORE_PARAMETERS = "before_parameters"
IN_PARAMETERS = "in_parameters"


class CohereState(Struct, tag="cohere"):
    """What the filter keeps between chunks."""

    section: str
    held: str = ""  # text not read yet: a marker's start, trailing space, an open citation
    scanned: int = 0  # how much of ``held`` is known to hold no whole marker
    blank: bool = True  # ``held`` is only white space
    trim_left: bool = False
    cite_at: int = -1  # how much of an open citation's text went out already (-1: none)
    text_index: int = 0  # characters of the section's text read, for citations' spans
    done: bool = False
    call_at: str = BEFORE_CALL
    call_index: int = 0
    parameters: SerdeJsonState | None = None
    indent_dropped: int = 0
    line_has_text: bool = False
    written: int = 0  # characters written so far
    reread: int = 0  # characters of held text read again so far, past the window
    starved: bool = False  # past the re-read budget: chunks wait in ``unread``
    unread: list[str] = []  # chunks after ``held``: white space after white space, or all


@dataclass
class CallPiece:
    """A piece of call ``index``: its id, its name, or text of its arguments."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class Cited:
    """A citation read: its text's span in its section, and whether it is in thinking."""

    start: int
    end: int
    text: str
    thinking: bool


@dataclass
class Pieces:
    """What one write gives: text per kind, call pieces merged by call."""

    calls: dict[int, CallPiece] = field(default_factory=dict)
    citations: list[Cited] = field(default_factory=list)
    # Text per kind as read, joined when asked: a string grown per piece would copy all
    # of it again for each section or citation of one write.
    content_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)

    @property
    def content(self) -> str | None:
        return "".join(self.content_parts) if self.content_parts else None

    @property
    def reasoning(self) -> str | None:
        return "".join(self.reasoning_parts) if self.reasoning_parts else None

    def text(self, section: str, text: str) -> None:
        if text:
            parts = self.reasoning_parts if section == THINKING else self.content_parts
            parts.append(text)

    def call(self, index: int, *, id: str = "", name: str = "", arguments: str = "") -> None:
        if not (id or name or arguments):
            return
        piece = self.calls.setdefault(index, CallPiece(index))
        piece.id = id or piece.id
        piece.name = name or piece.name
        piece.arguments += arguments

    def ordered_calls(self) -> list[CallPiece]:
        return [self.calls[index] for index in sorted(self.calls)]


def _rstrip_len(text: str) -> int:
    """How many characters of white space end ``text``. Python's strip measures it in C:
    a run of blank tokens may be megabytes, which a loop here reads at a quarter second
    each. Python's white space is Unicode's and ``_NOT_SPACE``: the last of those in
    the run ends what is kept."""
    if not text or text[-1] not in _SPACE_SET:
        return 0
    end = len(text.rstrip())
    for char in _NOT_SPACE:
        end = max(end, text.rfind(char, end) + 1)
    return len(text) - end


def _lstrip_len(text: str) -> int:
    """How many characters of white space open ``text`` (as ``_rstrip_len``)."""
    if not text or text[0] not in _SPACE_SET:
        return 0
    start = len(text) - len(text.lstrip())
    for char in _NOT_SPACE:
        at = text.find(char, 0, start)
        start = at if at != -1 else start
    return start


def _blank(text: str) -> bool:
    """Whether ``text`` is only white space (empty included)."""
    return _lstrip_len(text) == len(text)


def _held_prefix(text: str, markers: tuple[str, ...], start: int) -> int:
    """Where the longest end of ``text[start:]`` that begins some marker starts (-1:
    none)."""
    longest = max(len(m) for m in markers) - 1
    start = max(start, len(text) - longest)
    while True:
        at = text.find("<", start)
        if at == -1:
            return -1
        rest = text[at:]
        if any(m.startswith(rest) and m != rest for m in markers):
            return at
        start = at + 1


def _unescaped_quote(text: str, start: int) -> int:
    """The first ``"`` from ``start`` not escaped by an odd run of backslashes that
    also starts there or after (-1: none)."""
    at = text.find('"', start)
    while at != -1:
        slashes = 0
        while at - slashes > start and text[at - 1 - slashes] == "\\":
            slashes += 1
        if slashes % 2 == 0:
            return at
        at = text.find('"', at + 1)
    return -1


class _NextMatch:
    """Where ``pattern`` next matches in ``text`` from a position that only moves on:
    a match found ahead is kept, so asking again before it costs nothing (the pattern
    has no anchor or look-behind, so where a match starts does not depend on where the
    search did)."""

    def __init__(self, pattern: re.Pattern[str], text: str) -> None:
        self.pattern = pattern
        self.text = text
        self.searched = False
        self.found = -1  # where the last match found starts (-1: none from there on)

    def at(self, start: int) -> int:
        """Where the first match from ``start`` starts (-1: none)."""
        if not self.searched or (self.found != -1 and self.found < start):
            match = self.pattern.search(self.text, start)
            self.searched = True
            self.found = match.start() if match is not None else -1
        return self.found


class _MarkerFinder:
    """The first whole marker from a position that only moves on, in one text: each
    marker's next place is found once and kept until the position passes it, so many
    markers in one write cost the text's length once per kind of marker, not once per
    marker found."""

    def __init__(self, text: str, markers: tuple[str, ...]) -> None:
        self.text = text
        self.markers = markers
        self.next = [-2] * len(markers)  # each marker's next place (-1: none, -2: unknown)

    def first(self, start: int) -> tuple[str | None, int]:
        """The first marker starting at ``start`` or after (the first listed of those
        starting at one place) and where it starts; (None, -1) when there is none."""
        first: str | None = None
        first_at = -1
        for index, marker in enumerate(self.markers):
            at = self.next[index]
            if at == -2 or (at != -1 and at < start):
                at = self.text.find(marker, start)
                self.next[index] = at
            if at != -1 and (first_at == -1 or at < first_at):
                first, first_at = marker, at
        return first, first_at


class CohereFilter:
    """The filter over one output: ``write`` each decoded chunk, ``flush`` at its end."""

    def __init__(self, preset: str, state: CohereState) -> None:
        self.markers = PRESETS[preset]
        self.marker_list = tuple(self.markers)
        self.longest = max(len(marker) for marker in self.marker_list)
        self.s = state

    # ------------------------------------------------------------------ framing

    def write(self, text: str) -> Pieces:
        s = self.s
        if s.done:
            return Pieces()
        s.written += len(text)
        blank = self._blank_text() and _blank(text)
        if not (s.starved or blank):
            cost = max(0, len(s.held) - REREAD_WINDOW)
            if s.reread + cost <= REREAD_PER_CHAR * s.written + REREAD_FREE:
                s.reread += cost
                if s.unread:
                    # What waits is white space, as is what is held: no marker is in it.
                    joined, s.unread = "".join([*s.unread, text]), []
                    s.scanned = len(s.held) + len(joined) - len(text)
                    text = joined
                return self._write(text)
            s.starved = True
        # White space after white space is held until text shows it was not the end;
        # past the budget everything is. Either waits unread, not copied per chunk.
        s.unread.append(text)
        return Pieces()

    def _write(self, text: str) -> Pieces:
        s = self.s
        out = Pieces()
        held = s.held + text
        finder = _MarkerFinder(held, self.marker_list)
        at_least = max(0, s.scanned - self.longest + 1)  # where a whole marker may start
        read = 0  # how much of ``held`` is done with
        while True:
            found, at = finder.first(at_least)
            if found is None:
                # A marker may be starting at the end: all of it waits for the next write.
                if _held_prefix(held, self.marker_list, read) == -1 and read < len(held):
                    read += self._read(s.section, held[read:], final=False, out=out)
                break
            if at > read:
                # What precedes a marker is read as an output's end: held text goes out.
                self._read(s.section, held[read:at], final=True, out=out)
            read = at_least = at + len(found)
            self._enter(self.markers[found])
        s.held = held[read:]
        s.scanned = len(s.held)  # no marker in it: the next write looks only past it
        s.blank = _blank(s.held)
        return out

    def flush(self) -> Pieces:
        s = self.s
        out = Pieces()
        if s.starved and s.unread:
            unread, s.unread = "".join(s.unread), []
            out = self._write(unread)
        s.done = True
        if self._blank_text():
            # Only white space is held or waits unread: an output's end sends none of
            # it, so none of it is read (a blank output's end would read all of it).
            # What a read would leave is left, so the last snapshot stays the same.
            s.scanned += sum(map(len, s.unread))
            s.held, s.unread = "", []
        elif s.held:
            held, s.held = s.held, ""
            self._read(s.section, held, final=True, out=out)
        return out

    def _blank_text(self) -> bool:
        """Whether what is held is white space in a section whose text ends trimmed."""
        return self.s.blank and self.s.section in (ANSWER, THINKING)

    def _enter(self, section: str) -> None:
        s = self.s
        s.cite_at = -1  # an open citation went out with the text before the marker
        s.text_index = 0  # a citation's span counts from its section's start
        if section == THINKING:
            s.trim_left = True
        s.section = section

    def _read(self, section: str, text: str, *, final: bool, out: Pieces) -> int:
        """Read ``text`` in ``section``; how much of it is done with."""
        if section == IGNORE:
            # Nothing of it is sent; a marker starting in it was held back before.
            return len(text)
        if section == ACTION:
            return self._actions(text, out)
        return self._text(section, text, final, out)

    # ------------------------------------------------------------------ text and citations

    def _text(self, section: str, text: str, final: bool, out: Pieces) -> int:
        s = self.s
        trailing = _rstrip_len(text)
        send = text[: len(text) - trailing]
        dropped = 0
        if s.trim_left:
            dropped = _lstrip_len(send)
            send = send[dropped:]
            if send:
                s.trim_left = False
        said, taken, cited = self._citations(send, section, out)
        if said is None or (not said and not cited):
            if not send or not final:
                return dropped + taken
            said = send
            if s.cite_at != -1:
                said = send[s.cite_at :] if s.cite_at < len(send) else ""
                s.cite_at = -1
            if not said:
                return dropped + taken
        out.text(section, said)
        return dropped + taken

    def _citations(self, text: str, section: str, out: Pieces) -> tuple[str | None, int, bool]:
        """The text to send of ``text`` with citation tags taken out (the citations onto
        ``out``), how much of it is done with, and whether a whole citation was read;
        None: wait for more. It reads on from a cursor (``taken``): the package reads
        the rest after each citation as a new text, and ``cite_at`` counts from the
        cursor, but a copy of the rest per citation would cost their count times the
        text's length."""
        s = self.s
        said: list[str] = []
        taken = 0
        cited = False
        while True:
            open_at, open_end = _marker_at(text, CITE_OPEN, taken)
            if open_at == -1:
                said.append(text[taken:])
                s.text_index += len(text) - taken
                return "".join(said), len(text), cited
            if open_end == -1:
                return _joined(said, cited), taken, cited
            close_at, close_end = _close_at(text, taken)
            if close_at == -1 or close_end == -1:
                partial, used = self._open_citation(text, taken, open_at, open_end, close_at)
                if partial:
                    said.append(partial)
                    return "".join(said), used, cited
                return _joined(said, cited), taken, cited
            if open_end > close_at:
                return _joined(said, cited), taken, cited
            quoted = text[open_end + 1 : close_at]
            piece = text[taken:open_at] + quoted
            start = s.text_index + open_at - taken
            out.citations.append(Cited(start, start + len(quoted), quoted, section == THINKING))
            s.text_index += len(piece)
            if s.cite_at != -1:
                sent = taken + s.cite_at
                piece = text[sent:close_at] if sent < close_at else ""
            s.cite_at = -1
            said.append(piece)
            cited = True
            taken = close_end + 1

    def _open_citation(
        self, text: str, taken: int, open_at: int, open_end: int, close_at: int
    ) -> tuple[str, int]:
        """A citation still open in what of ``text`` follows ``taken``: the text before
        it and what of its own text is new; and how much of ``text`` is done with."""
        s = self.s
        before = text[taken:open_at]
        s.text_index += len(before)
        if s.cite_at != -1:
            if taken + s.cite_at >= len(text):
                return before, open_at
            start = taken + s.cite_at
        else:
            start = open_end + 1
        s.cite_at = len(text) - open_at
        end = close_at if close_at > taken else len(text)
        if start >= end:
            return before, open_at
        return before + text[start:end], open_at

    # ------------------------------------------------------------------ actions

    def _actions(self, text: str, out: Pieces) -> int:
        """Read an action block's calls from ``text``; how much of it is done with.

        Each move reads on from where the last one stopped (the package reads the rest
        as a new text, which a copy per move would make cost the count of calls times
        the text's length). A text ending in a backslash is not read at all."""
        if text.endswith("\\"):
            return 0
        objects = _NextMatch(_PARAMETERS_OBJECT, text)
        taken = 0
        while taken < len(text):
            step = self._action_step(text, taken, objects, out)
            if step < 0:
                break
            taken = step
        return taken

    def _action_step(self, text: str, at: int, objects: _NextMatch, out: Pieces) -> int:
        """One move of the action reader over ``text`` from ``at``: where it stopped
        (-1: wait). ``objects`` finds the next parameters that open an object."""
        s = self.s
        where = s.call_at
        if where in (BEFORE_CALL, BEFORE_NAME):
            key = _CALL_ID if where == BEFORE_CALL else _NAME
            found = key.search(text, at)
            if found is None:
                return -1
            s.call_at = IN_ID if where == BEFORE_CALL else IN_NAME
            return found.end()
        if where in (IN_ID, IN_NAME):
            quote = _unescaped_quote(text, at)
            if quote == -1:
                return -1
            if where == IN_ID:
                out.call(s.call_index, id=text[at:quote])
                s.call_at = BEFORE_NAME
            else:
                out.call(s.call_index, name=text[at:quote])
                s.call_at = BEFORE_PARAMETERS
            return quote + 1
        if where == BEFORE_PARAMETERS:
            # Parameters opening an object anywhere ahead, even in a later call, send
            # the reader into the first parameters ahead (the package's rule).
            if objects.at(at) != -1:
                found = _PARAMETERS.search(text, at)
                assert found is not None
                s.call_at = IN_PARAMETERS
                s.parameters = SerdeJsonState()
                return found.end()
            brace = text.find("}", at)
            if brace == -1:
                return -1
            self._next_call()
            return brace
        return self._parameters(text, at, out)

    def _parameters(self, text: str, at: int, out: Pieces) -> int:
        """The parameters' raw text from ``at`` up to where it first is one JSON value."""
        s = self.s
        assert s.parameters is not None
        end = SerdeJson(s.parameters).first_end(text, at)
        if end == -1:
            self._raw_arguments(text[at:], out)
            return len(text)
        self._raw_arguments(text[at:end], out)
        self._next_call()
        return end

    def _next_call(self) -> None:
        s = self.s
        s.call_at = BEFORE_CALL
        s.call_index += 1
        s.parameters = None

    def _raw_arguments(self, text: str, out: Pieces) -> None:
        """Send ``text`` less up to eight columns of white space opening each line."""
        s = self.s
        kept: list[str] = []
        for char in text:
            if char == "\n":
                s.indent_dropped = 0
                s.line_has_text = False
            elif char in _SPACE_SET:
                if s.indent_dropped < _INDENT and not s.line_has_text:
                    s.indent_dropped += 1
                    continue
            else:
                s.line_has_text = True
            kept.append(char)
        if kept:
            out.call(s.call_index, arguments="".join(kept))


def _joined(said: list[str], cited: bool) -> str | None:
    """What was read before a stop: None when nothing was (the caller waits)."""
    return "".join(said) if said or cited else None


def _marker_at(text: str, marker: str, start: int) -> tuple[int, int]:
    """Where ``marker`` first starts from ``start`` and where its last character is (-1
    for the latter when only its beginning ends ``text[start:]``; both -1 when
    neither)."""
    at = text.find(marker, start)
    if at != -1:
        return at, at + len(marker) - 1
    for size in range(len(marker) - 1, 0, -1):
        if text.endswith(marker[:size], start):
            return len(text) - size, -1
    return -1, -1


def _close_at(text: str, start: int) -> tuple[int, int]:
    """Where a citation's closing tag first starts from ``start`` and where its ``>``
    is (-1 when not yet)."""
    at, _ = _marker_at(text, CITE_CLOSE, start)
    if at == -1:
        return -1, -1
    if not text.startswith(CITE_CLOSE, at):
        return at, -1
    end = text.find(">", at + 1)
    return at, end
