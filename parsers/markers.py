"""Splitting text at marker literals (``<think>``, ``<tool_call>``, ...).

At each position the longest literal that matches there is a marker; everything
between markers is text. This is how a marker-driven parser sees a complete
output, where no marker can still be cut off by the end of a chunk.
"""

from __future__ import annotations

from collections.abc import Iterable


class MarkerSet:
    """A fixed set of literals, matched longest first."""

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = tuple(sorted(set(literals), key=len, reverse=True))
        self._first_chars = frozenset(literal[0] for literal in self.literals)

    def split(self, text: str) -> list[tuple[str | None, str]]:
        """``(marker, text)`` pieces in order: ``marker`` is None for plain text."""
        pieces: list[tuple[str | None, str]] = []
        start = 0
        i = 0
        first_chars = self._first_chars
        while i < len(text):
            if text[i] in first_chars:
                match = next((m for m in self.literals if text.startswith(m, i)), None)
                if match is not None:
                    if i > start:
                        pieces.append((None, text[start:i]))
                    pieces.append((match, match))
                    i += len(match)
                    start = i
                    continue
            i += 1
        if start < len(text):
            pieces.append((None, text[start:]))
        return pieces
