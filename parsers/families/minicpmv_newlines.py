"""MiniCPM-V's newline recovery: its tokenizer writes a newline as the two characters
``\\`` and ``n``, so vLLM turns ``\\n``, ``\\r`` and ``\\r\\n`` back into newlines in the
text it sends, leaving code (```...```, `...`), LaTeX ($...$, $$...$$, \\(...\\),
\\[...\\]) and runs of several backslashes as written.

Streamed, the text arrives in pieces: a piece ending in half an escape (``\\``, ``\\r``,
a backtick that may be the first of three, a ``$`` that may be one of two, half a closing
marker) holds that tail until the next piece, and a run of backslashes is held whole
until it ends (its length decides whether a following ``n`` is a newline). The held run
is kept as a count, so each character is read once however long the run grows.
"""

from __future__ import annotations

import re

from msgspec import Struct

__all__ = ["NewlineState", "recover", "recover_whole"]

# Where plain text stops: the characters that may start an escape, code or LaTeX.
_SPECIAL = re.compile(r"[`$\\]")
# Tails a piece holds back, not at its end: the start of a longer escape or marker.
_HELD_ESCAPES = ("\\", "\\r", "\\r\\")


class NewlineState(Struct):
    """One text channel's recovery between pieces (reasoning and content each keep one)."""

    closing: str = ""  # the marker that ends the code or LaTeX span we are in ("": none)
    held: str = ""  # a short tail (at most three characters) read again with the next piece
    run: int = 0  # a run of two or more backslashes at the end, held whole


def recover(state: NewlineState, text: str, final: bool) -> str:
    """The recovered text of the next piece; ``final``: nothing follows (release all)."""
    out: list[str] = []
    pos = 0
    if state.run:
        slashes = len(text) - len(text.lstrip("\\"))
        if not final and slashes == len(text):
            state.run += slashes
            return ""
        out.append("\\" * (state.run + slashes))
        state.run = 0
        pos = slashes
    elif state.held:
        text = state.held + text
        state.held = ""
    size = len(text)
    while pos < size:
        if state.closing:
            pos = _inside(state, text, pos, final, out)
            continue
        char = text[pos]
        if char == "`":
            if not final and size - pos <= 2 and text[pos:] in ("`", "``"):
                state.held = text[pos:]
                break
            marker = "```" if text.startswith("```", pos) else "`"
            out.append(marker)
            pos += len(marker)
            state.closing = marker
        elif char == "$":
            if not final and pos == size - 1:
                state.held = "$"
                break
            marker = "$$" if text.startswith("$$", pos) else "$"
            out.append(marker)
            pos += len(marker)
            state.closing = marker
        elif char == "\\":
            end = pos + 1
            while end < size and text[end] == "\\":
                end += 1
            if end - pos > 1:
                if not final and end == size:
                    state.run = end - pos
                    break
                out.append(text[pos:end])
                pos = end
                continue
            if not final and size - pos <= 3 and text[pos:] in _HELD_ESCAPES:
                state.held = text[pos:]
                break
            pos = _escape(state, text, pos, out)
        else:
            match = _SPECIAL.search(text, pos)
            end = match.start() if match is not None else size
            out.append(text[pos:end])
            pos = end
    return "".join(out)


def _inside(state: NewlineState, text: str, pos: int, final: bool, out: list[str]) -> int:
    """Text inside a code or LaTeX span, kept as written up to its closing marker."""
    marker = state.closing
    found = text.find(marker, pos)
    if found >= 0:
        out.append(text[pos : found + len(marker)])
        state.closing = ""
        return found + len(marker)
    size = len(text)
    if not final:
        # The first tail that may still grow into the marker is held.
        for start in range(max(pos, size - len(marker) + 1), size):
            if marker.startswith(text[start:]):
                out.append(text[pos:start])
                state.held = text[start:]
                return size
    out.append(text[pos:])
    return size


def _escape(state: NewlineState, text: str, pos: int, out: list[str]) -> int:
    """One backslash not in a run: a newline escape, a LaTeX opener, or itself."""
    if text.startswith("\\r\\n", pos):
        out.append("\n")
        return pos + 4
    if text.startswith(("\\n", "\\r"), pos):
        out.append("\n")
        return pos + 2
    if text.startswith(("\\(", "\\["), pos):
        out.append(text[pos : pos + 2])
        state.closing = "\\)" if text[pos + 1] == "(" else "\\]"
        return pos + 2
    out.append("\\")
    return pos + 1


def recover_whole(text: str | None) -> str | None:
    """A whole output's text recovered at once (vLLM's one-shot reading)."""
    if text is None or "\\" not in text:
        return text
    return recover(NewlineState(), text, final=True)
