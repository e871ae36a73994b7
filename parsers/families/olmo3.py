"""Olmo 3 reasoning (``olmo3``): ``<think>`` / ``</think>`` spelled in ordinary tokens.

Olmo 3's vocabulary has no think tokens, so vLLM 0.33.0 reads the markers as text.

* One-shot: with a ``</think>`` in the output, reasoning is what precedes the first one
  (a leading ``<think>`` dropped) and content what follows; without one, all is content.
* Streamed: each chunk's text joins a buffer. A chunk whose text could be part of a
  marker (it lies inside one, or its end starts one, or its start ends one, as vLLM's
  ``string_overlap`` decides) is held, unless the buffer already holds that marker;
  otherwise the buffer is read: text before a ``<think>`` is content (sent alone, the
  rest kept for the next read), text before the buffer's last ``</think>`` is
  reasoning (likewise), and what remains goes out as reasoning or content, as the
  last marker left it. Nothing is flushed at the end: held text is lost, as in vLLM.
* Reasoning ends, for the tool parser, when the output's ids hold ``</`` (or ``Ġ</``),
  ``think``, ``>`` in a row; the same ids in the prompt end it before the output starts.

The buffer grows by parts (``GrowingText``) and is read from a cursor with the
markers' positions kept as it grows, so a stream costs what it reads once.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from parsers.families import olmo3_tools
from parsers.family import Family, ParserUnavailable, Reasoning, Request, reuse
from parsers.growing_text import GrowingText
from parsers.types import Delta, Vocabulary

THINK_START = "<think>"
THINK_END = "</think>"
# The ids vLLM looks for: ``</`` (with or without a leading space), then ``think``, ``>``.
_END_FIRST = ("Ġ</", "</")
_END_REST = ("think", ">")


class Olmo3Markers:
    """The token ids of a spelled ``</think>`` in this vocabulary."""

    def __init__(self, vocab: Vocabulary) -> None:
        ids = {token: vocab.id_of(token) for token in (*_END_FIRST, *_END_REST)}
        missing = [token for token, token_id in ids.items() if token_id is None]
        if missing:
            raise ParserUnavailable(f"this tokenizer has no {' / '.join(missing)} token")
        self.first = frozenset(ids[token] for token in _END_FIRST)
        self.rest = [ids[token] for token in _END_REST]

    def holds_end(self, token_ids: Sequence[int]) -> bool:
        """Whether ``</`` ``think`` ``>`` appear in a row in ``token_ids``."""
        rest = self.rest
        return any(
            token_ids[i] in self.first and list(token_ids[i + 1 : i + 1 + len(rest)]) == rest
            for i in range(len(token_ids) - len(rest))
        )


def extract_olmo3(text: str) -> tuple[str | None, str | None]:
    """vLLM's one-shot reading (the module docstring)."""
    end = text.find(THINK_END)
    if end < 0:
        return None, text
    start = len(THINK_START) if text.startswith(THINK_START) else 0
    return text[start:end] or None, text[end + len(THINK_END) :] or None


def partly_overlaps(text: str, marker: str) -> bool:
    """vLLM's ``string_overlap`` of a chunk's text with a marker, short of the whole
    marker: the text lies inside it (empty text too), or one's end is the other's start."""
    if len(text) < len(marker):
        if text in marker:
            return True
        span = len(text)
    else:
        if marker in text:
            return False
        span = len(marker)
    return any(text[-i:] == marker[:i] or marker[-i:] == text[:i] for i in range(1, span))


class Olmo3ReasoningState(Struct, tag="olmo3"):
    # The buffer, read from ``cursor``; emptied when all of it is read.
    buffer: GrowingText = field(default_factory=GrowingText)
    cursor: int = 0
    reasoning: bool = True  # what the last marker read left (vLLM starts in reasoning)
    # The first <think> at or past the cursor (-1: none before ``start_from``), and the
    # last </think> in the buffer (-1: none).
    start_at: int = -1
    start_from: int = 0
    end_at: int = -1
    # The output's last two ids (a spelled </think> across chunks), and whether the
    # ids have shown one.
    last_ids: list[int] = field(default_factory=list)
    ended: bool = False


class Olmo3Reasoning:
    """One-shot and streamed ``olmo3`` reasoning."""

    engine_based = False

    def __init__(self, markers: Olmo3Markers, state: Olmo3ReasoningState | None = None) -> None:
        self.markers = markers
        self.s = state if state is not None else Olmo3ReasoningState()

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.markers.holds_end(prompt_token_ids)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        return extract_olmo3(text)

    # ------------------------------------------------------------------ streaming

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        s = self.s
        ids = [*s.last_ids, *token_ids]
        s.ended = s.ended or self.markers.holds_end(ids)
        s.last_ids = ids[-len(self.markers.rest) :]
        self._append(text)
        starts = partly_overlaps(text, THINK_START)
        ends = partly_overlaps(text, THINK_END)
        if (starts and self._start() >= 0 and not ends) or (ends and self._has_end()):
            return self._read()
        if not (starts or ends):
            return self._read()
        return self._read() if self._has_end() else None

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.s.ended

    def content_ids(self, token_ids: list[int]) -> list[int]:
        """None: vLLM's parser gives the tool parser no ids of the ending chunk."""
        return []

    def finish(self) -> Delta | None:
        """Nothing: held text stays unsent, as in vLLM."""
        return None

    def _append(self, text: str) -> None:
        """Add ``text`` to the buffer, noting a ``</think>`` that ends in it."""
        s = self.s
        before = len(s.buffer)
        s.buffer.append(text)
        at = s.buffer.find(THINK_END, max(s.cursor, before - len(THINK_END) + 1))
        while at >= 0:
            s.end_at = at
            at = s.buffer.find(THINK_END, at + len(THINK_END))

    def _start(self) -> int:
        """The first ``<think>`` at or past the cursor (-1: none)."""
        s = self.s
        if s.start_at >= s.cursor:
            return s.start_at
        start = max(s.cursor, s.start_from)
        s.start_at = s.buffer.find(THINK_START, start)
        found = s.start_at >= 0
        s.start_from = s.start_at + 1 if found else max(start, len(s.buffer) - len(THINK_START) + 1)
        return s.start_at

    def _has_end(self) -> bool:
        return self.s.end_at >= self.s.cursor

    def _read(self) -> Delta:
        """vLLM's ``process_buffer``: one piece of the buffer, by the markers in it."""
        s = self.s
        start = self._start()
        if start >= 0:
            s.reasoning = True
            before = s.buffer[s.cursor : start]
            s.cursor = start + len(THINK_START)
            if before:
                return Delta(content=before)
        if self._has_end():
            s.reasoning = False
            before = s.buffer[s.cursor : s.end_at]
            s.cursor = s.end_at + len(THINK_END)
            if before:
                return Delta(reasoning=before)
        rest = s.buffer[s.cursor :]
        s.buffer, s.cursor = GrowingText(), 0
        s.start_at, s.start_from, s.end_at = -1, 0, -1
        return Delta(reasoning=rest) if s.reasoning else Delta(content=rest)


# ------------------------------------------------------------------ the family


def _stream(
    markers: Olmo3Markers, request: Request, kept: object
) -> tuple[Olmo3Reasoning, Olmo3ReasoningState]:
    state = reuse(kept, Olmo3ReasoningState)
    return Olmo3Reasoning(markers, state), state


FAMILY = Family(
    title="Olmo 3 (think markers as text)",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("olmo3",),
            engine_based=False,
            states=(Olmo3ReasoningState,),
            prepare=lambda name, vocab: Olmo3Markers(vocab),
            one_shot=lambda markers, request: Olmo3Reasoning(markers),
            stream=_stream,
            golden=("O1", "B1"),
        ),
    ),
    tools=(olmo3_tools.TOOLS,),
)
