"""Hunyuan: A13B on Llama 3.1's vocabulary (the ids vLLM's A13B reasoning parser follows
are cl100k's, which Llama 3's first ranks are), HY-V3 and HY-V4 on a synthetic tokenizer.

vLLM's A13B reasoning parser reads one token per call and fails on any other chunk (the
server answers 400), so the configuration with it records one token per chunk only; the
tool parser alone records every chunking.
"""

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
    TIME,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
    engine_family_scenarios,
    plain_scenarios,
    served_as,
)
from recorder.families.llama import LLAMA3_EOT
from recorder.formats import glm_calls

SERVED = "hunyuan"


def a13b_calls(calls: list[tuple[str, Any]], compact: bool = False) -> str:
    """A13B's calls: a JSON list of ``{"name", "arguments"}`` in ``<tool_calls>`` tags."""
    items = [{"name": name, "arguments": args} for name, args in calls]
    separators = (",", ":") if compact else None
    body = json.dumps(items, ensure_ascii=False, separators=separators)
    return f"<tool_calls>{body}</tool_calls>"


def answer(text: str, reasoning: str | None = None) -> str:
    """An A13B turn: ``<think>`` then ``<answer>`` (empty thinking when ``reasoning`` is None)."""
    think = "<think>\n\n</think>\n" if reasoning is None else f"<think>\n{reasoning}\n</think>\n"
    return f"{think}<answer>\n{text}\n</answer>"


MALFORMED = (
    '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}]</tool_calls>'
)


def a13b_scenarios() -> list[Scenario]:
    """Reasoning and calls in A13B's turn format."""
    chat = _served(SERVED)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM]),
            [answer("17 × 23 = **391**.", REASONING)],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            chat([ASK_SUM]),
            [f"<think>\n{REASONING}"],
            finish="length",
        ),
        Scenario(
            "empty_thinking",
            "an empty think block (the fast-thinking form) then an answer",
            chat([ASK_SUM]),
            [answer("391.")],
        ),
        Scenario(
            "plain_answer",
            "no think block at all: content throughout",
            chat([ASK_SUM]),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            chat(weather, **tools),
            [answer(a13b_calls([WEATHER]), PLAN)],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two parallel tool calls",
            chat(weather, **tools),
            [answer(a13b_calls([WEATHER, TIME]), PLAN_TWO)],
        ),
        Scenario(
            "compact_two_calls",
            "two calls written compactly, the second with empty arguments",
            chat(weather, **tools),
            [answer(a13b_calls([WEATHER, ("get_time", {})], compact=True), PLAN_TWO)],
        ),
        Scenario(
            "content_then_call",
            "content before the call block",
            chat(weather, **tools),
            [answer(f"Let me check.\n{a13b_calls([WEATHER])}", PLAN)],
        ),
        Scenario(
            "call_inside_think",
            "a call block inside the reasoning only",
            chat(weather, **tools),
            [answer("No call needed.", f"Maybe {a13b_calls([WEATHER])} later.")],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: vLLM's JSON-list path",
            chat(weather, **tools, tool_choice="required"),
            [answer('[{"name": "get_weather", "parameters": {"city": "Paris"}}]', PLAN)],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the arguments as the answer",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [answer('{"timezone": "Asia/Tokyo"}', PLAN)],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call block stays content",
            chat(weather, **tools, tool_choice="none"),
            [answer(a13b_calls([WEATHER]), PLAN)],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments inside a well-formed block",
            chat(weather, **tools),
            [answer(MALFORMED, PLAN)],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [answer(a13b_calls([WEATHER]), PLAN)[:-60]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning and in a string argument",
            chat([ASK_JA], **tools),
            [
                answer(
                    a13b_calls([("get_weather", {"city": "東京 🗼", "days": 2})]),
                    "東京の天気を調べる 🌤️ 必要がある。",
                )
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [answer("Sunny.", PLAN), answer(a13b_calls([WEATHER]), PLAN)],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [answer(a13b_calls([WEATHER]), PLAN)],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def a13b_tool_scenarios() -> list[Scenario]:
    """The tool parser alone: what reaches it is the whole output."""
    chat = _served(SERVED)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call block", chat(weather, **tools), [a13b_calls([WEATHER])]),
        Scenario(
            "two_calls",
            "two calls in one block",
            chat(weather, **tools),
            [a13b_calls([WEATHER, TIME])],
        ),
        Scenario(
            "bare_list_two_calls",
            "a bare list after a newline, compact, the second call with empty arguments",
            chat(weather, **tools),
            ["\n" + a13b_calls([WEATHER, ("get_time", {})], compact=True)[12:-13]],
        ),
        Scenario(
            "content_then_call",
            "content before the block: streamed as content, read one-shot",
            chat(weather, **tools),
            [f"Let me check.\n{a13b_calls([WEATHER])}"],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: vLLM's JSON-list path",
            chat(weather, **tools, tool_choice="required"),
            ['[{"name": "get_weather", "parameters": {"city": "Paris"}}]'],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the arguments as the output",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            ['{"timezone": "Asia/Tokyo"}'],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments inside a well-formed block",
            chat(weather, **tools),
            [MALFORMED],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [a13b_calls([WEATHER])[:-40]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in a string argument",
            chat([ASK_JA], **tools),
            [a13b_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", a13b_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [a13b_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def _efforts(scenarios: list[Scenario]) -> list[Scenario]:
    """``thinking`` kwargs spelled as the ``reasoning_effort`` HY's parsers read."""
    for scenario in scenarios:
        kwargs = scenario.chat_request.get("chat_template_kwargs")
        if kwargs is not None:
            effort = "no_think" if kwargs.get("thinking") is False else "high"
            if kwargs.get("enable_thinking") is False:
                effort = "no_think"
            scenario.chat_request["chat_template_kwargs"] = {"reasoning_effort": effort}
    return scenarios


def hy_scenarios(served: str) -> list[Scenario]:
    """Reasoning only, its switch the effort: the plain list with ``reasoning_effort`` for
    ``thinking``, plus the effort unset, given as the request's field, and ``none``."""
    scenarios = served_as(served, plain_scenarios(glm_calls))
    for scenario in scenarios:
        kwargs = scenario.chat_request.get("chat_template_kwargs")
        if kwargs is not None:
            effort = "high" if kwargs.get("thinking") else "no_think"
            scenario.chat_request["chat_template_kwargs"] = {"reasoning_effort": effort}
    chat = _served(served)
    output = f"{REASONING}</think>391."
    return [
        *scenarios,
        Scenario("effort_unset", "no effort: the parser's default", chat([ASK_SUM]), [output]),
        Scenario(
            "effort_field",
            "the request's reasoning_effort field",
            chat([ASK_SUM], reasoning_effort="low"),
            [output],
        ),
        Scenario(
            "effort_none",
            "reasoning_effort none (not no_think: still thinking for these parsers)",
            chat([ASK_SUM], reasoning_effort="none"),
            [output],
        ),
    ]


SYNTHETIC = {"hy": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}}


CONFIGS = [
    Config(
        "U1",
        _parsers("hunyuan_a13b", "hunyuan_a13b"),
        "LlamaForCausalLM",
        a13b_scenarios(),
        eos=LLAMA3_EOT,
        served=SERVED,
        chunkings=("t1",),
    ),
    Config(
        "U2",
        _parsers(None, "hunyuan_a13b"),
        "LlamaForCausalLM",
        a13b_tool_scenarios(),
        eos=LLAMA3_EOT,
        served=SERVED,
    ),
    Config(
        "U3",
        _parsers("hy_v3", None),
        "hy",
        hy_scenarios("hy"),
        eos=QWEN3_EOS,
        served="hy",
    ),
    Config(
        "U4",
        _parsers("hy_v4", None),
        "hy",
        hy_scenarios("hy"),
        eos=QWEN3_EOS,
        served="hy",
    ),
    Config(
        "U5",
        _parsers("hy_v4", "hy_v4"),
        "hy",
        _efforts(engine_family_scenarios("hy", "hy")),
        eos=QWEN3_EOS,
        served="hy",
    ),
    Config(
        "U6",
        _parsers("hy_v3", "hy_v3"),
        "hy",
        _efforts(engine_family_scenarios("hy_v3", "hy")),
        eos=QWEN3_EOS,
        served="hy",
    ),
]
