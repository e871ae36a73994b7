"""MiMo (Qwen3's engine, parameter values kept verbatim) on Nemotron 3's synthetic
tokenizer: Qwen3's vocabulary with the ChatML template that opens ``<think>``."""

from __future__ import annotations

from recorder.common import (
    ASK_WEATHER,
    PLAN,
    SYSTEM,
    TOOLS,
    Config,
    Scenario,
    _chat,
    _parsers,
    engine_family_scenarios,
)
from recorder.families.nemotron import NEMOTRON


def mimo_scenarios() -> list[Scenario]:
    """The engine-family list in Qwen3-Coder's markup (its values wrapped in newlines,
    which MiMo keeps), plus values written without them and with markup-like text."""
    weather = [SYSTEM, ASK_WEATHER]
    return [
        *engine_family_scenarios("qwen3_xml", "mimo"),
        Scenario(
            "verbatim_values",
            "values without wrapping newlines, one with two lines and a '<' inside",
            _chat(weather, tools=TOOLS, model="mimo"),
            [
                f"{PLAN}</think>\n<tool_call>\n<function=get_weather>\n"
                "<parameter=city>Paris <3\nFrance</parameter>\n"
                "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"
            ],
        ),
    ]


CONFIGS = [
    Config(
        "W4",
        _parsers("mimo", "mimo"),
        NEMOTRON,
        mimo_scenarios(),
        eos="<|im_end|>",
        served="mimo",
    ),
]
