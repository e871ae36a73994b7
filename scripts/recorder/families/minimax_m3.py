"""MiniMax M3 on a synthetic tokenizer (``<mm:think>`` reasoning, namespaced calls)."""

from __future__ import annotations

import copy
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
    _chat,
    _parsers,
    plain_scenarios,
    served_as,
    tool_scenarios,
)
from recorder.formats import M3_NAMESPACE, minimax_m3_calls

M3 = "minimax_m3"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
NS = M3_NAMESPACE
# The shared scenarios' thinking switches, as M3's template reads them.
_SWITCHES = {True: {"thinking_mode": "enabled"}, False: {"thinking_mode": "disabled"}}
ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "create_order",
        "description": "Place an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "user_id": {"type": "integer"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                    },
                },
                "gift": {"type": "boolean"},
                "note": {"type": "string"},
            },
        },
    },
}


def m3_spelled(scenarios: list[Scenario]) -> list[Scenario]:
    """The shared scenarios in M3's spelling: ``</mm:think>``, and ``thinking_mode``."""
    for scenario in scenarios:
        scenario.outputs = [
            text.replace("<think>", "<mm:think>").replace("</think>", "</mm:think>")
            for text in scenario.outputs
        ]
        kwargs = scenario.chat_request.get("chat_template_kwargs")
        if kwargs is not None and "thinking" in kwargs:
            scenario.chat_request = copy.deepcopy(scenario.chat_request)
            scenario.chat_request["chat_template_kwargs"] = _SWITCHES[bool(kwargs["thinking"])]
    return scenarios


def _invoke(name: str, body: str) -> str:
    return f'{NS}<invoke name="{name}">\n{body}{NS}</invoke>\n'


def _element(name: str, body: str) -> str:
    return f"{NS}<{name}>{body}{NS}</{name}>"


def m3_scenarios() -> list[Scenario]:
    """The tool scenarios in M3's markup, plus what only M3 reads."""
    tools = {"tools": TOOLS}
    thinking = {"chat_template_kwargs": _SWITCHES[True]}
    weather = [SYSTEM, ASK_WEATHER]
    item = _element("item", _element("sku", "book-001") + _element("qty", "2"))
    order = (
        _element("user_id", "42")
        + "\n"
        + _element("items", item + _element("item", _element("sku", "pen")))
        + "\n"
        + _element("gift", "true")
        + _element("note", "leave " + _element("b", "at") + " the door")
        + "\n"
        + _element("tag", "a")
        + _element("tag", "b")
        + "\n"
    )
    return [
        *m3_spelled(tool_scenarios("minimax_m3", True)),
        Scenario(
            "explicit_think_start",
            "thinking_mode unset: the output opens <mm:think> itself",
            _chat([ASK_SUM]),
            [f"<mm:think>{REASONING}</mm:think>391."],
        ),
        Scenario(
            "stray_closer",
            "thinking_mode unset: a leading </mm:think> is dropped",
            _chat([ASK_SUM]),
            ["</mm:think>17 × 23 = 391."],
        ),
        Scenario(
            "nested_elements",
            "objects, a list of <item>s, repeated names, mixed text, typed by the schema",
            _chat(weather, tools=[*TOOLS, ORDER_TOOL], **thinking),
            [
                f"{PLAN}</mm:think>{NS}<tool_call>\n"
                + _invoke("create_order", order)
                + f"{NS}</tool_call>"
            ],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request lacks is still a call (no name check)",
            _chat(weather, **tools, **thinking),
            [f"{PLAN}</mm:think>" + minimax_m3_calls([("get_stock", {"symbol": "ACME"}), WEATHER])],
        ),
        Scenario(
            "text_around_calls",
            "content; an invoke outside the wrapper is content; text after the calls is dropped",
            _chat(weather, **tools, **thinking),
            [
                f"{PLAN}</mm:think>Checking.\n"
                + _invoke("get_time", _element("timezone", "UTC"))
                + f"{NS}<tool_call>\n"
                + _invoke("get_weather", _element("city", "Paris"))
                + f"{NS}</tool_call>\nDone."
            ],
        ),
        Scenario(
            "name_spellings",
            "single-quoted and bare names",
            _chat(weather, **tools, **thinking),
            [
                f"{PLAN}</mm:think>{NS}<tool_call>\n{NS}<invoke name='get_time'>"
                + _element("timezone", "UTC")
                + f"{NS}</invoke>{NS}<invoke name=get_weather>"
                + _element("city", "Paris")
                + f"{NS}</invoke>\n{NS}</tool_call>"
            ],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: calls are read and dropped",
            _chat(weather, **tools, **thinking, tool_choice="none"),
            [f"{PLAN}</mm:think>Sure.{minimax_m3_calls([WEATHER])}"],
        ),
    ]


def _reasoning_only() -> list[Scenario]:
    scenarios = m3_spelled(plain_scenarios(minimax_m3_calls))
    for scenario in scenarios:
        kwargs: dict[str, Any] = scenario.chat_request.get("chat_template_kwargs") or {}
        if scenario.name == "explicit_think_start" and kwargs.get("thinking_mode") == "enabled":
            scenario.chat_request = {**scenario.chat_request, "chat_template_kwargs": {}}
    return scenarios


SYNTHETIC: dict[str, dict[str, Any] | None] = {M3: None}


CONFIGS = [
    Config(
        "W2",
        _parsers("minimax_m3", "minimax_m3"),
        M3,
        served_as(M3, m3_scenarios()),
        eos=QWEN3_EOS,
        served=M3,
    ),
    Config(
        "W3",
        _parsers("minimax_m3", None),
        M3,
        served_as(M3, _reasoning_only()),
        eos=QWEN3_EOS,
        served=M3,
    ),
]
