"""K2 Horizon's reasoning (a think block per reasoning effort) on a synthetic tokenizer."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    QWEN3_EOS,
    REASONING,
    Config,
    Scenario,
    _chat,
    _parsers,
    served_as,
)

K2H = "k2_horizon"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
THINK, END = "<ifm|think>", "</ifm|think>"


def _effort(level: str) -> dict[str, Any]:
    return {"chat_template_kwargs": {"reasoning_effort": level}}


def k2_horizon_scenarios() -> list[Scenario]:
    """Reasoning only: each effort's block, a missing opener, a call section, cuts."""
    return [
        Scenario(
            "reason_answer",
            "the high effort block, then an answer",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}{END}17 × 23 = **391**."],
        ),
        Scenario(
            "no_opener",
            "the block's opener left to the template",
            _chat([ASK_SUM]),
            [f"{REASONING}{END}391."],
        ),
        Scenario(
            "medium_effort",
            "reasoning_effort medium: <ifm|think_fast>",
            _chat([ASK_SUM], **_effort("medium")),
            [f"<ifm|think_fast>{REASONING}</ifm|think_fast>391."],
        ),
        Scenario(
            "low_effort_other_block",
            "reasoning_effort low reads only its own block",
            _chat([ASK_SUM], **_effort("low")),
            [f"<ifm|think_faster>{REASONING}</ifm|think_faster>{THINK}x{END}391."],
        ),
        Scenario(
            "call_section_ends_reasoning",
            "a call section ends reasoning, stays content",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}<ifm|tool_calls>get_time</ifm|tool_calls>"],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}"],
            finish="length",
        ),
        Scenario("no_markers", "no block at all", _chat([ASK_SUM]), ["391."]),
        Scenario(
            "multibyte",
            "CJK and emoji split across byte-level tokens",
            _chat([ASK_JA]),
            [f"{THINK}東京の天気を調べる 🌤️ 必要がある。{END}晴れ 🌞、最高 21℃。"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            _chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"{THINK}{REASONING}{END}391.", "391."],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"{THINK}{REASONING}{END}391."],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {K2H: None}

CONFIGS = [
    Config(
        "W5",
        _parsers("k2_horizon", None),
        K2H,
        served_as(K2H, k2_horizon_scenarios()),
        eos=QWEN3_EOS,
        served=K2H,
    ),
]
