"""Granite 4.2's reasoning (``granite_thinking_parser``) with Qwen3-Coder calls."""

from __future__ import annotations

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    QWEN3_EOS,
    REASONING,
    SYSTEM,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _chat,
    _parsers,
    served_as,
)
from recorder.families.nemotron import NEMOTRON, nemotron_scenarios
from recorder.formats import qwen3_xml_calls


def granite_thinking_scenarios() -> list[Scenario]:
    """Nemotron 3's scenarios plus answers opened by newlines, as Granite's template writes."""
    force = {"chat_template_kwargs": {"force_nonempty_content": True}}
    extra = [
        Scenario(
            "newlines_then_answer",
            "the answer opens with newlines after </think>",
            _chat([ASK_SUM]),
            [f"{REASONING}\n</think>\n\n391."],
        ),
        Scenario(
            "newlines_only_answer",
            "only newlines after </think>",
            _chat([ASK_SUM]),
            [f"{REASONING}\n</think>\n\n"],
        ),
        Scenario(
            "force_content_newlines_only",
            "force_nonempty_content and only newlines after </think>",
            _chat([ASK_SUM], **force),
            [f"{REASONING}\n</think>\n"],
        ),
        Scenario(
            "newlines_then_call",
            "newlines, then a call after </think>",
            _chat([SYSTEM, ASK_WEATHER], tools=TOOLS),
            [f"{PLAN}\n</think>\n\n{qwen3_xml_calls([WEATHER])}"],
        ),
    ]
    return served_as(NEMOTRON, nemotron_scenarios() + extra)


CONFIGS = [
    Config(
        "A2",
        _parsers("granite_thinking_parser", "qwen3_coder"),
        NEMOTRON,
        granite_thinking_scenarios(),
        eos=QWEN3_EOS,
        served=NEMOTRON,
    ),
]
