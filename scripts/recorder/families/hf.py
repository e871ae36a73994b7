"""vLLM's ``hf`` parsers: a message read by the tokenizer configuration's response template
(the synthetic tokenizer carries Qwen3's: ``<think>`` reasoning, JSON calls between
``<tool_call>`` tags opened after any white space, content closed by ``<|im_end|>``)."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    QWEN3_EOS,
    REASONING,
    SYSTEM,
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
from recorder.formats import ernie_calls

HF = "hf"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML, a response template)


def hf_tool_scenarios() -> list[Scenario]:
    """The engine-family list in Qwen3's JSON calls, plus what the template reads its own
    way: string arguments coerced to the schema, blank lines around calls, a call whose
    name is missing, text that only starts like a call, and a region left open."""
    chat = _served(HF)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n'
    extra = [
        Scenario(
            "string_argument_coerced",
            "a string argument the schema types as an integer",
            chat(weather, **tools),
            [f"{PLAN}</think>\n\n{call}</tool_call>"],
        ),
        Scenario(
            "blank_lines_between",
            "content, blank lines, two calls, blank lines and more text",
            chat(weather, **tools),
            [
                f"{PLAN}</think>Checking.\n\n\n"
                + ernie_calls([WEATHER, WEATHER])
                + "\n\n  Done.\n\n"
            ],
        ),
        Scenario(
            "call_without_name",
            "a call region whose JSON has no name: its calls are dropped",
            chat(weather, **tools),
            [f'{PLAN}</think>Sure.<tool_call>\n{{"arguments": {{}}}}\n</tool_call> ok'],
        ),
        Scenario(
            "call_like_text",
            "text that starts like a call tag, and a stray </think>",
            chat([ASK_SUM], **tools),
            [f"{REASONING}</think>a <tool_cal b </think> c <tool_callx"],
        ),
        Scenario(
            "open_region_at_end",
            "a call region the output ends inside",
            chat(weather, **tools),
            [f"{PLAN}</think>{call}"],
        ),
        Scenario(
            "end_marker_in_text",
            "an end-of-turn marker in the middle of the answer",
            chat([ASK_SUM], **tools),
            [f"{REASONING}</think>391.\n<|im_end|>\nmore"],
        ),
    ]
    return served_as(HF, engine_family_scenarios("ernie", HF) + extra)


HF_XML = "hf_xml"  # the same, its response template Qwen3.5's (calls read as xml-inline)


def hf_xml_scenarios() -> list[Scenario]:
    """The engine-family list in Qwen3.5's XML calls (typed by the schema from strings),
    plus a parameter repeated, one with a value over several lines, and a call with none."""
    chat = _served(HF_XML)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    extra = [
        Scenario(
            "repeated_and_multiline_parameters",
            "a parameter given twice (the last wins) and a value over lines",
            chat(weather, **tools),
            [
                f"{PLAN}</think>\n\n<tool_call>\n<function=get_weather>\n"
                "<parameter=city>\nParis\n</parameter>\n<parameter=city>\nLyon,\nFrance\n"
                "</parameter>\n<parameter=days>\n 2 \n</parameter>\n</function>\n</tool_call>"
            ],
        ),
        Scenario(
            "call_without_parameters",
            "a call with no parameters, then text",
            chat(weather, **tools),
            [f"{PLAN}</think>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\nok"],
        ),
    ]
    return served_as(HF_XML, engine_family_scenarios("qwen3_xml", HF_XML) + extra)


SYNTHETIC: dict[str, dict[str, Any] | None] = {HF: None, HF_XML: None}


CONFIGS = [
    Config("X1", _parsers("hf", "hf"), HF, hf_tool_scenarios(), eos=QWEN3_EOS, served=HF),
    Config(
        "X2",
        _parsers("hf", None),
        HF,
        served_as(HF, plain_scenarios(ernie_calls)),
        eos=QWEN3_EOS,
        served=HF,
    ),
    Config("X5", _parsers("hf", "hf"), HF_XML, hf_xml_scenarios(), eos=QWEN3_EOS, served=HF_XML),
]
