"""Muse Glimmer's compatibility reading of a whole output (vLLM 0.33.0's
``muse_glimmer`` reasoning parser), pass by pass as its patterns read it, each pass
linear:

* reasoning: every ``to=self<|message|>`` body up to ``<|eom|>``, consecutive ones
  joined by a newline, plus an unterminated one (up to the next header or the end);
* with the reasoning spans cut out, a text still holding call markup is the tool
  parser's input whole; else the content is the first ``to=user`` body (up to
  ``<|eot|>``, ``<|eom|>`` or the end, before a final newline), none when there is
  reasoning, the whole output when there is no framing at all.

A header here is ``to=RECIPIENT<|message|>`` only (no bare ``<|message|>``).
"""

from __future__ import annotations

from msgspec import Struct, field

from parsers.families.muse_frames import (
    ASSISTANT,
    CALLS_OPEN,
    EOM,
    EOT,
    INVOKE_OPEN,
    MESSAGE,
    START,
    WHITESPACE,
    Frame,
    Segmenter,
    has_atem,
)
from parsers.growing_text import GrowingText

SELF = "to=self" + MESSAGE
USER = "to=user" + MESSAGE


class Headers:
    """Where ``to=[^\\s<]+<|message|>`` headers start in one text, asked for the first at
    or after a growing offset."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.message = text.find(MESSAGE)

    def first(self, at: int) -> int:
        """The first header start at or after ``at`` (-1: none)."""
        text = self.text
        while self.message >= 0:
            m = self.message
            if m > at:
                run = m
                while run > at and text[run - 1] not in WHITESPACE and text[run - 1] != "<":
                    run -= 1
                to = text.find("to=", run, m)
                if to >= 0 and to + 3 < m:
                    return to
            self.message = text.find(MESSAGE, m + 1)
        return -1


def _eom_after(text: str, at: int) -> int:
    return text.find(EOM, at)


def _prefixed(text: str, header: int, floor: int) -> int:
    """Where a span starting at ``header`` starts with its optional
    ``<|start|>assistant`` and whitespace before it."""
    gap = header
    while gap > floor and text[gap - 1] in WHITESPACE:
        gap -= 1
    lead = gap - len(START + ASSISTANT)
    return lead if lead >= floor and text[lead:gap] == START + ASSISTANT else header


def strip_closed(text: str) -> str:
    """``text`` without its ``to=self<|message|>...<|eom|>`` spans."""
    kept: list[str] = []
    pos = 0
    while True:
        header = text.find(SELF, pos)
        eom = _eom_after(text, header + len(SELF)) if header >= 0 else -1
        if eom < 0:
            break
        kept.append(text[pos : _prefixed(text, header, pos)])
        pos = eom + len(EOM)
    kept.append(text[pos:])
    return "".join(kept)


def _open_spans(text: str) -> list[tuple[int, int, int]]:
    """Unterminated reasoning spans: (span start, body start, body end), each running
    to the next header or the end with no ``<|eom|>`` first."""
    spans = []
    headers = Headers(text)
    pos = 0
    header = text.find(SELF, pos)
    while header >= 0:
        body = header + len(SELF)
        eom = _eom_after(text, body)
        nxt = headers.first(body)
        stop = len(text) if nxt < 0 else nxt
        if eom >= 0 and eom < stop:
            header = text.find(SELF, header + 1)
            continue
        spans.append((_prefixed(text, header, pos), body, stop))
        pos = stop
        header = text.find(SELF, pos)
    return spans


def strip_open(text: str) -> str:
    kept: list[str] = []
    pos = 0
    for start, _, stop in _open_spans(text):
        kept.append(text[pos:start])
        pos = stop
    kept.append(text[pos:])
    return "".join(kept)


def _reasoning(text: str) -> str | None:
    """The closed spans (consecutive ones joined by a newline), then the first open one."""
    collapsed: list[str] = []
    pos = 0
    eom = text.find(EOM)
    while eom >= 0:
        header = text.find(SELF, eom + len(EOM))
        if header < 0:
            break
        collapsed.append(text[pos:eom] + "\n")
        pos = header + len(SELF)
        eom = text.find(EOM, pos)
    joined = "".join(collapsed) + text[pos:]
    found: list[str] = []
    at = joined.find(SELF)
    while at >= 0:
        end = joined.find(EOM, at + len(SELF))
        if end < 0:
            break
        found.append(joined[at + len(SELF) : end])
        at = joined.find(SELF, end + len(EOM))
    reasoning = "\n".join(found) if found else None
    spans = _open_spans(text)
    if spans and spans[0][2] > spans[0][1]:
        partial = text[spans[0][1] : spans[0][2]]
        reasoning = f"{reasoning}\n{partial}" if reasoning else partial
    return reasoning


def _answer(text: str) -> str | None:
    at = text.find(USER)
    if at < 0:
        return None
    body = at + len(USER)
    stops = [p for p in (text.find(EOT, body), text.find(EOM, body)) if p >= 0]
    end = min(stops) if stops else len(text)
    if not stops and text.endswith("\n") and end > body:
        end -= 1
    return text[body:end] or None


def extract(text: str) -> tuple[str | None, str | None]:
    """vLLM's ``muse_glimmer`` one-shot split (the module docstring)."""
    reasoning = _reasoning(text)
    remainder = strip_open(strip_closed(text))
    if has_atem(remainder):
        return reasoning, remainder or None
    if USER in text:
        return reasoning, _answer(text)
    if SELF in text:
        return reasoning, None
    return None, text or None


def prompt_hands_off(text: str) -> bool:
    """Whether a (prompt's) text's last assistant turn has a tool channel followed by
    call markup, reasoning spans cut out."""
    at = text.rfind(START + ASSISTANT)
    scoped = text[at + len(START + ASSISTANT) :] if at >= 0 else text
    scoped = strip_open(strip_closed(scoped))
    headers = Headers(scoped)
    start = headers.first(0)
    while start >= 0:
        end = scoped.find(MESSAGE, start)
        if scoped[start + 3 : end] not in ("self", "user"):
            return has_atem(scoped[start:])
        start = headers.first(end + len(MESSAGE))
    return False


class GlimmerTurn(Struct):
    """Where Glimmer's hand-off is looked for: the text after the last
    ``<|start|>assistant``, from its first tool channel on (``held``, once found)."""

    turn: int = 0
    carry: str = ""
    tool: int = -1
    held: GrowingText = field(default_factory=GrowingText)
    searched: int = 0

    def advance(self, frames: Segmenter, ended: list[tuple[Frame, str]], text: str) -> str | None:
        """Read one chunk; the tool channel's text once it holds call markup."""
        opener = START + ASSISTANT
        seen = self.carry + text
        last = seen.rfind(opener)
        if last >= 0:
            self.turn = frames.end() - len(seen) + last + len(opener)
        self.carry = seen[-(len(opener) - 1) :]
        if 0 <= self.tool < self.turn:
            self.tool, self.held, self.searched = -1, GrowingText(), 0
        if self.tool >= 0:
            self.held.append(text)
        else:
            candidates = [f for f, _ in ended]
            if frames.current is not None:
                candidates.append(frames.current)
            for frame in candidates:
                if frame.start >= self.turn and frame.recipient not in ("self", "user"):
                    self.tool = frame.start
                    handed = frames.since(frame.start)
                    self.held = GrowingText([handed], len(handed))
                    break
        if self.tool < 0:
            return None
        start = max(self.searched - len(CALLS_OPEN) + 1, 0)
        self.searched = len(self.held)
        if self.held.find(CALLS_OPEN, start) >= 0 or self.held.find(INVOKE_OPEN, start) >= 0:
            return self.held.text()
        return None
