"""What the benches stream: generated model outputs and prompts, as Qwen3 token ids.

Every bench tokenizes with the bundled Qwen3 tokenizer (gpt-oss's Harmony with the
bundled gpt-oss one), so the ids are the ones such an engine would send. The chat
workload is what a qwen3 + hermes model emits for an agentic turn: reasoning, then an
answer, then tool calls. The parser workloads put a long stretch in the section each
parser configuration works hardest on.
"""

from __future__ import annotations

import copy
import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

from app.examples.response_templates import QWEN3_RESPONSE_TEMPLATE
from app.tokens.tokenizer import Tokenizer, load_tokenizer, resolve_model_dir
from parsers.families.deepseek import CALL_BEGIN, CALL_FINISH, CALLS_BEGIN, CALLS_END, SEP
from parsers.families.glm import (
    KEY_CLOSE_TAG,
    KEY_OPEN_TAG,
    TURN_BOUNDARIES,
    VALUE_CLOSE_TAG,
    VALUE_OPEN_TAG,
)
from parsers.families.kimi_k2 import ARGUMENT_BEGIN, SECTION_BEGIN, SECTION_END
from parsers.families.kimi_k2 import CALL_BEGIN as KIMI_CALL_BEGIN
from parsers.families.kimi_k2 import CALL_FINISH as KIMI_CALL_FINISH
from parsers.families.llama4_pythonic import PYTHON_END, PYTHON_START

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

# Gemma 4's reasoning, in the channel its output opens.
GEMMA4_THOUGHT = "<|channel>thought\nShort thought.<channel|>"

# parser configuration -> (tool parser, reasoning parser, where the long stretch lies)
PARSER_CONFIGS: dict[str, tuple[str | None, str | None, str]] = {
    "qwen3+hermes": ("hermes", "qwen3", "chat"),
    "qwen3": (None, "qwen3", "reasoning"),
    "deepseek_r1": (None, "deepseek_r1", "reasoning"),
    "hermes": ("hermes", None, "hermes_call"),
    "qwen3+qwen3_coder": ("qwen3_coder", "qwen3", "coder_call"),
    "deepseek_r1+longcat": ("longcat", "deepseek_r1", "longcat_call"),
    "step5+step5": ("step5", "step5", "coder_call"),
    "step3p5+step3p5": ("step3p5", "step3p5", "coder_call"),
    "seed_oss+seed_oss": ("seed_oss", "seed_oss", "seed_call"),
    "xlam": ("xlam", None, "content"),
    "pythonic": ("pythonic", None, "content"),
    "llama3_json": ("llama3_json", None, "content"),
    "llama4_pythonic": ("llama4_pythonic", None, "llama4_call"),
    "deepseek_v3+deepseek_v31": ("deepseek_v31", "deepseek_v3", "deepseek_v31_call"),
    "deepseek_v3+deepseek_v3": ("deepseek_v3", "deepseek_v3", "deepseek_v3_call"),
    "deepseek_v32": ("deepseek_v32", None, "dsml_v32_call"),
    "deepseek_v4+deepseek_v4": ("deepseek_v4", "deepseek_v4", "dsml_v4_call"),
    "deepseek_v41+deepseek_v41": ("deepseek_v41", "deepseek_v41", "dsml_v41_call"),
    "openai_gptoss+openai": ("openai", "openai_gptoss", "harmony_call"),
    "minimax_m2+minimax_m2": ("minimax_m2", "minimax_m2", "minimax_call"),
    "minimax_m2_append_think+minimax_m2": ("minimax_m2", "minimax_m2_append_think", "minimax_call"),
    "mistral+mistral": ("mistral", "mistral", "mistral_call"),
    "mistral+mistral (JSON array)": ("mistral", "mistral", "mistral_array_call"),
    "kimi_k2+kimi_k2": ("kimi_k2", "kimi_k2", "kimi_call"),
    "glm45+glm45": ("glm45", "glm45", "glm_call"),
    "granite4": ("granite4", None, "hermes_call"),
    "granite": (None, "granite", "granite_reasoning"),
    "inkling+inkling": ("inkling", "inkling", "inkling_call"),
    "holo2": (None, "holo2", "reasoning"),
    "olmo3": (None, "olmo3", "reasoning"),
    "nemotron_v3+qwen3_coder": ("qwen3_coder", "nemotron_v3", "coder_call"),
    "phi4_mini_json": ("phi4_mini_json", None, "phi4_call"),
    "minimax_m3+minimax_m3": ("minimax_m3", "minimax_m3", "m3_call"),
    "ling3+ling3": ("ling3", "ling3", "glm_call"),
    "mimo+mimo": ("mimo", "mimo", "coder_call"),
    "ernie45+ernie45": ("ernie45", "ernie45", "hermes_call"),
    "step3+step3": ("step3", "step3", "step3_call"),
    "muse+muse": ("muse", "muse", "muse_call"),
    "gigachat3": ("gigachat3", None, "gigachat3_call"),
    "gemma4+gemma4": ("gemma4", "gemma4", "gemma4_call"),
    "granite_thinking_parser+qwen3_coder": ("qwen3_coder", "granite_thinking_parser", "coder_call"),
    "granite (tools)": ("granite", None, "granite_array_call"),
    "cohere_command3+cohere_command3": ("cohere_command3", "cohere_command3", "cohere_call"),
    "granite-20b-fc": ("granite-20b-fc", None, "granite_fc_call"),
    "poolside_v1 tools": ("poolside_v1", None, "poolside_call"),
    "hunyuan_a13b": ("hunyuan_a13b", None, "content"),
    "hy_v4": (None, "hy_v4", "reasoning"),
    "hy_v4+hy_v4": ("hy_v4", "hy_v4", "content"),
    "hy_v3+hy_v3": ("hy_v3", "hy_v3", "content"),
    "olmo3 (tools)": ("olmo3", None, "olmo3_call"),
    "dots": ("dots", None, "dots_call"),
    "internlm": ("internlm", None, "internlm_call"),
    "functiongemma": ("functiongemma", None, "functiongemma_call"),
    "plamo3+plamo3": ("plamo3", "plamo3", "plamo3_call"),
    "minicpmv+qwen3_coder": ("qwen3_coder", "minicpmv", "coder_call"),
    "minicpm5": ("minicpm5", None, "minicpm5_call"),
    "kimi_k3+kimi_k3": ("kimi_k3", "kimi_k3", "kimi_k3_call"),
    "k2_horizon (tools)": ("k2_horizon", None, "k2_horizon_call"),
    "apertus": ("apertus", None, "apertus_call"),
    "lfm2": ("lfm2", None, "lfm2_call"),
    "jamba": ("jamba", None, "jamba_call"),
    "hf+hf": ("hf", "hf", "hermes_call"),
    "beam+beam": ("beam", "beam", "hermes_call"),
}
# PLaMo 3: its requests block, one request's name, its arguments opened to a string.
PLAMO3_SECTION = "<|plamo:begin_tool_requests:plamo|>"
PLAMO3_CALL_OPEN = (
    f"{PLAMO3_SECTION}<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>save_note"
    "<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json"
    '<|plamo:msg|>{"body": '
)
# Cohere Command: an action block's first call, its string ``body`` left open.
COHERE_CALL_OPEN = (
    '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "save_note", "parameters": {"body": '
)
# Mistral's configurations run on a tekken-converted tokenizer: the synthetic v13
# layout ([ARGS] calls, [THINK]), or the real tekken_240911 one (a JSON array).
MISTRAL_ARRAY = "(JSON array)"
MISTRAL_THOUGHT = "[THINK]Short thought.[/THINK]"
MISTRAL_CALL_OPEN = '[TOOL_CALLS]save_note[ARGS]{"body": '
MISTRAL_ARRAY_OPEN = '[TOOL_CALLS][{"name": "save_note", "arguments": {"body": '
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
# MiniMax M2: a call section's opener, then one call to save_note with its string body open.
MINIMAX_MARKERS = ("<minimax:tool_call>", "</minimax:tool_call>")
MINIMAX_CALL_OPEN = '<minimax:tool_call>\n<invoke name="save_note">\n<parameter name="body">'
# MiniMax M3: its think markers and call namespace as tokens; a save_note body left open.
M3_MARKERS = ("<mm:think>", "</mm:think>", "]<]minimax[>[")
M3_SECTION = "]<]minimax[>[<tool_call>\n"
M3_CALL_OPEN = M3_SECTION + ']<]minimax[>[<invoke name="save_note">\n]<]minimax[>[<body>'
# K2 Horizon's IFM group: a call's string value opened (the group closes at the end).
K2H_CALL_OPEN = (
    "<ifm|tool_calls><ifm|tool_call>save_note<ifm|arg_key>body</ifm|arg_key><ifm|arg_value>"
)
# Kimi K3's XTML: the think closer, an empty response, a call's string argument opened.
K3_MARKERS = ("<|open|>", "<|close|>", "<|sep|>")
K3_CALL_OPEN = (
    "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
    '<|open|>call tool="save_note" index="1"<|sep|><|open|>argument key="body" type="string"'
    "<|sep|>"
)
SEED_MARKERS = (
    "<seed:bos>",
    "<seed:eos>",
    "<seed:think>",
    "</seed:think>",
    "<seed:tool_call>",
    "</seed:tool_call>",
)
DSML_TOOLS = frozenset({"deepseek_v32", "deepseek_v4", "deepseek_v41"})
# Inkling: a thinking block, then a tool block's ``save_note`` string ``body`` left open
# (its markers are tokens of their own, read by their text).
INKLING_MARKERS = (
    "<|message_model|>",
    "<|content_thinking|>",
    "<|content_invoke_tool_json|>",
    "<|end_message|>",
)
INKLING_CALL_OPEN = (
    "<|content_thinking|>Short thought.<|end_message|><|message_model|>"
    '<|content_invoke_tool_json|>{"name": "save_note", "args": {"body": "'
)
LLAMA4_MARKERS = (PYTHON_START, PYTHON_END)
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


def qwen3_with_tokens(*texts: str) -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus ``texts`` as added, non-special tokens
    (their ids follow Qwen3's, so every other id means what it means to Qwen3)."""
    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(resolve_model_dir("qwen3")), local_files_only=True)
    hf.add_tokens([AddedToken(text, special=False, normalized=False) for text in texts])
    return Tokenizer(hf, default_max_model_len=1 << 20, model_eos_token_ids=[])


@cache
def qwen3_with_deepseek_markers() -> Tokenizer:
    """DeepSeek's parsers find markers by id: Qwen3's vocabulary plus its tool markers."""
    return qwen3_with_tokens(CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_FINISH, SEP)


@cache
def qwen3_with_kimi_markers() -> Tokenizer:
    """Qwen3's vocabulary plus Kimi K2's markers as tokens (single tokens in Kimi's too)."""
    return qwen3_with_tokens(*KIMI_MARKERS)


@cache
def qwen3_with_glm_markers() -> Tokenizer:
    """Qwen3's vocabulary plus GLM's markers as tokens (single tokens in GLM's too)."""
    return qwen3_with_tokens(*GLM_MARKERS)


@cache
def qwen3_with_hy_markers() -> Tokenizer:
    """Qwen3's vocabulary plus HY's call markers as tokens (single tokens in HY's too)."""
    return qwen3_with_tokens(
        "<tool_calls>",
        "</tool_calls>",
        "<tool_sep>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    )


@cache
def qwen3_with_seed_markers() -> Tokenizer:
    """Qwen3's vocabulary plus Seed-OSS's markers as tokens (single tokens in Seed's too)."""
    return qwen3_with_tokens(*SEED_MARKERS)


@cache
def qwen3_with_dsml() -> Tokenizer:
    """Qwen3's vocabulary plus ``｜DSML｜`` as one token (as DeepSeek's has it); DSML
    markers are text spanning several tokens."""
    return qwen3_with_tokens("｜DSML｜")


@cache
def qwen3_with_minimax_markers() -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus MiniMax's call-section markers as tokens
    (the invoke and parameter tags are text, as in MiniMax's own vocabulary)."""
    return qwen3_with_tokens(*MINIMAX_MARKERS)


@cache
def qwen3_with_m3_markers() -> Tokenizer:
    """Qwen3's vocabulary plus MiniMax M3's think markers and call namespace as tokens."""
    return qwen3_with_tokens(*M3_MARKERS)


@cache
def qwen3_with_k3_markers() -> Tokenizer:
    """Qwen3's vocabulary plus Kimi K3's three XTML tokens."""
    return qwen3_with_tokens(*K3_MARKERS)


@cache
def qwen3_with_inkling_markers() -> Tokenizer:
    """Qwen3's vocabulary plus Inkling's block markers as tokens (as in Inkling's own)."""
    return qwen3_with_tokens(*INKLING_MARKERS)


@cache
def qwen3_with_llama4_markers() -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus Llama 4's ``<|python_start|>`` and
    ``<|python_end|>`` as tokens that reach the parser as text, as in Meta's files."""
    return qwen3_with_tokens(*LLAMA4_MARKERS)


@cache
def mistral_tekken(array: bool) -> Tokenizer:
    """A tokenizer converted from mistral-common's tekken file (a dev dependency): the
    real one (``array``: pre-v11 calls), else with Magistral's v13 control tokens."""
    import mistral_common

    from app.tokens.bundled import built_once
    from app.tokens.tekken import MAGISTRAL_CONTROLS, write_tekken_tokenizer

    tekken = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    renames = {} if array else MAGISTRAL_CONTROLS
    name = "bench-mistral-v3" if array else "bench-mistral-v13"
    folder = built_once(name, 1, lambda out: write_tekken_tokenizer(tekken, out, renames))
    return load_tokenizer(str(folder))


@cache
def gpt_oss() -> Tokenizer:
    """The bundled gpt-oss tokenizer (o200k_harmony): Harmony is read by its ids."""
    return load_tokenizer("gpt-oss")


@cache
def qwen3_with_plamo3_markers() -> Tokenizer:
    """Qwen3's vocabulary plus PLaMo 3's marker pieces and one-token markers (each of its
    reasoning and call markers is several tokens, as in PLaMo's own)."""
    return qwen3_with_tokens(
        "<|plamo:begin_",
        "<|plamo:end_",
        ":plamo|>",
        "<|plamo:constrain|>",
        "<|plamo:msg|>",
        "<|plamo:tag|>",
    )


@cache
def qwen3_with_response_template() -> Tokenizer:
    """Qwen3's vocabulary with Qwen3's markup as its response template (what vLLM's
    ``hf`` parsers read from a tokenizer's configuration)."""
    tokenizer = copy.copy(qwen3())
    tokenizer.vocabulary = dataclasses.replace(
        tokenizer.vocabulary, response_template=QWEN3_RESPONSE_TEMPLATE
    )
    return tokenizer


def tokenizer_for(tool: str | None, config: str = "") -> Tokenizer:
    """The tokenizer a parser configuration is benched with."""
    if tool == "mistral":
        return mistral_tekken(MISTRAL_ARRAY in config)
    if tool == "openai":
        return gpt_oss()
    if tool in DSML_TOOLS:
        return qwen3_with_dsml()
    if tool == "minimax_m2":
        return qwen3_with_minimax_markers()
    if tool == "llama4_pythonic":
        return qwen3_with_llama4_markers()
    if tool == "kimi_k2":
        return qwen3_with_kimi_markers()
    if tool in ("glm45", "glm47", "ling3"):
        return qwen3_with_glm_markers()
    if tool == "seed_oss":
        return qwen3_with_seed_markers()
    if tool == "inkling":
        return qwen3_with_inkling_markers()
    if tool == "minimax_m3":
        return qwen3_with_m3_markers()
    if tool in ("hy_v3", "hy_v4"):
        return qwen3_with_hy_markers()
    if tool == "plamo3":
        return qwen3_with_plamo3_markers()
    if tool == "kimi_k3":
        return qwen3_with_k3_markers()
    if tool == "jamba":  # its two markers are HY's
        return qwen3_with_hy_markers()
    if tool in ("hf", "beam"):
        return qwen3_with_response_template()
    return qwen3_with_deepseek_markers() if tool in DEEPSEEK_TOOLS else qwen3()


def repeat_to(ids: list[int], unit: list[int], tokens: int) -> list[int]:
    """``ids`` followed by ``unit`` repeated, cut to exactly ``tokens`` ids."""
    count = max(0, tokens - len(ids)) // max(len(unit), 1) + 1
    return (ids + unit * count)[:tokens]


def chat_output(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """Reasoning (3/4), an answer, then tool calls: ``tokens`` ids of one agentic turn."""
    ids = repeat_to(tokenizer.encode("<think>\n"), tokenizer.encode(THOUGHT), tokens * 3 // 4)
    ids += tokenizer.encode("\n</think>\n\n" + ANSWER * 4)
    return repeat_to(ids, tokenizer.encode("\n" + CALL), tokens)


def parser_output(tokenizer: Tokenizer, kind: str, tokens: int) -> list[int]:
    """``tokens`` ids whose long stretch lies where the ``kind`` of configuration works."""
    if kind == "chat":
        return chat_output(tokenizer, tokens)
    head = {
        "reasoning": "",
        "content": "",
        "hermes_call": 'Short thought.\n</think>\n\n<tool_call>\n{"name": "save_note", '
        '"arguments": {"body": "',
        "longcat_call": 'Short thought.\n</think>\n\n<longcat_tool_call>\n{"name": '
        '"save_note", "arguments": {"body": "',
        "seed_call": "Short thought.</seed:think>\n\n<seed:tool_call>\n<function=save_note>\n"
        "<parameter=body>\n",
        "coder_call": "Short thought.\n</think>\n\n<tool_call>\n<function=save_note>\n"
        "<parameter=body>\n",
        "deepseek_v31_call": f'{CALLS_BEGIN}{CALL_BEGIN}save_note{SEP}{{"body": "',
        "deepseek_v3_call": f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}save_note\n```json\n"
        '{"body": "',
        "dsml_v32_call": dsml_call_open("deepseek_v32"),
        "dsml_v4_call": "Short thought.\n</think>\n\n" + dsml_call_open("deepseek_v4"),
        "dsml_v41_call": "Short thought.\n</think>\n\n" + dsml_call_open("deepseek_v41"),
        "harmony_call": HARMONY_THOUGHT + HARMONY_CALL_OPEN + '"',
        "minimax_call": "Short thought.\n</think>\n\n" + MINIMAX_CALL_OPEN,
        "llama4_call": f'{PYTHON_START}[save_note(body="',
        "mistral_call": MISTRAL_THOUGHT + MISTRAL_CALL_OPEN + '"',
        "mistral_array_call": MISTRAL_ARRAY_OPEN + '"',
        "kimi_call": "Short thought.\n</think>\n\n" + KIMI_CALL_OPEN + '"',
        "glm_call": "Short thought.\n</think>\n\n" + GLM_CALL_OPEN,
        "granite_reasoning": "Here is my thought process:\n",
        "inkling_call": INKLING_CALL_OPEN,
        "phi4_call": 'functools[{"name": "save_note", "arguments": {"body": "',
        "m3_call": "Short thought.</mm:think>\n\n" + M3_CALL_OPEN,
        "step3_call": "Short thought.</think><｜tool_calls_begin｜><｜tool_call_begin｜>function"
        '<｜tool_sep｜><steptml:invoke name="save_note">\n<steptml:parameter name="body">',
        "muse_call": " to=self<|message|>Short thought.<|eom|><|start|>assistant to=save_note"
        '<|message|><atem:function_calls>\n<atem:invoke name="save_note">\n'
        '<atem:parameter name="body">',
        "gigachat3_call": 'function call<|role_sep|>\n{"name": "save_note", "arguments": '
        '{"body": "',
        "gemma4_call": GEMMA4_THOUGHT + '<|tool_call>call:save_note{body:<|"|>',
        "granite_array_call": '<tool_call>[{"name": "save_note", "arguments": {"body": "',
        "poolside_call": "<tool_call>save_note\n<arg_key>body</arg_key><arg_value>",
        "granite_fc_call": '<function_call> {"name": "save_note", "arguments": {"body": "',
        "cohere_call": "<|START_THINKING|>Short thought.<|END_THINKING|>" + COHERE_CALL_OPEN + '"',
        "olmo3_call": '<function_calls>\nsave_note(body="',
        "dots_call": '<dots_function_call>\n<invoke name="save_note">\n<parameter name="body">',
        "internlm_call": '<|action_start|><|plugin|>\n{"name": "save_note", "parameters": '
        '{"body": "',
        "functiongemma_call": "<start_function_call>call:save_note{body:<escape>",
        "plamo3_call": "Short thought.<|plamo:end_think:plamo|>" + PLAMO3_CALL_OPEN + '"',
        "minicpm5_call": '<function name="save_note"><param name="body">',
        "kimi_k3_call": "Short thought." + K3_CALL_OPEN,
        "k2_horizon_call": K2H_CALL_OPEN,
        "apertus_call": '<|tools_prefix|>[{"save_note": {"body": "',
        "lfm2_call": "<|tool_call_start|>[save_note(body='",
        "jamba_call": '<tool_calls>[{"name": "save_note", "arguments": {"body": "',
    }[kind]
    return repeat_to(tokenizer.encode(head), tokenizer.encode(SENTENCE), tokens)


def prompt_ids(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """A chat-templated prompt of exactly ``tokens`` ids (a long user turn fills it)."""
    head = tokenizer.encode("<|im_start|>user\nPlan a weekend in Lisbon and book it. ")
    tail = tokenizer.encode("<|im_end|>\n<|im_start|>assistant\n")
    body = repeat_to(head, tokenizer.encode(SENTENCE), max(tokens - len(tail), len(head)))
    return body + tail
