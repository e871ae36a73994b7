"""Olmo 3's reasoning."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    QWEN3_EOS,
    REASONING,
    THINK,
    Config,
    Scenario,
    _parsers,
    _served,
    plain_scenarios,
    served_as,
)

OLMO3 = "olmo3"  # the synthetic tokenizer's family (Qwen3's vocabulary, no think tokens)


def olmo3_scenarios() -> list[Scenario]:
    """olmo3 reasoning (markers spelled in ordinary tokens): the reasoning-only list plus
    text around and between the markers, and angle brackets that look like them."""
    chat = _served(OLMO3)
    think = {"chat_template_kwargs": THINK}
    extra = [
        Scenario(
            "text_before_think",
            "content before an explicit <think>",
            chat([ASK_SUM], **think),
            [f"Okay. <think>{REASONING}</think>391."],
        ),
        Scenario(
            "two_think_ends",
            "two </think>: one-shot splits at the first, the stream at the last",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>First.</think>Second."],
        ),
        Scenario(
            "angle_brackets",
            "< and > in reasoning and answer (held while they may be a marker)",
            chat([ASK_SUM], **think),
            ["Is 3<4 and 5>2? <b>Yes</b>.</think>So a<b> and <think-ish> hold."],
        ),
        Scenario(
            "ends_in_marker_piece",
            "an answer whose last text could start a marker: held, then lost",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>Use x </"],
        ),
    ]
    return served_as(OLMO3, plain_scenarios() + extra)


SYNTHETIC: dict[str, dict[str, Any] | None] = {OLMO3: None}


CONFIGS = [
    Config(
        "O1",
        _parsers("olmo3", None),
        OLMO3,
        olmo3_scenarios(),
        eos=QWEN3_EOS,
        served=OLMO3,
    ),
]
