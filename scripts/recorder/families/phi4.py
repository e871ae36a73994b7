"""Phi-4-mini's functools calls."""

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
from recorder.formats import _json_args

PHI4 = "phi4_mini"  # the synthetic tokenizer's family (Qwen3's vocabulary, Phi's turns)


def phi4_calls(calls: list[tuple[str, Any]], key: str = "arguments") -> str:
    """Phi-4-mini: ``functools`` then a JSON array of ``{name, arguments}``."""
    body = ", ".join(f'{{"name": "{name}", "{key}": {_json_args(args)}}}' for name, args in calls)
    return f"functools[{body}]"


def phi4_scenarios() -> list[Scenario]:
    """phi4_mini_json: one-shot reads ``functools[...]``; the stream sends nothing."""
    chat = _served(PHI4)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call", chat(weather, **tools), [phi4_calls([WEATHER])]),
        Scenario(
            "two_calls", "two calls in one array", chat(weather, **tools),
            [phi4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "text before functools: dropped when calls are read",
            chat(weather, **tools),
            ["Let me check. " + phi4_calls([WEATHER])],
        ),
        Scenario(
            "parameters_key",
            "a call written with parameters instead of arguments",
            chat(weather, **tools),
            [phi4_calls([TIME], key="parameters")],
        ),
        Scenario(
            "bracket_in_arguments",
            "a ] inside the arguments cuts the array: calls made, none readable",
            chat(weather, **tools),
            [phi4_calls([("get_weather", {"city": "Paris", "days": [1, 2]})])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in the array",
            chat(weather, **tools),
            [phi4_calls([("get_weather", '{"city": "Paris", "unit": }')])],
        ),
        Scenario(
            "missing_name",
            "a member without a name: no calls, the output is content",
            chat(weather, **tools),
            ['functools[{"arguments": {"city": "Paris"}}]'],
        ),
        Scenario(
            "unknown_tool", "a call to a tool the request does not declare",
            chat(weather, **tools), [phi4_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call stays content",
            chat(weather, **tools, tool_choice="none"),
            [phi4_calls([WEATHER])],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [phi4_calls([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + phi4_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", phi4_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [phi4_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]  # fmt: skip


SYNTHETIC: dict[str, dict[str, Any] | None] = {PHI4: None}


CONFIGS = [
    Config(
        "P1",
        _parsers(None, "phi4_mini_json"),
        PHI4,
        phi4_scenarios(),
        eos="<|end|>",
        served=PHI4,
    ),
]
