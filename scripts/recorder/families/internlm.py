"""InternLM2 (``internlm`` calls, no reasoning parser) on a synthetic tokenizer."""

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

INTERNLM = "internlm2"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
MARKER = "<|action_start|><|plugin|>"


def internlm_call(name: str, args: Any, key: str = "parameters") -> str:
    """One InternLM2 call: a JSON object between the action markers (``args`` as it is
    when text)."""
    body = args if isinstance(args, str) else json.dumps({"name": name, key: args})
    return f"{MARKER}\n{body}<|action_end|>"


def _scenarios() -> list[Scenario]:
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}
    call = internlm_call(*WEATHER)
    ja = internlm_call("get_weather", {"city": "東京 🗼", "days": 2})
    return [
        Scenario("plain_answer", "plain content", _chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario("one_call", "one call alone", _chat(weather, **tools), [call]),
        Scenario(
            "content_then_call",
            "content, then a call, then a newline",
            _chat(weather, **tools),
            [f"Let me check.\n{call}\n"],
        ),
        Scenario(
            "arguments_key",
            "the arguments under an arguments key",
            _chat(weather, **tools),
            [internlm_call(*TIME, key="arguments")],
        ),
        Scenario(
            "no_arguments",
            "a call with a name only",
            _chat(weather, **tools),
            [internlm_call("get_time", '{"name": "get_time"}')],
        ),
        Scenario(
            "text_after_call",
            "content, a call, then more text after it",
            _chat(weather, **tools),
            [f"Checking.{call}\nDone."],
        ),
        Scenario(
            "two_calls",
            "two calls (vLLM's parser reads one: a second marker fails the request)",
            _chat(weather, **tools),
            [f"{call}\n{internlm_call(*TIME)}"],
        ),
        Scenario(
            "other_action",
            "an action that is no plugin call (held back when streamed)",
            _chat(weather, **tools),
            ["Running.<|action_start|><|interpreter|>\nprint(1)<|action_end|>"],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [internlm_call(*UNKNOWN)],
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
            [internlm_call(*TIME)],
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
            [internlm_call("get_weather", '{"name": "get_weather", "parameters": {"city": }}')],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(weather, **tools),
            [f"Let me check.{call[:-30]}"],
            finish="length",
        ),
        *output_scenarios(call, ja),
    ]


CONFIGS = [
    Config(
        "E6",
        _parsers(None, "internlm"),
        INTERNLM,
        served_as(INTERNLM, _scenarios()),
        eos=QWEN3_EOS,
        served=INTERNLM,
    ),
]
SYNTHETIC = {INTERNLM: None}
