"""LFM2 (``lfm2`` calls, no reasoning parser) on a synthetic tokenizer."""

from __future__ import annotations

from typing import Any

from recorder.common import (
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
    _chat,
    _parsers,
    output_scenarios,
    served_as,
)

LFM2 = "lfm2"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
START = "<|tool_call_start|>"
END = "<|tool_call_end|>"


def lfm2_calls(calls: list[tuple[str, Any]]) -> str:
    """LFM2's calls: a pythonic list between its markers."""
    rendered = [
        f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls
    ]
    return f"{START}[{', '.join(rendered)}]{END}"


def _scenarios() -> list[Scenario]:
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}
    call = lfm2_calls([WEATHER])
    ja = lfm2_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
    return [
        Scenario("plain_answer", "plain content", _chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario("one_call", "one call alone", _chat(weather, **tools), [call]),
        Scenario(
            "content_then_call",
            "content, then a call, then more text",
            _chat(weather, **tools),
            [f"Let me check. {call}\nDone."],
        ),
        Scenario(
            "two_calls",
            "two calls in one list",
            _chat(weather, **tools),
            [lfm2_calls([WEATHER, TIME])],
        ),
        Scenario(
            "echoed_call",
            "the call echoed after its end marker, capped by a second one, then text",
            _chat(weather, **tools),
            [f"{call}{call[len(START) :]} It is sunny."],
        ),
        Scenario(
            "repaired_values",
            "a raw line break in a string, a zero-padded integer, a keyword parameter",
            _chat(weather, **tools),
            [f"{START}[get_weather(city='Paris\nFrance', days=07, from='now')]{END}"],
        ),
        Scenario(
            "nested_quotes",
            "a string nesting its own quotes (closed where the list parses)",
            _chat(weather, **tools),
            [f"{START}[get_weather(city='sed -n '1,9p' f.py', unit='celsius')]{END}"],
        ),
        Scenario(
            "values",
            "numbers, lists, dicts, literals and a dotted name",
            _chat(weather, **tools),
            [
                f'{START}[get_weather(city="Paris", days=-3, hours=[6, 12.5], '
                f"opts={{'raw': None, 'ok': True}}), ns.get_time(timezone='UTC')]{END}"
            ],
        ),
        Scenario(
            "no_list",
            "a call outside a list (read as content)",
            _chat(weather, **tools),
            [f"{START}get_weather(city='Paris'){END} Checking."],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [lfm2_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required",
            _chat(weather, **tools, tool_choice="required"),
            [call],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice",
            _chat(weather, **tools, tool_choice=NAMED_TIME),
            [lfm2_calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            _chat(weather, **tools, tool_choice="none"),
            [f"Let me check.{call}"],
        ),
        Scenario(
            "malformed_arguments",
            "a list that does not parse",
            _chat(weather, **tools),
            [f"{START}[get_weather(city=, unit='celsius')]{END}"],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            _chat(weather, **tools),
            [f"Let me check.{call[:-30]}"],
            finish="length",
        ),
        *output_scenarios(call, ja),
    ]


CONFIGS = [
    Config(
        "T5",
        _parsers(None, "lfm2"),
        LFM2,
        served_as(LFM2, _scenarios()),
        eos=QWEN3_EOS,
        served=LFM2,
    ),
]
SYNTHETIC = {LFM2: None}
