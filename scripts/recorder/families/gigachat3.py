"""GigaChat 3's JSON call after ``function call<|role_sep|>`` (synthetic tokenizer)."""

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
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)

GIGACHAT3 = "gigachat3"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)
SEP = "<|message_sep|>\n\n"
OPENER = "function call<|role_sep|>\n"


def giga_call(call: tuple[str, Any], compact: bool = False, opener: str = OPENER) -> str:
    """One call: ``{"name": ..., "arguments": {...}}`` after the opener."""
    name, args = call
    separators = (",", ":") if compact else None
    if isinstance(args, str):  # raw (malformed) arguments text
        return f'{opener}{{"name": "{name}", "arguments": {args}}}'
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False, separators=separators)
    return opener + body


def gigachat3_scenarios() -> list[Scenario]:
    """An answer, content then a call, the call alone (both openers), compact JSON, text
    after the call, arguments that are no object, malformed and cut calls, ``tool_choice``."""
    chat = _served(GIGACHAT3)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario("answer", "a plain answer", chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        Scenario(
            "content_then_call",
            "content, the message separator, then a call",
            chat(weather, **tools),
            ["Let me check." + SEP + giga_call(WEATHER)],
        ),
        Scenario("call_only", "a call alone", chat(weather, **tools), [giga_call(WEATHER)]),
        Scenario(
            "function_call_token",
            "a call after <|function_call|>",
            chat(weather, **tools),
            ["Checking." + giga_call(TIME, opener="<|function_call|>")],
        ),
        Scenario(
            "compact_json",
            "a call written without spaces",
            chat(weather, **tools),
            [SEP + giga_call(WEATHER, compact=True)],
        ),
        Scenario(
            "nested_arguments",
            "arguments holding an object, a list and a quoted brace",
            chat(weather, **tools),
            [SEP + giga_call(("get_weather", {"city": "Paris }", "opts": {"days": [1, 2]}}))],
        ),
        Scenario(
            "text_after_call",
            "text after the call's JSON",
            chat(weather, **tools),
            [SEP + giga_call(WEATHER) + "\nDone."],
        ),
        Scenario(
            "arguments_not_object",
            "arguments that are a string",
            chat(weather, **tools),
            [SEP + giga_call(("get_time", '"UTC"'))],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            chat(weather, **tools),
            [SEP + giga_call(("get_stock", {"symbol": "ACME"}))],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON in the arguments",
            chat(weather, **tools),
            [SEP + giga_call(("get_weather", '{"city": "Paris", "unit": }'))],
        ),
        Scenario(
            "call_cut_length",
            "a call cut by length in its arguments",
            chat(weather, **tools),
            [(SEP + giga_call(WEATHER))[:-12]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in content and a string argument",
            chat([ASK_JA], **tools),
            ["晴れ 🌞。" + SEP + giga_call(("get_weather", {"city": "東京 🗼", "days": 2}))],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: the JSON list vLLM's guided decoding asks for",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the arguments object alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the call stays content",
            chat(weather, **tools, tool_choice="none"),
            ["Let me check." + SEP + giga_call(WEATHER)],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", SEP + giga_call(WEATHER)],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [SEP + giga_call(WEATHER)],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC = {GIGACHAT3: {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}}


CONFIGS = [
    Config(
        "J5",
        _parsers(None, "gigachat3"),
        GIGACHAT3,
        gigachat3_scenarios(),
        eos="</s>",
        served=GIGACHAT3,
    ),
]
