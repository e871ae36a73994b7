"""Step-3.5 and Step-3.7 (``step3p5``): Qwen3's ``<think>`` reasoning and Qwen3-Coder
calls, with two differences in the reasoning: the chat template always opens
``<think>`` (no request turns thinking off), and the model ends reasoning with
``\\n</think>\\n``, so trailing reasoning whitespace is held back as vLLM's engines hold it.
The calls read exactly as ``qwen3_coder``'s (its declaration answers to ``step3p5``).
"""

from __future__ import annotations

from parsers.engine.reasoning import EngineReasoning, EngineReasoningState
from parsers.families.qwen3 import Qwen3Grammar
from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import ParseOptions


class Step3p5Reasoning(EngineReasoning):
    """Reasoning that no request switches off."""

    def __init__(
        self,
        grammar: Qwen3Grammar,
        options: ParseOptions,
        state: EngineReasoningState | None = None,
    ) -> None:
        super().__init__(grammar, options, state)
        self.thinking = True


def _stream(
    grammar: Qwen3Grammar, request: Request, kept: object
) -> tuple[Step3p5Reasoning, EngineReasoningState]:
    state = reuse(kept, EngineReasoningState)
    return Step3p5Reasoning(grammar, request.options, state), state


FAMILY = Family(
    title="Step-3.5, Step-3.7",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("step3p5",),
            engine_based=True,
            states=(EngineReasoningState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=lambda grammar, request: Step3p5Reasoning(grammar, request.options),
            stream=_stream,
            golden=("Q3",),
        ),
    ),
)
