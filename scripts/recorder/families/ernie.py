"""ERNIE-4.5 thinking (``ernie45`` reasoning and calls) on a synthetic tokenizer."""

from __future__ import annotations

from recorder.common import (
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
    engine_family_scenarios,
    plain_scenarios,
    served_as,
    tool_scenarios,
)
from recorder.formats import MALFORMED, ernie_calls

ERNIE = "ernie45"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
ANSWER = "\n</think>\n\n<response>\n17 × 23 = 391.\n</response>\n"


def _answers() -> list[Scenario]:
    """What ERNIE's own answer shape adds: newlines around ``</think>`` and the
    ``<response>`` block, read by the reasoning parser (and, thinking off, the tool one)."""
    return [
        Scenario(
            "response_block",
            "reasoning, then the answer in a <response> block",
            _chat([ASK_SUM]),
            [f"{REASONING}{ANSWER}"],
        ),
        Scenario(
            "response_block_thinking_off",
            "thinking off: the answer in a <response> block, no reasoning",
            _chat([ASK_SUM], **NO_THINK),
            ["<response>\n17 × 23 = 391.\n</response>\n"],
        ),
    ]


def _calls() -> list[Scenario]:
    """The calls' own cases: ERNIE's newlines, a call that does not read, markup with no
    JSON object, and three calls."""
    weather = [SYSTEM, ASK_WEATHER]
    bad = ("get_weather", MALFORMED["ernie"])
    return [
        Scenario(
            "newlines_then_call",
            "reasoning, newlines after </think>, then a call",
            _chat(weather, tools=TOOLS),
            [f"{PLAN}\n</think>\n\n\n{ernie_calls([WEATHER])}\n"],
        ),
        Scenario(
            "malformed_then_call",
            "a call whose JSON fails, then a good one",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [f"Checking.\n{ernie_calls([bad, TIME])}\n"],
        ),
        Scenario(
            "markup_without_object",
            "call markup around text that is no JSON object",
            _chat(weather, tools=TOOLS, **NO_THINK),
            ["Checking.\n<tool_call>\nget_weather Paris\n</tool_call>\n"],
        ),
        Scenario(
            "three_calls",
            "reasoning then three calls",
            _chat(weather, tools=TOOLS),
            [f"{PLAN_TWO}\n</think>\n\n{ernie_calls([WEATHER, TIME, WEATHER])}\n"],
        ),
        Scenario(
            "response_then_call",
            "thinking off: a <response> block, then a call",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [f"<response>\nLet me check.\n</response>\n{ernie_calls([WEATHER])}"],
        ),
    ]


CONFIGS = [
    Config(
        "E1",
        _parsers(ERNIE, ERNIE),
        ERNIE,
        engine_family_scenarios("ernie", ERNIE) + served_as(ERNIE, _answers() + _calls()),
        eos=QWEN3_EOS,
        served=ERNIE,
    ),
    Config(
        "E2",
        _parsers(ERNIE, None),
        ERNIE,
        served_as(ERNIE, plain_scenarios(ernie_calls) + _answers()),
        eos=QWEN3_EOS,
        served=ERNIE,
    ),
    # ERNIE-4.5's non-thinking models: the calls alone.
    Config(
        "E5",
        _parsers(None, ERNIE),
        ERNIE,
        served_as(ERNIE, tool_scenarios("ernie", False) + _answers() + _calls()),
        eos=QWEN3_EOS,
        served=ERNIE,
    ),
]
SYNTHETIC = {ERNIE: None}
