"""Poolside's reasoning."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    QWEN3_EOS,
    REASONING,
    SYSTEM,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
    plain_scenarios,
    served_as,
    tool_scenarios,
)
from recorder.formats import glm_calls

# --- Poolside (synthetic tokenizer) -----------------------------------------------------

POOLSIDE = "poolside"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)


def poolside_reasoning_scenarios() -> list[Scenario]:
    """``poolside_v1`` reasoning (deepseek_v3's, read back only to the assistant's turn):
    the plain list plus an earlier turn whose ``</think>`` must not end this one's."""
    chat = _served(POOLSIDE)
    earlier = [
        ASK_SUM,
        {"role": "assistant", "content": f"<think>{REASONING}</think>391."},
        {"role": "user", "content": "And 17 × 24?"},
    ]
    return [
        *served_as(POOLSIDE, plain_scenarios(glm_calls)),
        Scenario(
            "earlier_think_end",
            "an earlier turn's </think> in the prompt, thinking on without <think> in it",
            chat(earlier, chat_template_kwargs={"enable_thinking": True}),
            [f"{REASONING} Plus 17.</think>408."],
        ),
        Scenario(
            "earlier_think_end_unset",
            "the same prompt, thinking not asked for: all content",
            chat(earlier),
            [f"{REASONING}</think>408."],
        ),
    ]


def poolside_tool_scenarios() -> list[Scenario]:
    """``poolside_v1`` reasoning and tools (GLM's call markup, read by its own parser):
    the tool list with thinking asked for, plus what this parser adds."""
    chat = _served(POOLSIDE)
    weather = [SYSTEM, ASK_WEATHER]
    return [
        *served_as(POOLSIDE, tool_scenarios("glm", True)),
        Scenario(
            "text_after_call",
            "content, a call, then text after it",
            chat(weather, tools=TOOLS),
            ["Checking.\n" + glm_calls([WEATHER]) + "\nDone."],
        ),
        Scenario(
            "key_twice_and_empty_call",
            "an empty call, then a key given twice and a typed value",
            chat(weather, tools=TOOLS),
            [
                "<tool_call></tool_call><tool_call>get_weather\n<arg_key>city</arg_key>"
                "<arg_value>Paris</arg_value><arg_key>city</arg_key><arg_value>Rome"
                "</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
            ],
        ),
        Scenario(
            "logprobs_without_text",
            "logprobs asked for: a chunk that sends nothing sends empty content",
            chat(weather, tools=TOOLS, logprobs=True, top_logprobs=1),
            [glm_calls([WEATHER])],
            logprobs=1,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {POOLSIDE: None}


CONFIGS = [
    Config(
        "V1",
        _parsers("poolside_v1", None),
        POOLSIDE,
        poolside_reasoning_scenarios(),
        eos=QWEN3_EOS,
        served=POOLSIDE,
    ),
    Config(
        "H5",
        _parsers("poolside_v1", "poolside_v1"),
        POOLSIDE,
        poolside_tool_scenarios(),
        eos=QWEN3_EOS,
        served=POOLSIDE,
    ),
]
