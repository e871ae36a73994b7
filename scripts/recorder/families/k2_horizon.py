"""K2 Horizon's reasoning (a think block per reasoning effort) and its IFM calls (XML, typed
XML or JSON by the kwarg tool_call_format) on a synthetic tokenizer."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    PLAN_TWO,
    QWEN3_EOS,
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

K2H = "k2_horizon"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
THINK, END = "<ifm|think>", "</ifm|think>"


def _effort(level: str) -> dict[str, Any]:
    return {"chat_template_kwargs": {"reasoning_effort": level}}


def k2_horizon_scenarios() -> list[Scenario]:
    """Reasoning only: each effort's block, a missing opener, a call section, cuts."""
    return [
        Scenario(
            "reason_answer",
            "the high effort block, then an answer",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}{END}17 × 23 = **391**."],
        ),
        Scenario(
            "no_opener",
            "the block's opener left to the template",
            _chat([ASK_SUM]),
            [f"{REASONING}{END}391."],
        ),
        Scenario(
            "medium_effort",
            "reasoning_effort medium: <ifm|think_fast>",
            _chat([ASK_SUM], **_effort("medium")),
            [f"<ifm|think_fast>{REASONING}</ifm|think_fast>391."],
        ),
        Scenario(
            "low_effort_other_block",
            "reasoning_effort low reads only its own block",
            _chat([ASK_SUM], **_effort("low")),
            [f"<ifm|think_faster>{REASONING}</ifm|think_faster>{THINK}x{END}391."],
        ),
        Scenario(
            "call_section_ends_reasoning",
            "a call section ends reasoning, stays content",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}<ifm|tool_calls>get_time</ifm|tool_calls>"],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}"],
            finish="length",
        ),
        Scenario("no_markers", "no block at all", _chat([ASK_SUM]), ["391."]),
        Scenario(
            "multibyte",
            "CJK and emoji split across byte-level tokens",
            _chat([ASK_JA]),
            [f"{THINK}東京の天気を調べる 🌤️ 必要がある。{END}晴れ 🌞、最高 21℃。"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            _chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"{THINK}{REASONING}{END}391.", "391."],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"{THINK}{REASONING}{END}391."],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def ifm_calls(calls: list[tuple[str, Any]], fmt: str = "xml") -> str:
    """An IFM call group: each call's name then its arguments, or its JSON."""
    text = "<ifm|tool_calls>"
    for name, args in calls:
        if fmt == "json":
            body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        elif isinstance(args, str):  # raw (malformed) argument markup
            body = name + args
        else:
            body = name
            for key, value in args.items():
                kind = f"<ifm|arg_type>{type(value).__name__}</ifm|arg_type>"
                shown = value if isinstance(value, str) else json.dumps(value)
                body += (
                    f"<ifm|arg_key>{key}</ifm|arg_key>{kind if fmt == 'xml_typed' else ''}"
                    f"<ifm|arg_value>{shown}</ifm|arg_value>"
                )
        text += f"<ifm|tool_call>{body}</ifm|tool_call>"
    return text + "</ifm|tool_calls>"


def _format(fmt: str) -> dict[str, Any]:
    return {"chat_template_kwargs": {"tool_call_format": fmt}}


def k2_horizon_tool_scenarios() -> list[Scenario]:
    """``k2_horizon`` reasoning and tools: the three call formats, refusals, cuts."""
    tools = {"tools": TOOLS}
    ask = [SYSTEM, ASK_WEATHER]
    end = END
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}{end}17 × 23 = **391**."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM]),
            [f"{THINK}{REASONING}"],
            finish="length",
        ),
        Scenario(
            "reason_one_call",
            "reasoning then one call",
            _chat(ask, **tools),
            [f"{PLAN}{end}{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning, content, then two calls",
            _chat(ask, **tools),
            [f"{PLAN_TWO}{end}Checking both.{ifm_calls([WEATHER, TIME])}"],
        ),
        Scenario(
            "call_group_ends_reasoning",
            "a call group right after reasoning ends it",
            _chat(ask, **tools),
            [f"{PLAN}{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "json_calls",
            "tool_call_format json",
            _chat(ask, **tools, **_format("json")),
            [f"{PLAN}{end}{ifm_calls([WEATHER, TIME], 'json')}"],
        ),
        Scenario(
            "typed_calls",
            "tool_call_format xml_typed",
            _chat(ask, **tools, **_format("xml_typed")),
            [
                f"{PLAN}{end}"
                + ifm_calls([("get_weather", {"city": "Paris", "days": 2})], "xml_typed")
            ],
        ),
        Scenario(
            "type_tag_in_plain_xml",
            "a type tag in plain XML: no calls, the group stays content",
            _chat(ask, **tools),
            [f"{PLAN}{end}{ifm_calls([('get_weather', {'city': 'Paris'})], 'xml_typed')}"],
        ),
        Scenario(
            "schema_coercion",
            "values typed by the tool's schema (days an integer, unit a string)",
            _chat(ask, **tools),
            [
                f"{PLAN}{end}"
                + ifm_calls(
                    [
                        (
                            "get_weather",
                            "<ifm|arg_key>city</ifm|arg_key><ifm|arg_value> Paris "
                            "</ifm|arg_value>\n<ifm|arg_key>days</ifm|arg_key><ifm|arg_value> 3 "
                            "</ifm|arg_value><ifm|arg_key>unit</ifm|arg_key><ifm|arg_value>1"
                            "</ifm|arg_value>",
                        )
                    ]
                )
            ],
        ),
        Scenario(
            "name_only_call",
            "a call with a name and no arguments",
            _chat(ask, **tools),
            [
                f"{PLAN}{end}<ifm|tool_calls><ifm|tool_call> get_time </ifm|tool_call>"
                "</ifm|tool_calls>"
            ],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request lacks: no calls",
            _chat(ask, **tools),
            [f"{PLAN}{end}{ifm_calls([('get_stock', {'symbol': 'ACME'})])}"],
        ),
        Scenario(
            "malformed_group",
            "text between calls in the group: no calls",
            _chat(ask, **tools),
            [
                f"{PLAN}{end}<ifm|tool_calls><ifm|tool_call>get_time<ifm|arg_key>timezone"
                "</ifm|arg_key><ifm|arg_value>UTC</ifm|arg_value></ifm|tool_call>stray"
                "</ifm|tool_calls>"
            ],
        ),
        Scenario(
            "text_after_calls",
            "content, calls, then text after the group",
            _chat(ask, **tools),
            [f"{PLAN}{end}Checking.{ifm_calls([WEATHER])}\nDone."],
        ),
        Scenario(
            "blank_before_calls",
            "only whitespace before the group: no content",
            _chat(ask, **tools),
            [f"{PLAN}{end}\n\n{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "group_never_closed",
            "a group that never closes: the rest is content at the end",
            _chat(ask, **tools),
            [f"{PLAN}{end}Checking.<ifm|tool_calls><ifm|tool_call>get_time"],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (read as auto)",
            _chat(ask, **tools, tool_choice="required"),
            [f"{PLAN}{end}{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: another tool's call is refused",
            _chat(ask, **tools, tool_choice={"type": "function", "function": {"name": "get_time"}}),
            [
                f"{PLAN}{end}{ifm_calls([TIME])}",
            ],
        ),
        Scenario(
            "tool_choice_named_other",
            "named tool_choice with a call to another tool",
            _chat(ask, **tools, tool_choice={"type": "function", "function": {"name": "get_time"}}),
            [f"{PLAN}{end}{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the group is content",
            _chat(ask, **tools, tool_choice="none"),
            [f"{PLAN}{end}\n{ifm_calls([WEATHER])}"],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length",
            _chat(ask, **tools),
            [f"{PLAN}{end}{ifm_calls([WEATHER])[:-40]}"],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _chat([ASK_JA], **tools),
            [
                f"東京の天気を調べる 🌤️ 必要がある。{end}晴れ 🌞"
                + ifm_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(ask, **tools, n=2, logprobs=True, top_logprobs=2),
            [f"{PLAN}{end}Sunny.", f"{PLAN}{end}{ifm_calls([WEATHER])}"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(ask, **tools, stream_options={"include_usage": True}),
            [f"{PLAN}{end}{ifm_calls([WEATHER])}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {K2H: None}

CONFIGS = [
    Config(
        "W5",
        _parsers("k2_horizon", None),
        K2H,
        served_as(K2H, k2_horizon_scenarios()),
        eos=QWEN3_EOS,
        served=K2H,
    ),
    Config(
        "K4",
        _parsers("k2_horizon", "k2_horizon"),
        K2H,
        served_as(K2H, k2_horizon_tool_scenarios()),
        eos=QWEN3_EOS,
        served=K2H,
    ),
]
