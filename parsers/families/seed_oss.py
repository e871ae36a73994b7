"""Seed-OSS (``seed_oss``): Qwen3's grammar with its markers renamed.

Reasoning is ``<seed:think>`` ... ``</seed:think>``, calls are Qwen3-Coder's
``<function=NAME>`` bodies inside ``<seed:tool_call>`` tags, and turns are bounded by
``<seed:bos>`` / ``<seed:eos>``; everything else, thinking switch included, is Qwen3's.
"""

from __future__ import annotations

from parsers.engine.tools import tool_builders
from parsers.families.qwen3 import Qwen3Grammar, Qwen3Reasoning, Qwen3ReasoningState, Spelling
from parsers.families.qwen3_coder import Qwen3CoderState, Qwen3CoderTools
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import Vocabulary

SEED_OSS = Spelling(
    think_start="<seed:think>",
    think_end="</seed:think>",
    tool_start="<seed:tool_call>",
    tool_end="</seed:tool_call>",
    turn_boundaries=("<seed:bos>", "<seed:eos>"),
)


def _grammar(_: str, vocab: Vocabulary) -> Qwen3Grammar:
    return Qwen3Grammar(vocab, SEED_OSS)


def _reasoning_stream(
    grammar: Qwen3Grammar, request: Request, kept: object
) -> tuple[Qwen3Reasoning, Qwen3ReasoningState]:
    state = reuse(kept, Qwen3ReasoningState)
    return Qwen3Reasoning(grammar, request.options, state), state


class SeedOssTools(Qwen3CoderTools):
    """vLLM gives Seed-OSS no structural tag, so a required or named ``tool_choice`` is
    read as the forced JSON the engine was constrained to, not as markup."""

    supports_required_and_named = True


_tools, _tools_stream = tool_builders(SeedOssTools)

FAMILY = Family(
    title="Seed-OSS",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("seed_oss",),
            engine_based=True,
            needs=(SEED_OSS.think_start, SEED_OSS.think_end),
            states=(Qwen3ReasoningState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: Qwen3Reasoning(grammar, request.options),
            stream=_reasoning_stream,
            golden=("Y1",),
        ),
    ),
    tools=(
        Tools(
            names=("seed_oss",),
            engine_based=True,
            states=(Qwen3CoderState,),
            prepare=_grammar,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("Y1",),
        ),
    ),
)
