"""granite-20b-functioncalling (``granite-20b-fc``): JSON calls, each after its own
``<function_call>``; streamed only when the output opens with one."""

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
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)

SERVED = "granite"
TOKENIZER = "nemotron_v3"  # Qwen3's vocabulary and ChatML: the markup is plain text
EOS = "<|im_end|>"
chat = _served(SERVED)


def fc_calls(calls: list[tuple[str, Any]], key: str = "arguments", gap: str = " ") -> str:
    return "\n".join(
        f"<function_call>{gap}" + json.dumps({"name": n, key: a}, ensure_ascii=False)
        for n, a in calls
    )


def granite_fc_scenarios() -> list[Scenario]:
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("one_call", "one call", chat(weather, **tools), [fc_calls([WEATHER])]),
        Scenario("two_calls", "two calls", chat(weather, **tools), [fc_calls([WEATHER, TIME])]),
        Scenario(
            "tight_and_spaced",
            "no space after one opener, a blank line before the next",
            chat(weather, **tools),
            [fc_calls([WEATHER], gap="") + "\n\n" + fc_calls([TIME], gap="  ")],
        ),
        Scenario("plain_answer", "no call", chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario(
            "content_before_call",
            "text, then a call: content streamed, the call read one-shot only",
            chat(weather, **tools),
            ["Let me check. " + fc_calls([WEATHER])],
        ),
        Scenario(
            "opener_prefix",
            "text that starts like the opener and is not",
            chat(weather, **tools),
            ["<function calls are not needed> Paris is sunny."],
        ),
        Scenario(
            "parameters_key",
            "parameters instead of arguments",
            chat(weather, **tools),
            [fc_calls([TIME], key="parameters")],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": "get_weather", "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the arguments object",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the markup is content",
            chat(weather, **tools, tool_choice="none"),
            [fc_calls([WEATHER])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments",
            chat(weather, **tools),
            ['<function_call> {"name": "get_weather", "arguments": {"city": "Paris", "unit": }}'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [fc_calls([WEATHER, TIME])[:-20]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in a string argument",
            chat([ASK_JA], **tools),
            [fc_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", fc_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [fc_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


CONFIGS = [
    Config(
        "H4",
        _parsers(None, "granite-20b-fc"),
        TOKENIZER,
        granite_fc_scenarios(),
        eos=EOS,
        served=SERVED,
    ),
]
