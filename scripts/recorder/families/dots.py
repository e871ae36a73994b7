"""dots tool calls: <dots_function_call> blocks of <invoke> calls or one JSON call."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
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
    _parsers,
    _served,
)

DOTS = "dots"  # the synthetic tokenizer's family (Qwen3's vocabulary, its markers as tokens)
START, END = "<dots_function_call>", "</dots_function_call>"


def invoke(name: str, args: dict[str, Any]) -> str:
    """One ``<invoke>`` call, each argument a ``<parameter>`` (non-strings as JSON)."""
    params = "".join(
        f'<parameter name="{key}">'
        f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        "</parameter>\n"
        for key, value in args.items()
    )
    return f'<invoke name="{name}">\n{params}</invoke>'


def block(*bodies: str) -> str:
    return f"{START}\n" + "\n".join(bodies) + f"\n{END}"


def dots_scenarios() -> list[Scenario]:
    """The dots tool parser alone: XML and JSON bodies, typed parameters, blocks vLLM
    drops or sends as text, and the usual request shapes."""
    chat = _served(DOTS)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]

    def call(name: str, notes: str, output: str, **extra: Any) -> Scenario:
        return Scenario(name, notes, chat(weather, **tools), [output], **extra)

    one = block(invoke(*WEATHER))
    as_json = block(json.dumps({"name": TIME[0], "arguments": TIME[1]}))
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        call("one_call", "one <invoke> call", one),
        call(
            "two_calls", "two <invoke> calls in one block", block(invoke(*WEATHER), invoke(*TIME))
        ),
        call("json_call", "one JSON call in a block", as_json),
        call("content_then_call", "text before the block", f"Let me check.\n{one}"),
        call("two_blocks", "an <invoke> block then a JSON block", f"{one}\n{as_json}"),
        call(
            "typed_parameters",
            "parameters converted by the schema: an integer, a string that looks like one, null",
            block(
                "<invoke name='get_weather'>\n<parameter name=city> 42 </parameter>\n"
                '<parameter name="days">3</parameter>\n<parameter name="unit">null</parameter>\n'
                "</invoke>"
            ),
        ),
        call("text_after_call", "text after the block", f"{one}\nDone."),
        call("unknown_tool", "a call to an undeclared tool: dropped", block(invoke(*UNKNOWN))),
        call(
            "unknown_json_tool",
            "a JSON call to an undeclared tool",
            block(json.dumps({"name": UNKNOWN[0], "arguments": UNKNOWN[1]})),
        ),
        call(
            "malformed_arguments",
            "a JSON body that does not parse",
            block('{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}'),
        ),
        call("call_cut_length", "a block cut by length", one[:-30], finish="length"),
        call("json_cut_length", "a JSON block cut by length", as_json[:-22], finish="length"),
        call("stray_closing", "a closing marker in text", f"Sunny {END} in Paris."),
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
            "multibyte",
            "CJK and emoji in text and a parameter",
            chat([ASK_JA], **tools),
            ["東京を調べます 🌤️\n" + block(invoke("get_weather", {"city": "東京 🗼", "days": 2}))],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", one],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [one],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {DOTS: None}


CONFIGS = [
    Config("B3", _parsers(None, "dots"), DOTS, dots_scenarios(), eos=QWEN3_EOS, served=DOTS),
]
