"""Cohere Command A (``cohere_command3``) and Command 4 (``cohere_command4``): one
filter (vLLM runs Cohere's ``cohere_melody``) reads sections, citations and action blocks."""

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

COHERE = "cohere"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
EOS = "<|END_OF_TURN_TOKEN|>"
chat = _served(COHERE)


def cohere_calls(calls: list[tuple[str, Any]], first_id: int = 0) -> str:
    """An action block as Command models write it: a JSON list, one call a line."""
    lines = [
        "    "
        + json.dumps(
            {
                "tool_call_id": str(first_id + n),
                "tool_name": name,
                "parameters": args,
            },
            ensure_ascii=False,
        )
        for n, (name, args) in enumerate(calls)
    ]
    return "<|START_ACTION|>[\n" + ",\n".join(lines) + "\n]<|END_ACTION|>"


MALFORMED_CALL = (
    '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
    '"parameters": {"city": "Paris", "unit": celsius}}\n]<|END_ACTION|>'
)
EMPTY_CALL = (
    '<|START_ACTION|>[\n    {"tool_call_id": "", "tool_name": "get_time", "parameters": {}},\n'
    '    {"tool_call_id": "7", "tool_name": "get_weather", "parameters": {\n'
    '        "city": "Paris",\n        "days": 3\n    }}\n]<|END_ACTION|>'
)


class Spelling:
    """How one dialect opens and closes its sections."""

    def __init__(self, answer: str, thinking_opened: bool) -> None:
        self.answer = answer
        self.thinking_opened = thinking_opened  # the prompt opens the reasoning

    def think(self, text: str) -> str:
        opener = "" if self.thinking_opened else "<|START_THINKING|>"
        return f"{opener}{text}<|END_THINKING|>"

    def say(self, text: str) -> str:
        return f"<|START_{self.answer}|>{text}<|END_{self.answer}|>"


CMD3 = Spelling("RESPONSE", thinking_opened=False)
CMD4 = Spelling("TEXT", thinking_opened=True)


def cohere_scenarios(sp: Spelling) -> list[Scenario]:
    """Sections, calls, citations and white space, in one dialect's spelling."""
    think: dict[str, Any] = {"chat_template_kwargs": {"thinking": True}}
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM], **think),
            [sp.think(REASONING) + sp.say("17 × 23 = **391**.")],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            chat([ASK_SUM], **think),
            [sp.think(REASONING)[: -len("<|END_THINKING|>")]],
            finish="length",
        ),
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            chat(weather, **tools, **think),
            [sp.think(PLAN) + cohere_calls([WEATHER])],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two parallel tool calls",
            chat(weather, **tools, **think),
            [sp.think(PLAN_TWO) + cohere_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "an answer section, then a call",
            chat(weather, **tools),
            [sp.say("Let me check.") + cohere_calls([WEATHER])],
        ),
        Scenario(
            "plain_answer",
            "an answer section only",
            chat([ASK_SUM]),
            [sp.say("17 × 23 = 391.")],
        ),
        Scenario(
            "no_markers",
            "text without a section marker, trailing white space",
            chat([ASK_SUM]),
            ["17 × 23 = 391.  \n"],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required",
            chat(weather, **tools, tool_choice="required"),
            [cohere_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [cohere_calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the action block is read and dropped",
            chat(weather, **tools, tool_choice="none", **think),
            [sp.think(PLAN) + cohere_calls([WEATHER])],
        ),
        Scenario(
            "malformed_arguments",
            "parameters that never are JSON: their text runs to the block's end",
            chat(weather, **tools),
            [MALFORMED_CALL],
        ),
        Scenario(
            "empty_id_and_parameters",
            "a call with an empty id and {} parameters, then an indented one",
            chat(weather, **tools),
            [EMPTY_CALL],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its parameters",
            chat(weather, **tools, **think),
            [sp.think(PLAN) + cohere_calls([WEATHER])[:-40]],
            finish="length",
        ),
        Scenario(
            "citations",
            "citation tags in reasoning and answer, taken out of the text",
            chat([SYSTEM, ASK_WEATHER], **think),
            [
                sp.think("The forecast says <co>sunny</co: 0:[1]>.")
                + sp.say("It is <co>sunny and 21℃</co: 0:[0,1]> in Paris.")
            ],
        ),
        Scenario(
            "white_space",
            "white space around sections: trimmed where the filter trims it",
            chat([ASK_SUM], **think),
            [sp.think("\n  17 × 23 \n") + "\n" + sp.say("  391.  \n") + "\n"],
        ),
        Scenario(
            "include_reasoning_false",
            "include_reasoning false: the reasoning is dropped",
            chat([ASK_SUM], include_reasoning=False, **think),
            [sp.think(REASONING) + sp.say("391.")],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            chat([ASK_JA], **tools, **think),
            [
                sp.think("東京の天気を調べる 🌤️ 必要がある。")
                + sp.say("晴れ 🌞")
                + cohere_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, **think, n=2, logprobs=True, top_logprobs=2),
            [sp.think(PLAN) + sp.say("Sunny."), sp.think(PLAN) + cohere_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, **think, stream_options={"include_usage": True}),
            [sp.think(PLAN) + cohere_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def reasoning_only_scenarios() -> list[Scenario]:
    """No tool parser: sections still split, an action block is read and dropped."""
    keep = {"reason_answer", "reason_one_call", "plain_answer", "citations", "usage_chunk"}
    scenarios = [s for s in cohere_scenarios(CMD3) if s.name in keep]
    for scenario in scenarios:
        if "tools" in scenario.chat_request:  # vLLM asks for a tool parser for "auto"
            scenario.chat_request = scenario.chat_request | {"tool_choice": "none"}
    return scenarios


SYNTHETIC: dict[str, dict[str, Any] | None] = {
    COHERE: {"architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2"}
}


CONFIGS = [
    Config(
        "H1",
        _parsers("cohere_command3", "cohere_command3"),
        COHERE,
        cohere_scenarios(CMD3),
        eos=EOS,
        served=COHERE,
    ),
    Config(
        "H2",
        _parsers("cohere_command4", "cohere_command4"),
        COHERE,
        cohere_scenarios(CMD4),
        eos=EOS,
        served=COHERE,
    ),
    Config(
        "H3",
        _parsers("cohere_command3", None),
        COHERE,
        reasoning_only_scenarios(),
        eos=EOS,
        served=COHERE,
    ),
]
