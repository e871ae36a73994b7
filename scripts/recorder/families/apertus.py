"""Apertus (``apertus`` calls, no reasoning parser) on a synthetic tokenizer."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    QWEN3_EOS,
    SYSTEM,
    TIME,
    TOOLS,
    UNKNOWN,
    WEATHER,
    Config,
    Scenario,
    _chat,
    _parsers,
    output_scenarios,
    served_as,
)

APERTUS = "apertus"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
PREFIX = "<|tools_prefix|>"
SUFFIX = "<|tools_suffix|>"


def apertus_calls(calls: list[tuple[str, Any]], suffix: bool = True) -> str:
    """A block of Apertus calls: a JSON array of ``{name: arguments}`` objects."""
    body = json.dumps([{name: args} for name, args in calls], ensure_ascii=False)
    return f"{PREFIX}{body}{SUFFIX if suffix else ''}"


def _scenarios() -> list[Scenario]:
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}
    call = apertus_calls([WEATHER])
    days = ("get_weather", {"city": "Paris", "days": 12, "unit": "celsius"})
    nested = ("get_weather", {"city": "Paris", "options": {"hours": [6, 12.5, 18], "raw": None}})
    ja = apertus_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
    return [
        Scenario("plain_answer", "plain content", _chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario("one_call", "one call alone", _chat(weather, **tools), [call]),
        Scenario(
            "content_then_call",
            "content, then a call, then more text",
            _chat(weather, **tools),
            [f"Let me check. {call}\nDone."],
        ),
        Scenario(
            "two_calls",
            "two calls in one block",
            _chat(weather, **tools),
            [apertus_calls([WEATHER, TIME])],
        ),
        Scenario(
            "numbers",
            "numbers and nested values in the arguments (held while they may grow)",
            _chat(weather, **tools),
            [apertus_calls([days, nested])],
        ),
        Scenario(
            "no_suffix",
            "a block whose JSON completes without the suffix, then text",
            _chat(weather, **tools),
            [f"{apertus_calls([TIME], suffix=False)} The time is next."],
        ),
        Scenario(
            "spaced_block",
            "whitespace around the array and between elements",
            _chat(weather, **tools),
            [
                f'{PREFIX} [ {{"get_time": {{"timezone": "Asia/Tokyo"}}}} ,\n'
                f' {{"get_weather": {{"city": "Paris"}}}} ] {SUFFIX}'
            ],
        ),
        Scenario(
            "empty_arguments",
            "a call with empty arguments, one with null",
            _chat(weather, **tools),
            [apertus_calls([("get_time", {}), ("get_weather", None)])],
        ),
        Scenario(
            "angle_bracket_end",
            "content ending in '<' (held back as a possible marker)",
            _chat([ASK_SUM], **tools),
            ["17 × 23 = 391 <"],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [apertus_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required",
            _chat(weather, **tools, tool_choice="required"),
            [call],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice",
            _chat(weather, **tools, tool_choice=NAMED_TIME),
            [apertus_calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            _chat(weather, **tools, tool_choice="none"),
            [f"Let me check.{call}"],
        ),
        Scenario(
            "malformed_arguments",
            "a block whose JSON does not read",
            _chat(weather, **tools),
            [f'{PREFIX}[{{"get_weather": {{"city": }}}}]{SUFFIX}'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(weather, **tools),
            [f"Let me check.{call[:-24]}"],
            finish="length",
        ),
        *output_scenarios(call, ja),
    ]


CONFIGS = [
    Config(
        "T6",
        _parsers(None, "apertus"),
        APERTUS,
        served_as(APERTUS, _scenarios()),
        eos=QWEN3_EOS,
        served=APERTUS,
    ),
]
SYNTHETIC = {APERTUS: None}
