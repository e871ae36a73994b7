"""Nemotron 3 reasoning (``nemotron_v3``): Qwen3's format with two differences.

vLLM declares it on its engine as Qwen3's grammar (``<think>`` / ``</think>``, a
``<tool_call>`` ending reasoning, ChatML turns bounding the prompt scan) with reasoning's
trailing whitespace held back, and one rule of its own: a request that turns thinking
off (``enable_thinking: false``) or asks for ``force_nonempty_content`` never gets an
empty answer. One-shot, reasoning and content swap when the content is empty or
whitespace; streamed, a stream that ends still reasoning gets everything it streamed as
reasoning once more, as content, on its last chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import field

from parsers.engine.core import CONTENT, REASONING
from parsers.engine.reasoning import (
    HeldReasoningState,
    HoldingReasoning,
    ends_unspaced,
    hold_trailing_reasoning,
)
from parsers.families.qwen3 import Qwen3Grammar, Qwen3Reasoning
from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import Delta, ParseOptions, PlainText


def forces_content(options: ParseOptions) -> bool:
    """Whether the request wants a non-empty answer: thinking off, or asked outright."""
    kwargs = options.chat_template_kwargs
    return kwargs.get("enable_thinking") is False or kwargs.get("force_nonempty_content") is True


class NemotronReasoningState(HeldReasoningState, tag="nemotron_v3"):
    # Reasoning as streamed (before trailing whitespace is held), kept only for a
    # request that forces content: the answer of a stream that never ends reasoning.
    streamed: list[str] = field(default_factory=list)


class NemotronReasoning(HoldingReasoning):
    """Qwen3's reasoning with held whitespace and the forced-content swap."""

    def __init__(
        self,
        grammar: Qwen3Grammar,
        options: ParseOptions,
        state: NemotronReasoningState | None = None,
    ) -> None:
        self.nemotron = state if state is not None else NemotronReasoningState()
        super().__init__(grammar, options, self.nemotron)
        self.force_content = forces_content(options)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        reasoning: str | None = None
        content: str | None = text
        if self.thinking:
            closed = (
                prompt_token_ids is not None
                and bool(self.grammar.boundary_ids)
                and self.is_reasoning_end(prompt_token_ids)
            )
            reasoning, content = self._split(text, CONTENT if closed else REASONING)
        if self.force_content and (content is None or not content.strip()):
            return content, reasoning
        return reasoning, content

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        delta = Qwen3Reasoning.stream(self, text, token_ids)
        if self.force_content and delta is not None and delta.reasoning:
            self.nemotron.streamed.append(delta.reasoning)
        return hold_trailing_reasoning(delta, self.nemotron, self.nemotron.ended)

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """``HoldingReasoning.plain_text``, each plain chunk's text kept as ``stream``
        keeps what it streams for a request that forces content."""
        looks = super().plain_text(token_ids)
        if looks is None or not self.force_content:
            return looks
        return looks._replace(check=self._kept)

    def _kept(self, text: str) -> bool:
        if not ends_unspaced(text):
            return False
        self.nemotron.streamed.append(text)
        return True

    def finish(self) -> Delta | None:
        """The engine's flush; a stream still reasoning that forces content gets its
        streamed reasoning as content first."""
        promoted = "" if self.nemotron.ended else "".join(self.nemotron.streamed)
        flushed = super().finish()
        if not promoted:
            return flushed
        if flushed is None:
            return Delta(content=promoted)
        flushed.content = promoted + (flushed.content or "")
        return flushed


# ------------------------------------------------------------------ the family


def _stream(
    grammar: Qwen3Grammar, request: Request, kept: object
) -> tuple[NemotronReasoning, NemotronReasoningState]:
    state = reuse(kept, NemotronReasoningState)
    return NemotronReasoning(grammar, request.options, state), state


# Thinking: on unless ``enable_thinking`` is false (read by ``Qwen3Reasoning``).
FAMILY = Family(
    title="Nemotron 3",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("nemotron_v3",),
            engine_based=True,
            states=(NemotronReasoningState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=lambda grammar, request: NemotronReasoning(grammar, request.options),
            stream=_stream,
            golden=("N2",),
        ),
    ),
)
