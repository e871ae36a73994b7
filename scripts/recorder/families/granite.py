"""Granite 3.2 reasoning phrases and Granite 4 calls."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    PLAN,
    REASONING,
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

# --- Granite (synthetic tokenizer) -------------------------------------------------

GRANITE = "granite"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)


GRANITE_EOS = "<|end_of_text|>"


def granite4_calls(calls: list[tuple[str, Any]]) -> str:
    """Granite 4.0: each call a JSON object in its own ``<tool_call>`` tags."""
    return "\n".join(
        f'<tool_call>\n{{"name": "{name}", "arguments": {_json_args(args)}}}\n</tool_call>'
        for name, args in calls
    )


def granite4_scenarios() -> list[Scenario]:
    """granite4 (no reasoning parser): the tool scenarios of a JSON-in-tags format, and
    call objects vLLM cannot read (no arguments, null arguments)."""
    chat = _served(GRANITE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call", chat(weather, **tools), [granite4_calls([WEATHER])]),
        Scenario(
            "two_calls",
            "two calls, a newline between them",
            chat(weather, **tools),
            [granite4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "content, a call, then more text after it",
            chat(weather, **tools),
            [f"Let me check.\n{granite4_calls([WEATHER])}\nDone."],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare",
            chat(weather, **tools),
            [granite4_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            chat(weather, **tools, tool_choice="none"),
            [granite4_calls([WEATHER])],
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
            "malformed JSON in the call tags, then text",
            chat(weather, **tools),
            [
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}'
                "\n</tool_call>\nSorry."
            ],
        ),
        Scenario(
            "missing_arguments",
            "a call object without arguments, then a good call and text",
            chat(weather, **tools),
            [
                '<tool_call>\n{"name": "get_weather"}\n</tool_call>\n'
                + granite4_calls([TIME])
                + "\nDone."
            ],
        ),
        Scenario(
            "null_arguments",
            "a call whose arguments are null",
            chat(weather, **tools),
            ['<tool_call>{"name": "get_time", "arguments": null}</tool_call>'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [granite4_calls([WEATHER])[:-20]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + granite4_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", granite4_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [granite4_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


THOUGHT_PHRASE = "Here is my thought process:"


RESPONSE_PHRASE = "Here is my response:"


def granite_reasoning_scenarios() -> list[Scenario]:
    """granite reasoning (phrases, no markers): reasoning then an answer in both
    spellings, the phrases not at the start, cut inside each part, no reasoning."""
    chat = _served(GRANITE)
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}\n\n{RESPONSE_PHRASE}\n17 × 23 = **391**."],
        ),
        Scenario(
            "contracted_phrases",
            "the Here's spelling of both phrases",
            chat([ASK_SUM]),
            [f"Here's my thought process: {REASONING} Here's my response: 391."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never answered, cut by length",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}"],
            finish="length",
        ),
        Scenario(
            "cut_in_response_phrase",
            "cut by length inside the response phrase",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}\n\nHere is my resp"],
            finish="length",
        ),
        Scenario("plain_answer", "no phrases: all content", chat([ASK_SUM]), ["17 × 23 = 391."]),
        Scenario(
            "phrases_after_text",
            "the phrases after other text (one-shot finds them, the stream does not)",
            chat([ASK_SUM]),
            [f"Sure. {THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391."],
        ),
        Scenario(
            "here_in_reasoning",
            "reasoning that says Here and a phrase that breaks off",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE} Here we go. Here is my plan: multiply. {RESPONSE_PHRASE} 391."],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning and answer",
            chat([ASK_JA]),
            [f"{THOUGHT_PHRASE} 東京の天気を調べる 🌤️ 必要がある。{RESPONSE_PHRASE} 晴れ 🌞。"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"{THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391.", "391."],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"{THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391."],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def granite_pair_scenarios() -> list[Scenario]:
    """granite reasoning beside granite4 tools: the stream never leaves reasoning's
    parser (content keeps the call markup), one-shot reads calls from the content."""
    chat = _served(GRANITE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_one_call",
            "reasoning, then a call after the response phrase",
            chat(weather, **tools),
            [f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE}\n{granite4_calls([WEATHER])}"],
        ),
        Scenario(
            "call_without_reasoning",
            "a call with no phrases",
            chat(weather, **tools),
            [granite4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list after the response phrase",
            chat(weather, **tools, tool_choice="required"),
            [
                f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE}"
                + json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])
            ],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            chat(weather, **tools, tool_choice="none"),
            [f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE} {granite4_calls([WEATHER])}"],
        ),
    ]


SYNTHETIC = {GRANITE: {"architectures": ["GraniteForCausalLM"], "model_type": "granite"}}


CONFIGS = [
    Config(
        "F1",
        _parsers(None, "granite4"),
        GRANITE,
        granite4_scenarios(),
        eos=GRANITE_EOS,
        served=GRANITE,
    ),
    Config(
        "F2",
        _parsers("granite", None),
        GRANITE,
        granite_reasoning_scenarios(),
        eos=GRANITE_EOS,
        served=GRANITE,
    ),
    Config(
        "F3",
        _parsers("granite", "granite4"),
        GRANITE,
        granite_pair_scenarios(),
        eos=GRANITE_EOS,
        served=GRANITE,
    ),
]
