"""FunctionGemma (``functiongemma`` calls, no reasoning parser) on a synthetic tokenizer."""

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

FUNCTIONGEMMA = "functiongemma"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def functiongemma_call(name: str, args: dict[str, Any] | str) -> str:
    """One FunctionGemma call: ``key:<escape>value<escape>`` pairs in braces (``args`` as
    it is when text)."""
    body = (
        args
        if isinstance(args, str)
        else ",".join(f"{key}:<escape>{_value(value)}<escape>" for key, value in args.items())
    )
    return f"<start_function_call>call:{name}{{{body}}}<end_function_call>"


def _scenarios() -> list[Scenario]:
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}
    call = functiongemma_call(*WEATHER)
    time = functiongemma_call(*TIME)
    ja = functiongemma_call("get_weather", {"city": "東京 🗼", "days": 2})
    return [
        Scenario("plain_answer", "plain content", _chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario("one_call", "one call with two arguments", _chat(weather, **tools), [call]),
        Scenario("one_argument", "one call with one argument", _chat(weather, **tools), [time]),
        Scenario(
            "content_then_call",
            "content, then a call",
            _chat(weather, **tools),
            [f"Let me check.\n{call}"],
        ),
        Scenario(
            "two_calls",
            "two calls back to back",
            _chat(weather, **tools),
            [f"{time}{call}"],
        ),
        Scenario(
            "no_arguments",
            "a call with empty braces",
            _chat(weather, **tools),
            [functiongemma_call("get_time", "")],
        ),
        Scenario(
            "text_after_call",
            "content, a call, then more text after it",
            _chat(weather, **tools),
            [f"Checking.{time}\nDone."],
        ),
        Scenario(
            "typed_values",
            "values that read as JSON (a number, a list, a quoted string) and one that does not",
            _chat(weather, **tools),
            [
                functiongemma_call(
                    "get_weather",
                    'days:<escape>3<escape>,hours:<escape>[6, 12]<escape>,city:<escape>"Nice"'
                    "<escape>,note:<escape>{not json<escape>",
                )
            ],
        ),
        Scenario(
            "repeated_key",
            "an argument given twice: the later value in the first place",
            _chat(weather, **tools),
            [
                functiongemma_call(
                    "get_weather",
                    "city:<escape>Paris<escape>,days:<escape>2<escape>,city:<escape>Rome<escape>",
                )
            ],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [functiongemma_call(*UNKNOWN)],
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
            [time],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            _chat(weather, **tools, tool_choice="none"),
            [f"Let me check.{call}"],
        ),
        Scenario(
            "malformed_arguments",
            "a value never closed, and no closing brace",
            _chat(weather, **tools),
            [
                "<start_function_call>call:get_weather{city:<escape>Paris<escape>,"
                "unit:<escape>celsius<end_function_call>"
            ],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(weather, **tools),
            [f"Let me check.{call[:-30]}"],
            finish="length",
        ),
        Scenario(
            "less_than",
            "content with a < (held back as a possible marker), ending in one",
            _chat([ASK_SUM], **tools),
            ["391 < 400 and 17 <"],
        ),
        *output_scenarios(call, ja),
    ]


CONFIGS = [
    Config(
        "T1",
        _parsers(None, "functiongemma"),
        FUNCTIONGEMMA,
        served_as(FUNCTIONGEMMA, _scenarios()),
        eos=QWEN3_EOS,
        served=FUNCTIONGEMMA,
    ),
]
SYNTHETIC = {FUNCTIONGEMMA: None}
