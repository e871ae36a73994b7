"""Poolside's reasoning."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    QWEN3_EOS,
    REASONING,
    Config,
    Scenario,
    _parsers,
    _served,
    plain_scenarios,
    served_as,
)
from recorder.formats import glm_calls

# --- Poolside (synthetic tokenizer) -----------------------------------------------------

POOLSIDE = "poolside"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)


def poolside_reasoning_scenarios() -> list[Scenario]:
    """``poolside_v1`` reasoning (deepseek_v3's, read back only to the assistant's turn):
    the plain list plus an earlier turn whose ``</think>`` must not end this one's."""
    chat = _served(POOLSIDE)
    earlier = [
        ASK_SUM,
        {"role": "assistant", "content": f"<think>{REASONING}</think>391."},
        {"role": "user", "content": "And 17 × 24?"},
    ]
    return [
        *served_as(POOLSIDE, plain_scenarios(glm_calls)),
        Scenario(
            "earlier_think_end",
            "an earlier turn's </think> in the prompt, thinking on without <think> in it",
            chat(earlier, chat_template_kwargs={"enable_thinking": True}),
            [f"{REASONING} Plus 17.</think>408."],
        ),
        Scenario(
            "earlier_think_end_unset",
            "the same prompt, thinking not asked for: all content",
            chat(earlier),
            [f"{REASONING}</think>408."],
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {POOLSIDE: None}


CONFIGS = [
    Config(
        "V1",
        _parsers("poolside_v1", None),
        POOLSIDE,
        poolside_reasoning_scenarios(),
        eos=QWEN3_EOS,
        served=POOLSIDE,
    ),
]
