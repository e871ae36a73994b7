"""Granite 3.0/3.1 calls (``granite``): a JSON array of calls after a marker."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    SYSTEM,
    TIME,
    TOOLS,
    UNKNOWN,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)
from recorder.families.granite import GRANITE, GRANITE_EOS


def granite_array(calls: list[tuple[str, Any]], marker: str = "<|tool_call|>") -> str:
    """Granite 3.0 (``<|tool_call|>``) or 3.1 (``<tool_call>``): one JSON array of calls."""
    return marker + json.dumps([{"name": n, "arguments": a} for n, a in calls])


def granite_array_scenarios() -> list[Scenario]:
    chat = _served(GRANITE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    compact = '<|tool_call|>[{"name":"get_weather","arguments":{"city":"Paris","days":"3"}}]'
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call", chat(weather, **tools), [granite_array([WEATHER])]),
        Scenario(
            "two_calls", "two calls", chat(weather, **tools), [granite_array([WEATHER, TIME])]
        ),
        Scenario(
            "text_marker",
            "Granite 3.1's marker spelled as text, a space before the array",
            chat(weather, **tools),
            [granite_array([TIME], "<tool_call> ")],
        ),
        Scenario(
            "content_call_text",
            "content, the calls, then text after the array",
            chat(weather, **tools),
            [f"Let me check. {granite_array([WEATHER])} Done."],
        ),
        Scenario(
            "not_an_array",
            "a marker followed by an object, not an array: content",
            chat(weather, **tools),
            ['<|tool_call|>{"name": "get_time", "arguments": {"timezone": "UTC"}}'],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare",
            chat(weather, **tools),
            [granite_array([UNKNOWN])],
        ),
        Scenario(
            "compact_typed",
            "compact JSON whose string value the schema types (written out again)",
            chat(weather, **tools),
            [compact],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the calls are read and dropped",
            chat(weather, **tools, tool_choice="none"),
            [granite_array([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in the arguments, then text",
            chat(weather, **tools),
            ['<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}]'],
        ),
        Scenario(
            "arguments_not_object",
            "arguments given as a string",
            chat(weather, **tools),
            ['<|tool_call|>[{"name": "get_time", "arguments": "UTC"}]'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [granite_array([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + granite_array([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", granite_array([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [granite_array([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


CONFIGS = [
    Config(
        "A3",
        _parsers(None, "granite"),
        GRANITE,
        granite_array_scenarios(),
        eos=GRANITE_EOS,
        served=GRANITE,
    ),
]
