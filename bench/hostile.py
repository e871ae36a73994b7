"""``python -m bench hostile``: parser cost per token on adversarial model output.

Model output is untrusted input, so every parser configuration meets every
adversarial family (markers repeated thousands of times, openings that never close,
deep nesting, quote and backslash storms, invalid UTF-8...) at 256 to 16,384 tokens,
through the server's derenderer in-process: one-shot (the whole output in one call)
and streamed one token per chunk with the session kept. A parser whose cost grows
with the text before each step shows as time per token growing with the length.

Families of long tokens run apart, at 1,024 to 32,768 tokens: text that a parser holds
or re-reads grows by the vocabulary's longest tokens (about a hundred characters each,
where a copy of the text so far per chunk shows at once): a string argument, Kimi K2 call
markers inside a call's name, Cohere Command's open citations, action blocks, citations,
calls and sections, an output of only blank tokens, and held text waiting for markup that
never comes (a call's name, DeepSeek V3's possible closing fence, Poolside's names and
values, Harmony bytes that form no character, closing brackets after a call's arguments).
Such a row is ok when its per-token cost at the largest size is at most 2.5 times that at
the smallest, and no single streamed chunk takes over 50 ms.

Each measurement runs in a forked child under a deadline, so a parser that freezes
(a backtracking pattern holds the GIL) is reported as a timeout instead of stopping
the bench. Times are the child's CPU seconds, robust to whatever else the machine
runs. A streamed row's "worst request" is the whole stream's cost: what one chunk
costs when its session is missing and the history is replayed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgspec
from matplotlib.lines import Line2D
from matplotlib.ticker import ScalarFormatter

from app.examples.hostile_tokens import (
    continuation_pair_id,
    invalid_byte_id,
    longest_blank_tokens,
    longest_token_of,
    longest_tokens,
)
from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    GenerateChunk,
    GenerateStreamChoice,
)
from bench.micro import Derender, derenderer
from bench.plots import LOWER_IS_BETTER, plt  # with the backend chosen
from bench.report import machine, progress, table, write
from bench.workload import (
    CHAT_REQUEST,
    COHERE_CALL_OPEN,
    GLM_CALL_OPEN,
    HARMONY_CALL_OPEN,
    HARMONY_THOUGHT,
    KIMI_CALL_OPEN,
    M3_CALL_OPEN,
    M3_SECTION,
    MINIMAX_CALL_OPEN,
    MISTRAL_ARRAY,
    MISTRAL_ARRAY_OPEN,
    MISTRAL_CALL_OPEN,
    MISTRAL_THOUGHT,
    PLAMO3_CALL_OPEN,
    PLAMO3_SECTION,
    SENTENCE,
    dsml_call_open,
    prompt_ids,
    repeat_to,
    tokenizer_for,
)
from parsers.families.deepseek import CALL_BEGIN, CALL_FINISH, CALLS_BEGIN, SEP
from parsers.families.kimi_k2 import ARGUMENT_BEGIN, SECTION_BEGIN
from parsers.families.kimi_k2 import CALL_BEGIN as KIMI_CALL_BEGIN
from parsers.families.kimi_k2 import CALL_FINISH as KIMI_CALL_FINISH
from parsers.families.llama4_pythonic import PYTHON_END, PYTHON_START
from parsers.types import OutputRefused

SIZES = (256, 1024, 4096, 16384)
LONG_SIZES = (1024, 8192, 32768)
MODES = ("one-shot", "stream")
# What every row must hold: per-token cost may at most double from 1,024 to 16,384 tokens,
# and no single request may take a second.
GROWTH_LIMIT = 2.0
REQUEST_LIMIT_S = 1.0
# The long-token families' line (see the module's docstring).
LONG_GROWTH_LIMIT = 2.5
CHUNK_LIMIT_MS = 50.0
DEADLINE_S = 60.0
AFTER_REASONING = "Short thought.\n</think>\n\n"
INKLING_BLOCK = "<|message_model|><|content_invoke_tool_json|>"
MUSE_SECTION = "<|start|>assistant to=save_note<|message|><atem:function_calls>\n"
MUSE_INVOKE = '<atem:invoke name="save_note">\n<atem:parameter name="body">'


@dataclass(frozen=True)
class Config:
    """A server's parser flags and the request's tool choice."""

    tool: str | None
    reasoning: str | None
    tool_choice: Any = "auto"
    # The text that opens one call with a string value next, in this format.
    call_open: str = ""
    # One whole call in this format, and what separates calls.
    call: str = ""
    # What opens a run of calls, where the format has one.
    section: str = ""
    # A short reasoning that ends, before a family that works on tool calls.
    after_reasoning: str = AFTER_REASONING


_NAMED = {"type": "function", "function": {"name": "save_note"}}
STEP3_CALL_OPEN = (
    '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="save_note">\n'
    '<steptml:parameter name="body">'
)


def _dsml_config(tool: str, reasoning: str | None) -> Config:
    """A DSML dialect's calls: the block's opener once, then invoke after invoke."""
    section, call_open = dsml_call_open(tool).split("\n", 1)
    close = "</｜DSML｜ " if tool == "deepseek_v41" else "</｜DSML｜"
    call = f"{call_open}x{close}parameter>\n{close}invoke>\n"
    return Config(
        tool, reasoning, call_open=dsml_call_open(tool), call=call, section=section + "\n"
    )


def _minimax_config(reasoning: str) -> Config:
    """MiniMax M2's calls: the section's opener once, then invoke after invoke."""
    section, call_open = MINIMAX_CALL_OPEN.split("\n", 1)
    call = f"{call_open}x</parameter>\n</invoke>\n"
    return Config(
        "minimax_m2", reasoning, call_open=MINIMAX_CALL_OPEN, call=call, section=section + "\n"
    )


CONFIGS: dict[str, Config] = {
    "qwen3": Config(None, "qwen3"),
    "deepseek_r1": Config(None, "deepseek_r1"),
    "granite": Config(None, "granite"),
    "hermes": Config(
        "hermes",
        None,
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "qwen3+hermes": Config(
        "hermes",
        "qwen3",
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "deepseek_r1+hermes": Config(
        "hermes",
        "deepseek_r1",
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "qwen3_coder": Config(
        "qwen3_coder",
        None,
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "qwen3+qwen3_coder": Config(
        "qwen3_coder",
        "qwen3",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "deepseek_r1+longcat": Config(
        "longcat",
        "deepseek_r1",
        call_open='<longcat_tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<longcat_tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n'
        "</longcat_tool_call>\n",
    ),
    "step5+step5": Config(
        "step5",
        "step5",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "step3p5+step3p5": Config(
        "step3p5",
        "step3p5",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "seed_oss+seed_oss": Config(
        "seed_oss",
        "seed_oss",
        call_open="<seed:tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<seed:tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</seed:tool_call>\n",
        after_reasoning="Short thought.</seed:think>",
    ),
    "xlam": Config(
        "xlam",
        None,
        call_open='[{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
    ),
    "xlam (required)": Config(
        "xlam",
        None,
        "required",
        call_open='[{"name": "save_note", "parameters": {"body": ',
        call='{"name": "save_note", "parameters": {"body": "x"}}, ',
    ),
    "pythonic": Config(
        "pythonic",
        None,
        call_open="[save_note(body=",
        call='save_note(body="x", n=[1, {"k": True}], m=None), ',
    ),
    "pythonic (named)": Config(
        "pythonic", None, _NAMED, call_open='{"body": ', call='{"body": "x"}, '
    ),
    "llama3_json": Config(
        "llama3_json",
        None,
        call_open='{"name": "save_note", "parameters": {"body": ',
        call='{"name": "save_note", "parameters": {"body": "x"}}; ',
    ),
    "llama4_pythonic": Config(
        "llama4_pythonic",
        None,
        call_open=f"{PYTHON_START}[save_note(body=",
        call='save_note(body="x", n=[1, {"k": True}], m=None), ',
        section=f"{PYTHON_START}[",
    ),
    "deepseek_v3+deepseek_v31": Config(
        "deepseek_v31",
        "deepseek_v3",
        call_open=f'{CALLS_BEGIN}{CALL_BEGIN}save_note{SEP}{{"body": ',
        call=f'{CALL_BEGIN}save_note{SEP}{{"body": "x"}}{CALL_FINISH}',
        section=CALLS_BEGIN,
    ),
    "deepseek_v3+deepseek_v3": Config(
        "deepseek_v3",
        "deepseek_v3",
        call_open=f'{CALLS_BEGIN}{CALL_BEGIN}function{SEP}save_note\n```json\n{{"body": ',
        call=f'{CALL_BEGIN}function{SEP}save_note\n```json\n{{"body": "x"}}\n```{CALL_FINISH}',
        section=CALLS_BEGIN,
    ),
    "deepseek_v32": _dsml_config("deepseek_v32", None),
    "deepseek_v4+deepseek_v4": _dsml_config("deepseek_v4", "deepseek_v4"),
    "deepseek_v41+deepseek_v41": _dsml_config("deepseek_v41", "deepseek_v41"),
    "minimax_m2+minimax_m2": _minimax_config("minimax_m2"),
    "minimax_m2_append_think+minimax_m2": _minimax_config("minimax_m2_append_think"),
    "openai_gptoss+openai": Config(
        "openai",
        "openai_gptoss",
        call_open=HARMONY_CALL_OPEN,
        call=HARMONY_CALL_OPEN + '"x"}<|call|><|start|>assistant',
        after_reasoning=HARMONY_THOUGHT,
    ),
    "mistral+mistral": Config(
        "mistral",
        "mistral",
        call_open=MISTRAL_CALL_OPEN,
        call=MISTRAL_CALL_OPEN + '"x"}',
        after_reasoning=MISTRAL_THOUGHT,
    ),
    f"mistral+mistral {MISTRAL_ARRAY}": Config(
        "mistral",
        "mistral",
        call_open=MISTRAL_ARRAY_OPEN,
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
        section="[TOOL_CALLS][",
        after_reasoning="",
    ),
    "kimi_k2+kimi_k2": Config(
        "kimi_k2",
        "kimi_k2",
        call_open=KIMI_CALL_OPEN,
        call=f"{KIMI_CALL_BEGIN}functions.save_note:0{ARGUMENT_BEGIN}"
        + '{"body": "x"}'
        + KIMI_CALL_FINISH,
        section=SECTION_BEGIN,
    ),
    "glm45+glm47": Config(
        "glm47",
        "glm45",
        call_open=GLM_CALL_OPEN,
        call="<tool_call>save_note\n<arg_key>body</arg_key>\n<arg_value>x</arg_value>\n</tool_call>\n",
    ),
    "glm47": Config(
        "glm47",
        None,
        call_open=GLM_CALL_OPEN,
        call="<tool_call>save_note\n<arg_key>body</arg_key>\n<arg_value>x</arg_value>\n</tool_call>\n",
    ),
    "granite4": Config(
        "granite4",
        None,
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "inkling+inkling": Config(
        "inkling",
        "inkling",
        call_open=INKLING_BLOCK + '{"name": "save_note", "args": {"body": ',
        call=INKLING_BLOCK + '{"name": "save_note", "args": {"body": "x"}}<|end_message|>',
        after_reasoning="<|content_thinking|>Short thought.<|end_message|>",
    ),
    "inkling": Config(
        "inkling",
        None,
        call_open=INKLING_BLOCK + '{"name": "save_note", "args": {"body": ',
        call=INKLING_BLOCK + '{"name": "save_note", "args": {"body": "x"}}<|end_message|>',
    ),
    "holo2": Config(None, "holo2"),
    "olmo3": Config(None, "olmo3"),
    "nemotron_v3+qwen3_coder": Config(
        "qwen3_coder",
        "nemotron_v3",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "phi4_mini_json": Config(
        "phi4_mini_json",
        None,
        call_open='functools[{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
        section="functools[",
    ),
    "minimax_m3+minimax_m3": Config(
        "minimax_m3",
        "minimax_m3",
        call_open=M3_CALL_OPEN,
        call=M3_CALL_OPEN.removeprefix(M3_SECTION)
        + "x]<]minimax[>[</body>\n]<]minimax[>[</invoke>\n",
        section=M3_SECTION,
        after_reasoning="Short thought.</mm:think>\n\n",
    ),
    "ling3+ling3": Config(
        "ling3",
        "ling3",
        call_open=GLM_CALL_OPEN,
        call="<tool_call>save_note\n<arg_key>body</arg_key>\n<arg_value>x</arg_value>\n</tool_call>\n",
    ),
    "mimo+mimo": Config(
        "mimo",
        "mimo",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "ernie45+ernie45": Config(
        "ernie45",
        "ernie45",
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "step3+step3": Config(
        "step3",
        "step3",
        call_open=f"<｜tool_calls_begin｜>{STEP3_CALL_OPEN}",
        call=f"{STEP3_CALL_OPEN}x</steptml:parameter>\n</steptml:invoke><｜tool_call_end｜>",
        section="<｜tool_calls_begin｜>",
    ),
    "muse+muse": Config(
        "muse",
        "muse",
        call_open=MUSE_SECTION + MUSE_INVOKE,
        call=MUSE_INVOKE + "x</atem:parameter>\n</atem:invoke>\n",
        section=MUSE_SECTION,
        after_reasoning=" to=self<|message|>Short thought.<|eom|>",
    ),
    "gigachat3": Config(
        "gigachat3",
        None,
        call_open='function call<|role_sep|>\n{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}',
        section="function call<|role_sep|>\n",
    ),
    "gemma4+gemma4": Config(
        "gemma4",
        "gemma4",
        call_open='<|tool_call>call:save_note{body:<|"|>',
        call='<|tool_call>call:save_note{body:<|"|>x<|"|>}<tool_call|>',
        after_reasoning="<|channel>thought\nShort thought.<channel|>",
    ),
    "granite_thinking_parser+qwen3_coder": Config(
        "qwen3_coder",
        "granite_thinking_parser",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "granite (tools)": Config(
        "granite",
        None,
        call_open='<tool_call>[{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
        section="<tool_call>[",
    ),
    "cohere_command3+cohere_command3": Config(
        "cohere_command3",
        "cohere_command3",
        call_open=COHERE_CALL_OPEN,
        call='{"tool_call_id": "0", "tool_name": "save_note", "parameters": {"body": "x"}},\n',
        section="<|START_ACTION|>[\n",
        after_reasoning="<|START_THINKING|>Short thought.<|END_THINKING|>",
    ),
    "granite-20b-fc": Config(
        "granite-20b-fc",
        None,
        call_open='<function_call> {"name": "save_note", "arguments": {"body": ',
        call='<function_call> {"name": "save_note", "arguments": {"body": "x"}}\n',
        section="<function_call> ",
    ),
    "poolside_v1 tools": Config(
        "poolside_v1",
        None,
        call_open="<tool_call>save_note\n<arg_key>body</arg_key><arg_value>",
        call="<tool_call>save_note\n<arg_key>body</arg_key><arg_value>x</arg_value></tool_call>\n",
    ),
    "hunyuan_a13b": Config(
        "hunyuan_a13b",
        None,
        call_open='<tool_calls>[{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
        section="<tool_calls>[",
    ),
    "hy_v4": Config(None, "hy_v4"),
    "hy_v4+hy_v4": Config(
        "hy_v4",
        "hy_v4",
        call_open="<tool_call>save_note<arg_key>body</arg_key><arg_value>",
        call="<tool_call>save_note<arg_key>body</arg_key><arg_value>x</arg_value></tool_call>",
        section="<tool_calls>",
    ),
    "hy_v3+hy_v3": Config(
        "hy_v3",
        "hy_v3",
        call_open="<tool_call>save_note<tool_sep><arg_key>body</arg_key>\n<arg_value>",
        call="<tool_call>save_note<tool_sep><arg_key>body</arg_key><arg_value>x</arg_value>"
        "</tool_call>",
        section="<tool_calls>",
    ),
    "olmo3 (tools)": Config(
        "olmo3",
        None,
        call_open="<function_calls>\nsave_note(body=",
        call='save_note(body="x", n=[1, {"k": true}], m=null)\n',
        section="<function_calls>\n",
    ),
    "dots": Config(
        "dots",
        None,
        call_open='<dots_function_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<dots_function_call>\n<invoke name="save_note">\n<parameter name="body">x'
        "</parameter>\n</invoke>\n</dots_function_call>\n",
    ),
    "internlm": Config(
        "internlm",
        None,
        call_open='<|action_start|><|plugin|>\n{"name": "save_note", "parameters": {"body": ',
        call='<|action_start|><|plugin|>\n{"name": "save_note", "parameters": {"body": "x"}}'
        "<|action_end|>",
    ),
    "functiongemma": Config(
        "functiongemma",
        None,
        call_open="<start_function_call>call:save_note{body:<escape>",
        call="<start_function_call>call:save_note{body:<escape>x<escape>,n:<escape>[1]<escape>}"
        "<end_function_call>",
    ),
    "plamo3+plamo3": Config(
        "plamo3",
        "plamo3",
        call_open=PLAMO3_CALL_OPEN,
        call=PLAMO3_CALL_OPEN.removeprefix(PLAMO3_SECTION)
        + '"x"}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>',
        section=PLAMO3_SECTION,
        after_reasoning="Short thought.<|plamo:end_think:plamo|>",
    ),
    "minicpmv+qwen3_coder": Config(
        "qwen3_coder",
        "minicpmv",
        call_open="<tool_call>\n<function=save_note>\n<parameter=body>\n",
        call="<tool_call>\n<function=save_note>\n<parameter=body>\nx\n</parameter>\n"
        "</function>\n</tool_call>\n",
    ),
    "minicpmv": Config(None, "minicpmv"),
    "minicpm5": Config(
        "minicpm5",
        None,
        call_open='<function name="save_note"><param name="body">',
        call='<function name="save_note"><param name="body">x</param></function>\n',
    ),
    "kimi_k3+kimi_k3": Config(
        "kimi_k3",
        "kimi_k3",
        call_open='<|open|>call tool="save_note" index="1"<|sep|>'
        '<|open|>argument key="body" type="string"<|sep|>',
        call='<|open|>call tool="save_note" index="1"<|sep|><|open|>argument key="body" '
        'type="string"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|>',
        section="<|open|>tools<|sep|>",
        after_reasoning="Short thought.<|close|>think<|sep|>",
    ),
    "k2_horizon (tools)": Config(
        "k2_horizon",
        None,
        call_open="<ifm|tool_call>save_note<ifm|arg_key>body</ifm|arg_key><ifm|arg_value>",
        call="<ifm|tool_call>save_note<ifm|arg_key>body</ifm|arg_key><ifm|arg_value>x"
        "</ifm|arg_value></ifm|tool_call>",
        section="<ifm|tool_calls>",
    ),
    "apertus": Config(
        "apertus",
        None,
        call_open='<|tools_prefix|>[{"save_note": {"body": ',
        call='<|tools_prefix|>[{"save_note": {"body": "x", "n": [1, {"k": true}]}}]'
        "<|tools_suffix|>",
    ),
    "lfm2": Config(
        "lfm2",
        None,
        call_open="<|tool_call_start|>[save_note(body=",
        call="<|tool_call_start|>[save_note(body='x', n=[1, {'k': True}])]<|tool_call_end|>",
    ),
    "jamba": Config(
        "jamba",
        None,
        call_open='<tool_calls>[{"name": "save_note", "arguments": {"body": ',
        call='{"name": "save_note", "arguments": {"body": "x"}}, ',
        section="<tool_calls>[",
    ),
    "hf+hf": Config(
        "hf",
        "hf",
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    "beam+beam": Config(
        "beam",
        "beam",
        call_open='<tool_call>\n{"name": "save_note", "arguments": {"body": ',
        call='<tool_call>\n{"name": "save_note", "arguments": {"body": "x"}}\n</tool_call>\n',
    ),
    # Command 4's preset: its output opens in thinking, and it knows <|START_TEXT|>.
    "cohere_command4+cohere_command4": Config(
        "cohere_command4",
        "cohere_command4",
        call_open=COHERE_CALL_OPEN,
        call='{"tool_call_id": "0", "tool_name": "save_note", "parameters": {"body": "x"}},\n',
        section="<|START_ACTION|>[\n",
        after_reasoning="<|START_THINKING|>Short thought.<|END_THINKING|>",
    ),
}


def _always(config: Config) -> bool:
    return True


def _cohere(config: Config) -> bool:
    return config.tool is not None and config.tool.startswith("cohere_command")


@dataclass(frozen=True)
class Family:
    """An adversarial output: ``head`` once, then ``unit`` repeated to the length.

    Either may depend on the configuration (its call format).
    """

    head: Callable[[Config], str]
    unit: Callable[[Config], str]
    # Marker texts spelled as plain text tokens (never their special token ids).
    spelled: bool = False
    # Where tool calls are parsed: after reasoning, if the configuration has any.
    in_tools: bool = True
    # What ends the output, after the repeated unit (which then stops short of it).
    tail: str = ""
    # The unit as token ids chosen from the vocabulary (instead of ``unit``'s text).
    unit_ids: Callable[[Tokenizer], list[int]] | None = None
    # The configurations it is measured for, and how.
    applies: Callable[[Config], bool] = _always
    modes: tuple[str, ...] = MODES


def _fixed(text: str) -> Callable[[Config], str]:
    return lambda config: text


def _in_call(text: str) -> Callable[[Config], str]:
    return lambda config: config.call_open + text


INVALID_BYTES = "invalid UTF-8 bytes"
# Members with distinct keys, more than the longest output holds.
_DISTINCT_MEMBERS = "".join(f'"k{i}": {i}, ' for i in range(20_000))
FAMILIES: dict[str, Family] = {
    "prose": Family(_fixed(""), _fixed(SENTENCE), in_tools=False),
    "'>' repeated": Family(_fixed(""), _fixed(">"), in_tools=False),
    "'<' repeated": Family(_fixed(""), _fixed("<"), in_tools=False),
    "<think> ids": Family(_fixed(""), _fixed("<think>"), in_tools=False),
    "</think> ids": Family(_fixed(""), _fixed("</think>"), in_tools=False),
    "<think> as text": Family(_fixed(""), _fixed("<think>"), spelled=True, in_tools=False),
    INVALID_BYTES: Family(_fixed(""), _fixed(""), in_tools=False),
    "<tool_call> ids": Family(_fixed(""), _fixed("<tool_call>")),
    "<tool_call> as text": Family(_fixed(""), _fixed("<tool_call>"), spelled=True),
    "``` repeated": Family(_fixed(""), _fixed("```")),
    "<parameter= storm": Family(_fixed("<tool_call>\n<function=f>\n"), _fixed("<parameter=")),
    "<function= storm": Family(_fixed("<tool_call>\n"), _fixed("<function=")),
    "'[a(b=' repeated": Family(_fixed(""), _fixed("[a(b=")),
    "'{\"a\":' repeated": Family(_fixed(""), _fixed('{"a":')),
    "nested brackets in a call": Family(_in_call(""), _fixed('[{"a": ')),
    "quote/backslash storm": Family(_in_call('"'), _fixed('\\"\\\\\'"')),
    "long argument string": Family(_in_call('"'), _fixed(SENTENCE)),
    "many calls": Family(
        lambda c: c.section or ("[" if c.call.endswith(", ") else ""), lambda c: c.call
    ),
    "DeepSeek call-begin storm": Family(_fixed(CALLS_BEGIN), _fixed(CALL_BEGIN + "f")),
    "DeepSeek separator storm": Family(_fixed(CALLS_BEGIN + CALL_BEGIN + "f"), _fixed(SEP)),
    "fence storm in a call": Family(_in_call(""), _fixed("\n```")),
    "'>' storm in a value": Family(_in_call(""), _fixed("a>")),
    "DSML parameter storm": Family(
        _in_call("v</｜DSML｜parameter>"),
        _fixed('<｜DSML｜parameter name="k" string="true">v>w</｜DSML｜parameter>'),
    ),
    # A parameter given again, its string value left open and growing by '>' after '>'.
    "DSML parameter reopened, value open": Family(
        _in_call('v</｜DSML｜parameter>\n<｜DSML｜parameter name="body" string="true">'),
        _fixed("a>"),
    ),
    "DSML invoke storm": Family(_fixed("<｜DSML｜tool_calls>\n"), _fixed('<｜DSML｜invoke name="')),
    "MiniMax parameter storm": Family(
        _in_call("v</parameter>"), _fixed('<parameter name="k">v>w</parameter>')
    ),
    "MiniMax invoke storm": Family(_fixed("<minimax:tool_call>\n"), _fixed('<invoke name="')),
    "MiniMax open name storm": Family(_in_call(""), _fixed('<parameter name="k')),
    "long number": Family(_in_call("1"), _fixed("234")),
    "duplicate keys": Family(_in_call('1, "a": 1, "a": 2'), _fixed(', "b": 1')),
    "surrogate escapes": Family(_in_call('"'), _fixed("\\ud800")),
    "control characters in a string": Family(_in_call('"\x01'), _fixed("abc")),
    "many short values": Family(_in_call("{"), _fixed(_DISTINCT_MEMBERS)),
    # Llama 4: the end marker, held back while it ends the text, over and over in a call.
    "<|python_end|> storm in a call": Family(_in_call('"'), _fixed(PYTHON_END)),
    # Kimi K2: call openers with no arguments; GLM: argument tags inside one value, and
    # the same key's pair again and again.
    "Kimi call-begin storm": Family(_fixed(SECTION_BEGIN), _fixed(KIMI_CALL_BEGIN + "f")),
    "GLM arg-tag storm in a value": Family(
        _in_call("v"), _fixed("<arg_key>k</arg_key><arg_value>v")
    ),
    "GLM repeated-key storm": Family(
        _in_call("v</arg_value>"), _fixed("<arg_key>body</arg_key><arg_value>v w</arg_value>")
    ),
    # Inkling: message headers that never open a block, one header as long as the
    # output, and a call body's top-level members before its args.
    "Inkling header storm": Family(_fixed(""), _fixed("<|message_model|>x"), in_tools=False),
    "Inkling long header": Family(_fixed("<|message_model|>"), _fixed(SENTENCE), in_tools=False),
    "Inkling members before args": Family(
        _fixed(INKLING_BLOCK + '{"name": "save_note", '), _fixed('"argz": {"a": [1, "}"]}, ')
    ),
    # Harmony: a header that never closes, and markers inside one message's text.
    "Harmony header storm": Family(_fixed(""), _fixed("<|start|>assistant<|channel|> to=f")),
    "Harmony marker storm in a message": Family(
        _fixed("<|channel|>final<|message|>"), _fixed("<|message|><|channel|><|constrain|>")
    ),
    # Mistral: call markers back to back, and markers inside a call's arguments.
    "[TOOL_CALLS] storm": Family(_fixed(""), _fixed("[TOOL_CALLS]")),
    "[ARGS] and brace storm in a call": Family(_in_call(""), _fixed("[ARGS]{[TOOL_CALLS]")),
    # MiniCPM-V's newline recovery: a backslash run held until it ends, and escapes
    # with code and LaTeX spans opening and closing.
    "backslash run": Family(_fixed(""), _fixed("\\"), in_tools=False),
    "escapes, code and LaTeX": Family(_fixed(""), _fixed("a\\n`b\\n`$c$\\(d\\)"), in_tools=False),
}


def _has_call(config: Config) -> bool:
    return bool(config.call_open)


def _with_long_token(markers: str) -> Callable[[Tokenizer], list[int]]:
    """``markers``' ids, then the vocabulary's longest token that is plain text."""
    return lambda tokenizer: tokenizer.encode(markers) + longest_tokens(tokenizer, 1)


def _before_long_tokens(markers: str) -> Callable[[Tokenizer], list[int]]:
    """``markers``' ids, then the vocabulary's longest tokens that are plain text."""
    return lambda tokenizer: tokenizer.encode(markers) + longest_tokens(tokenizer)


# Cohere Command: a call's string value closed, the next call's opened (as after
# ``COHERE_CALL_OPEN``).
_COHERE_NEXT_CALL = (
    '"}},\n    {"tool_call_id": "0", "tool_name": "save_note", "parameters": {"body": "'
)


def _tool(name: str) -> Callable[[Config], bool]:
    return lambda config: config.tool == name


# Kimi K2's call openers and closers inside a call's name (a call opens only after the
# section's opener or a closed call, so each marker after the first is name text).
LONG_FAMILIES: dict[str, Family] = {
    "long tokens in a string argument": Family(
        _in_call('"'), _fixed(""), unit_ids=longest_tokens, applies=_has_call, modes=("stream",)
    ),
    "Kimi call openers in a name": Family(
        _fixed(SECTION_BEGIN),
        _fixed(""),
        unit_ids=_with_long_token(KIMI_CALL_BEGIN),
        applies=_tool("kimi_k2"),
    ),
    "Kimi call markers in a name": Family(
        _fixed(SECTION_BEGIN),
        _fixed(""),
        unit_ids=_with_long_token(KIMI_CALL_BEGIN + KIMI_CALL_FINISH),
        applies=_tool("kimi_k2"),
    ),
    # A header as long as the output, closed by one <|message|> near its end, the stream
    # going on in the message it opens: the header is read in the chunk that closes it.
    "Harmony long header, closed": Family(
        _fixed("<|channel|>analysis"),
        _fixed("<|channel|>x"),
        in_tools=False,
        tail="<|message|>" + SENTENCE + "<|end|><|start|>assistant<|channel|>final<|message|>Hi",
        applies=_tool("openai"),
    ),
    # Cohere Command's held text growing by long tokens: a citation left open, its text
    # ending in a closing tag's start chunk after chunk, junk in an action block.
    "Cohere long tokens in an open citation": Family(
        _fixed("<co>"), _fixed(""), unit_ids=longest_tokens, applies=_cohere, modes=("stream",)
    ),
    "Cohere closing-tag starts between long tokens": Family(
        _fixed("<co>"), _fixed(""), unit_ids=_with_long_token("</co"), applies=_cohere
    ),
    "Cohere long tokens in an action block": Family(
        _fixed("<|START_ACTION|>["),
        _fixed(""),
        unit_ids=longest_tokens,
        applies=_cohere,
        modes=("stream",),
    ),
    # Cohere Command: many citations, calls and sections, each of the long tokens, read
    # one-shot too (where one write reads them all).
    "Cohere long tokens in many citations": Family(
        _fixed("<co>"),
        _fixed(""),
        unit_ids=_before_long_tokens("</co: 0:[1]> <co>"),
        applies=_cohere,
    ),
    "Cohere long tokens in many calls": Family(
        _in_call('"'), _fixed(""), unit_ids=_before_long_tokens(_COHERE_NEXT_CALL), applies=_cohere
    ),
    "Cohere long tokens between section markers": Family(
        _fixed("<|START_THINKING|>"),
        _fixed(""),
        unit_ids=_before_long_tokens("<|END_THINKING|><|START_THINKING|>"),
        in_tools=False,
        applies=_cohere,
    ),
    # Held text that waits for markup that never comes, growing by long tokens: a call's
    # name (Hermes, DeepSeek V3), DeepSeek V3's arguments ending in what may be the
    # closing fence, and Harmony message bytes that form no character (one shows as
    # U+FFFD per token, the rest wait).
    "Hermes long tokens in a call's name": Family(
        _fixed('<tool_call>\n{"name": "'),
        _fixed(""),
        unit_ids=longest_tokens,
        applies=_tool("hermes"),
        modes=("stream",),
    ),
    "DeepSeek V3 long tokens in a call's name": Family(
        _fixed(f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}"),
        _fixed(""),
        unit_ids=longest_tokens,
        applies=_tool("deepseek_v3"),
        modes=("stream",),
    ),
    "DeepSeek V3 fence-like runs in a call": Family(
        _in_call('"x"}'),
        _fixed(""),
        unit_ids=lambda tokenizer: [longest_token_of(tokenizer, "\n`")],
        applies=_tool("deepseek_v3"),
        modes=("stream",),
    ),
    "Harmony lone continuation bytes in a message": Family(
        _fixed("<|channel|>final<|message|>"),
        _fixed(""),
        in_tools=False,
        unit_ids=lambda tokenizer: [continuation_pair_id(tokenizer)],
        applies=_tool("openai"),
        modes=("stream",),
    ),
    # An output of nothing but whitespace, which a parser may hold until it says more;
    # Poolside's held text growing while it waits for the tag that ends a name or a
    # value that is no string.
    "long blank tokens": Family(
        _fixed(""), _fixed(""), unit_ids=longest_blank_tokens, modes=("stream",)
    ),
    "Poolside long tokens in a name": Family(
        _fixed("<tool_call>"),
        _fixed(""),
        unit_ids=longest_tokens,
        applies=_tool("poolside_v1"),
        modes=("stream",),
    ),
    "Poolside long tokens in a value that is no string": Family(
        _fixed("<tool_call>save_note\n<arg_key>count</arg_key><arg_value>"),
        _fixed(""),
        unit_ids=longest_tokens,
        applies=_tool("poolside_v1"),
        modes=("stream",),
    ),
    # A call's arguments closed, then closing brackets only: where a format holds a
    # closing bracket at the top level until something else comes (Mistral, Kimi K2),
    # the held run grows with the output.
    "closing brackets after a call's arguments": Family(
        _in_call('"x"'),
        _fixed(""),
        unit_ids=lambda tokenizer: [longest_token_of(tokenizer, "}]")],
        applies=_has_call,
    ),
    # Reasoning made of the vocabulary's longest blank tokens: the engine's families hold
    # reasoning's trailing whitespace until more reasoning comes, a run that grows with
    # the output. (The output starts where the prompt leaves it: in reasoning, for a
    # format whose thinking is on.)
    "long blank tokens in reasoning": Family(
        _fixed(""),
        _fixed(""),
        in_tools=False,
        unit_ids=longest_blank_tokens,
        applies=lambda config: config.reasoning is not None,
        modes=("stream",),
    ),
}


def family_spec(name: str) -> Family:
    """A family of either kind by its name."""
    return FAMILIES[name] if name in FAMILIES else LONG_FAMILIES[name]


def _ids(tokenizer: Tokenizer, text: str, spelled: bool) -> list[int]:
    if not spelled:
        return tokenizer.encode(text)
    # "<" on its own, then the rest: the tokenizer never sees the special token.
    return tokenizer.encode(text[:1]) + tokenizer.encode(text[1:])


def output_ids(tokenizer: Tokenizer, config: Config, name: str, tokens: int) -> list[int]:
    """``tokens`` ids of the family's output for this configuration."""
    spec = family_spec(name)
    head = spec.head(config)
    if config.reasoning is not None and spec.in_tools:
        head = config.after_reasoning + head
    if name == INVALID_BYTES:
        unit = [invalid_byte_id(tokenizer)]
    elif spec.unit_ids is not None:
        unit = spec.unit_ids(tokenizer)
    else:
        unit = _ids(tokenizer, spec.unit(config), spec.spelled)
    tail = tokenizer.encode(spec.tail) if spec.tail else []
    body = repeat_to(tokenizer.encode(head), unit, max(tokens - len(tail), 0))
    return (body + tail)[:tokens]


class Measurement(msgspec.Struct):
    config: str
    family: str
    mode: str
    tokens: int
    cpu_s: float | None  # None: missed the deadline
    max_chunk_ms: float | None = None  # streamed only

    @property
    def us_per_token(self) -> float | None:
        return None if self.cpu_s is None else 1e6 * self.cpu_s / self.tokens


def _chat_request(config: Config) -> dict[str, Any]:
    return {**CHAT_REQUEST, "tool_choice": config.tool_choice}


def one_shot(derender: Derender, config: Config, ids: list[int], prompt: list[int]) -> float:
    """CPU seconds of one chat derender of the whole output."""
    body = {
        "generate_response": {
            "request_id": "hostile",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}],
        },
        "chat_request": _chat_request(config),
        "prompt_token_ids": prompt,
    }
    request = msgspec.json.decode(msgspec.json.encode(body), type=ChatDerenderRequest)
    started = time.process_time()
    with contextlib.suppress(OutputRefused):  # vLLM's parser raises too: a 400 is the answer
        derender.chat(request)
    return time.process_time() - started


def streamed(
    derender: Derender, config: Config, ids: list[int], prompt: list[int]
) -> tuple[float, float]:
    """CPU seconds of the whole stream, one token per chunk, and of its worst chunk."""
    body = {
        "generate_chunk": {"choices": []},
        "stream": True,
        "chat_request": _chat_request(config),
        "prompt_token_ids": prompt,
    }
    base = msgspec.json.decode(msgspec.json.encode(body), type=ChatStreamDerenderRequest)
    session: StreamSession | None = None
    state = None
    total = worst = 0.0
    last = len(ids) - 1
    for position, token in enumerate(ids):
        finish = "length" if position == last else None
        choice = GenerateStreamChoice(0, token_ids=[token], finish_reason=finish)
        chunk = GenerateChunk([choice], request_id="hostile")
        request = msgspec.structs.replace(base, generate_chunk=chunk, stream_state=state)
        started = time.process_time()
        try:
            state, session = derender.chunk(request, session)
        except OutputRefused:  # vLLM's parser raises too: the stream ends with a 400
            break
        finally:
            spent = time.process_time() - started
            total += spent
            worst = max(worst, spent)
    return total, worst


def _measure(
    send: Connection,
    derender: Derender,
    config: Config,
    mode: str,
    ids: list[int],
    prompt: list[int],
) -> None:
    if mode == "one-shot":
        send.send((one_shot(derender, config, ids, prompt), None))
    else:
        send.send(streamed(derender, config, ids, prompt))


def in_child(
    derender: Derender, config: Config, mode: str, ids: list[int], prompt: list[int]
) -> tuple[float, float | None] | None:
    """The measurement in a forked child; None when it misses the deadline or dies.

    What the child inherits is frozen out of the collector first: otherwise the child's
    first full collection walks (and so copies, page by page) the whole inherited heap,
    a one-off cost that lands on whichever size happens to trigger it.
    """
    gc.freeze()
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(
        target=_measure, args=(send, derender, config, mode, ids, prompt)
    )
    child.start()
    send.close()
    try:
        if not receive.poll(DEADLINE_S):
            return None
        result: tuple[float, float | None] = receive.recv()
        return result
    except EOFError:
        return None
    finally:
        child.kill()
        child.join()


def measure(
    configs: list[str], families: list[str], sizes: list[int], long_sizes: list[int]
) -> list[Measurement]:
    """Every family for every configuration it applies to, in each of its modes."""
    results: list[Measurement] = []
    runs = [
        (name, fam, mode)
        for name in configs
        for fam in families
        if family_spec(fam).applies(CONFIGS[name])
        for mode in family_spec(fam).modes
    ]
    current = ""
    for done, (name, fam, mode) in enumerate(runs, 1):
        config = CONFIGS[name]
        if name != current:
            current = name
            tokenizer = tokenizer_for(config.tool, name)
            prompt = prompt_ids(tokenizer, 100)
            derender = derenderer(tokenizer, config.tool, config.reasoning)
        family_sizes = long_sizes if fam in LONG_FAMILIES else sizes
        # Built per size: a family may end in a tail every size must have.
        outputs = {size: output_ids(tokenizer, config, fam, size) for size in family_sizes}
        line = []
        for size in family_sizes:
            outcome = in_child(derender, config, mode, outputs[size], prompt)
            if outcome is None:
                results.append(Measurement(name, fam, mode, size, None))
                line.append(f"{size}: timeout")
                break
            cpu, worst = outcome
            chunk_ms = None if worst is None else 1e3 * worst
            results.append(Measurement(name, fam, mode, size, cpu, chunk_ms))
            line.append(f"{size}: {1e6 * cpu / size:.1f}")
        progress(f"[{done}/{len(runs)}] {name} / {fam} / {mode}: µs per token " + ", ".join(line))
    return results


# ---------------------------------------------------------------------------- report


def _cost(results: list[Measurement], tokens: int) -> float | None:
    found = [r for r in results if r.tokens == tokens]
    return found[0].us_per_token if found else None


def _row_verdict(group: list[Measurement], small: int, large: int) -> tuple[float | None, str]:
    """Growth of the per-token cost from ``small`` to ``large`` tokens, and its verdict."""
    if any(r.cpu_s is None for r in group):
        return None, "TIMEOUT"
    early, late = _cost(group, small), _cost(group, large)
    if early is None or late is None:
        return None, "n/a"
    growth = late / max(early, 1e-3)
    worst = max((r.cpu_s or 0.0) for r in group)
    ok = growth <= GROWTH_LIMIT and worst <= REQUEST_LIMIT_S
    return growth, "ok" if ok else "FAIL"


def _groups(results: list[Measurement]) -> dict[tuple[str, str, str], list[Measurement]]:
    groups: dict[tuple[str, str, str], list[Measurement]] = {}
    for r in results:
        groups.setdefault((r.config, r.family, r.mode), []).append(r)
    return groups


def render(results: list[Measurement], sizes: list[int], long_sizes: list[int]) -> str:
    """The table of the families at ``sizes``, then that of the long-token families."""
    standard = [r for r in results if r.family not in LONG_FAMILIES]
    long = [r for r in results if r.family in LONG_FAMILIES]
    parts = [render_standard(standard, sizes)] if standard else []
    if long:
        parts.append(render_long(long, long_sizes))
    return "\n\n".join(parts)


def _costs(group: list[Measurement], sizes: list[int]) -> list[str]:
    costs = []
    for size in sizes:
        cost = _cost(group, size)
        timed_out = any(r.tokens == size and r.cpu_s is None for r in group)
        costs.append("timeout" if timed_out else "" if cost is None else f"{cost:.1f}")
    return costs


def _worst_chunk_ms(group: list[Measurement]) -> float | None:
    """A streamed row's costliest single chunk, at any size (None for one-shot)."""
    return max((r.max_chunk_ms for r in group if r.max_chunk_ms is not None), default=None)


def _ms(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def render_standard(results: list[Measurement], sizes: list[int]) -> str:
    small, large = (1024, max(sizes)) if 1024 in sizes else (min(sizes), max(sizes))
    columns = [
        "parsers",
        "family",
        "mode",
        *(f"µs/token @{size}" for size in sizes),
        f"@{large} / @{small}",
        "worst request ms",
        "worst chunk ms",
        "verdict",
    ]
    rows = []
    failures = 0
    for (config, name, mode), group in _groups(results).items():
        growth, verdict = _row_verdict(group, small, large)
        failures += verdict != "ok"
        worst = max((r.cpu_s for r in group if r.cpu_s is not None), default=None)
        rows.append(
            [
                config,
                name,
                mode,
                *_costs(group, sizes),
                "" if growth is None else f"{growth:.2f}",
                _ms(None if worst is None else 1e3 * worst, 0),
                _ms(_worst_chunk_ms(group), 1),
                verdict,
            ]
        )
    summary = render_summary(results, small, large)
    title = (
        f"hostile output: CPU per token, one-shot and streamed one token per chunk "
        f"(session kept); a row is ok when its cost per token grows at most {GROWTH_LIMIT:g}x "
        f"from {small} to {large} tokens and no request takes over {REQUEST_LIMIT_S:g} s (a "
        "streamed row's worst request is its whole stream: a replay of that history). "
        f"{len(rows) - failures} of {len(rows)} rows are ok; "
        f"times are this machine's"
    )
    return "\n".join([title, "", table(columns, rows), "", summary])


def _long_verdict(group: list[Measurement], small: int, large: int) -> tuple[float | None, str]:
    """Growth of the per-token cost from ``small`` to ``large`` tokens, and its verdict."""
    if any(r.cpu_s is None for r in group):
        return None, "TIMEOUT"
    early, late = _cost(group, small), _cost(group, large)
    if early is None or late is None:
        return None, "n/a"
    growth = late / max(early, 1e-3)
    chunk = _worst_chunk_ms(group) or 0.0
    ok = growth <= LONG_GROWTH_LIMIT and chunk <= CHUNK_LIMIT_MS
    return growth, "ok" if ok else "FAIL"


def render_long(results: list[Measurement], sizes: list[int]) -> str:
    small, large = min(sizes), max(sizes)
    columns = [
        "parsers",
        "family",
        "mode",
        *(f"µs/token @{size}" for size in sizes),
        f"@{large} / @{small}",
        "worst chunk ms",
        "verdict",
    ]
    rows = []
    failures = 0
    for (config, name, mode), group in _groups(results).items():
        growth, verdict = _long_verdict(group, small, large)
        failures += verdict != "ok"
        rows.append(
            [
                config,
                name,
                mode,
                *_costs(group, sizes),
                "" if growth is None else f"{growth:.2f}",
                _ms(_worst_chunk_ms(group), 1),
                verdict,
            ]
        )
    title = (
        f"long tokens: CPU per token of outputs made of long tokens (a string argument of "
        f"the vocabulary's longest tokens, streamed one per chunk) or of markers inside a "
        f"call's name; a row is ok when its cost per token grows at most "
        f"{LONG_GROWTH_LIMIT:g}x from {small} to {large} tokens and no streamed chunk takes "
        f"over {CHUNK_LIMIT_MS:g} ms. {len(rows) - failures} of {len(rows)} "
        f"rows are ok; times are this machine's"
    )
    return "\n".join([title, "", table(columns, rows)])


def render_summary(results: list[Measurement], small: int, large: int) -> str:
    """Per configuration and mode, the worst family: the rows a reader checks first."""
    worst: dict[tuple[str, str], tuple[float, str, float, float]] = {}
    for (config, family, mode), group in _groups(results).items():
        growth, _ = _row_verdict(group, small, large)
        request = max((r.cpu_s for r in group if r.cpu_s is not None), default=0.0)
        late = _cost(group, large)
        key = (config, mode)
        seen = worst.get(key)
        score = math.inf if growth is None else growth
        if seen is None or score > seen[0]:
            worst[key] = (score, family, late or math.nan, request)
        elif request > seen[3]:
            worst[key] = (seen[0], seen[1], seen[2], request)
    columns = [
        "parsers",
        "mode",
        f"worst @{large} / @{small}",
        "its family",
        f"its µs/token @{large}",
        "worst request ms (any family)",
    ]
    rows = [
        [
            config,
            mode,
            "timeout" if math.isinf(score) else f"{score:.2f}",
            family,
            f"{late:.1f}",
            f"{1e3 * request:.0f}",
        ]
        for (config, mode), (score, family, late, request) in worst.items()
    ]
    return "\n".join(["the worst family per configuration and mode:", "", table(columns, rows)])


def draw(results: list[Measurement], out: Path) -> Path:
    """One panel per configuration; each mode one colour, one line per family."""
    configs = list(dict.fromkeys(r.config for r in results))
    columns = min(4, len(configs))
    rows = math.ceil(len(configs) / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(max(4.5 * columns, 7), 3.6 * rows + 1), squeeze=False, sharey=True
    )
    colours = {"one-shot": "tab:blue", "stream": "tab:orange"}
    groups = _groups(results)
    for ax, config in zip(axes.flat, configs, strict=False):
        for (name, _, mode), group in groups.items():
            if name != config:
                continue
            points = [(r.tokens, r.us_per_token) for r in group if r.us_per_token is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, color=colours[mode], alpha=0.45, linewidth=1, marker=".")
        ax.set_title(config, fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("output tokens")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat[len(configs) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"CPU µs per token, {LOWER_IS_BETTER}")
    handles = [Line2D([], [], color=colour, label=mode) for mode, colour in colours.items()]
    figure.legend(handles=handles, loc="lower center", ncol=len(handles))
    figure.suptitle("hostile output: CPU per token by length\n(one line per adversarial family)")
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    path = out / "hostile.png"
    out.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main(args: argparse.Namespace) -> int:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the children are forked
    sizes, long_sizes = sorted(args.sizes), sorted(args.long_sizes)
    configs = args.configs or list(CONFIGS)
    families = args.families or [*FAMILIES, *LONG_FAMILIES]
    results = measure(configs, families, sizes, long_sizes)
    text = render(results, sizes, long_sizes)
    figure = draw(results, args.out)
    write(args.out, "hostile", {"machine": machine(), "results": results}, text, [figure])
    failed = "FAIL" in text or "TIMEOUT" in text
    return 1 if args.check and failed else 0
