"""Mistral's calls on the tekken test tokenizers."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
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

# --- Mistral ----------------------------------------------------------------------

MISTRAL = "MistralForCausalLM"


MISTRAL_SERVED = "mistral"


MISTRAL_EOS = "</s>"


def args_calls(calls: list[tuple[str, Any]]) -> str:
    """v11+ calls: ``[TOOL_CALLS]name[ARGS]{...}`` for each."""
    return "".join(f"[TOOL_CALLS]{name}[ARGS]{_json_args(args)}" for name, args in calls)


def array_calls(calls: list[tuple[str, Any]]) -> str:
    """Pre-v11 calls: one JSON array after ``[TOOL_CALLS]``."""
    body = [{"name": name, "arguments": args} for name, args in calls]
    return "[TOOL_CALLS]" + json.dumps(body, ensure_ascii=False)


def _mistral(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MISTRAL_SERVED, "messages": messages, **extra}


def mistral_scenarios(array: bool) -> list[Scenario]:
    """Mistral's scenarios: ``array`` for the pre-v11 JSON array, else the ``[ARGS]``
    form with ``[THINK]`` reasoning."""
    calls = array_calls if array else args_calls
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    think = "" if array else f"[THINK]{PLAN}[/THINK]"
    named = {"type": "function", "function": {"name": "get_time"}}
    scenarios = [
        Scenario("plain_answer", "a plain answer", _mistral([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario(
            "one_call",
            "reasoning (where the tokenizer has [THINK]) then one tool call",
            _mistral(weather, **tools),
            [think + calls([WEATHER])],
        ),
        Scenario(
            "two_calls",
            "two parallel tool calls",
            _mistral(weather, **tools),
            [calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "content, then a tool call",
            _mistral(weather, **tools),
            ["Let me check. " + calls([WEATHER])],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not offer",
            _mistral(weather, **tools),
            [calls([("get_stock_price", {"ticker": "ACME"})])],
        ),
        Scenario(
            "typed_arguments",
            "a string where the schema wants an integer; nested arguments",
            _mistral(weather, **tools),
            [calls([("get_weather", {"city": "Paris", "days": "2", "opts": {"a": [1, {}]}})])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (parsed like auto)",
            _mistral(weather, **tools, tool_choice="required"),
            [calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (parsed like auto)",
            _mistral(weather, **tools, tool_choice=named),
            [calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: call markup is not a call",
            _mistral(weather, **tools, tool_choice="none"),
            ["Checking. " + calls([WEATHER])],
        ),
        Scenario(
            "text_after_call",
            "text after the call's arguments",
            _mistral(weather, **tools),
            [calls([WEATHER]) + " Done."],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments",
            _mistral(weather, **tools),
            [calls([WEATHER]).replace('"celsius"', "")],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its arguments",
            _mistral(weather, **tools),
            [calls([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            _mistral([ASK_JA], **tools),
            ["晴れ 🌞。" + calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _mistral(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", calls([WEATHER])],
            logprobs=2,
        ),
    ]
    if array:
        scenarios += [
            Scenario(
                "bare_object",
                "one call as a bare object, not an array",
                _mistral(weather, **tools),
                ['[TOOL_CALLS]{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}'],
            ),
            Scenario(
                "string_arguments",
                "arguments written as a JSON string",
                _mistral(weather, **tools),
                ['[TOOL_CALLS][{"name": "get_time", "arguments": "{\\"timezone\\": \\"UTC\\"}"}]'],
            ),
            Scenario(
                "required_bare_array",
                "tool_choice required: a bare array without the marker",
                _mistral(weather, **tools, tool_choice="required"),
                [array_calls([WEATHER])[len("[TOOL_CALLS]") :]],
            ),
            Scenario(
                "not_json_after_marker",
                "prose after [TOOL_CALLS]",
                _mistral(weather, **tools),
                ["Sure. [TOOL_CALLS] I will call get_weather now."],
            ),
        ]
    else:
        scenarios += [
            Scenario(
                "reason_answer",
                "reasoning then an answer",
                _mistral([ASK_SUM]),
                [f"[THINK]{REASONING}[/THINK]17 × 23 = **391**."],
            ),
            Scenario(
                "reasoning_only_length",
                "reasoning never closed, cut by length",
                _mistral([ASK_SUM]),
                [f"[THINK]{REASONING}"],
                finish="length",
            ),
            Scenario(
                "brace_form",
                "a call whose name runs straight into its arguments (no [ARGS])",
                _mistral(weather, **tools),
                ['[TOOL_CALLS]get_time{"timezone": "Asia/Tokyo"}'],
            ),
            Scenario(
                "call_inside_reasoning",
                "a call before [/THINK] ends the reasoning",
                _mistral(weather, **tools),
                [f"[THINK]{PLAN}" + calls([WEATHER])],
            ),
            Scenario(
                "usage_chunk",
                "stream_options.include_usage: a usage-only final chunk",
                _mistral(weather, **tools, stream_options={"include_usage": True}),
                [think + calls([WEATHER])],
                usage_chunk=True,
                one_shot=False,
            ),
        ]
    return scenarios


CONFIGS = [
    Config(
        "S1",
        _parsers("mistral", "mistral"),
        MISTRAL,
        mistral_scenarios(array=False),
        eos=MISTRAL_EOS,
        served=MISTRAL_SERVED,
        tokenizer="mistral_v13",
    ),
    Config(
        "S2",
        _parsers("mistral", "mistral"),
        MISTRAL,
        mistral_scenarios(array=True),
        eos=MISTRAL_EOS,
        served=MISTRAL_SERVED,
        tokenizer="mistral_v3",
    ),
]
