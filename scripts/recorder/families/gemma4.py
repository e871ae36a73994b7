"""Gemma 4 (``gemma4`` reasoning and tools) on a synthetic tokenizer."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    PLAN_TWO,
    REASONING,
    SYSTEM,
    TIME,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _chat,
    _parsers,
    served_as,
)

GEMMA4 = "gemma4"  # the synthetic tokenizer's family (Qwen3's vocabulary, Gemma's markers)
DELIM = '<|"|>'
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
WEATHER_ASK = [SYSTEM, ASK_WEATHER]


def _value(value: Any) -> str:
    if isinstance(value, str):
        return f"{DELIM}{value}{DELIM}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def gemma4_calls(calls: list[tuple[str, Any]]) -> str:
    """Gemma 4: ``<|tool_call>call:NAME{key:value,...}<tool_call|>`` per call."""
    return "".join(
        f"<|tool_call>call:{name}"
        + (args if isinstance(args, str) else _value(args))
        + "<tool_call|>"
        for name, args in calls
    )


def _thought(text: str) -> str:
    """Reasoning in the channel the thinking prompt opened, with its label line."""
    return f"thought\n{text}<channel|>"


def _reasoning() -> list[Scenario]:
    return [
        Scenario(
            "reason_answer",
            "thinking: reasoning in the channel the prompt opened, then an answer",
            _chat([ASK_SUM], **THINK),
            [_thought(REASONING) + "17 × 23 = **391**."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM], **THINK),
            [f"thought\n{REASONING}"],
            finish="length",
        ),
        Scenario(
            "explicit_channel_thinking_off",
            "thinking off, yet the output opens a channel itself",
            _chat([ASK_SUM]),
            [f"<|channel>thought\n{REASONING}<channel|>391."],
        ),
        Scenario(
            "label_without_channel",
            "thinking off, an output that starts with the label and closes a channel",
            _chat([ASK_SUM]),
            ["thought\nQuick sum.<channel|>391."],
        ),
        Scenario(
            "thinking_disabled",
            "thinking off: a plain answer",
            _chat([ASK_SUM]),
            ["17 × 23 = 391."],
        ),
    ]


def _calls() -> list[Scenario]:
    tools = {"tools": TOOLS}
    opts = {"deep": True, "tags": ["a,b", 2]}
    nested = ("get_weather", {"city": "Paris", "days": 3, "opts": opts})
    return [
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            _chat(WEATHER_ASK, **tools, **THINK),
            [_thought(PLAN) + gemma4_calls([WEATHER])],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two calls",
            _chat(WEATHER_ASK, **tools, **THINK),
            [_thought(PLAN_TWO) + gemma4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "call_from_reasoning",
            "a call straight out of reasoning (no channel closer)",
            _chat(WEATHER_ASK, **tools, **THINK),
            [f"thought\n{PLAN}" + gemma4_calls([WEATHER])],
        ),
        Scenario(
            "content_then_call",
            "thinking off: content, then a call with typed and nested values",
            _chat(WEATHER_ASK, **tools),
            ["Let me check.\n" + gemma4_calls([nested])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (read like auto)",
            _chat(WEATHER_ASK, **tools, tool_choice="required"),
            [gemma4_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (read like auto)",
            _chat(
                WEATHER_ASK,
                **tools,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
            ),
            [gemma4_calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup is read and dropped",
            _chat(WEATHER_ASK, **tools, tool_choice="none"),
            [gemma4_calls([WEATHER])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments inside well-formed call markup",
            _chat(WEATHER_ASK, **tools),
            [gemma4_calls([("get_weather", f"{{city:{DELIM}Paris,days:[1,2 ,unit:}}")])],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(WEATHER_ASK, **tools, **THINK),
            [_thought(PLAN) + gemma4_calls([WEATHER])[:-22]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _chat([ASK_JA], **tools, **THINK),
            [
                _thought("東京の天気を調べる 🌤️ 必要がある。")
                + gemma4_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(WEATHER_ASK, **tools, **THINK, n=2, logprobs=True, top_logprobs=2),
            [_thought(PLAN) + "Sunny.", _thought(PLAN) + gemma4_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(WEATHER_ASK, **tools, **THINK, stream_options={"include_usage": True}),
            [_thought(PLAN) + gemma4_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {GEMMA4: None}


CONFIGS = [
    Config(
        "A1",
        _parsers("gemma4", "gemma4"),
        GEMMA4,
        served_as(GEMMA4, _reasoning() + _calls()),
        eos="<turn|>",
        served=GEMMA4,
    ),
]
