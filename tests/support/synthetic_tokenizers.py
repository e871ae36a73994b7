"""Synthetic test tokenizers for families whose real vocabularies are not available offline.

Each is the bundled Qwen3 tokenizer with the family's special tokens added after
Qwen3's own, written to a directory holding only ``tokenizer.json`` and
``tokenizer_config.json`` (with a minimal chat template in the family's turn format,
so vLLM's render server can render prompts with it). They are test fixtures, named
synthetic wherever they are used: the markers are single tokens as in the real
models, everything else is Qwen3's vocabulary. Which added tokens count as special
is ours (turn markers special, call markup ordinary, as Qwen3's ``<tool_call>`` is).

``python -m tests.support.synthetic_tokenizers FAMILY DIR`` writes one (the golden recorder
runs it with the project's Python, so recorded ids are the suite's ids).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tokenizers import AddedToken
from tokenizers import Tokenizer as RustTokenizer

from app.examples.response_templates import (
    GEMMA4_RESPONSE_TEMPLATE,
    QWEN3_RESPONSE_TEMPLATE,
    QWEN35_RESPONSE_TEMPLATE,
)
from app.tokens.bundled_qwen3 import bundled_qwen3_dir

# Every token a family adds, in id order after Qwen3's.
FAMILY_TOKENS: dict[str, tuple[str, ...]] = {
    "kimi_k2": (
        "<|im_user|>",
        "<|im_assistant|>",
        "<|im_system|>",
        "<|im_middle|>",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    ),
    "minimax_m2": ("<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"),
    # LongCat-Flash's call tags (Hermes' format); with none of them used, Step-5's stand-in.
    "longcat": ("<longcat_tool_call>", "</longcat_tool_call>"),
    "seed_oss": (
        "<seed:bos>",
        "<seed:eos>",
        "<seed:think>",
        "</seed:think>",
        "<seed:tool_call>",
        "</seed:tool_call>",
    ),
    "glm45": (
        "[gMASK]",
        "<sop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    ),
    "granite": ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"),
    "inkling": (
        "<|message_system|>",
        "<|message_user|>",
        "<|message_tool|>",
        "<|message_model|>",
        "<|content_text|>",
        "<|content_thinking|>",
        "<|content_invoke_tool_json|>",
        "<|content_invoke_tool_text|>",
        "<|content_tool_error|>",
        "<|content_model_end_sampling|>",
        "<|end_message|>",
    ),
    # Poolside's Laguna: role tags (Qwen3's vocabulary has <think> and <tool_call> already).
    "poolside": (
        "<system>",
        "<user>",
        "<assistant>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    ),
    # Nemotron 3: Qwen3's markers (<think>, <tool_call>) and ChatML turns, all in Qwen3's own.
    "nemotron_v3": (),
    # Phi-4-mini's turn markers; its calls (functools[...]) are plain text.
    "phi4_mini": ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>"),
    # Olmo 3: ChatML turns, and no think tokens at all (below).
    "olmo3": (),
    # MiniMax M3: its think markers and the namespace every call tag begins with.
    "minimax_m3": ("<mm:think>", "</mm:think>", "]<]minimax[>["),
    # K2 Horizon: a think block per reasoning effort, and its call section's markers.
    "k2_horizon": (
        "<ifm|think>",
        "</ifm|think>",
        "<ifm|think_fast>",
        "</ifm|think_fast>",
        "<ifm|think_faster>",
        "</ifm|think_faster>",
        "<ifm|tool_calls>",
        "</ifm|tool_calls>",
        # Its calls' markers (after the reasoning ones, so those keep their ids).
        "<ifm|tool_call>",
        "</ifm|tool_call>",
        "<ifm|arg_key>",
        "</ifm|arg_key>",
        "<ifm|arg_type>",
        "</ifm|arg_type>",
        "<ifm|arg_value>",
        "</ifm|arg_value>",
    ),
    # ERNIE-4.5: its answer tags (Qwen3's vocabulary has <think> and <tool_call> already).
    "ernie45": ("<response>", "</response>"),
    # Step-3's call markers (its <think> and </think> are Qwen3's).
    "step3": (
        "<｜tool_calls_begin｜>",
        "<｜tool_calls_end｜>",
        "<｜tool_call_begin｜>",
        "<｜tool_call_end｜>",
        "<｜tool_sep｜>",
    ),
    # Muse's message framing; its ATEM call markup is plain text.
    "muse": ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>"),
    # GigaChat 3's message framing; ``function call`` is plain text.
    "gigachat3": ("<|message_sep|>", "<|role_sep|>", "<|function_call|>", "</s>"),
    # Gemma 4's turn, channel and call markers and its string delimiter, all special.
    "gemma4": (
        "<|turn>",
        "<turn|>",
        "<|channel>",
        "<channel|>",
        "<|tool_call>",
        "<tool_call|>",
        "<|tool_response>",
        "<tool_response|>",
        '<|"|>',
    ),
    # Cohere Command A / Command 4: turn tokens and the section markers, all special.
    "cohere": (
        "<|START_OF_TURN_TOKEN|>",
        "<|END_OF_TURN_TOKEN|>",
        "<|SYSTEM_TOKEN|>",
        "<|USER_TOKEN|>",
        "<|CHATBOT_TOKEN|>",
        "<|START_THINKING|>",
        "<|END_THINKING|>",
        "<|START_RESPONSE|>",
        "<|END_RESPONSE|>",
        "<|START_TEXT|>",
        "<|END_TEXT|>",
        "<|START_ACTION|>",
        "<|END_ACTION|>",
    ),
    # Hunyuan HY-V3/V4: call markup beyond Qwen3's <think> and <tool_call> tokens.
    "hy": (
        "<tool_calls>",
        "</tool_calls>",
        "<tool_sep>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    ),
    # dots: ChatML turns, its call markers as ordinary tokens (they reach the parser as text).
    "dots": ("<dots_function_call>", "</dots_function_call>"),
    # InternLM2's action markers (ordinary tokens here: vLLM keeps special ones in the text
    # whenever its parser reads calls, and the text is what the parser reads).
    "internlm2": ("<|action_start|>", "<|plugin|>", "<|action_end|>"),
    # FunctionGemma's call markers and string delimiter (ordinary tokens: its parser keeps
    # special tokens in the text whenever it reads calls, and reads the text).
    "functiongemma": ("<start_function_call>", "<end_function_call>", "<escape>"),
    # PLaMo 3's markers are several tokens: a begin/end anchor, the name as text, a
    # closing anchor (``<|plamo:begin_`` ``think`` ``:plamo|>``); its turn and argument
    # markers are one token each.
    "plamo3": (
        "<|plamo:begin_",
        "<|plamo:end_",
        ":plamo|>",
        "<|plamo:constrain|>",
        "<|plamo:msg|>",
        "<|plamo:tag|>",
    ),
    # MiniCPM-V: ChatML turns (Qwen3's) and the reserved markers its parser drops, special.
    "minicpmv": ("<|reserved_12|>", "<|reserved_13|>", "<|reserved_14|>", "<|reserved_15|>"),
    # Kimi K3's XTML element markers and its end of message, all special.
    "kimi_k3": ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"),
    # Apertus' call block markers (ordinary tokens here, as InternLM2's).
    "apertus": ("<|tools_prefix|>", "<|tools_suffix|>"),
    # LFM2's call markers (ordinary tokens here, as InternLM2's).
    "lfm2": ("<|tool_call_start|>", "<|tool_call_end|>"),
    # Jamba's call markers (ordinary tokens here, as InternLM2's are).
    "jamba": ("<tool_calls>", "</tool_calls>"),
    # A model read by its response template (vLLM's ``hf``): Qwen3's markers, all its own.
    "hf": (),
}
# Beam read by its response template: Gemma 4's markers (its turns, channel and calls).
FAMILY_TOKENS["beam"] = FAMILY_TOKENS["gemma4"]
# Qwen3.5's markup read by its response template (vLLM's ``hf``): Qwen3's markers.
FAMILY_TOKENS["hf_xml"] = ()
# Qwen3's added tokens a family's vocabulary lacks: they are dropped, so the text reads
# in ordinary tokens (Olmo 3 spells <think> as "<", "think", ">").
FAMILY_DROPS: dict[str, frozenset[str]] = {"olmo3": frozenset({"<think>", "</think>"})}
# The added tokens that are special (turn structure); the rest are ordinary tokens.
FAMILY_SPECIAL: dict[str, frozenset[str]] = {
    "kimi_k2": frozenset({"<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>"}),
    "minimax_m2": frozenset(),
    "longcat": frozenset(),
    "seed_oss": frozenset({"<seed:bos>", "<seed:eos>"}),
    "glm45": frozenset(
        {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}
    ),
    "granite": frozenset({"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"}),
    # Every Inkling marker is a special token of its own.
    "inkling": frozenset(FAMILY_TOKENS["inkling"]),
    "poolside": frozenset({"<system>", "<user>", "<assistant>"}),
    "nemotron_v3": frozenset(),
    "phi4_mini": frozenset(FAMILY_TOKENS["phi4_mini"]),
    "olmo3": frozenset(),
    "minimax_m3": frozenset(),
    "k2_horizon": frozenset(),
    "ernie45": frozenset(),
    "step3": frozenset(),
    "muse": frozenset(FAMILY_TOKENS["muse"]),
    "gigachat3": frozenset(FAMILY_TOKENS["gigachat3"]),
    "gemma4": frozenset(FAMILY_TOKENS["gemma4"]),
    "cohere": frozenset(FAMILY_TOKENS["cohere"]),
    "hy": frozenset(),
    "dots": frozenset(),
    "internlm2": frozenset(),
    "functiongemma": frozenset(),
    "plamo3": frozenset({"<|plamo:begin_", "<|plamo:end_", ":plamo|>", "<|plamo:tag|>"}),
    "minicpmv": frozenset(FAMILY_TOKENS["minicpmv"]),
    "kimi_k3": frozenset(FAMILY_TOKENS["kimi_k3"]),
    "apertus": frozenset(),
    "lfm2": frozenset(),
    "jamba": frozenset(),
    "hf": frozenset(),
    "beam": frozenset(FAMILY_TOKENS["gemma4"]),
    "hf_xml": frozenset(),
}
_EOS = {
    "kimi_k2": "<|im_end|>",
    "minimax_m2": "<|im_end|>",
    "longcat": "<|im_end|>",
    "seed_oss": "<seed:eos>",
    "glm45": "<|endoftext|>",
    "granite": "<|end_of_text|>",
    "inkling": "<|im_end|>",
    "poolside": "<|im_end|>",
    "nemotron_v3": "<|im_end|>",
    "phi4_mini": "<|end|>",
    "olmo3": "<|im_end|>",
    "minimax_m3": "<|im_end|>",
    "k2_horizon": "<|im_end|>",
    "ernie45": "<|im_end|>",
    "step3": "<|im_end|>",
    "muse": "<|eot|>",
    "gigachat3": "</s>",
    "gemma4": "<turn|>",
    "cohere": "<|END_OF_TURN_TOKEN|>",
    "hy": "<|im_end|>",
    "dots": "<|im_end|>",
    "internlm2": "<|im_end|>",
    "functiongemma": "<|im_end|>",
    "plamo3": "<|plamo:tag|>",
    "minicpmv": "<|im_end|>",
    "kimi_k3": "<|end_of_msg|>",
    "apertus": "<|im_end|>",
    "lfm2": "<|im_end|>",
    "jamba": "<|im_end|>",
    "hf": "<|im_end|>",
    "beam": "<turn|>",
    "hf_xml": "<|im_end|>",
}

_KIMI_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|im_system|>system<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'user' -%}<|im_user|>user<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- elif m.role == 'assistant' -%}"
    "<|im_assistant|>assistant<|im_middle|>{{ m.content or '' }}<|im_end|>"
    "{%- else -%}<|im_system|>{{ m.role }}<|im_middle|>{{ m.content }}<|im_end|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
)
_GLM_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>\n{{ m.content }}"
    "{%- elif m.role == 'user' -%}<|user|>\n{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>\n{{ m.content or '' }}"
    "{%- else -%}<|observation|>\n{{ m.content }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and not enable_thinking -%}\n<think></think>{%- endif -%}"
    "{%- endif -%}"
)
# Granite's role turns; tools listed as JSON in an ``available_tools`` turn.
_GRANITE_TEMPLATE = (
    "{%- if tools -%}<|start_of_role|>available_tools<|end_of_role|>"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "<|end_of_text|>{%- endif -%}"
    "{%- for m in messages -%}"
    "<|start_of_role|>{{ m.role }}<|end_of_role|>{{ m.content or '' }}<|end_of_text|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|start_of_role|>assistant<|end_of_role|>{%- endif -%}"
)
# ChatML turns; tools listed as JSON in a system turn; the generation prompt opens
# reasoning with "<think>\n" (closed at once when enable_thinking or thinking is false).
_CHATML_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if (enable_thinking is defined and not enable_thinking)"
    " or (thinking is defined and not thinking) %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)
# Seed-OSS's turns; a generation prompt closes reasoning at once when thinking is off.
_SEED_TEMPLATE = (
    "{%- for m in messages -%}<seed:bos>{{ m.role }}\n{{ m.content or '' }}<seed:eos>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<seed:bos>assistant\n"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "<seed:think></seed:think>{%- endif -%}"
    "{%- endif -%}"
)
# Typed blocks: each message a role marker, a content-kind marker, its text and
# <|end_message|>; tools listed as JSON in a system block. The generation prompt opens
# the model's message and, when the request says, its thinking or its text block.
_INKLING_TEMPLATE = (
    "{%- if tools -%}<|message_system|><|content_text|># Tools\n"
    "{%- for tool in tools %}{{ tool | tojson }}\n{% endfor -%}<|end_message|>{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}<|message_model|>"
    "{%- else -%}<|message_{{ m.role }}|>{%- endif -%}"
    "<|content_text|>{{ m.content or '' }}<|end_message|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|message_model|>"
    "{%- if thinking is defined and thinking -%}<|content_thinking|>"
    "{%- elif thinking is defined -%}<|content_text|>{%- endif -%}"
    "{%- endif -%}"
)
# Role tags around each turn; the generation prompt opens the assistant's turn and, when
# the request asks for thinking, its reasoning.
_POOLSIDE_TEMPLATE = (
    "{%- for m in messages -%}<{{ m.role }}>{{ m.content or '' }}<|im_end|>\n{%- endfor -%}"
    "{%- if add_generation_prompt -%}<assistant>"
    "{%- if thinking is defined and thinking -%}<think>\n{%- endif -%}"
    "{%- endif -%}"
)
_PHI4_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|{{ m.role }}|>{{ m.content or '' }}"
    "{%- if m.role == 'system' and tools -%}<|tool|>{{ tools | tojson }}<|/tool|>{%- endif -%}"
    "<|end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)
# Muse's messages: ``<|start|>ROLE<|message|>TEXT<|eot|>``, tools listed as JSON in a
# system message; the generation prompt opens the assistant's turn (its first header
# is the model's: `` to=self<|message|>``).
_MUSE_TEMPLATE = (
    "{%- if tools -%}<|start|>system<|message|># Tools\n"
    "{%- for tool in tools %}{{ tool | tojson }}\n{% endfor -%}<|eot|>{%- endif -%}"
    "{%- for m in messages -%}<|start|>{{ m.role }}<|message|>{{ m.content or '' }}<|eot|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"
)
# GigaChat 3's messages: ``ROLE<|role_sep|>\nTEXT<|message_sep|>\n\n``, tools as JSON in a
# ``function descriptions`` message; the generation prompt opens the assistant's.
_GIGACHAT3_TEMPLATE = (
    "{%- if tools -%}function descriptions<|role_sep|>\n{{ tools | tojson }}"
    "<|message_sep|>\n\n{%- endif -%}"
    "{%- for m in messages -%}{{ m.role }}<|role_sep|>\n{{ m.content or '' }}<|message_sep|>\n\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}assistant<|role_sep|>\n{%- endif -%}"
)
# Gemma 4's turns; with enable_thinking the generation prompt opens the thought channel.
_GEMMA4_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|turn>{{ 'model' if m.role == 'assistant' else m.role }}\n{{ m.content or '' }}<turn|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|turn>model\n"
    "{%- if enable_thinking is defined and enable_thinking -%}<|channel>{%- endif -%}"
    "{%- endif -%}"
)
# ChatML turns, tools as in _CHATML_TEMPLATE; the generation prompt opens the reasoning
# block when ``thinking_mode`` is "enabled" (MiniMax M3's switch).
_M3_TEMPLATE = _CHATML_TEMPLATE.split("{%- if add_generation_prompt %}")[0] + (
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if thinking_mode is defined and thinking_mode == 'enabled' %}{{- '<mm:think>' }}"
    "{%- endif %}{%- endif %}"
)
# Cohere's turns; the generation prompt opens the chatbot's turn (Command 4's prompt
# opens its thinking too: ask with ``thinking``).
_COHERE_TEMPLATE = (
    "{%- for m in messages -%}<|START_OF_TURN_TOKEN|>"
    "{%- if m.role == 'user' -%}<|USER_TOKEN|>{%- elif m.role == 'system' -%}<|SYSTEM_TOKEN|>"
    "{%- else -%}<|CHATBOT_TOKEN|>{%- endif -%}"
    "{{ m.content or '' }}<|END_OF_TURN_TOKEN|>{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
    "{%- if thinking is defined and thinking -%}<|START_THINKING|>{%- endif -%}"
    "{%- endif -%}"
)
# PLaMo 3's turns: ``ROLE<|plamo:msg|>TEXT<|plamo:tag|>`` after an opening
# ``<|plamo:tag|>``, tools listed as JSON in a system turn.
_PLAMO3_TEMPLATE = (
    "<|plamo:tag|>"
    "{%- if tools -%}system<|plamo:msg|># Tools\n"
    "{%- for tool in tools %}{{ tool | tojson }}\n{% endfor -%}<|plamo:tag|>{%- endif -%}"
    "{%- for m in messages -%}{{ m.role }}<|plamo:msg|>{{ m.content or '' }}<|plamo:tag|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}assistant<|plamo:msg|>{%- endif -%}"
)
# Kimi K3's XTML messages; the generation prompt opens the assistant's message and its
# think channel, or its response channel when the kwarg thinking (else enable_thinking)
# is false.
_K3_TEMPLATE = (
    "{%- for m in messages -%}"
    "<|open|>message role=\"{{ m.role }}\"<|sep|>{{ m.content or '' }}<|close|>message<|sep|>"
    "<|end_of_msg|>{%- endfor -%}"
    '{%- if add_generation_prompt -%}<|open|>message role="assistant"<|sep|>'
    "{%- if thinking is defined and thinking is not none -%}{%- set on = thinking -%}"
    "{%- elif enable_thinking is defined -%}{%- set on = enable_thinking -%}"
    "{%- else -%}{%- set on = true -%}{%- endif -%}"
    "{%- if on -%}<|open|>think<|sep|>{%- else -%}<|open|>response<|sep|>{%- endif -%}"
    "{%- endif -%}"
)
_TEMPLATES = {
    "kimi_k2": _KIMI_TEMPLATE,
    "minimax_m2": _CHATML_TEMPLATE,
    "longcat": _CHATML_TEMPLATE,
    "seed_oss": _SEED_TEMPLATE,
    "glm45": _GLM_TEMPLATE,
    "granite": _GRANITE_TEMPLATE,
    "inkling": _INKLING_TEMPLATE,
    "poolside": _POOLSIDE_TEMPLATE,
    "nemotron_v3": _CHATML_TEMPLATE,
    "phi4_mini": _PHI4_TEMPLATE,
    "olmo3": _CHATML_TEMPLATE,
    "minimax_m3": _M3_TEMPLATE,
    "k2_horizon": _M3_TEMPLATE,
    "ernie45": _CHATML_TEMPLATE,
    "step3": _CHATML_TEMPLATE,
    "muse": _MUSE_TEMPLATE,
    "gigachat3": _GIGACHAT3_TEMPLATE,
    "gemma4": _GEMMA4_TEMPLATE,
    "cohere": _COHERE_TEMPLATE,
    "hy": _CHATML_TEMPLATE,
    "dots": _CHATML_TEMPLATE,
    "internlm2": _CHATML_TEMPLATE,
    "functiongemma": _CHATML_TEMPLATE,
    "plamo3": _PLAMO3_TEMPLATE,
    "minicpmv": _CHATML_TEMPLATE,
    "kimi_k3": _K3_TEMPLATE,
    "apertus": _CHATML_TEMPLATE,
    "lfm2": _CHATML_TEMPLATE,
    "jamba": _CHATML_TEMPLATE,
    "hf": _CHATML_TEMPLATE,
    "beam": _GEMMA4_TEMPLATE,
    "hf_xml": _CHATML_TEMPLATE,
}
# The response template each family's tokenizer configuration carries, if any.
_RESPONSE_TEMPLATES: dict[str, dict[str, Any]] = {
    "hf": QWEN3_RESPONSE_TEMPLATE,
    "beam": GEMMA4_RESPONSE_TEMPLATE,
    "hf_xml": QWEN35_RESPONSE_TEMPLATE,
}


def _without(path: Path, dropped: frozenset[str]) -> RustTokenizer:
    """The tokenizer at ``path`` without the added tokens ``dropped``."""
    if not dropped:
        return RustTokenizer.from_file(str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in dropped]
    return RustTokenizer.from_str(json.dumps(data))


def write_synthetic_tokenizer(family: str, folder: Path) -> Path:
    """Write ``family``'s synthetic tokenizer into ``folder`` (created); returns it."""
    if family not in FAMILY_TOKENS:
        raise ValueError(f"no synthetic tokenizer for {family!r}; known: {sorted(FAMILY_TOKENS)}")
    source = bundled_qwen3_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _without(source / "tokenizer.json", FAMILY_DROPS.get(family, frozenset()))
    special = FAMILY_SPECIAL[family]
    for token in FAMILY_TOKENS[family]:
        tokenizer.add_tokens([AddedToken(token, special=token in special, normalized=False)])
    tokenizer.save(str(folder / "tokenizer.json"))
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    extra = list(config.get("extra_special_tokens") or [])
    config["extra_special_tokens"] = extra + [t for t in FAMILY_TOKENS[family] if t in special]
    config["eos_token"] = _EOS[family]
    config["chat_template"] = _TEMPLATES[family]
    if family in _RESPONSE_TEMPLATES:
        config["response_template"] = _RESPONSE_TEMPLATES[family]
    (folder / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.support.synthetic_tokenizers FAMILY DIR")
    print(write_synthetic_tokenizer(sys.argv[1], Path(sys.argv[2])))
