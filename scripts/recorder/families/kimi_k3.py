"""Kimi K3 (XTML channels: think, response, tools) on a synthetic tokenizer."""

from __future__ import annotations

import json
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

K3 = "kimi_k3"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
EOS = "<|end_of_msg|>"
THINK_OPEN = "<|open|>think<|sep|>"
THINK_END = "<|close|>think<|sep|>"
RESPONSE = "<|open|>response<|sep|>"
RESPONSE_END = "<|close|>response<|sep|>"
MESSAGE_END = "<|close|>message<|sep|>"
NO_THINK = {"chat_template_kwargs": {"thinking": False}}
TOOLS_ON = {"tools": TOOLS}
WEATHER_ASK = [SYSTEM, ASK_WEATHER]


def _type(value: Any) -> str:
    kinds = {bool: "boolean", int: "number", float: "number", str: "string"}
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return kinds[type(value)]


def k3_calls(calls: list[tuple[str, Any]]) -> str:
    """A tools channel: each call's arguments typed, strings raw, the rest JSON."""
    text = "<|open|>tools<|sep|>"
    for index, (name, args) in enumerate(calls, 1):
        text += f'<|open|>call tool="{name}" index="{index}"<|sep|>'
        if isinstance(args, str):  # raw (malformed) argument markup
            text += args
        else:
            for key, value in args.items():
                kind = _type(value)
                body = value if kind == "string" else json.dumps(value, ensure_ascii=False)
                text += (
                    f'<|open|>argument key="{key}" type="{kind}"<|sep|>{body}'
                    "<|close|>argument<|sep|>"
                )
        text += "<|close|>call<|sep|>"
    return text + "<|close|>tools<|sep|>"


def _answer(text: str) -> str:
    return f"{RESPONSE}{text}{RESPONSE_END}{MESSAGE_END}"


def _calls_after(content: str, calls: list[tuple[str, Any]]) -> str:
    return f"{RESPONSE}{content}{RESPONSE_END}{k3_calls(calls)}{MESSAGE_END}"


def tool_scenarios() -> list[Scenario]:
    """``kimi_k3`` reasoning and tools: the channels, typed arguments, cuts."""
    return [
        Scenario(
            "reason_answer",
            "think channel, then a response channel",
            _chat([ASK_SUM]),
            [f"{REASONING}{THINK_END}{_answer('17 × 23 = **391**.')}"],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM]),
            [REASONING],
            finish="length",
        ),
        Scenario(
            "explicit_think_open",
            "output that opens the think channel itself",
            _chat([ASK_SUM]),
            [f"{THINK_OPEN}{REASONING}{THINK_END}{_answer('391.')}"],
        ),
        Scenario(
            "reason_one_call",
            "reasoning, an empty response, one call",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [f"{PLAN}{THINK_END}{_calls_after('', [WEATHER])}"],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning, a response, two calls",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [f"{PLAN_TWO}{THINK_END}{_calls_after('Checking both.', [WEATHER, TIME])}"],
        ),
        Scenario(
            "content_then_call_no_thinking",
            "thinking off: the prompt opens the response; content, then a call",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK),
            [f"Let me check.{RESPONSE_END}{k3_calls([WEATHER])}{MESSAGE_END}"],
        ),
        Scenario(
            "thinking_disabled",
            "thinking off: a plain answer",
            _chat([ASK_SUM], **NO_THINK),
            [f"17 × 23 = 391.{RESPONSE_END}{MESSAGE_END}"],
        ),
        Scenario(
            "no_response_wrapper",
            "an answer written without the response channel",
            _chat([ASK_SUM]),
            [f"{REASONING}{THINK_END}391."],
        ),
        Scenario(
            "typed_arguments",
            "every argument type, escaped attributes, a string with a newline and a <",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [
                f"{PLAN}{THINK_END}"
                + _calls_after(
                    "",
                    [
                        (
                            "get_weather",
                            {
                                "city": "Paris\n<b> & co",
                                "days": 3,
                                "opts": {"a": [1, 2.5]},
                                "hours": [6, 12],
                                "metric": True,
                                "note": None,
                            },
                        ),
                        (
                            "get_time",
                            '<|open|>argument key="time&quot;zone&amp;" type="string"<|sep|>'
                            "UTC<|close|>argument<|sep|>",
                        ),
                    ],
                )
            ],
        ),
        Scenario(
            "malformed_calls",
            "a call without a tool name (dropped), a number that is no JSON (kept raw)",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK),
            [
                f'{RESPONSE_END}<|open|>tools<|sep|><|open|>call index="1"<|sep|>'
                '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
                "<|close|>call<|sep|>"
                '<|open|>call tool="get_weather" index="2"<|sep|>'
                '<|open|>argument key="days" type="number"<|sep|>two<|close|>argument<|sep|>'
                "<|close|>call<|sep|><|close|>tools<|sep|>"
            ],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (read as auto)",
            _chat(WEATHER_ASK, **TOOLS_ON, tool_choice="required", **NO_THINK),
            [f"{RESPONSE_END}{k3_calls([WEATHER])}{MESSAGE_END}"],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice",
            _chat(
                WEATHER_ASK,
                **TOOLS_ON,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
                **NO_THINK,
            ),
            [f"{RESPONSE_END}{k3_calls([TIME])}{MESSAGE_END}"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the calls are read and dropped, the response unwrapped",
            _chat(WEATHER_ASK, **TOOLS_ON, tool_choice="none"),
            [f"{PLAN}{THINK_END}{_calls_after('Let me check.', [WEATHER])}"],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [f"{PLAN}{THINK_END}{_calls_after('Checking.', [WEATHER])[:-70]}"],
            finish="length",
        ),
        Scenario(
            "text_after_calls",
            "text after the tools channel",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [f"{PLAN}{THINK_END}{_calls_after('Checking.', [WEATHER])}\nDone."],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _chat([ASK_JA], **TOOLS_ON),
            [
                f"東京の天気を調べる 🌤️ 必要がある。{THINK_END}"
                + _calls_after("晴れ 🌞", [("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(WEATHER_ASK, **TOOLS_ON, n=2, logprobs=True, top_logprobs=2),
            [
                f"{PLAN}{THINK_END}{_answer('Sunny.')}",
                f"{PLAN}{THINK_END}{_calls_after('', [WEATHER])}",
            ],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(WEATHER_ASK, **TOOLS_ON, stream_options={"include_usage": True}),
            [f"{PLAN}{THINK_END}{_calls_after('', [WEATHER])}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def reasoning_scenarios() -> list[Scenario]:
    """``kimi_k3`` reasoning alone: it unwraps the response channel itself."""
    return [
        Scenario(
            "reason_answer",
            "think channel, then a response channel (unwrapped)",
            _chat([ASK_SUM]),
            [f"{REASONING}{THINK_END}{_answer('17 × 23 = **391**.')}"],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM]),
            [REASONING],
            finish="length",
        ),
        Scenario(
            "explicit_think_open",
            "output that opens the think channel itself",
            _chat([ASK_SUM]),
            [f"{THINK_OPEN}{REASONING}{THINK_END}{_answer('391.')}"],
        ),
        Scenario(
            "thinking_disabled",
            "thinking off: every chunk is content, the markers stripped",
            _chat([ASK_SUM], **NO_THINK),
            [f"17 × 23 = 391.{RESPONSE_END}{MESSAGE_END}"],
        ),
        Scenario(
            "enable_thinking_false",
            "enable_thinking false reads as thinking off",
            _chat([ASK_SUM], chat_template_kwargs={"enable_thinking": False}),
            [f"391.{RESPONSE_END}{MESSAGE_END}"],
        ),
        Scenario(
            "response_cut_length",
            "a response channel never closed, cut by length",
            _chat([ASK_SUM]),
            [f"{REASONING}{THINK_END}{RESPONSE}17 × 23 is"],
            finish="length",
        ),
        Scenario(
            "no_response_wrapper",
            "an answer written without the response channel",
            _chat([ASK_SUM]),
            [f"{REASONING}{THINK_END}391.{MESSAGE_END}"],
        ),
        Scenario(
            "call_markup_stays_content",
            "a tools channel in an output of a request without tools: content",
            _chat(WEATHER_ASK),
            [f"{PLAN}{THINK_END}{_calls_after('Checking.', [WEATHER])}"],
        ),
        Scenario(
            "call_markup_tool_choice_none",
            "a tools channel with tool_choice none: the response unwrapped",
            _chat(WEATHER_ASK, **TOOLS_ON, tool_choice="none"),
            [f"{PLAN}{THINK_END}{_calls_after('Checking.', [WEATHER])}"],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji split across byte-level tokens",
            _chat([ASK_JA]),
            [f"東京の天気を調べる 🌤️ 必要がある。{THINK_END}{_answer('晴れ 🌞、最高 21℃。')}"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            _chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"{REASONING}{THINK_END}{_answer('391.')}", f"{THINK_END}{_answer('391.')}"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"{REASONING}{THINK_END}{_answer('391.')}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def tools_only_scenarios() -> list[Scenario]:
    """``kimi_k3`` tools alone: no reasoning parser, so a think channel is content."""
    typed = [("get_weather", {"city": "Paris\n<b>", "days": 3, "opts": {"a": [1]}})]
    return [
        Scenario(
            "answer",
            "thinking off: an answer in the response channel",
            _chat([ASK_SUM], **NO_THINK),
            [f"17 × 23 = 391.{RESPONSE_END}{MESSAGE_END}"],
        ),
        Scenario(
            "think_channel_is_content",
            "a think channel with no reasoning parser, then calls",
            _chat(WEATHER_ASK, **TOOLS_ON),
            [f"{PLAN}{THINK_END}{_calls_after('Checking.', [WEATHER, TIME])}"],
        ),
        Scenario(
            "content_then_calls",
            "thinking off: content, then typed calls",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK),
            [f"Let me check.{RESPONSE_END}{k3_calls(typed)}{MESSAGE_END}"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the calls read and dropped, the response unwrapped",
            _chat(WEATHER_ASK, **TOOLS_ON, tool_choice="none", **NO_THINK),
            [f"Let me check.{RESPONSE_END}{k3_calls([WEATHER])}{MESSAGE_END}"],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (read as auto)",
            _chat(WEATHER_ASK, **TOOLS_ON, tool_choice="required", **NO_THINK),
            [f"{RESPONSE_END}{k3_calls([WEATHER])}{MESSAGE_END}"],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK),
            [f"Checking.{RESPONSE_END}{k3_calls([WEATHER])[:-60]}"],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in the answer and a string argument",
            _chat([ASK_JA], **TOOLS_ON, **NO_THINK),
            [f"晴れ 🌞{RESPONSE_END}{k3_calls([('get_weather', {'city': '東京 🗼'})])}"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK, n=2, logprobs=True, top_logprobs=2),
            [f"Sunny.{RESPONSE_END}{MESSAGE_END}", f"{RESPONSE_END}{k3_calls([WEATHER])}"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(WEATHER_ASK, **TOOLS_ON, **NO_THINK, stream_options={"include_usage": True}),
            [f"{RESPONSE_END}{k3_calls([WEATHER])}{MESSAGE_END}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {K3: None}

CONFIGS = [
    Config(
        "K2",
        _parsers("kimi_k3", "kimi_k3"),
        K3,
        served_as(K3, tool_scenarios()),
        eos=EOS,
        served=K3,
    ),
    Config(
        "K3",
        _parsers("kimi_k3", None),
        K3,
        served_as(K3, reasoning_scenarios()),
        eos=EOS,
        served=K3,
    ),
    Config(
        "K5",
        _parsers(None, "kimi_k3"),
        K3,
        served_as(K3, tools_only_scenarios()),
        eos=EOS,
        served=K3,
    ),
]
