"""Granite 4.2's reasoning (``granite_thinking_parser``): Nemotron 3's, content trimmed.

vLLM declares it as Nemotron 3's parser (Qwen3's format, reasoning's trailing whitespace
held, the forced-content swap) with one rule of its own: Granite's template writes
``\\n</think>\\n``, so newlines that open the answer are dropped. Streamed, reasoning
counts as ended only once the answer brings something besides newlines (until then the
stream stays with the reasoning parser, and a stream that ends there gets its reasoning
as content when the request forces content); one-shot, the content loses its leading
newlines and the swap happens only when there was no content at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from parsers.engine.core import CONTENT, REASONING
from parsers.engine.reasoning import hold_trailing_reasoning
from parsers.families.nemotron import NemotronReasoning, NemotronReasoningState
from parsers.families.qwen3 import Qwen3Grammar, Qwen3Reasoning
from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import Delta, ParseOptions


class GraniteThinkingState(NemotronReasoningState, tag="granite_thinking"):
    content_started: bool = False


class GraniteThinkingReasoning(NemotronReasoning):
    """Nemotron 3's reasoning, the answer's leading newlines dropped."""

    def __init__(
        self,
        grammar: Qwen3Grammar,
        options: ParseOptions,
        state: GraniteThinkingState | None = None,
    ) -> None:
        self.granite = state if state is not None else GraniteThinkingState()
        super().__init__(grammar, options, self.granite)

    def _trimmed(self, delta: Delta | None) -> Delta | None:
        """The delta without the newlines that open the answer (vLLM's reading)."""
        if delta is None or delta.content is None or self.granite.content_started:
            return delta
        content = delta.content.lstrip("\n")
        if content:
            self.granite.content_started = True
            delta.content = content
            return delta
        delta.content = None
        return delta if delta.reasoning is not None or delta.tool_calls else None

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.granite.ended and self.granite.content_started

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.granite
        delta = Qwen3Reasoning.stream(self, text, token_ids)
        if self.force_content and delta is not None and delta.reasoning:
            state.streamed.append(delta.reasoning)
        return hold_trailing_reasoning(self._trimmed(delta), state, state.ended)

    def finish(self) -> Delta | None:
        state = self.granite
        ended = state.ended and state.content_started
        promoted = "" if ended else "".join(state.streamed)
        flushed = self._trimmed(Qwen3Reasoning.finish(self))
        if not promoted:
            return flushed
        if flushed is None:
            return Delta(content=promoted)
        flushed.content = promoted + (flushed.content or "")
        return flushed

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
        absent = content is None
        if content is not None:
            content = content.lstrip("\n") or None
        if self.force_content and absent:
            return content, reasoning
        return reasoning, content


def _stream(
    grammar: Qwen3Grammar, request: Request, kept: object
) -> tuple[GraniteThinkingReasoning, GraniteThinkingState]:
    state = reuse(kept, GraniteThinkingState)
    return GraniteThinkingReasoning(grammar, request.options, state), state


# Thinking: on unless ``enable_thinking`` is false (read by ``Qwen3Reasoning``).
FAMILY = Family(
    title="Granite 4.2 (thinking)",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("granite_thinking_parser",),
            engine_based=True,
            states=(GraniteThinkingState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=lambda grammar, request: GraniteThinkingReasoning(grammar, request.options),
            stream=_stream,
            golden=("A2",),
        ),
    ),
)
