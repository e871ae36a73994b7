"""Olmo 3's reasoning, and its reasoning with its call lines."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    PLAN,
    PLAN_TWO,
    QWEN3_EOS,
    REASONING,
    SYSTEM,
    THINK,
    TIME,
    TOOLS,
    UNKNOWN,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
    plain_scenarios,
    served_as,
)

OLMO3 = "olmo3"  # the synthetic tokenizer's family (Qwen3's vocabulary, no think tokens)


def olmo3_scenarios() -> list[Scenario]:
    """olmo3 reasoning (markers spelled in ordinary tokens): the reasoning-only list plus
    text around and between the markers, and angle brackets that look like them."""
    chat = _served(OLMO3)
    think = {"chat_template_kwargs": THINK}
    extra = [
        Scenario(
            "text_before_think",
            "content before an explicit <think>",
            chat([ASK_SUM], **think),
            [f"Okay. <think>{REASONING}</think>391."],
        ),
        Scenario(
            "two_think_ends",
            "two </think>: one-shot splits at the first, the stream at the last",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>First.</think>Second."],
        ),
        Scenario(
            "angle_brackets",
            "< and > in reasoning and answer (held while they may be a marker)",
            chat([ASK_SUM], **think),
            ["Is 3<4 and 5>2? <b>Yes</b>.</think>So a<b> and <think-ish> hold."],
        ),
        Scenario(
            "ends_in_marker_piece",
            "an answer whose last text could start a marker: held, then lost",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>Use x </"],
        ),
    ]
    return served_as(OLMO3, plain_scenarios() + extra)


def olmo3_calls(calls: list[tuple[str, Any]], marked: bool = True) -> str:
    """Olmo 3's calls: one pythonic call a line, in <function_calls> when ``marked``;
    string arguments are written as they are (malformed bodies)."""

    def arguments(args: Any) -> str:
        if isinstance(args, str):
            return args
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())

    lines = "\n".join(f"{name}({arguments(args)})" for name, args in calls)
    return f"<function_calls>\n{lines}\n</function_calls>" if marked else lines


def olmo3_tool_scenarios(reasoning: bool) -> list[Scenario]:
    """The olmo3 tool parser, after olmo3 reasoning or alone: calls, the one-shot and
    streamed readings' differences, and lines vLLM's stream cannot parse. (After
    reasoning, vLLM's stream reads no call: its tool parser sees text that does not
    open with ``<``.)"""
    chat = _served(OLMO3)
    think = {"chat_template_kwargs": THINK}
    plan = f"{PLAN}</think>" if reasoning else ""
    plan_two = f"{PLAN_TWO}</think>" if reasoning else ""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]

    def call(name: str, notes: str, output: str, **extra: Any) -> Scenario:
        return Scenario(name, notes, chat(weather, **tools, **think), [output], **extra)

    one = olmo3_calls([WEATHER])
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM], **tools, **think),
            [f"{REASONING}</think>17 × 23 = **391**."],
        ),
        call("reason_one_call", "reasoning then one call", f"{plan}{one}"),
        call(
            "reason_two_calls",
            "reasoning then two call lines",
            f"{plan_two}{olmo3_calls([WEATHER, TIME])}",
        ),
        call(
            "content_then_call",
            "text before <function_calls>: one-shot finds the call, the stream sends content",
            f"{plan}Let me check.\n{one}",
        ),
        call(
            "bare_call_lines",
            "call lines without the markers: one-shot calls, the stream content",
            f"{plan}{olmo3_calls([WEATHER, TIME], marked=False)}",
        ),
        call(
            "json_literals",
            "null/true/false arguments and a nested list",
            f"{plan}"
            + olmo3_calls([("get_weather", "city='Paris', unit=null, days=[1, 2], hourly=true")]),
        ),
        call(
            "two_calls_one_line",
            "two calls on one line, comma-separated",
            f"{plan}<function_calls>\nget_weather(city='Paris'), get_time(timezone='UTC')"
            "\n</function_calls>",
        ),
        call(
            "indented_line",
            "an indented second line: one-shot strips it, the stream stops at it",
            f"{plan_two}" + olmo3_calls([WEATHER, TIME]).replace("\nget_time", "\n  get_time"),
        ),
        call(
            "closing_paren_next_line",
            "a call's closing parenthesis on the next line",
            f"{plan}<function_calls>\nget_weather(city='Paris'\n)\n</function_calls>",
        ),
        call(
            "other_markup",
            "an answer opening with another tag: the stream sends nothing",
            f"{plan}<b>Sunny</b> in Paris.",
        ),
        call(
            "text_after_closing",
            "text after </function_calls>",
            f"{plan}{one}\nDone.",
        ),
        call(
            "unknown_tool",
            "a call to an undeclared tool",
            f"{plan}{olmo3_calls([UNKNOWN])}",
        ),
        call(
            "malformed_arguments",
            "arguments that are names, not literals",
            f"{plan}" + olmo3_calls([("get_weather", "city=Paris, unit=celsius")]),
        ),
        call(
            "call_cut_length",
            "a call cut by length in a string argument",
            f"{plan}{one[:-24]}",
            finish="length",
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, **think, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, **think, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning and a string argument",
            chat([ASK_JA], **tools, **think),
            [
                ("東京の天気を調べる 🌤️ 必要がある。</think>" if reasoning else "")
                + olmo3_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, **think, n=2, logprobs=True, top_logprobs=2),
            [f"{plan}Sunny.", f"{plan}{one}"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, **think, stream_options={"include_usage": True}),
            [f"{plan}{one}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {OLMO3: None}


CONFIGS = [
    Config(
        "O1",
        _parsers("olmo3", None),
        OLMO3,
        olmo3_scenarios(),
        eos=QWEN3_EOS,
        served=OLMO3,
    ),
    Config(
        "B1",
        _parsers("olmo3", "olmo3"),
        OLMO3,
        olmo3_tool_scenarios(reasoning=True),
        eos=QWEN3_EOS,
        served=OLMO3,
    ),
    Config(
        "B2",
        _parsers(None, "olmo3"),
        OLMO3,
        olmo3_tool_scenarios(reasoning=False),
        eos=QWEN3_EOS,
        served=OLMO3,
    ),
]
