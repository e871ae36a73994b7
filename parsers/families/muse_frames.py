"""Muse's channel framing, read as vLLM 0.33.0's Muse parsers segment it.

A Muse turn is messages: a header ``[<|start|>assistant] [to=RECIPIENT]<|message|>``,
a body, and a boundary (``<|eom|>``, ``<|eot|>``). vLLM's reasoning and tool parsers
find headers with different patterns, and this module reads each (``Reading``):

* the reasoning parser's: ``<|start|>assistant`` then any whitespace, a recipient of
  any characters but whitespace and ``<``; a body also ends at ``<|start|>``;
* the tool parser's: ``<|start|>``, whitespace, ``assistant``, then spaces (no
  newline), a recipient of letters, digits and ``_.-``; a body ends at ``<|eom|>`` or
  ``<|eot|>`` (closed) or is cut at ``<|start|>`` (still open);
* Glimmer's reasoning parser's: ``to=RECIPIENT<|message|>`` only (a bare
  ``<|message|>`` is body text); a body ends at ``<|eom|>``, ``<|eot|>`` or the next
  header.

Every ``<|message|>`` ends exactly one header; where the header starts is read back
from there over the run of recipient characters and whitespace before it, once per
header, so the whole read costs the text's length. ``Segmenter`` reads a stream a
piece at a time, keeping only the text of the message being read.
"""

from __future__ import annotations

from enum import Enum

from msgspec import Struct, field

from parsers.growing_text import GrowingText

MESSAGE = "<|message|>"
START = "<|start|>"
EOM = "<|eom|>"
EOT = "<|eot|>"
ASSISTANT = "assistant"
CALLS_OPEN = "<atem:function_calls>"
INVOKE_OPEN = "<atem:invoke"

# ``\s`` as vLLM's ``regex`` patterns read it (Unicode White_Space).
WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_LONGEST_MARKER = len(MESSAGE)


def has_atem(body: str) -> bool:
    """Whether a body holds call markup, as both parsers test it."""
    return CALLS_OPEN in body or INVOKE_OPEN in body


class Frame(Struct):
    """One message: where its header starts, its body's span (absolute offsets) and
    whether a boundary marker ended the body (``body_end`` -1 while it grows)."""

    recipient: str | None
    start: int
    body_start: int
    body_end: int = -1
    by_boundary: bool = False


def _run_back(text: GrowingText | str, end: int, floor: int, inside: frozenset[str]) -> int:
    """Where the run of ``inside`` characters ending at ``end`` starts (not before floor)."""
    at = end
    while at > floor and text[at - 1] in inside:
        at -= 1
    return at


def _run_back_not(text: GrowingText | str, end: int, floor: int) -> int:
    """Where the run of characters that are neither whitespace nor ``<`` ending at
    ``end`` starts: the reasoning parser's recipient characters."""
    at = end
    while at > floor:
        ch = text[at - 1]
        if ch in WHITESPACE or ch == "<":
            break
        at -= 1
    return at


def _glued_recipient(text: GrowingText | str, rest: int, m: int) -> tuple[bool, str | None]:
    """Whether ``[rest, m)`` is nothing or ``to=`` and a recipient (and which)."""
    if rest == m:
        return True, None
    if m > rest + 3 and text.startswith("to=", rest):
        return True, text[rest + 3 : m]
    return False, None


def _reasoning_header(text: GrowingText | str, m: int, floor: int) -> tuple[int, str | None]:
    """The reasoning parser's header ending in the ``<|message|>`` at ``m``: from
    ``<|start|>assistant`` if it leads (spaced or glued), else from the first ``to=``
    of the recipient run, else ``<|message|>`` alone."""
    opener = START + ASSISTANT
    run = _run_back_not(text, m, floor)
    if run > floor and text[run - 1] == "<":
        lead = run - 1
        if text[lead : lead + len(opener)] == opener:
            fits, recipient = _glued_recipient(text, lead + len(opener), m)
            if fits:
                return lead, recipient
    elif run > floor:
        spaces = _run_back(text, run, floor, WHITESPACE)
        lead = spaces - len(opener)
        if lead >= floor and text[lead:spaces] == opener:
            fits, recipient = _glued_recipient(text, run, m)
            if fits:
                return lead, recipient
    to = text.find("to=", run, m)
    if to >= 0 and to + 3 < m:
        return to, text[to + 3 : m]
    return m, None


def _tool_header(text: GrowingText | str, m: int, floor: int) -> tuple[int, str | None]:
    """The tool parser's header ending in the ``<|message|>`` at ``m``."""
    name = _run_back(text, m, floor, _NAME_CHARS)
    recipient: str | None = None
    to_start = m
    if name < m and name - 3 >= floor and text[name - 3 : name] == "to=":
        recipient = text[name:m]
        to_start = name - 3
    spaces = _run_back(text, to_start, floor, WHITESPACE - {"\n"})
    word = spaces - len(ASSISTANT)
    if word >= floor and text[word:spaces] == ASSISTANT:
        gap = _run_back(text, word, floor, WHITESPACE)
        opener = gap - len(START)
        if opener >= floor and text[opener:gap] == START:
            return opener, recipient
    return spaces, recipient


class Reading(Enum):
    """Whose header pattern and boundaries a segmenter reads with."""

    REASONING = "reasoning"
    TOOL = "tool"
    GLIMMER = "glimmer"


def _glimmer_header(text: GrowingText | str, m: int, floor: int) -> tuple[int, str | None] | None:
    """Glimmer's ``to=[^\\s<]+<|message|>`` ending at ``m``, if there is one."""
    run = _run_back_not(text, m, floor)
    to = text.find("to=", run, m)
    if to >= 0 and to + 3 < m:
        return to, text[to + 3 : m]
    return None


class Segmenter(Struct):
    """Messages of a stream read a piece at a time, as ``reading`` reads them.

    ``text`` holds the stream from ``base`` on: the message being read, from its
    header, and whatever follows; ``searched`` is how far markers have been looked
    for. ``current`` is the message being read (None before the first header).
    """

    reading: Reading
    text: GrowingText = field(default_factory=GrowingText)
    base: int = 0
    searched: int = 0
    current: Frame | None = None
    headers: int = 0

    def feed(self, piece: str) -> list[tuple[Frame, str]]:
        """Read ``piece``; the messages it ended, each with its body."""
        self._drop_read()
        self.text.append(piece)
        done: list[tuple[Frame, str]] = []
        while True:
            event = self._next_event()
            if event is None:
                break
            at, marker = event
            if marker == MESSAGE:
                done.extend(self._header(at))
            else:
                self._boundary(at, marker)
        end = self.base + len(self.text)
        self.searched = max(self.searched, end - _LONGEST_MARKER + 1)
        return done

    def finish(self) -> list[tuple[Frame, str]]:
        """Every message the whole text held, the last one included (one-shot)."""
        current = self.current
        if current is None:
            return []
        return [(current, self.body(current))]

    def end(self) -> int:
        return self.base + len(self.text)

    def since(self, start: int) -> str:
        """The text from absolute offset ``start`` (at least this piece's first
        message's header) to the end."""
        return self.text[start - self.base :]

    def body(self, frame: Frame, offset: int = 0) -> str:
        """The body of the message being read (so far), or of one this piece ended,
        from ``offset`` into it."""
        start = frame.body_start + max(offset, 0)
        return self.text[start - self.base : self.body_stop(frame) - self.base]

    def body_stop(self, frame: Frame) -> int:
        """Where a body ends (so far)."""
        return frame.body_end if frame.body_end >= 0 else self.end()

    def find(self, needle: str, start: int, stop: int) -> bool:
        """Whether ``needle`` is in the text between two absolute offsets."""
        return self.text.find(needle, max(start - self.base, 0), stop - self.base) >= 0

    def _drop_read(self) -> None:
        """Forget the text before the message being read (it starts its own header)."""
        current = self.current
        keep = current.start if current is not None else self.base
        if keep > self.base:
            kept = self.text[keep - self.base :]
            self.text = GrowingText([kept] if kept else [], len(kept))
            self.base = keep

    def _next_event(self) -> tuple[int, str] | None:
        """The first marker at or after ``searched`` that changes what is read."""
        current = self.current
        markers: tuple[str, ...] = (MESSAGE,)
        if current is not None and current.body_end < 0:
            glimmer = self.reading is Reading.GLIMMER
            markers = (MESSAGE, EOM, EOT) if glimmer else (MESSAGE, EOM, EOT, START)
        best: tuple[int, str] | None = None
        origin = max(self.searched - self.base, 0)
        for marker in markers:
            at = self.text.find(marker, origin)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, marker)
        if best is None:
            return None
        return best[0] + self.base, best[1]

    def _boundary(self, at: int, marker: str) -> None:
        current = self.current
        assert current is not None
        current.body_end = at
        # The tool parser cuts a body at ``<|start|>`` but leaves it open.
        current.by_boundary = not (self.reading is Reading.TOOL and marker == START)
        self.searched = at + len(marker)

    def _header(self, at: int) -> list[tuple[Frame, str]]:
        current = self.current
        floor = current.body_start if current is not None else self.base
        if self.reading is Reading.GLIMMER:
            found = _glimmer_header(self.text, at - self.base, floor - self.base)
        elif self.reading is Reading.TOOL:
            found = _tool_header(self.text, at - self.base, floor - self.base)
        else:
            found = _reasoning_header(self.text, at - self.base, floor - self.base)
        if found is None:
            self.searched = at + len(MESSAGE)
            return []
        start, recipient = found[0] + self.base, found[1]
        done: list[tuple[Frame, str]] = []
        if current is not None:
            if current.body_end < 0 or current.body_end > start:
                current.body_end = start
                current.by_boundary = False
            done.append((current, self.body(current)))
        body_start = at + len(MESSAGE)
        self.current = Frame(recipient, start, body_start)
        self.headers += 1
        self.searched = body_start
        return done


def frames(text: str, reading: Reading) -> list[tuple[Frame, str]]:
    """Every message of a whole text, with its body (one-shot)."""
    segmenter = Segmenter(reading)
    found = segmenter.feed(text)
    return found + segmenter.finish()
