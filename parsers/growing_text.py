"""A call body that grows a piece at a time: appends cost the piece, not the body.

``body += piece`` on a string held by a parser's state copies the whole body on every
chunk: quadratic in a long argument streamed one (long) token per chunk. ``GrowingText``
keeps the body as parts whose lengths at least double from the newest back (merging
the newest ones when they come close), so a body of n characters is O(log n) parts and
each character is copied O(log n) times in all. It reads like the string it stands for
(length, indexing, slices, ``find``, ``startswith``), so a scanner that reads forward
from a cursor and slices what it found costs what it reads; ``text()`` joins the whole
body, for readers that need all of it once (a call's end, one-shot).
"""

from __future__ import annotations

from typing import Protocol

from msgspec import Struct, field


class Text(Protocol):
    """What a scanner reads of a body: a ``str``, or a ``GrowingText``."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: int | slice, /) -> str: ...

    def find(self, sub: str, start: int = ..., end: int | None = ..., /) -> int: ...

    def startswith(self, prefix: str, start: int = ..., /) -> bool: ...


class GrowingText(Struct):
    """Text as parts, oldest first, each more than twice the length of the next."""

    parts: list[str] = field(default_factory=list)
    size: int = 0

    def __post_init__(self) -> None:
        if self.size != sum(len(part) for part in self.parts):
            raise ValueError("size is not the parts' length")

    def append(self, text: str) -> None:
        if not text:
            return
        parts = self.parts
        parts.append(text)
        self.size += len(text)
        while len(parts) > 1 and len(parts[-2]) <= 2 * len(parts[-1]):
            last = parts.pop()
            parts[-1] += last

    def drop_last(self, count: int) -> str:
        """Remove the last ``count`` characters (a few: copies the newest part) and give
        them back."""
        dropped = ""
        while count > 0 and self.parts:
            last = self.parts[-1]
            taken = last[max(0, len(last) - count) :]
            self.parts[-1] = last[: len(last) - len(taken)]
            if not self.parts[-1]:
                self.parts.pop()
            self.size -= len(taken)
            count -= len(taken)
            dropped = taken + dropped
        return dropped

    def text(self) -> str:
        """The whole text (joined once: later reads of it are free)."""
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __str__(self) -> str:
        return self.text()

    def __getitem__(self, key: int | slice) -> str:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                raise ValueError("only contiguous slices")
            return self._slice(start, stop)
        pos = key + self.size if key < 0 else key
        if not 0 <= pos < self.size:
            raise IndexError("GrowingText index out of range")
        k, offset = self._locate(pos)
        return self.parts[k][pos - offset]

    def find(self, sub: str, start: int = 0, end: int | None = None) -> int:
        """The first position of ``sub`` in ``[start, end)`` (-1 if none), as ``str.find``
        has it for positions in range: reads that span of the text, nothing before it."""
        start, end, _ = slice(start, end).indices(self.size)
        if end - start < len(sub):
            return -1
        if not sub:
            return start
        k, offset = self._locate(start)
        parts = self.parts
        at = parts[k].find(sub, start - offset, end - offset)
        if at >= 0:
            return offset + at
        # A match straddling into the later parts starts in the last len(sub) - 1
        # characters of this one; the text from there is no longer than from start.
        resume = max(start, offset + len(parts[k]) - len(sub) + 1)
        if resume + len(sub) > end:
            return -1
        at = self._slice(resume, end).find(sub)
        return resume + at if at >= 0 else -1

    def startswith(self, prefix: str, start: int = 0) -> bool:
        if start < 0:  # from the end, as ``str.startswith`` reads it
            start = max(start + self.size, 0)
        if start > self.size:
            return False
        return self[start : start + len(prefix)] == prefix

    def _locate(self, pos: int) -> tuple[int, int]:
        """The part holding ``pos`` and where it starts (``len(parts)`` and the size
        at the end). Walked from the newest part: reads are mostly near the end."""
        offset = self.size
        k = len(self.parts)
        if pos >= offset:
            return k, offset
        while offset > pos:
            k -= 1
            offset -= len(self.parts[k])
        return k, offset

    def _slice(self, start: int, stop: int) -> str:
        if stop <= start:
            return ""
        k, offset = self._locate(start)
        parts = self.parts
        first = parts[k]
        if stop - offset <= len(first):
            return first[start - offset : stop - offset]
        pieces = [first[start - offset :]]
        offset += len(first)
        for part in parts[k + 1 :]:
            if stop - offset <= len(part):
                pieces.append(part[: stop - offset])
                break
            pieces.append(part)
            offset += len(part)
        return "".join(pieces)
