"""Jamba (``jamba`` calls, no reasoning parser) on a synthetic tokenizer: a JSON array of
calls between ``<tool_calls>`` and ``</tool_calls>``."""

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

JAMBA = "jamba"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)


def jamba_calls(calls: list[tuple[str, Any]]) -> str:
    """Jamba's calls: one JSON array between its markers."""
    body = json.dumps([{"name": n, "arguments": a} for n, a in calls])
    return f"<tool_calls>{body}</tool_calls>"


def _scenarios() -> list[Scenario]:
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}
    call = jamba_calls([WEATHER])
    ja = jamba_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
    compact = (
        '<tool_calls>[{"name":"get_weather","arguments":{"city":"Paris","days":3}}]</tool_calls>'
    )
    return [
        Scenario("plain_answer", "plain content", _chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario("one_call", "one call alone", _chat(weather, **tools), [call]),
        Scenario("two_calls", "two calls", _chat(weather, **tools), [jamba_calls([WEATHER, TIME])]),
        Scenario(
            "content_then_call",
            "content, then the calls",
            _chat(weather, **tools),
            [f"Let me check.\n{call}"],
        ),
        Scenario(
            "text_after_calls",
            "content, the calls, then more text after them",
            _chat(weather, **tools),
            [f"Checking. {call}\nDone."],
        ),
        Scenario(
            "compact_json",
            "compact JSON (one-shot and streamed arguments are re-serialized)",
            _chat(weather, **tools),
            [compact],
        ),
        Scenario(
            "no_arguments",
            "a call with a name only",
            _chat(weather, **tools),
            ['<tool_calls>[{"name": "get_time"}]</tool_calls>'],
        ),
        Scenario(
            "arguments_not_object",
            "arguments given as a string",
            _chat(weather, **tools),
            ['<tool_calls>[{"name": "get_time", "arguments": "UTC"}]</tool_calls>'],
        ),
        Scenario(
            "no_end_marker",
            "calls with no closing marker (one-shot: content)",
            _chat(weather, **tools),
            [call.removesuffix("</tool_calls>")],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [jamba_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required",
            _chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice",
            _chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            _chat(weather, **tools, tool_choice="none"),
            [f"Let me check.{call}"],
        ),
        Scenario(
            "malformed_arguments",
            "a call whose JSON does not read",
            _chat(weather, **tools),
            ['<tool_calls>[{"name": "get_weather", "arguments": {"city": }}]</tool_calls>'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(weather, **tools),
            [f"Let me check.{call[:-20]}"],
            finish="length",
        ),
        *output_scenarios(call, ja),
    ]


CONFIGS = [
    Config(
        "T3",
        _parsers(None, "jamba"),
        JAMBA,
        served_as(JAMBA, _scenarios()),
        eos=QWEN3_EOS,
        served=JAMBA,
    ),
]
SYNTHETIC = {JAMBA: {"architectures": ["JambaForCausalLM"], "model_type": "jamba"}}
