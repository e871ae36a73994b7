"""Nemotron 3's reasoning."""

from __future__ import annotations

from typing import Any

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
    tool_scenarios,
)
from recorder.formats import qwen3_xml_calls

NEMOTRON = "nemotron_v3"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)


def nemotron_scenarios() -> list[Scenario]:
    """Nemotron 3 (``nemotron_v3`` reasoning, Qwen3-Coder calls): the tool scenarios plus
    what the family adds: reasoning swapped into content when ``enable_thinking`` is false
    or ``force_nonempty_content`` is true and content is empty."""
    force = {"chat_template_kwargs": {"force_nonempty_content": True}}
    no_think = {"chat_template_kwargs": {"enable_thinking": False}}
    extra = [
        Scenario(
            "explicit_think_start",
            "output that opens with <think> itself",
            _chat([ASK_SUM]),
            [f"<think>{REASONING}</think>391."],
        ),
        Scenario(
            "force_content_reasoning_only",
            "force_nonempty_content, reasoning never closed: it becomes the content",
            _chat([ASK_SUM], **force),
            [f"{REASONING}\n"],
            finish="length",
        ),
        Scenario(
            "force_content_blank_answer",
            "force_nonempty_content, an answer of whitespace after </think>",
            _chat([ASK_SUM], **force),
            [f"{REASONING}\n</think>\n\n"],
        ),
        Scenario(
            "force_content_with_answer",
            "force_nonempty_content with a real answer: nothing swapped",
            _chat([ASK_SUM], **force),
            [f"{REASONING}</think>391."],
        ),
        Scenario(
            "enable_thinking_false",
            "enable_thinking false: a plain answer",
            _chat([ASK_SUM], **no_think),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "enable_thinking_false_blank",
            "enable_thinking false and a blank answer",
            _chat([ASK_SUM], **no_think),
            ["\n"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup is read and dropped",
            _chat([SYSTEM, ASK_WEATHER], tools=TOOLS, tool_choice="none"),
            [f"{PLAN}</think>{qwen3_xml_calls([WEATHER])}"],
        ),
    ]
    return served_as(NEMOTRON, tool_scenarios("qwen3_xml", False) + extra)


SYNTHETIC: dict[str, dict[str, Any] | None] = {NEMOTRON: None}


CONFIGS = [
    Config(
        "N2",
        _parsers("nemotron_v3", "qwen3_coder"),
        NEMOTRON,
        nemotron_scenarios(),
        eos=QWEN3_EOS,
        served=NEMOTRON,
    ),
]
