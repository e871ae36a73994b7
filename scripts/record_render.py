"""Record /render golden transcripts from vLLM 0.33.0's own render server.

Runs with the oracle's Python (it needs nothing but the standard library; the oracle
itself is started as a subprocess):

    ../shared/oracle/venv/bin/python scripts/record_render.py --qwen3 DIR [--config R1]

DIR is the model directory both servers load; for the Qwen3 configurations it is
the bundled ``qwen3`` directory (``python -c "from app.tokens.bundled_qwen3 import
bundled_qwen3_dir; print(bundled_qwen3_dir())"`` with the project's Python), which
carries Qwen3's chat template and sampling defaults, so both sides render the same
template with the same tokenizer; gpt-oss (G) and DeepSeek-V4 (D) configurations load the
bundled ``gpt-oss`` and ``deepseek`` directories (``--gpt-oss``, ``--deepseek``).

For each configuration it starts ``serve_oracle.sh`` on a free loopback port with the
configuration's flags, posts every scenario to its render path and writes
``tests/golden/render/render-<CONFIG>.jsonl.gz``: one JSON object per line with
``name``, ``path``, ``headers``, ``request``, ``status`` and ``response``. Scenarios
pass a ``request_id`` (or an ``X-Request-Id``) so ids are not random. The round trips
(``rt-*``) add ``derender``: the oracle's derender call (``request``,
``status``, ``response``) for a model output against the prompt ids it rendered, so a
test can check that our render fed to our derender parses as vLLM's pair does.

Nothing in app/, cache/, parsers/ or tests/ imports this script.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The oracle folder: $ORACLE_DIR, else the one whose venv runs this script.
ORACLE = Path(os.environ.get("ORACLE_DIR") or Path(sys.executable).parents[2])
OUT = Path(__file__).resolve().parent.parent / "tests" / "golden" / "render"
CHAT = "/v1/chat/completions/render"
COMPLETIONS = "/v1/completions/render"
MAX_MODEL_LEN = "40000"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city"],
        },
    },
}
NOTE = {"type": "function", "function": {"name": "save_note"}}
STRICT = {"type": "function", "function": {**WEATHER["function"], "strict": True}}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
USER = {"role": "user", "content": "What is the weather in Paris?"}


Scenario = tuple[str, str, dict[str, str], dict[str, Any]]


def chat(name: str, model: str = "qwen3", **fields: Any) -> Scenario:
    request = {"model": model, "request_id": f"golden-{name}", "messages": [USER], **fields}
    return name, CHAT, {}, request


def completion(name: str, model: str = "qwen3", **fields: Any) -> Scenario:
    return name, COMPLETIONS, {}, {"model": model, "request_id": f"golden-{name}", **fields}


SCENARIOS = [
    chat("plain"),
    chat("system", messages=[{"role": "system", "content": "Be brief."}, USER]),
    chat(
        "parts",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    ),
    chat("tools", tools=[WEATHER]),
    chat("tools-required", tools=[WEATHER], tool_choice="required"),
    chat(
        "tools-named",
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ),
    chat("tools-none", tools=[WEATHER], tool_choice="none"),
    chat(
        "tools-required-single",
        tools=[WEATHER, NOTE],
        tool_choice="required",
        parallel_tool_calls=False,
    ),
    chat("tools-required-strict", tools=[STRICT, NOTE], tool_choice="required"),
    chat(
        "tools-named-strict",
        tools=[STRICT],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ),
    chat(
        "tools-required-format",
        tools=[NOTE],
        tool_choice="required",
        response_format={"type": "json_object"},
    ),
    chat("tools-auto-strict", tools=[STRICT, NOTE]),
    chat(
        "tool-result",
        tools=[WEATHER],
        messages=[
            USER,
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        ],
    ),
    chat(
        "multi-turn",
        messages=[
            USER,
            {"role": "assistant", "content": "Sunny.", "reasoning": "Look it up."},
            {"role": "user", "content": "And tomorrow?"},
        ],
    ),
    chat(
        "reasoning-content",
        messages=[
            USER,
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "Think."},
            {"role": "user", "content": "Thanks"},
        ],
    ),
    chat("thinking-off", chat_template_kwargs={"enable_thinking": False}),
    chat("effort-none", reasoning_effort="none"),
    chat("effort-high", reasoning_effort="high"),
    chat("no-generation-prompt", add_generation_prompt=False),
    chat(
        "continue-final",
        add_generation_prompt=False,
        continue_final_message=True,
        messages=[USER, {"role": "assistant", "content": "The weather is"}],
    ),
    chat("no-reasoning", include_reasoning=False),
    chat("n-stop", n=3, stop=["END", "\n\n"], stop_token_ids=[151643], seed=7),
    chat("stop-string", stop="STOP", include_stop_str_in_output=True),
    chat("max-tokens", max_tokens=128, temperature=0.0),
    chat("max-completion-tokens", max_tokens=50, max_completion_tokens=64, temperature=1.0),
    chat(
        "sampling",
        temperature=0.3,
        top_p=0.5,
        top_k=5,
        min_p=0.1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        repetition_penalty=1.1,
    ),
    chat("logprobs", logprobs=True, top_logprobs=5),
    chat("logprobs-echo", logprobs=True, top_logprobs=2, echo=True),
    chat("stream", stream=True, stream_options={"include_usage": True}),
    chat("logit-bias", logit_bias={"100": 5, "200": -150.5}),
    chat(
        "json-schema",
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "w", "schema": {"type": "object"}},
        },
    ),
    chat("json-object", response_format={"type": "json_object"}),
    chat("structured", structured_outputs={"regex": "[a-z]+"}),
    chat("transfer", kv_transfer_params={"do_remote_decode": True}, vllm_xargs={"k": 1}),
    chat(
        "misc",
        cache_salt="salt",
        priority=3,
        return_token_ids=True,
        bad_words=["x"],
        min_tokens=2,
        ignore_eos=True,
    ),
    chat("skip-special", skip_special_tokens=True),
    ("header-id", CHAT, {"X-Request-Id": "from-header"}, {"model": "qwen3", "messages": [USER]}),
    chat("no-model", model=None),
    # Errors.
    chat("err-model", model="other"),
    chat("err-temperature", temperature=3.0),
    chat("err-top-p", top_p=0.0),
    chat("err-n", n=0),
    chat("err-max-tokens", max_tokens=0),
    chat("err-empty-stop", stop=[""]),
    chat("err-template", chat_template="{{ messages }}"),
    chat("err-template-kwarg", chat_template_kwargs={"chat_template": "x"}),
    chat("err-tools-empty", tools=[]),
    chat("err-tool-choice-no-tools", tool_choice="auto"),
    chat(
        "err-tool-choice-unknown",
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "nope"}},
    ),
    chat("err-beam", use_beam_search=True),
    chat("err-too-long", max_tokens=39990),
    chat("err-long-prompt", messages=[{"role": "user", "content": "word " * 41000}]),
    # Completions.
    completion("c-plain", prompt="Once upon a time"),
    completion("c-batch", prompt=["a", "b c"], max_tokens=5),
    completion("c-ids", prompt=[1, 2, 3]),
    completion("c-ids-batch", prompt=[[1, 2], [3]]),
    completion("c-default-max", prompt="x", max_tokens=None),
    completion("c-logprobs", prompt="x", logprobs=3, echo=True),
    completion("c-echo-zero", prompt="x", echo=True, max_tokens=0),
    completion("c-sampling", prompt="x", temperature=0.0, stop=["\n"], n=2, stream=True),
    completion("c-err-model", prompt="x", model="other"),
    completion("c-err-negative-id", prompt=[1, -1]),
    completion("c-err-oov-id", prompt=[[1], [10**9]]),
    completion("c-vocab-edge", prompt=[151668, 151935]),
    chat("err-content-type", messages=[{"role": "user", "content": 123}]),
    completion("c-err-long", prompt="word " * 41000),
]


# Render, then derender an output against the rendered prompt: (name, chat fields, output).
ROUND_TRIPS = [
    ("rt-thinking", {}, "Check the forecast.</think>\n\nIt is sunny."),
    ("rt-thinking-off", {"chat_template_kwargs": {"enable_thinking": False}}, "It is sunny."),
    ("rt-effort-none", {"reasoning_effort": "none"}, "It is sunny."),
    (
        "rt-tool-call",
        {"tools": [WEATHER]},
        'Need data.</think>\n\n<tool_call>\n{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}\n</tool_call>',
    ),
    (
        "rt-tool-result",
        {
            "tools": [WEATHER],
            "messages": [
                USER,
                {"role": "assistant", "content": "", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
            ],
        },
        "Done.</think>\n\nIt is 18 C and sunny.",
    ),
    (
        "rt-continue",
        {
            "add_generation_prompt": False,
            "continue_final_message": True,
            "messages": [USER, {"role": "assistant", "content": "<think>\nLet me"}],
        },
        " see.</think>\n\nSunny.",
    ),
]


def round_trip(
    base: str, config: Config, encode: Any, name: str, fields: dict[str, Any], output: str
) -> dict[str, Any]:
    """Render through the oracle, then derender ``output`` with the rendered prompt ids."""
    model = config.served
    chat_request = {"model": model, "request_id": f"golden-{name}", "messages": [USER], **fields}
    status, rendered = post(base, CHAT, {}, chat_request)
    assert status == 200, rendered
    ids = [*encode(output), *config.eos]
    derender = {
        "model": model,
        "chat_request": chat_request,
        "prompt_token_ids": rendered["token_ids"],
        "generate_response": {
            "request_id": rendered["request_id"],
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}],
        },
    }
    status, response = post(base, "/v1/chat/completions/derender", {}, derender)
    return {
        "name": name,
        "path": CHAT,
        "headers": {},
        "request": chat_request,
        "status": 200,
        "response": rendered,
        "derender": {"request": derender, "status": status, "response": response},
    }


KWARG_SCENARIOS = [
    chat("k-defaults"),
    chat("k-override", chat_template_kwargs={"enable_thinking": True}),
    chat("k-null", chat_template_kwargs={"enable_thinking": None, "custom": "auto"}),
    chat("k-effort", reasoning_effort="high"),
    chat("k-extra", chat_template_kwargs={"other": [1, 2]}),
]
KWARG_TRIPS = [
    ("rt-k-defaults", {}, "It is sunny."),
    ("rt-k-override", {"chat_template_kwargs": {"enable_thinking": True}}, "Hm.</think>\n\nSunny."),
]
GPT_OSS = "gpt-oss"
GPT_OSS_SCENARIOS = [
    chat("g-plain", GPT_OSS),
    chat("g-system", GPT_OSS, messages=[{"role": "system", "content": "Be brief."}, USER]),
    chat("g-developer", GPT_OSS, messages=[{"role": "developer", "content": "Use metric."}, USER]),
    chat(
        "g-parts",
        GPT_OSS,
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    ),
    chat("g-tools", GPT_OSS, tools=[WEATHER]),
    chat("g-tools-none", GPT_OSS, tools=[WEATHER], tool_choice="none"),
    chat(
        "g-tool-result",
        GPT_OSS,
        tools=[WEATHER],
        messages=[
            USER,
            {"role": "assistant", "content": "", "reasoning": "Need data.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        ],
    ),
    chat(
        "g-multi-turn",
        GPT_OSS,
        messages=[
            USER,
            {"role": "assistant", "content": "Sunny.", "reasoning": "Look it up."},
            {"role": "user", "content": "And tomorrow?"},
        ],
    ),
    chat("g-effort-low", GPT_OSS, reasoning_effort="low"),
    chat("g-effort-high", GPT_OSS, reasoning_effort="high"),
    chat("g-n-stop", GPT_OSS, n=2, stop=["END"], stop_token_ids=[200012], seed=3),
    chat("g-logprobs", GPT_OSS, logprobs=True, top_logprobs=3, max_tokens=100),
    chat("g-sampling", GPT_OSS, temperature=0.5, top_p=0.9, top_k=10),
    chat("g-no-reasoning", GPT_OSS, include_reasoning=False),
    chat("g-template", GPT_OSS, chat_template="{{ messages }}"),
    chat("g-err-effort-none", GPT_OSS, reasoning_effort="none"),
    chat("g-err-effort", GPT_OSS, reasoning_effort="max"),
    chat("g-err-model", "qwen3"),
    completion("g-c-plain", GPT_OSS, prompt="Once upon a time"),
]
GPT_OSS_TRIPS = [
    (
        "rt-g-final",
        {},
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Sunny.<|return|>",
    ),
    (
        "rt-g-call",
        {"tools": [WEATHER]},
        "<|channel|>analysis<|message|>Need data.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    ),
]

DEEPSEEK = "deepseek"
SYSTEM = {"role": "system", "content": "Be brief."}
CALL_2 = {
    "id": "call_2",
    "type": "function",
    "function": {"name": "save_note", "arguments": '{"text": "Paris"}'},
}
# Arguments of every JSON type, a non-ASCII string, and a key the encoder prints as is.
ARGS_CALL = {
    "id": "call_3",
    "type": "function",
    "function": {
        "name": "save_note",
        "arguments": json.dumps(
            {"text": "café", "n": 3, "ok": True, "none": None, "list": [1, "a"], "obj": {"k": 1}},
            ensure_ascii=False,
        ),
    },
}
BAD_ARGS_CALL = {
    "id": "call_4",
    "type": "function",
    "function": {"name": "save_note", "arguments": "not json"},
}
UNICODE_TOOL = {
    "type": "function",
    "function": {"name": "météo", "description": "Le temps qu'il fait.", "parameters": {}},
}
TURN = [
    USER,
    {"role": "assistant", "content": "Sunny.", "reasoning": "Look it up."},
    {"role": "user", "content": "And tomorrow?"},
]
TOOL_TURN = [
    USER,
    {"role": "assistant", "content": "", "reasoning": "Need data.", "tool_calls": [CALL, CALL_2]},
    # Results in the other order: the encoder sorts them by the calls' order.
    {"role": "tool", "tool_call_id": "call_2", "content": "saved"},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18 C"}]},
]


def ds(name: str, model: str = DEEPSEEK, **fields: Any) -> Scenario:
    return chat(name, model, **fields)


DEEPSEEK_SCENARIOS = [
    ds("d-plain"),
    ds("d-system", messages=[SYSTEM, USER]),
    ds(
        "d-parts",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    ),
    ds(
        "d-billing-header",
        messages=[
            {"role": "system", "content": "x-anthropic-billing-header: cch=1\nBe brief."},
            USER,
        ],
    ),
    ds(
        "d-billing-header-parts",
        messages=[
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "x-anthropic-billing-header: cch=2"},
                    {"type": "text", "text": "Be brief."},
                ],
            },
            USER,
        ],
    ),
    ds("d-name", messages=[{"role": "user", "content": "Hi", "name": "ann"}]),
    ds("d-tools", tools=[WEATHER]),
    ds("d-tools-system", tools=[WEATHER, NOTE], messages=[USER, SYSTEM, USER]),
    ds("d-tools-none", tools=[WEATHER], tool_choice="none"),
    ds("d-tools-unicode", tools=[UNICODE_TOOL]),
    ds(
        "d-tool-result",
        tools=[WEATHER],
        messages=[
            USER,
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        ],
    ),
    ds("d-tool-results-order", tools=[WEATHER, NOTE], messages=TOOL_TURN),
    ds("d-tool-results-no-tools", messages=TOOL_TURN),
    ds(
        "d-tool-result-then-user",
        messages=[*TOOL_TURN, {"role": "user", "content": "Thanks"}],
    ),
    ds(
        "d-tool-args",
        tools=[NOTE],
        messages=[
            USER,
            {"role": "assistant", "content": "Saving.", "tool_calls": [ARGS_CALL, BAD_ARGS_CALL]},
            {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
        ],
    ),
    ds("d-multi-turn", messages=TURN),
    ds("d-multi-turn-tools", tools=[WEATHER], messages=TURN),
    ds(
        "d-reasoning-content",
        messages=[
            USER,
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "Think."},
            {"role": "user", "content": "Thanks"},
        ],
    ),
    ds(
        "d-reasoning-content-kept",
        chat_template_kwargs={"drop_thinking": False},
        messages=[
            USER,
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "Think."},
            {"role": "user", "content": "Thanks"},
        ],
    ),
    ds(
        "d-consecutive-users",
        messages=[USER, {"role": "user", "content": "Tell me.", "task": "query"}, USER],
    ),
    ds("d-keep-thinking", messages=TURN, chat_template_kwargs={"drop_thinking": False}),
    ds(
        "d-keep-thinking-chat",
        messages=TURN,
        chat_template_kwargs={"drop_thinking": False, "thinking": False},
    ),
    ds("d-multi-turn-chat", messages=TURN, chat_template_kwargs={"enable_thinking": False}),
    ds("d-thinking-off", chat_template_kwargs={"enable_thinking": False}),
    ds("d-thinking-kwarg-off", chat_template_kwargs={"thinking": False}),
    ds("d-thinking-kwarg-on", chat_template_kwargs={"thinking": True}),
    ds("d-thinking-either", chat_template_kwargs={"thinking": False, "enable_thinking": 1}),
    ds("d-thinking-null", chat_template_kwargs={"thinking": None}),
    ds("d-effort-none", reasoning_effort="none"),
    ds("d-effort-minimal", reasoning_effort="minimal"),
    ds("d-effort-low", reasoning_effort="low"),
    ds("d-effort-medium", reasoning_effort="medium"),
    ds("d-effort-high", reasoning_effort="high"),
    ds("d-effort-xhigh", reasoning_effort="xhigh"),
    ds("d-effort-max", reasoning_effort="max"),
    ds("d-effort-kwarg", chat_template_kwargs={"reasoning_effort": "max"}),
    ds("d-effort-kwarg-other", chat_template_kwargs={"reasoning_effort": "turbo"}),
    ds("d-effort-kwarg-number", chat_template_kwargs={"reasoning_effort": 3}),
    ds(
        "d-effort-thinking-off",
        reasoning_effort="max",
        chat_template_kwargs={"enable_thinking": False},
    ),
    ds(
        "d-effort-none-thinking-on",
        reasoning_effort="none",
        chat_template_kwargs={"thinking": True},
    ),
    ds("d-developer", messages=[{"role": "developer", "content": "Use metric."}, USER]),
    ds("d-developer-last", messages=[USER, {"role": "developer", "content": "Use metric."}]),
    ds(
        "d-developer-tools",
        messages=[{"role": "developer", "content": "Use metric.", "tools": [WEATHER]}],
    ),
    ds(
        "d-developer-tools-chat",
        tools=[NOTE],
        reasoning_effort="none",
        messages=[{"role": "developer", "content": "Use metric.", "tools": [WEATHER]}],
    ),
    ds("d-system-last", messages=[USER, SYSTEM]),
    ds(
        "d-system-then-assistant",
        messages=[USER, SYSTEM, {"role": "assistant", "content": "Hi.", "reasoning": "R."}],
    ),
    ds("d-assistant-last", messages=[USER, {"role": "assistant", "content": "It is"}]),
    ds(
        "d-continue-final",
        add_generation_prompt=False,
        continue_final_message=True,
        messages=[USER, {"role": "assistant", "content": "It is"}],
    ),
    ds("d-no-generation-prompt", add_generation_prompt=False),
    ds("d-task-query", messages=[{"role": "user", "content": "Paris weather", "task": "query"}]),
    ds("d-task-action", messages=[{"role": "user", "content": "Paris weather", "task": "action"}]),
    ds(
        "d-task-action-chat",
        reasoning_effort="none",
        messages=[{"role": "user", "content": "Paris weather", "task": "action"}],
    ),
    ds(
        "d-task-answer",
        messages=[
            {"role": "user", "content": "Paris weather", "task": "title"},
            {"role": "assistant", "content": "Weather", "reasoning": "R."},
            USER,
        ],
    ),
    ds(
        "d-latest-reminder",
        messages=[USER, {"role": "latest_reminder", "content": "Today is Monday."}],
    ),
    ds("d-no-reasoning", include_reasoning=False),
    ds("d-add-special", add_special_tokens=True),
    ds("d-n-stop", n=2, stop=["END"], stop_token_ids=[1], seed=7),
    ds("d-logprobs", logprobs=True, top_logprobs=3, max_tokens=100),
    ds("d-skip-special", skip_special_tokens=True),
    ds("d-tools-kwarg", chat_template_kwargs={"tools": [NOTE]}),
    ds("d-tokenize-kwarg", chat_template_kwargs={"tokenize": True}),
    ds("d-template", chat_template="{{ messages }}"),
    # Errors.
    ds("d-err-developer-empty", messages=[{"role": "developer", "content": ""}, USER]),
    ds("d-err-role", messages=[{"role": "critic", "content": "Hm."}, USER]),
    # In chat mode a developer or unknown message before the last user one is kept.
    ds(
        "d-err-developer-empty-chat",
        reasoning_effort="none",
        messages=[{"role": "developer", "content": ""}, USER],
    ),
    ds(
        "d-err-role-chat",
        reasoning_effort="none",
        messages=[{"role": "critic", "content": "Hm."}, USER],
    ),
    ds(
        "d-err-call-no-name",
        messages=[
            USER,
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}],
            },
            USER,
        ],
    ),
    ds("d-err-long-prompt", messages=[{"role": "user", "content": "word " * 41000}]),
    ds("d-err-model", model="qwen3"),
    # Completions: a text's suffix becomes DeepSeek's fill-in-the-middle prompt.
    completion("d-c-plain", DEEPSEEK, prompt="Once upon a time"),
    completion("d-c-suffix", DEEPSEEK, prompt="def f(x):\n", suffix="\n    return y\n"),
    completion("d-c-suffix-batch", DEEPSEEK, prompt=["a", "b"], suffix="z"),
    completion("d-c-suffix-echo", DEEPSEEK, prompt="a", suffix="z", echo=True),
    completion("d-c-suffix-ids", DEEPSEEK, prompt=[1, 2], suffix="z"),
    completion("d-c-suffix-truncate", DEEPSEEK, prompt="a", suffix="z", truncate_prompt_tokens=5),
]
# Server defaults (thinking off, reasoning kept) under the request's switches; no parsers.
DEEPSEEK_DEFAULTS_SCENARIOS = [
    ds("d2-plain"),
    ds("d2-multi-turn", messages=TURN),
    ds("d2-thinking-kwarg", messages=TURN, chat_template_kwargs={"thinking": True}),
    ds("d2-enable-thinking", chat_template_kwargs={"enable_thinking": True}),
    ds("d2-thinking-null", chat_template_kwargs={"thinking": None}),
    ds("d2-effort-high", reasoning_effort="high"),
    ds("d2-effort-none", reasoning_effort="none"),
    ds("d2-drop", messages=TURN, chat_template_kwargs={"thinking": True, "drop_thinking": True}),
    ds("d2-tools-none", tools=[WEATHER], tool_choice="none"),
    ds("d2-tools-auto", tools=[WEATHER]),
    ds("d2-no-reasoning", include_reasoning=False),
    ds("d2-skip-special", skip_special_tokens=False),
    ds("d2-err-long-prompt", messages=[{"role": "user", "content": "word " * 4100}]),
    completion("d2-c-suffix", DEEPSEEK, prompt="a", suffix="b"),
]
DS_CALL_OUTPUT = (
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)
DEEPSEEK_TRIPS = [
    ("rt-d-thinking", {}, "Check the forecast.</think>It is sunny."),
    ("rt-d-thinking-off", {"chat_template_kwargs": {"enable_thinking": False}}, "It is sunny."),
    ("rt-d-effort-none", {"reasoning_effort": "none"}, "It is sunny."),
    ("rt-d-tool-call", {"tools": [WEATHER]}, "Need data.</think>\n\n" + DS_CALL_OUTPUT),
    (
        "rt-d-tool-call-chat",
        {"tools": [WEATHER], "reasoning_effort": "none"},
        "Let me look.\n\n" + DS_CALL_OUTPUT,
    ),
    (
        "rt-d-tool-result",
        {"tools": [WEATHER, NOTE], "messages": TOOL_TURN},
        "Done.</think>It is 18 C and sunny.",
    ),
    ("rt-d-multi-turn", {"messages": TURN}, "Same.</think>Sunny again."),
]


@dataclass(frozen=True)
class Config:
    served: str  # the served model name, and which model directory it loads
    flags: list[str]
    scenarios: list[Scenario]
    round_trips: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    eos: tuple[int, ...] = ()  # appended to a round trip's output
    env: dict[str, str] = field(default_factory=dict)


QWEN3_PARSERS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
CONFIGS = {
    # Qwen3 with its parsers, as the derender goldens C* run.
    "R1": Config(
        "qwen3",
        [*QWEN3_PARSERS, "--enable-auto-tool-choice", "--max-model-len", MAX_MODEL_LEN],
        SCENARIOS,
        ROUND_TRIPS,
        eos=(151645,),
    ),
    # No parsers: skip_special_tokens and reasoning_ended as a plain server sets them.
    "R2": Config("qwen3", ["--max-model-len", "4096"], SCENARIOS),
    # Server-side template defaults under the request's own kwargs.
    "R3": Config(
        "qwen3",
        [
            *QWEN3_PARSERS,
            "--enable-auto-tool-choice",
            "--max-model-len",
            MAX_MODEL_LEN,
            "--default-chat-template-kwargs",
            '{"enable_thinking": false, "custom": 1}',
        ],
        KWARG_SCENARIOS,
        KWARG_TRIPS,
        eos=(151645,),
    ),
    # gpt-oss: Harmony, with the conversation start date pinned.
    "G1": Config(
        GPT_OSS,
        [
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
        GPT_OSS_SCENARIOS,
        GPT_OSS_TRIPS,
        env={"VLLM_SYSTEM_START_DATE": "2026-01-01"},
    ),
    # DeepSeek-V4: no template; vLLM renders with DeepSeek's encoder (its architecture).
    "D1": Config(
        DEEPSEEK,
        [
            "--reasoning-parser",
            "deepseek_v4",
            "--tool-call-parser",
            "deepseek_v4",
            "--enable-auto-tool-choice",
            "--max-model-len",
            MAX_MODEL_LEN,
        ],
        DEEPSEEK_SCENARIOS,
        DEEPSEEK_TRIPS,
        eos=(1,),
    ),
    "D2": Config(
        DEEPSEEK,
        [
            "--max-model-len",
            "4096",
            "--default-chat-template-kwargs",
            '{"thinking": false, "drop_thinking": false}',
        ],
        DEEPSEEK_DEFAULTS_SCENARIOS,
    ),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def oracle(model_dir: str, config: Config) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ORACLE_MODEL": model_dir, "ORACLE_SERVED": config.served, **config.env}
    flags = config.flags
    log = open(f"/tmp/record-render-{port}.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        ["bash", str(ORACLE / "serve_oracle.sh"), str(port), *flags],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            if process.poll() is not None:
                raise RuntimeError(f"the oracle exited; see {log.name}")
            time.sleep(1)
        yield base
    finally:
        os.killpg(process.pid, 15)
        process.wait(30)
        log.close()


def post(base: str, path: str, headers: dict[str, str], request: dict[str, Any]) -> tuple[int, Any]:
    data = json.dumps(request).encode()
    asked = urllib.request.Request(
        base + path, data=data, headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(asked, timeout=120) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def record(model_dir: str, name: str) -> Path:
    config = CONFIGS[name]
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"render-{name}.jsonl.gz"
    with oracle(model_dir, config) as base, gzip.open(target, "wt") as out:
        for name, path, headers, request in config.scenarios:
            request = {k: v for k, v in request.items() if v is not None}
            status, response = post(base, path, headers, request)
            line = {
                "name": name,
                "path": path,
                "headers": headers,
                "request": request,
                "status": status,
                "response": response,
            }
            out.write(json.dumps(line) + "\n")
        if config.round_trips:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model_dir)
            encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
            for name, fields, output in config.round_trips:
                trip = round_trip(base, config, encode, name, fields, output)
                out.write(json.dumps(trip) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qwen3", help="the bundled qwen3 directory (R configurations)")
    parser.add_argument("--gpt-oss", help="the bundled gpt-oss directory (G configurations)")
    parser.add_argument("--deepseek", help="the bundled deepseek directory (D configurations)")
    parser.add_argument("--config", action="append", choices=sorted(CONFIGS))
    args = parser.parse_args()
    dirs = {"qwen3": args.qwen3, "gpt-oss": args.gpt_oss, DEEPSEEK: args.deepseek}
    for name in args.config or sorted(CONFIGS):
        model_dir = dirs[CONFIGS[name].served]
        if model_dir is None:
            raise SystemExit(f"{name} needs --{CONFIGS[name].served}")
        print("recorded", record(model_dir, name), file=sys.stderr)


if __name__ == "__main__":
    main()
