"""What the benches stream: generated model outputs and prompts, as Qwen3 token ids.

Every bench tokenizes with the bundled Qwen3 tokenizer (gpt-oss's Harmony with the
bundled gpt-oss one), so the ids are the ones such an engine would send. The chat
workload is what a qwen3 + hermes model emits for an agentic turn: reasoning, then an
answer, then tool calls. The parser workloads put a long stretch in the section each
parser configuration works hardest on.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from app.tokenizer import Tokenizer, load_tokenizer
from parsers.deepseek import CALL_BEGIN, CALL_FINISH, CALLS_BEGIN, CALLS_END, SEP
from parsers.glm import (
    KEY_CLOSE_TAG,
    KEY_OPEN_TAG,
    TURN_BOUNDARIES,
    VALUE_CLOSE_TAG,
    VALUE_OPEN_TAG,
)
from parsers.kimi_k2 import ARGUMENT_BEGIN, SECTION_BEGIN, SECTION_END
from parsers.kimi_k2 import CALL_BEGIN as KIMI_CALL_BEGIN
from parsers.kimi_k2 import CALL_FINISH as KIMI_CALL_FINISH

SERVER_FLAGS = (
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "hermes",
    "--enable-auto-tool-choice",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_hotel",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "save_note",
            "parameters": {"type": "object", "properties": {"body": {"type": "string"}}},
        },
    },
]
CHAT_REQUEST: dict[str, Any] = {
    "model": "qwen3",
    "messages": [{"role": "user", "content": "Plan a weekend in Lisbon and book it."}],
    "tools": TOOLS,
}
THOUGHT = "Compare fares, weather and hotels near Alfama before deciding. "
ANSWER = "Here is the plan for your weekend in Lisbon. "
CALL = '<tool_call>\n{"name": "book_hotel", "arguments": {"city": "Lisbon"}}\n</tool_call>'
SENTENCE = "We compare the fares, the weather in Lisbon and the hotel options near Alfama. "

# parser configuration -> (tool parser, reasoning parser, where the long stretch lies)
PARSER_CONFIGS: dict[str, tuple[str | None, str | None, str]] = {
    "qwen3+hermes": ("hermes", "qwen3", "chat"),
    "qwen3": (None, "qwen3", "reasoning"),
    "deepseek_r1": (None, "deepseek_r1", "reasoning"),
    "hermes": ("hermes", None, "hermes_call"),
    "qwen3+qwen3_coder": ("qwen3_coder", "qwen3", "coder_call"),
    "xlam": ("xlam", None, "content"),
    "pythonic": ("pythonic", None, "content"),
    "llama3_json": ("llama3_json", None, "content"),
    "deepseek_v3+deepseek_v31": ("deepseek_v31", "deepseek_v3", "deepseek_v31_call"),
    "deepseek_v3+deepseek_v3": ("deepseek_v3", "deepseek_v3", "deepseek_v3_call"),
    "deepseek_v32": ("deepseek_v32", None, "dsml_v32_call"),
    "deepseek_v4+deepseek_v4": ("deepseek_v4", "deepseek_v4", "dsml_v4_call"),
    "deepseek_v41+deepseek_v41": ("deepseek_v41", "deepseek_v41", "dsml_v41_call"),
    "openai_gptoss+openai": ("openai", "openai_gptoss", "harmony_call"),
    "kimi_k2+kimi_k2": ("kimi_k2", "kimi_k2", "kimi_call"),
    "glm45+glm45": ("glm45", "glm45", "glm_call"),
}
# gpt-oss's Harmony: a short analysis message, then a call's JSON body left open.
HARMONY_THOUGHT = "<|channel|>analysis<|message|>Short thought.<|end|><|start|>assistant"
HARMONY_CALL_OPEN = (
    '<|channel|>commentary to=functions.save_note <|constrain|>json<|message|>{"body": '
)
# Kimi K2 and GLM: a ``save_note`` call's string ``body`` left open, in each format.
KIMI_CALL_OPEN = (
    f"{SECTION_BEGIN}{KIMI_CALL_BEGIN}functions.save_note:0{ARGUMENT_BEGIN}" + '{"body": '
)
GLM_CALL_OPEN = f"<tool_call>save_note\n{KEY_OPEN_TAG}body{KEY_CLOSE_TAG}\n{VALUE_OPEN_TAG}"
# Markers the Kimi K2 and GLM test tokenizers add to Qwen3's vocabulary as tokens.
KIMI_MARKERS = (SECTION_BEGIN, SECTION_END, KIMI_CALL_BEGIN, ARGUMENT_BEGIN, KIMI_CALL_FINISH)
GLM_MARKERS = (*TURN_BOUNDARIES, KEY_OPEN_TAG, KEY_CLOSE_TAG, VALUE_OPEN_TAG, VALUE_CLOSE_TAG)
DEEPSEEK_TOOLS = frozenset({"deepseek_v3", "deepseek_v31"})
DSML_TOOLS = frozenset({"deepseek_v32", "deepseek_v4", "deepseek_v41"})
DSML_STRING_PARAM = '<｜DSML｜parameter name="body" string="true">'


def dsml_call_open(tool: str) -> str:
    """The DSML text that opens a ``save_note`` call's string ``body``, in ``tool``'s dialect."""
    if tool == "deepseek_v41":
        return '<｜DSML｜ calls>\n<｜DSML｜ invoke name="save_note">\n' + DSML_STRING_PARAM.replace(
            "｜DSML｜", "｜DSML｜ "
        )
    wrapper = "function_calls" if tool == "deepseek_v32" else "tool_calls"
    return f'<｜DSML｜{wrapper}>\n<｜DSML｜invoke name="save_note">\n{DSML_STRING_PARAM}'


def qwen3() -> Tokenizer:
    return load_tokenizer("qwen3")


@cache
def qwen3_with_deepseek_markers() -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus DeepSeek's tool markers as tokens.

    DeepSeek's parsers find markers by id; the added ids follow Qwen3's, so every
    other id means what it means to Qwen3.
    """
    from tokenizers import AddedToken

    hf = load_tokenizer("qwen3")._hf
    markers = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_FINISH, SEP)
    hf.add_tokens([AddedToken(m, special=False, normalized=False) for m in markers])
    return Tokenizer(hf, default_max_model_len=1 << 20, model_eos_token_ids=[])


@cache
def qwen3_with_markers(markers: tuple[str, ...]) -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus a family's markers as tokens (Kimi K2's
    and GLM's synthetic vocabularies: their markers are single tokens there too)."""
    from tokenizers import AddedToken

    hf = load_tokenizer("qwen3")._hf
    hf.add_tokens([AddedToken(m, special=False, normalized=False) for m in markers])
    return Tokenizer(hf, default_max_model_len=1 << 20, model_eos_token_ids=[])


@cache
def qwen3_with_dsml() -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus ``｜DSML｜`` as one token (as DeepSeek's
    has it); DSML markers are text spanning several tokens."""
    from tokenizers import AddedToken

    hf = load_tokenizer("qwen3")._hf
    hf.add_tokens([AddedToken("｜DSML｜", special=False, normalized=False)])
    return Tokenizer(hf, default_max_model_len=1 << 20, model_eos_token_ids=[])


@cache
def gpt_oss() -> Tokenizer:
    """The bundled gpt-oss tokenizer (o200k_harmony): Harmony is read by its ids."""
    return load_tokenizer("gpt-oss")


def tokenizer_for(tool: str | None) -> Tokenizer:
    """The tokenizer a parser configuration is benched with."""
    if tool == "openai":
        return gpt_oss()
    if tool in DSML_TOOLS:
        return qwen3_with_dsml()
    if tool == "kimi_k2":
        return qwen3_with_markers(KIMI_MARKERS)
    if tool in ("glm45", "glm47"):
        return qwen3_with_markers(GLM_MARKERS)
    return qwen3_with_deepseek_markers() if tool in DEEPSEEK_TOOLS else qwen3()


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    ids: list[int] = tokenizer._hf.encode(text)
    return ids


def repeat_to(ids: list[int], unit: list[int], tokens: int) -> list[int]:
    """``ids`` followed by ``unit`` repeated, cut to exactly ``tokens`` ids."""
    count = max(0, tokens - len(ids)) // max(len(unit), 1) + 1
    return (ids + unit * count)[:tokens]


def chat_output(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """Reasoning (3/4), an answer, then tool calls: ``tokens`` ids of one agentic turn."""
    ids = repeat_to(encode(tokenizer, "<think>\n"), encode(tokenizer, THOUGHT), tokens * 3 // 4)
    ids += encode(tokenizer, "\n</think>\n\n" + ANSWER * 4)
    return repeat_to(ids, encode(tokenizer, "\n" + CALL), tokens)


def parser_output(tokenizer: Tokenizer, kind: str, tokens: int) -> list[int]:
    """``tokens`` ids whose long stretch lies where the ``kind`` of configuration works."""
    if kind == "chat":
        return chat_output(tokenizer, tokens)
    head = {
        "reasoning": "",
        "content": "",
        "hermes_call": 'Short thought.\n</think>\n\n<tool_call>\n{"name": "save_note", '
        '"arguments": {"body": "',
        "coder_call": "Short thought.\n</think>\n\n<tool_call>\n<function=save_note>\n"
        "<parameter=body>\n",
        "deepseek_v31_call": f'{CALLS_BEGIN}{CALL_BEGIN}save_note{SEP}{{"body": "',
        "deepseek_v3_call": f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}save_note\n```json\n"
        '{"body": "',
        "dsml_v32_call": dsml_call_open("deepseek_v32"),
        "dsml_v4_call": "Short thought.\n</think>\n\n" + dsml_call_open("deepseek_v4"),
        "dsml_v41_call": "Short thought.\n</think>\n\n" + dsml_call_open("deepseek_v41"),
        "harmony_call": HARMONY_THOUGHT + HARMONY_CALL_OPEN + '"',
        "kimi_call": "Short thought.\n</think>\n\n" + KIMI_CALL_OPEN + '"',
        "glm_call": "Short thought.\n</think>\n\n" + GLM_CALL_OPEN,
    }[kind]
    return repeat_to(encode(tokenizer, head), encode(tokenizer, SENTENCE), tokens)


def prompt_ids(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """A chat-templated prompt of exactly ``tokens`` ids (a long user turn fills it)."""
    head = encode(tokenizer, "<|im_start|>user\nPlan a weekend in Lisbon and book it. ")
    tail = encode(tokenizer, "<|im_end|>\n<|im_start|>assistant\n")
    body = repeat_to(head, encode(tokenizer, SENTENCE), max(tokens - len(tail), len(head)))
    return body + tail
