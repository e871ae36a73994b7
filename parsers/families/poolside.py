"""Poolside's Laguna reasoning (``poolside_v1``): ``deepseek_v3``'s, read back only to
the assistant's turn; its tool calls (``poolside_v1`` too) are in poolside_tools.py.

As ``deepseek_v3``, a request that asks for thinking (``thinking`` or
``enable_thinking``) is read as ``deepseek_r1`` (``<think>`` ... ``</think>``), any other
as content alone. Whether the prompt already ended reasoning is read back from its end
only to the last ``<assistant>``: a ``</think>`` in an earlier turn, a few-shot example
or a tool description does not end this turn's reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence

from parsers.families.deepseek import thinking_requested
from parsers.families.poolside_tools import PoolsideTools, PoolsideToolState, PoolsideToolStream
from parsers.families.think import (
    THINK_END,
    THINK_START,
    ThinkTagReasoning,
    ThinkTagStream,
    ThinkTagStreamState,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import Vocabulary

ASSISTANT = "<assistant>"


class AssistantTurnReasoning(ThinkTagReasoning):
    """Think tags whose prompt is read back only to the assistant turn's opener."""

    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        self.assistant_id = vocab.id_of(ASSISTANT)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        for token_id in reversed(token_ids):
            if token_id == self.start_id or token_id == self.assistant_id:
                return False
            if token_id == self.end_id:
                return True
        return False


def _prepare(_: str, vocab: Vocabulary) -> AssistantTurnReasoning:
    return AssistantTurnReasoning(vocab)


def _one_shot(think: AssistantTurnReasoning, request: Request) -> AssistantTurnReasoning | None:
    return think if request.thinking else None


def _stream(
    think: AssistantTurnReasoning, request: Request, kept: object
) -> tuple[ThinkTagStream, ThinkTagStreamState] | None:
    if not request.thinking:
        return None
    state = reuse(kept, ThinkTagStreamState)
    return ThinkTagStream(think, state), state


def _tool_stream(
    _: None, request: Request, kept: object
) -> tuple[PoolsideToolStream, PoolsideToolState]:
    state = reuse(kept, PoolsideToolState)
    options = request.options
    return PoolsideToolStream(options, request.id_seed, options.logprobs, state), state


FAMILY = Family(
    title="Poolside Laguna",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("poolside_v1",),
            engine_based=False,
            needs=(ASSISTANT, THINK_START, THINK_END),
            states=(ThinkTagStreamState,),
            thinking=thinking_requested,
            prepare=_prepare,
            one_shot=_one_shot,
            stream=_stream,
            golden=("V1", "H5"),
        ),
    ),
    tools=(
        Tools(
            names=("poolside_v1",),
            engine_based=False,
            states=(PoolsideToolState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: PoolsideTools(request.options),
            stream=_tool_stream,
            golden=("H5",),
        ),
    ),
)
