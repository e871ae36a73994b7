"""MiniMax M3's reasoning: ``<mm:think>reasoning</mm:think>answer``, read as vLLM 0.33.0 reads it.

vLLM's ``minimax_m3`` reasoning parser is not on its engine: each chunk it splits the
whole text so far into what is visible as reasoning and as content and sends what grew.
With ``chat_template_kwargs.thinking_mode == "enabled"`` the template opens the block, so
the output starts inside it; otherwise the output is content unless it opens with
``<mm:think>`` (a leading stray ``</mm:think>`` is dropped). Reasoning ends at the first
chunk whose text holds ``</mm:think>`` or shows any content, and what follows goes to
the tool parser. A tail that may still grow into a marker is held back, and is lost when
the output stops there, as in vLLM.

Here the split is kept as positions in the text (the first ``<mm:think>`` and
``</mm:think>``, the reasoning span last shown), found in each chunk's new text only, so a
chunk costs its own length; the text itself is kept while reasoning lasts, because the
chunk that ends it may show everything before a late ``<mm:think>`` as content (vLLM's
reading, reproduced).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from msgspec import Struct, field

from parsers.growing_text import GrowingText, Text
from parsers.types import Delta, ParseOptions, Vocabulary

START = "<mm:think>"
END = "</mm:think>"

Span = tuple[int, int]
_NO_SPAN: Span = (-1, -1)


def thinking_mode(options: ParseOptions) -> bool:
    """Whether the template opened the reasoning block (``thinking_mode: "enabled"``)."""
    return options.chat_template_kwargs.get("thinking_mode") == "enabled"


class M3ThinkingState(Struct, tag="minimax_m3_reasoning"):
    """What the reasoning phase keeps: its text, where the markers are, what was shown,
    vLLM's three flags, the ids the ending chunk's content had, and which marker ids
    the output held."""

    text: GrowingText = field(default_factory=GrowingText)
    start_at: int = -1  # the first <mm:think> (-1: none yet)
    end_at: int = -1  # the first </mm:think>
    shown: Span = _NO_SPAN  # the reasoning span the last chunk showed (-1: none)
    looked: bool = False  # a chunk with text was read (the flags below are then set)
    active: bool = False
    pending: bool = False
    ended: bool = False
    content_for: list[int] = field(default_factory=list)  # the ending chunk's ids
    content_ids: list[int] | None = None  # and the ids of its content
    saw_ids: bool = False
    saw_start: bool = False
    saw_end: bool = False


def _partial(text: Text, lo: int, hi: int, marker: str) -> int:
    """The length of the longest end of ``text[lo:hi]`` that begins ``marker`` (not all of it)."""
    longest = min(hi - lo, len(marker) - 1)
    tail = text[hi - longest : hi] if longest > 0 else ""
    for size in range(longest, 0, -1):
        if marker.startswith(tail[longest - size :]):
            return size
    return 0


def _span(lo: int, hi: int) -> Span | None:
    return (lo, hi) if hi > lo else None


class M3Thinking:
    """``minimax_m3`` reasoning, one-shot and streamed."""

    engine_based = False

    def __init__(
        self,
        vocab: Vocabulary,
        initial: bool,
        state: M3ThinkingState | None = None,
    ) -> None:
        self.initial = initial
        self.start_id = vocab.id_of(START)
        self.end_id = vocab.id_of(END)
        self.token_text: Callable[[int], str] = vocab.token_text
        self.state = state if state is not None else M3ThinkingState()

    # ------------------------------------------------------------------ prompt and one-shot

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        """The prompt's last ``</mm:think>`` comes after its last ``<mm:think>``."""
        for token_id in reversed(prompt_token_ids):
            if token_id == self.end_id:
                return True
            if token_id == self.start_id:
                return False
        return False

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        if not self.initial and text.startswith(END):
            return None, text[len(END) :] or None
        if self.initial and START not in text:
            reasoning, end, content = text.partition(END)
            return (reasoning, content or None) if end else (text, None)
        if START not in text:
            return None, text
        before, _, after = text.partition(START)
        reasoning, end, after_end = after.partition(END)
        if not end:
            return reasoning, before or None
        return reasoning, (before + after_end) or None

    # ------------------------------------------------------------------ streaming

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        if token_ids:
            state.saw_ids = True
            state.saw_start = state.saw_start or self.start_id in token_ids
            state.saw_end = state.saw_end or self.end_id in token_ids
        if not text:
            return None
        body = state.text
        before = len(body)
        body.append(text)
        if state.start_at < 0:
            state.start_at = body.find(START, max(0, before - len(START) + 1))
        if state.end_at < 0:
            state.end_at = body.find(END, max(0, before - len(END) + 1))
        shown, content = self._segments()
        state.looked = True
        if state.end_at >= 0 or content is not None:
            state.ended, state.active, state.pending = True, False, False
        else:
            whole = body.text() if len(body) <= len(END) else ""
            state.active = self.initial or state.start_at >= 0 or shown is not None
            state.pending = (
                not state.active
                and bool(whole)
                and (START.startswith(whole) or END.startswith(whole))
            )
        reasoning = self._grown(shown)
        state.shown = shown if shown is not None else _NO_SPAN
        if state.ended:
            state.content_for = list(token_ids)
            state.content_ids = self._content_ids(text, token_ids, content)
            state.text = GrowingText()  # read no more: the tool parser reads on
        if reasoning is None and content is None:
            return None
        return Delta(reasoning=reasoning, content=content)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        """vLLM's ``is_reasoning_end_streaming`` over the output's ids so far."""
        state = self.state
        if state.ended:
            return True
        if (state.active if state.looked else self.initial) or state.pending:
            return False
        if state.saw_end:
            return True
        if self.initial:
            return False
        return state.saw_ids and not state.saw_start

    def content_ids(self, token_ids: list[int]) -> list[int]:
        state = self.state
        if state.content_ids is not None and state.content_for == token_ids:
            found, state.content_ids, state.content_for = state.content_ids, None, []
            return found
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] == self.end_id:
                return token_ids[i + 1 :]
        if self.start_id in token_ids or self.initial:
            return []
        return token_ids

    def finish(self) -> Delta | None:
        return None

    # ------------------------------------------------------------------ vLLM's split

    def _segments(self) -> tuple[Span | None, str | None]:
        """vLLM's visible reasoning (as a span of the text) and content of the text so far."""
        state = self.state
        body = state.text
        size = len(body)
        base = 0
        if not self.initial:
            if size < len(END) and END.startswith(body.text()):
                return None, None
            if body.startswith(END):
                base = len(END)
                if size == base:
                    return None, None
        start = state.start_at
        if start < 0:
            if self.initial:
                end = state.end_at
                if end >= 0:
                    return _span(0, end), body[end + len(END) :] or None
                return _span(0, size - _partial(body, 0, size, END)), None
            return None, body[base : size - _partial(body, base, size, START)] or None
        lead = body[base:start]
        opened = start + len(START)
        end = state.end_at
        if 0 <= end < opened:
            end = body.find(END, opened)
        if end >= 0:
            return _span(opened, end), (lead + body[end + len(END) :]) or None
        return _span(opened, size - _partial(body, opened, size, END)), lead or None

    def _grown(self, shown: Span | None) -> str | None:
        """What of the reasoning ``shown`` now the last chunk did not show (all of it
        when it does not begin with that)."""
        if shown is None:
            return None
        body = self.state.text
        lo, hi = self.state.shown
        if lo < 0:
            return body[shown[0] : shown[1]]
        was = hi - lo
        if shown[0] == lo or (
            shown[1] - shown[0] >= was and body[shown[0] : shown[0] + was] == body[lo:hi]
        ):
            return body[shown[0] + was : shown[1]] or None
        return body[shown[0] : shown[1]]

    def _content_ids(self, text: str, token_ids: Sequence[int], content: str | None) -> list[int]:
        """The ids of the ending chunk's content: all of them when it is the chunk's text,
        those after the longest run of ids spelling what precedes it; else those after the
        chunk's last marker id (vLLM re-encodes the text there; these are its ids)."""
        ids = list(token_ids)
        if content is None:
            return []
        if content == text:
            return ids
        if text.endswith(content):
            prefix = text[: len(text) - len(content)]
            spelled = ""
            for index, token_id in enumerate(ids):
                if spelled == prefix:
                    return ids[index:]
                spelled += self.token_text(token_id)
                if not prefix.startswith(spelled):
                    break
            if spelled == prefix:
                return []
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] in (self.start_id, self.end_id):
                return ids[i + 1 :]
        return ids
