"""PLaMo 3 (``plamo3`` reasoning and calls) on a synthetic tokenizer: Qwen3's vocabulary
with PLaMo's marker pieces (``<|plamo:begin_``, ``<|plamo:end_``, ``:plamo|>``) and its
one-token markers, so each reasoning or call marker is several tokens as in PLaMo's own."""

from __future__ import annotations

import copy
from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
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
)
from recorder.formats import plamo3_calls

PLAMO = "plamo3"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
EOS = "<|plamo:tag|>"
BEGIN, END = "<|plamo:begin_", "<|plamo:end_"
THINK_START, THINK_END = f"{BEGIN}think:plamo|>", f"{END}think:plamo|>"
REQUESTS, REQUESTS_END = f"{BEGIN}tool_requests:plamo|>", f"{END}tool_requests:plamo|>"
ARGS_OPEN = f"{BEGIN}tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
WEATHER_BODY = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
PLAIN_ARGS_OPEN = f"{BEGIN}tool_arguments:plamo|><|plamo:msg|>"
# A request opened for get_time, up to its arguments.
OPEN_TIME = (
    f"{BEGIN}tool_request:plamo|>{BEGIN}tool_name:plamo|>get_time{END}tool_name:plamo|>{ARGS_OPEN}"
)


def _request(name: str | None, args: str, *, args_open: str = ARGS_OPEN) -> str:
    """One request block; ``name`` None leaves the name block out."""
    named = "" if name is None else f"{BEGIN}tool_name:plamo|>{name}{END}tool_name:plamo|>"
    return (
        f"{BEGIN}tool_request:plamo|>{named}{args_open}{args}"
        f"{END}tool_arguments:plamo|>{END}tool_request:plamo|>"
    )


def plamo_spelled(scenarios: list[Scenario]) -> list[Scenario]:
    """The shared scenarios in PLaMo's spelling: its think markers, and ``enable_thinking``
    for the ``thinking`` switch (the only one vLLM's PLaMo parser reads)."""
    for scenario in scenarios:
        scenario.outputs = [
            text.replace("<think>", THINK_START).replace("</think>", THINK_END)
            for text in scenario.outputs
        ]
        kwargs = scenario.chat_request.get("chat_template_kwargs")
        if kwargs is not None and "thinking" in kwargs:
            scenario.chat_request = copy.deepcopy(scenario.chat_request)
            scenario.chat_request["chat_template_kwargs"] = {
                "enable_thinking": bool(kwargs["thinking"])
            }
    return scenarios


def plamo_scenarios() -> list[Scenario]:
    """The engine families' tool scenarios in PLaMo's markup, plus what PLaMo's parser
    adds: cut markers at the end, calls named by their arguments, the turn's end."""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    one = plamo3_calls([WEATHER])

    def call(name: str, notes: str, output: str, **extra: Any) -> Scenario:
        return Scenario(name, notes, _chat(weather, **tools), [output], **extra)

    return [
        *plamo_spelled(engine_family_scenarios(PLAMO, PLAMO)),
        call(
            "reasoning_into_calls",
            "reasoning ended by the requests block itself",
            f"{PLAN}{plamo3_calls([WEATHER, TIME])}",
        ),
        call(
            "reasoning_cut_in_marker",
            "reasoning cut inside its end marker",
            f"{PLAN}{END}think",
            finish="length",
        ),
        call(
            "reasoning_cut_at_anchor",
            "reasoning cut right after a marker's anchor token",
            f"{PLAN}{END}",
            finish="length",
        ),
        call(
            "content_cut_in_marker",
            "content cut inside the requests marker",
            f"{PLAN}{THINK_END}Let me check.{BEGIN}tool_requests",
            finish="length",
        ),
        call(
            "content_cut_mid_token",
            "content cut inside a marker's name token (no token prefix: kept)",
            f"{PLAN}{THINK_END}Let me check.{BEGIN}tool_req",
            finish="length",
        ),
        call(
            "name_cut_in_marker",
            "a call cut inside its name's end marker",
            f"{PLAN}{THINK_END}{REQUESTS}{BEGIN}tool_request:plamo|>{BEGIN}tool_name:plamo|>"
            f"get_time{END}tool_name",
            finish="length",
        ),
        call(
            "arguments_cut_in_marker",
            "arguments cut inside their end marker (a whole token of it)",
            f'{PLAN}{THINK_END}{REQUESTS}{OPEN_TIME}{{"timezone": "UTC"}}{END}tool',
            finish="length",
        ),
        call(
            "arguments_cut_after_bracket",
            "arguments cut right after their closing bracket",
            f'{PLAN}{THINK_END}{REQUESTS}{OPEN_TIME}{{"timezone": "UTC"}}',
            finish="length",
        ),
        call(
            "empty_arguments",
            "a call with blank arguments",
            f"{PLAN}{THINK_END}{REQUESTS}{_request('get_time', ' ')}{REQUESTS_END}",
        ),
        call(
            "name_in_arguments",
            "a request without a name block: the arguments name the call",
            f"{PLAN}{THINK_END}{REQUESTS}{_request('', WEATHER_BODY)}{REQUESTS_END}",
        ),
        call(
            "arguments_before_name",
            "arguments before any name block: the stream fails (one-shot: docs/parity.md)",
            f"{PLAN}{THINK_END}{REQUESTS}{_request(None, '{}')}{REQUESTS_END}",
            one_shot=False,
        ),
        call(
            "plain_arguments_marker",
            "an arguments marker without its constrain part: the arguments are dropped",
            f"{PLAN}{THINK_END}{REQUESTS}"
            + _request("get_time", '{"timezone": "UTC"}', args_open=PLAIN_ARGS_OPEN)
            + REQUESTS_END,
        ),
        call(
            "turn_end_in_content",
            "the turn's end token inside the output, text after it",
            f"{PLAN}{THINK_END}Sunny.{EOS}ignored",
        ),
        call(
            "turn_end_in_arguments",
            "the turn's end inside a call's arguments",
            f'{PLAN}{THINK_END}{REQUESTS}{OPEN_TIME}{{"timezone": "UTC"}}{EOS}after',
        ),
        call(
            "think_reopened",
            "a think block opened again in content",
            f"{PLAN}{THINK_END}Checking.{THINK_START}More thought.{THINK_END}{one}",
        ),
        Scenario(
            "thinking_off_end_marker",
            "enable_thinking false: the think markers are text, not markers",
            _chat(weather, **tools, chat_template_kwargs={"enable_thinking": False}),
            [f"Sure.{THINK_END}Checked.{one}"],
        ),
        call(
            "nested_arguments",
            "nested objects and arrays, escapes and brackets inside strings",
            f"{PLAN}{THINK_END}{REQUESTS}"
            + _request("get_weather", '{"city": "Pa\\"ris}", "days": [1, {"a": [2]}]}')
            + REQUESTS_END,
        ),
    ]


def _reasoning_only() -> list[Scenario]:
    scenarios = plamo_spelled(plain_scenarios(plamo3_calls))
    return [
        *scenarios,
        Scenario(
            "cut_in_marker",
            "reasoning cut inside its end marker",
            _chat([ASK_SUM]),
            [f"{REASONING}{END}think"],
            finish="length",
        ),
        Scenario(
            "calls_end_reasoning",
            "the requests block ends reasoning and stays content",
            _chat([SYSTEM, ASK_WEATHER], tools=TOOLS, tool_choice="none"),
            [f"{PLAN}{plamo3_calls([WEATHER])}"],
        ),
        Scenario(
            "turn_end",
            "the turn's end token ends reasoning; text after it is content",
            _chat([ASK_SUM]),
            [f"{REASONING}{EOS}391."],
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {PLAMO: None}


CONFIGS = [
    Config(
        "P2",
        _parsers("plamo3", "plamo3"),
        PLAMO,
        served_as(PLAMO, plamo_scenarios()),
        eos=EOS,
        served=PLAMO,
    ),
    Config(
        "P4",
        _parsers(None, "plamo3"),
        PLAMO,
        served_as(PLAMO, plamo_scenarios()),
        eos=EOS,
        served=PLAMO,
    ),
    Config(
        "P3",
        _parsers("plamo3", None),
        PLAMO,
        served_as(PLAMO, _reasoning_only()),
        eos=EOS,
        served=PLAMO,
    ),
]
