"""Think-tag reasoning (``deepseek_r1``): ``<think>`` ... ``</think>`` then the answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from msgspec import Struct

from parsers.family import ParserUnavailable
from parsers.types import Delta, PlainText, Vocabulary

THINK_START = "<think>"
THINK_END = "</think>"


class ThinkTagReasoning:
    """vLLM's think-tag base: markers are single tokens; no turn boundaries."""

    def __init__(self, vocab: Vocabulary) -> None:
        start_id, end_id = vocab.id_of(THINK_START), vocab.id_of(THINK_END)
        if start_id is None or end_id is None:
            raise ParserUnavailable(
                f"this tokenizer has no {THINK_START} / {THINK_END} tokens for reasoning"
            )
        self.start_id = start_id
        self.end_id = end_id

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """Whether the last marker in ``token_ids`` closes reasoning."""
        for token_id in reversed(token_ids):
            if token_id == self.start_id:
                return False
            if token_id == self.end_id:
                return True
        return False

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """Split a whole output: after the first ``<think>``, up to the first ``</think>``.

        Without any ``</think>`` everything is reasoning. The prompt is not consulted.
        """
        before, start, after = text.partition(THINK_START)
        text = after if start else before
        reasoning, end, content = text.partition(THINK_END)
        if not end:
            return text, None
        return reasoning, content or None


class ThinkTagStreamState(Struct, tag="think"):
    start_seen: bool = False
    end_seen: bool = False


class ThinkTagStream:
    """Streamed think-tag reasoning, decided on token ids as vLLM's legacy parser does.

    ``deepseek_r1``: without a ``<think>`` in the output, text before ``</think>``
    is reasoning (the chat template opened it).
    """

    engine_based = False
    # Whether ``plain_text`` is ``stream``'s test: False where a subclass reads otherwise.
    _stream_is_ours: ClassVar[bool] = True

    def __init__(self, parser: ThinkTagReasoning, state: ThinkTagStreamState | None = None):
        self.parser = parser
        self.state = state if state is not None else ThinkTagStreamState()
        # Reasoning text alone: no think marker among a chunk's ids.
        self._plain = PlainText(frozenset((parser.start_id, parser.end_id)), frozenset())

    def __init_subclass__(cls) -> None:
        """A subclass with its own ``stream`` or ``ended_by`` reads chunks otherwise than
        ``plain_text`` tells, unless it gives its own ``plain_text``."""
        super().__init_subclass__()
        if "plain_text" not in vars(cls) and ("stream" in vars(cls) or "ended_by" in vars(cls)):
            cls._stream_is_ours = False

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Reasoning text alone (``ReadsPlain``): a chunk with no think marker among its
        ids, before any end was seen; it changes no state then."""
        if not self._stream_is_ours or self.state.end_seen:
            return None
        return self._plain

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        start_id, end_id = self.parser.start_id, self.parser.end_id
        start_before, end_before = state.start_seen, state.end_seen
        state.start_seen = start_before or start_id in token_ids
        state.end_seen = end_before or end_id in token_ids
        if len(token_ids) == 1 and (
            token_ids[0] == end_id or (token_ids[0] == start_id and not start_before)
        ):
            return None
        end = text.find(THINK_END) if end_id in token_ids else -1
        start = text.find(THINK_START) if start_id in token_ids and not start_before else -1
        if start >= 0 and (end < 0 or start < end):
            # The opening marker is markup (vLLM keeps it when it shares a chunk); only
            # the marker goes, so the text around it is what one token per chunk sends.
            text = text[:start] + text[start + len(THINK_START) :]
            if end < 0:
                return Delta(reasoning=text) if text else None
            end -= len(THINK_START)
        if end >= 0:
            after = text[end + len(THINK_END) :]
            return Delta(reasoning=text[:end], content=after or None)
        if end_before:
            return Delta(content=text)
        return Delta(reasoning=text)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.parser.is_reasoning_end(prompt_token_ids)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.parser.end_id in token_ids

    def content_ids(self, token_ids: list[int]) -> list[int]:
        end_id = self.parser.end_id
        if end_id not in token_ids[:-1]:
            return []
        return token_ids[token_ids.index(end_id) + 1 :]

    def finish(self) -> Delta | None:
        return None
