"""Think-tag reasoning (``deepseek_r1``): ``<think>`` ... ``</think>`` then the answer."""

from __future__ import annotations

from collections.abc import Sequence

from parsers.types import Vocabulary

THINK_START = "<think>"
THINK_END = "</think>"


class ParserUnavailable(ValueError):
    """The tokenizer lacks a token this parser cannot work without."""


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
