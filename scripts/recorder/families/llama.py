"""Llama 3.1 JSON calls and Llama 4 pythonic calls on the llama-models vocabularies."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    SYSTEM,
    TIME,
    TOOLS,
    UNKNOWN,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)
from recorder.formats import _json_args

# --- Llama 3.1 and Llama 4 ----------------------------------------------------------

# Architecture -> the tests' tokenizer fixture (tests/support/llama_tokenizers.py) built from
# llama-models' real vocabularies by the project's own Python.
LLAMA_FAMILIES = {"LlamaForCausalLM": "llama3", "Llama4ForCausalLM": "llama4"}


LLAMA3_EOT = "<|eot_id|>"


LLAMA4_EOT = "<|eot|>"


def llama3_calls(calls: list[tuple[str, Any]], tag: bool = True) -> str:
    """Llama 3.1's JSON calls, ``; ``-separated, after ``<|python_tag|>`` when ``tag``."""
    body = "; ".join(
        f'{{"name": "{name}", "parameters": {_json_args(args)}}}' for name, args in calls
    )
    return ("<|python_tag|>" if tag else "") + body


def pythonic_calls(calls: list[tuple[str, Any]]) -> str:
    """A pythonic call list: keyword arguments as Python literals."""

    def literal(value: Any) -> str:
        return repr(value) if not isinstance(value, bool | type(None)) else str(value)

    return (
        "["
        + ", ".join(
            f"{name}({', '.join(f'{k}={literal(v)}' for k, v in args.items())})"
            for name, args in calls
        )
        + "]"
    )


def llama3_json_scenarios(served: str) -> list[Scenario]:
    """llama3_json (and llama4_json) on the Llama 3.1 vocabulary."""
    chat = _served(served)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario(
            "one_call_python_tag",
            "one call after <|python_tag|>, ended by <|eom_id|>",
            chat(weather, **tools),
            [llama3_calls([WEATHER])],
            stop_token="<|eom_id|>",
        ),
        Scenario(
            "one_call_bare_json",
            "one call as bare JSON (no <|python_tag|>)",
            chat(weather, **tools),
            [llama3_calls([WEATHER], tag=False)],
        ),
        Scenario(
            "two_calls",
            "two calls separated by '; '",
            chat(weather, **tools),
            [llama3_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "text before the call: one-shot finds the call, the stream keeps content",
            chat(weather, **tools),
            ["Let me check. " + llama3_calls([WEATHER], tag=False)],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare",
            chat(weather, **tools),
            [llama3_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON after <|python_tag|>",
            chat(weather, **tools),
            ['<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": }}'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [llama3_calls([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in a string argument",
            chat([ASK_JA], **tools),
            [llama3_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
    ]


def llama4_pythonic_scenarios(served: str) -> list[Scenario]:
    """llama4_pythonic on the Llama 4 vocabulary."""
    chat = _served(served)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    marked = f"<|python_start|>{pythonic_calls([WEATHER])}<|python_end|>"
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario(
            "one_call",
            "one call as a bare list",
            chat(weather, **tools),
            [pythonic_calls([WEATHER])],
        ),
        Scenario(
            "one_call_python_markers",
            "one call inside <|python_start|> ... <|python_end|>",
            chat(weather, **tools),
            [marked],
        ),
        Scenario(
            "markers_special_kept",
            "the same with skip_special_tokens false",
            chat(weather, **tools, skip_special_tokens=False),
            [marked],
        ),
        Scenario(
            "two_calls",
            "two calls in one list",
            chat(weather, **tools),
            [f"<|python_start|>{pythonic_calls([WEATHER, TIME])}<|python_end|>"],
        ),
        Scenario(
            "content_then_call",
            "text before the list: all content",
            chat(weather, **tools),
            ["Let me check. " + pythonic_calls([WEATHER])],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare",
            chat(weather, **tools),
            [pythonic_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "marker_then_prose",
            "<|python_start|> then text that is no list: nothing streams",
            chat(weather, **tools),
            ["<|python_start|>I will look it up.<|python_end|>"],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [f"<|python_start|>{pythonic_calls([WEATHER])}"[:-10]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in a string argument",
            chat([ASK_JA], **tools),
            [pythonic_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
    ]


CONFIGS = [
    Config(
        "L1",
        _parsers(None, "llama3_json"),
        "LlamaForCausalLM",
        llama3_json_scenarios("llama3"),
        eos=LLAMA3_EOT,
        served="llama3",
    ),
    Config(
        "L2",
        _parsers(None, "llama4_pythonic"),
        "Llama4ForCausalLM",
        llama4_pythonic_scenarios("llama4"),
        eos=LLAMA4_EOT,
        served="llama4",
    ),
    Config(
        "L3",
        _parsers(None, "llama4_json"),
        "LlamaForCausalLM",
        llama3_json_scenarios("llama3")[:4],
        eos=LLAMA3_EOT,
        served="llama3",
    ),
]
