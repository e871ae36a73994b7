"""MiniMax-M2 on a synthetic tokenizer."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_WEATHER,
    PLAN,
    PLAN_TWO,
    QWEN3_EOS,
    SYSTEM,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _chat,
    _parsers,
    plain_scenarios,
    served_as,
    tool_scenarios,
)
from recorder.formats import minimax_calls

# --- MiniMax M2 (synthetic tokenizer) ------------------------------------------------

MINIMAX = "minimax_m2"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)


def minimax_scenarios() -> list[Scenario]:
    """The DeepSeek tool scenarios in MiniMax's markup, plus what only MiniMax reads."""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    time_call = '<parameter name="timezone">Asia/Tokyo</parameter>\n</invoke>\n'
    return [
        *tool_scenarios("minimax", True),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare is dropped; the next one stays",
            _chat(weather, **tools),
            [f"{PLAN}</think>" + minimax_calls([("get_stock", {"symbol": "AAPL"}), WEATHER])],
        ),
        Scenario(
            "name_spellings",
            "single-quoted and bare names, spaces around a parameter's name",
            _chat(weather, **tools),
            [
                f"{PLAN_TWO}</think><minimax:tool_call>\n<invoke name='get_time'>\n"
                + time_call
                + "<invoke name=get_weather>\n<parameter name = 'city' >Paris</parameter>\n"
                "<parameter name=days>2</parameter>\n</invoke>\n</minimax:tool_call>"
            ],
        ),
        Scenario(
            "invoke_without_wrapper",
            "an <invoke> outside <minimax:tool_call> is a call too; text after it is dropped",
            _chat(weather, **tools),
            [f'{PLAN}</think>Checking.\n<invoke name="get_time">\n{time_call}Done.'],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: calls are read and dropped",
            _chat(weather, **tools, tool_choice="none"),
            [f"{PLAN}</think>Sure.{minimax_calls([WEATHER])}"],
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {MINIMAX: None}


CONFIGS = [
    Config(
        "M1",
        _parsers("minimax_m2", "minimax_m2"),
        MINIMAX,
        served_as(MINIMAX, minimax_scenarios()),
        eos=QWEN3_EOS,
        served=MINIMAX,
    ),
    Config(
        "M2",
        _parsers("minimax_m2_append_think", "minimax_m2"),
        MINIMAX,
        served_as(MINIMAX, tool_scenarios("minimax", True)),
        eos=QWEN3_EOS,
        served=MINIMAX,
    ),
    Config(
        "M3",
        _parsers("minimax_m2", None),
        MINIMAX,
        served_as(MINIMAX, plain_scenarios(minimax_calls)),
        eos=QWEN3_EOS,
        served=MINIMAX,
    ),
]
