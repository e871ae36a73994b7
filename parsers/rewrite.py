"""A rewrite a family's serving parser applies to everything its parsers give.

vLLM serves some families (MiniCPM-V) through a parser of their own that runs the
reasoning and tool parsers as usual, then rewrites the text they give: every streamed
delta, and a whole output's reasoning and content. A reasoning parser that implements
``Rewrites`` is that rewrite; its state is plain data kept in the parser's own state
struct, so it snapshots and restores with it. ``ChatStream`` and ``ChatParser`` apply
it last, whatever the family.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from parsers.types import Delta

__all__ = ["Rewrites"]


@runtime_checkable
class Rewrites(Protocol):
    def rewrite_delta(self, delta: Delta | None, finished: bool) -> Delta | None:
        """A parsed delta rewritten (None: nothing to send); ``finished``: the last chunk."""
        ...

    def rewrite_text(self, text: str | None) -> str | None:
        """A whole output's reasoning or content rewritten."""
        ...
