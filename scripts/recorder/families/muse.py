"""Muse's channel-scoped messages and ATEM calls (synthetic tokenizer)."""

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
    REASONING,
    SYSTEM,
    TIME,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)

MUSE = "muse"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
EOM = "<|eom|>"
NEXT = "<|start|>assistant"  # a later message's header opens with it; the prompt opened the first


DOUBLED = "get_weather.get_weather"
TYPED = {"city": "42", "days": "2", "unit": '"celsius"'}


def msg(recipient: str | None, body: str, end: str = EOM, first: bool = False) -> str:
    """One message: the first of a turn has no ``<|start|>assistant`` (the prompt's)."""
    to = f" to={recipient}" if recipient else ""
    return f"{'' if first else NEXT}{to}<|message|>{body}{end}"


def atem(calls: list[tuple[str, Any]], raw: dict[str, str] | None = None) -> str:
    """ATEM calls: a string argument as it is, any other as JSON; ``raw`` values verbatim."""
    invokes = []
    for name, args in calls:
        params = "".join(
            f'<atem:parameter name="{key}">'
            f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
            "</atem:parameter>\n"
            for key, value in args.items()
        )
        params += "".join(
            f'<atem:parameter name="{key}">{value}</atem:parameter>\n'
            for key, value in (raw or {}).items()
        )
        invokes.append(f'<atem:invoke name="{name}">\n{params}</atem:invoke>\n')
    return "<atem:function_calls>\n" + "".join(invokes) + "</atem:function_calls>"


def muse_scenarios(recipient: str = "self") -> list[Scenario]:
    """Reasoning, answers, calls in one and several tool messages, ``tool_choice``,
    malformed and cut calls, markup echoed in reasoning, an unframed answer.
    ``recipient``: the reasoning channel's (Glimmer reads only ``to=self``)."""
    chat = _served(MUSE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    think = lambda text, end=EOM: msg(recipient, text, end, first=True)  # noqa: E731
    call = lambda calls, first=False: msg(calls[0][0], atem(calls), first=first)  # noqa: E731
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM]),
            [think(REASONING) + msg("user", "17 × 23 = **391**.", end="")],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning cut by length",
            chat([ASK_SUM]),
            [think(REASONING, end="")],
            finish="length",
        ),
        Scenario(
            "reason_one_call",
            "reasoning then a tool message with one call",
            chat(weather, **tools),
            [think(PLAN) + call([WEATHER])],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then one tool message with two calls",
            chat(weather, **tools),
            [think(PLAN_TWO) + msg("get_weather", atem([WEATHER, TIME]))],
        ),
        Scenario(
            "two_tool_messages",
            "two tool messages, a call each",
            chat(weather, **tools),
            [think(PLAN_TWO) + call([WEATHER]) + call([TIME])],
        ),
        Scenario(
            "commentary_then_call",
            "a commentary update, then a call",
            chat(weather, **tools),
            [msg("commentary", "Let me check.", first=True) + call([WEATHER])],
        ),
        Scenario(
            "bare_header",
            "a message with no recipient, then an answer",
            chat([ASK_SUM]),
            [msg(None, PLAN, first=True) + msg("user", "391.", end="")],
        ),
        Scenario(
            "text_after_calls",
            "reasoning, a call, then the answer",
            chat(weather, **tools),
            [think(PLAN) + call([WEATHER]) + msg("user", "Done.", end="")],
        ),
        Scenario(
            "doubled_name",
            "the recipient and invoke name doubled (get_weather.get_weather)",
            chat(weather, **tools),
            [think(PLAN) + msg(DOUBLED, atem([(DOUBLED, WEATHER[1])]))],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            chat(weather, **tools),
            [think(PLAN) + call([("get_stock", {"symbol": "ACME", "n": 2})])],
        ),
        Scenario(
            "string_typed_arguments",
            "a string parameter written as JSON, an integer one as text",
            chat(weather, **tools),
            [think(PLAN) + msg("get_weather", atem([("get_weather", {})], raw=TYPED))],
        ),
        Scenario(
            "markup_in_reasoning",
            "call markup echoed inside reasoning, then an answer",
            chat(weather, **tools),
            [think("I could write " + atem([WEATHER]) + " but no.") + msg("user", "Sunny.", "")],
        ),
        Scenario(
            "developer_message",
            "a to=developer message (dropped), then an answer",
            chat([ASK_SUM]),
            [think(PLAN) + msg("developer", "note") + msg("user", "391.", end="")],
        ),
        Scenario(
            "unframed_answer",
            "an answer with no message framing at all",
            chat([ASK_SUM]),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (read as auto: Muse opts out of the JSON-list path)",
            chat(weather, **tools, tool_choice="required"),
            [call([WEATHER], first=True)],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (read as auto)",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [call([TIME], first=True)],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the tool channel is content",
            chat(weather, **tools, tool_choice="none"),
            [think(PLAN) + call([WEATHER])],
        ),
        Scenario(
            "malformed_call",
            "an invoke never closed, a parameter never closed, a value not JSON",
            chat(weather, **tools),
            [
                think(PLAN)
                + msg(
                    "get_weather",
                    '<atem:function_calls>\n<atem:invoke name="get_weather">\n'
                    '<atem:parameter name="city">Paris</atem:parameter>\n'
                    '<atem:parameter name="days">{"n": </atem:parameter>\n'
                    '<atem:parameter name="unit">celsius\n</atem:invoke>\n'
                    '<atem:invoke name="get_time">\n</atem:function_calls>',
                )
            ],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length inside its parameters",
            chat(weather, **tools),
            [(think(PLAN) + call([WEATHER]))[:-60]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            chat([ASK_JA], **tools),
            [
                think("東京の天気を調べる 🌤️ 必要がある。")
                + call([("get_weather", {"city": "東京 🗼", "days": 2})])
                + msg("user", "晴れ 🌞。", end="")
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [think(PLAN) + msg("user", "Sunny.", end=""), think(PLAN) + call([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [think(PLAN) + call([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC = {MUSE: {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}}


CONFIGS = [
    Config("J1", _parsers("muse", "muse"), MUSE, muse_scenarios(), eos="<|eot|>", served=MUSE),
    Config("J2", _parsers(None, "muse"), MUSE, muse_scenarios(), eos="<|eot|>", served=MUSE),
    Config(
        "J3",
        _parsers("muse_glimmer", "muse_glimmer"),
        MUSE,
        muse_scenarios(),
        eos="<|eot|>",
        served=MUSE,
    ),
    Config(
        "J4", _parsers(None, "muse_glimmer"), MUSE, muse_scenarios(), eos="<|eot|>", served=MUSE
    ),
]
