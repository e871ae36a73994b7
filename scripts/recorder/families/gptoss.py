"""gpt-oss's Harmony on the bundled o200k_harmony tokenizer."""

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
    _parsers,
)
from recorder.formats import _json_args

# --- gpt-oss (Harmony) ------------------------------------------------------------

GPT_OSS = "GptOssForCausalLM"


GPT_OSS_SERVED = "gpt-oss"


START = "<|start|>assistant"


def analysis(text: str, end: bool = True) -> str:
    return f"<|channel|>analysis<|message|>{text}" + ("<|end|>" + START if end else "")


def final(text: str) -> str:
    return f"<|channel|>final<|message|>{text}<|return|>"


def harmony_calls(calls: list[tuple[str, Any]]) -> str:
    """Each call its own commentary message to ``functions.NAME``, JSON-constrained."""
    return START.join(
        f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        f"{_json_args(args)}<|call|>"
        for name, args in calls
    )


def _gpt(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": GPT_OSS_SERVED, "messages": messages, **extra}


def harmony_scenarios() -> list[Scenario]:
    """The DeepSeek coverage list in Harmony, plus what only Harmony has (preambles,
    built-in recipients, a header cut off)."""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_answer",
            "reasoning (analysis) then an answer (final)",
            _gpt([ASK_SUM]),
            [analysis(REASONING) + final("17 × 23 = **391**.")],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _gpt([ASK_SUM]),
            [analysis(REASONING, end=False)],
            finish="length",
        ),
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            _gpt(weather, **tools),
            [analysis(PLAN) + harmony_calls([WEATHER])],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two tool calls, each its own message",
            _gpt(weather, **tools),
            [analysis(PLAN_TWO) + harmony_calls([WEATHER, TIME])],
        ),
        Scenario(
            "preamble_then_call",
            "a commentary preamble with no recipient (content), then a call",
            _gpt(weather, **tools),
            [
                analysis(PLAN)
                + "<|channel|>commentary<|message|>Let me check.<|end|>"
                + START
                + harmony_calls([WEATHER])
            ],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call is parsed and dropped",
            _gpt(weather, **tools, tool_choice="none"),
            [analysis(PLAN) + harmony_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (Harmony parses it like auto)",
            _gpt(weather, **tools, tool_choice="required"),
            [harmony_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (Harmony parses it like auto)",
            _gpt(
                weather,
                **tools,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
            ),
            [harmony_calls([TIME])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in a call's body: arguments as sent",
            _gpt(weather, **tools),
            [harmony_calls([("get_weather", '{"city": "Paris", "unit": }')])],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its arguments",
            _gpt(weather, **tools),
            [analysis(PLAN) + harmony_calls([WEATHER])[:-30]],
            finish="length",
        ),
        Scenario(
            "header_cut_length",
            "output cut inside a message header: the raw header is recovered as content",
            _gpt(weather, **tools),
            [analysis(PLAN) + "<|channel|>commentary to=functions.get_wea"],
            finish="length",
        ),
        Scenario(
            "builtin_recipient",
            "a message to the built-in python tool and one on an unknown channel: dropped",
            _gpt(weather, **tools),
            [
                analysis(PLAN)
                + "<|channel|>analysis to=python<|message|>print(1)<|call|>"
                + START
                + "<|channel|>notes<|message|>hidden<|end|>"
                + START
                + final("Done.")
            ],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _gpt([ASK_JA], **tools),
            [
                analysis("東京の天気を調べる 🌤️ 必要がある。")
                + harmony_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _gpt(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [analysis(PLAN) + final("Sunny."), analysis(PLAN) + harmony_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _gpt(weather, **tools, stream_options={"include_usage": True}),
            [analysis(PLAN) + harmony_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


CONFIGS = [
    Config(
        "G1",
        _parsers("openai_gptoss", "openai"),
        GPT_OSS,
        harmony_scenarios(),
        eos="",
        served=GPT_OSS_SERVED,
    ),
]
