"""vLLM's ``beam`` parsers: a message read by the tokenizer configuration's response
template (the synthetic tokenizer carries Gemma 4's markup as one: a thought channel,
``<|tool_call>call:NAME{key:<|"|>text<|"|>}`` calls named by the opener's capture, bare
keys and delimited strings read as JSON)."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    SYSTEM,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
    served_as,
)
from recorder.families.gemma4 import THINK, _calls, _reasoning, gemma4_calls

BEAM = "beam"  # the synthetic tokenizer's family (Qwen3's vocabulary, Gemma 4's markers)


def beam_extra() -> list[Scenario]:
    """What the template reads its own way: a string argument coerced to the schema, a
    call after a tool response anchor, text after the end of turn, an opener without
    arguments."""
    chat = _served(BEAM)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "string_argument_coerced",
            "a delimited string argument the schema types as an integer",
            chat(weather, **tools, **THINK),
            [
                f'thought\n{PLAN}<channel|><|tool_call>call:get_weather{{days:<|"|>3<|"|>}}<tool_call|>'
            ],
        ),
        Scenario(
            "text_after_turn_end",
            "an answer, the end-of-turn marker spelled in the middle, and more text",
            chat([ASK_SUM]),
            ["391.<turn|>\nmore"],
        ),
        Scenario(
            "opener_without_arguments",
            "a call opener whose region is empty: malformed, dropped",
            chat(weather, **tools),
            ["Checking.<|tool_call>call:get_weather<tool_call|> done"],
        ),
        Scenario(
            "content_between_calls",
            "content, a call, content, a call",
            chat(weather, **tools),
            ["A " + gemma4_calls([WEATHER]) + " B " + gemma4_calls([WEATHER]) + " C"],
        ),
    ]


def beam_reasoning() -> list[Scenario]:
    """Reasoning only: the reasoning list, and call markup kept as content."""
    chat = _served(BEAM)
    return [
        *_reasoning(),
        Scenario(
            "call_markup_stays_content",
            "call markup without the tool side: content, delimiters included",
            chat([SYSTEM, ASK_WEATHER], tools=TOOLS, tool_choice="none", **THINK),
            [f"thought\n{PLAN}<channel|>" + gemma4_calls([WEATHER])],
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {BEAM: None}


CONFIGS = [
    Config(
        "X3",
        _parsers("beam", "beam"),
        BEAM,
        served_as(BEAM, _reasoning() + _calls() + beam_extra()),
        eos="<turn|>",
        served=BEAM,
    ),
    Config(
        "X4",
        _parsers("beam", None),
        BEAM,
        served_as(BEAM, beam_reasoning()),
        eos="<turn|>",
        served=BEAM,
    ),
]
