"""What every configuration shares: the request vocabulary, the scenario and configuration
shapes, and the scenario builders most families record with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recorder.formats import (
    FORMATS,
    MALFORMED,
    v31_calls,
)

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
    chunkings: tuple[str, ...] = CHUNKINGS  # the stream chunkings recorded


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


def output_scenarios(call: str, multibyte: str) -> list[Scenario]:
    """What every tool family records the same way in its own call spelling (``call``:
    one call to get_weather; ``multibyte``: a call with CJK and emoji in its string
    argument): multi-byte text, ``n=2`` with logprobs, a usage-only chunk."""
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            _chat([ASK_JA], **tools),
            [f"東京の天気を調べます 🌤️{multibyte}"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            _chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", call],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            _chat(weather, **tools, stream_options={"include_usage": True}),
            [call],
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


def _parsers(reasoning: str | None, tools: str | None) -> list[str]:
    flags = ["--reasoning-parser", reasoning] if reasoning else []
    if tools:
        flags += ["--tool-call-parser", tools, "--enable-auto-tool-choice"]
    return flags


QWEN3_EOS = "<|im_end|>"


def served_as(served: str, scenarios: list[Scenario]) -> list[Scenario]:
    """The scenarios with their chat requests naming ``served`` as the model."""
    for scenario in scenarios:
        scenario.chat_request = scenario.chat_request | {"model": served}
    return scenarios


def _served(served: str) -> Callable[..., dict[str, Any]]:
    def chat(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"model": served, "messages": messages, **extra}

    return chat


NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}


UNKNOWN = ("get_stock_price", {"symbol": "META"})


V4 = "DeepseekV4ForCausalLM"
