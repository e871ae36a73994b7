"""Golden transcripts from vLLM 0.33.0 and the rules for comparing against them.

The corpus (tests/golden/) holds requests with the replies vLLM's own derender server
gave: the Qwen3 configurations C1-C7 (a copy of shared/golden), the DeepSeek ones
D1-D7, gpt-oss's G1 and the Llama ones L1-L3 (recorded by scripts/record_golden.py). A
case is replayed through our app with our own ``stream_state`` threaded between calls,
then compared after normalizing what is allowed to differ: ``created`` and the random
part of tool-call ids.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.support.llama_tokenizers import llama_tokenizer_dir
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer
from tests.support.tekken_tokenizers import tekken_tokenizer_dir

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"

# Streams where vLLM 0.33.0's chunks corrupt the message and ours deliberately
# differ, with the classes of docs/parity.md each one shows (tests/test_golden.py
# checks the names against that table): a literal <think> leaking into reasoning, an
# outer brace leaking into malformed hermes arguments, xLAM arguments sent twice or
# lost and xLAM block text leaking into content, DeepSeek text lost in multi-token
# chunks.
_TWICE, _LEAK, _LOST = "xlam-arguments-twice", "xlam-block-leak", "xlam-lost-calls"
DEVIATIONS: dict[str, tuple[str, ...]] = {
    "C1.tool_malformed_json/chat_stream#t1": ("hermes-malformed-brace",),
    "C1.tool_malformed_json/chat_stream#t3": ("hermes-malformed-brace",),
    "Q1.malformed_arguments/chat_stream#t1": ("hermes-malformed-brace",),
    **{
        f"{scenario}/chat_stream#{chunking}": ("deepseek-think-leak",)
        for scenario in (
            "C2.reason_answer", "C2.tool_without_end_think", "C2.n2_logprobs",
            "C2.parallel_tools", "C2.emoji_reasoning", "D6.explicit_think_start",
            "Q1.explicit_think_start", "Q2.explicit_think_start",
            "V1.explicit_think_start",
        )
        for chunking in ("t3", "r16")
    },
    **{
        f"C4.{scenario}/chat_stream#{chunking}": classes
        for scenario, chunkings, classes in (
            ("json_array_single", ("t3", "r16"), (_TWICE,)),
            ("json_array_parallel", ("t3", "r16"), (_TWICE,)),
            ("json_array_same_twice", ("t3", "r16"), (_TWICE,)),
            ("json_codeblock", ("t1",), (_LEAK,)),
            ("json_codeblock", ("t3", "r16"), (_LEAK, _TWICE)),
            ("zero_args", ("r16",), (_TWICE,)),
            ("think_then_json", ("t1", "r16"), (_LEAK, _TWICE)),
            ("think_then_json", ("t3",), (_LEAK,)),
            ("malformed_json", ("t3", "r16"), (_LOST,)),
        )
        for chunking in chunkings
    },
    **{
        f"{config}.{scenario}/chat_stream#{chunking}": ("deepseek-multi-token-chunk",)
        for config, scenario, chunkings in (
            ("D1", "reason_two_calls", ("r16",)),
            ("D1", "content_then_call_no_thinking", ("t3", "r16")),
            ("D1", "malformed_arguments", ("r16",)),
            ("D1", "multibyte", ("r16",)),
            ("D2", "reason_two_calls", ("r16",)),
            ("D2", "content_then_call_no_thinking", ("t3", "r16")),
            ("D2", "malformed_arguments", ("t3", "r16")),
            ("D2", "multibyte", ("t3", "r16")),
            ("N1", "reason_two_calls", ("r16",)),
            ("N1", "content_then_call_no_thinking", ("t3", "r16")),
            ("N1", "malformed_arguments", ("t3", "r16")),
            ("N1", "multibyte", ("t3", "r16")),
        )
        for chunking in chunkings
    },
    **{
        f"F1.malformed_arguments/chat_stream#{chunking}": ("granite4-chunk-losses",)
        for chunking in ("t3", "r16")
    },
    **{
        f"F2.{scenario}/chat_stream#{chunking}": ("granite-phrase-chunks",)
        for scenario, chunkings in (
            ("reason_answer", ("t1", "t3", "r16")),
            ("reasoning_only_length", ("t1", "t3", "r16")),
            ("cut_in_response_phrase", ("t1", "t3", "r16")),
            ("contracted_phrases", ("r16",)),
            ("here_in_reasoning", ("r16",)),
            ("n2_logprobs", ("r16",)),
            ("usage_chunk", ("r16",)),
        )
        for chunking in chunkings
    },
    **{
        f"F3.{scenario}/chat_stream#r16": ("granite-phrase-chunks",)
        for scenario in ("reason_one_call", "tool_choice_required", "tool_choice_none")
    },
    **{
        f"{scenario}/chat_stream#{chunking}": ("hunyuan-a13b-list-opener",)
        for scenario, chunkings in (
            *((f"U1.{name}", ("t1",)) for name in (
                "reason_one_call", "reason_two_calls", "compact_two_calls",
                "malformed_arguments", "call_cut_length", "multibyte", "n2_logprobs",
                "usage_chunk",
            )),
            ("U2.one_call", ("t1", "t3", "r16")),
            ("U2.two_calls", ("t1", "t3")),
            ("U2.bare_list_two_calls", ("t1",)),
            ("U2.malformed_arguments", ("t1", "t3", "r16")),
            ("U2.call_cut_length", ("t1", "t3", "r16")),
            ("U2.multibyte", ("t1", "t3", "r16")),
            ("U2.n2_logprobs", ("t1", "t3")),
            ("U2.usage_chunk", ("t1", "t3", "r16")),
        )
        for chunking in chunkings
    },
    "U2.two_calls/chat_stream#r16": ("hunyuan-a13b-list-opener", _LOST),
    # HY-V3 and HY-V4 read reasoning with deepseek_r1's code
    **{
        f"{config}.explicit_think_start/chat_stream#{chunking}": ("deepseek-think-leak",)
        for config in ("U3", "U4", "U5")
        for chunking in ("t3", "r16")
    },
    **{
        f"B2.{scenario}/chat_stream#r16": ("pythonic-cut-list",)
        for scenario in ("indented_line", "text_after_closing")
    },
}  # fmt: skip
# Scenarios whose streams vLLM 0.33.0 assembles differently per chunking and we
# reproduce byte for byte (docs/parity.md, "Chunk-dependent classes we reproduce").
CHUNK_DEPENDENT = {
    # Inkling's reasoning alone: the switching chunk's markers are consumed by its engine
    "I2.end_sampling": "qwen3-switch-chunk",
    "S2.malformed_arguments": "mistral-array-json-error",
    # malformed JSON in a llama3_json call streams the difference between successive
    # partial readings, and the final text has no reading to settle from
    "L1.malformed_arguments": "llama3-json-malformed-arguments",
    # a llama3_json call cut short sends what its last two readings agree on, and all
    # of the last one's arguments when the last chunk's step sends a piece of them
    "L1.call_cut_length": "llama3-json-cut-call",
    # a granite4 call with null arguments gets "null" on the last chunk only if that
    # chunk carries a tool-call delta
    "F1.null_arguments": "granite4-null-arguments",
    # olmo3 reads its markers as text, chunk by chunk: where they fall against the chunk
    # boundaries decides what is reasoning, content, or never sent
    # granite-20b-fc holds output that may become its opener, then sends only the chunk
    # that shows it is not: the held text is lost
    "H4.opener_prefix": "granite-fc-held-opener",
    **{
        f"O1.{scenario}": "olmo3-text-markers"
        for scenario in (
            "call_markup_stays_content", "ends_in_marker_piece", "text_before_think",
            "two_think_ends",
        )
    },
    # ernie45 reads each chunk on its own: newlines, response tags and a <think> go or stay
    # by where the chunk boundaries fall (and a call that does not read ends the stream)
    **{
        scenario: "ernie45-chunk-reading"
        for scenario in (
            "E1.enable_thinking_false", "E1.explicit_think_start", "E1.malformed_then_call",
            "E1.markup_without_object", "E1.response_block", "E1.response_then_call",
            "E1.text_after_calls", "E2.explicit_think_start", "E2.response_block",
            "E5.malformed_then_call", "E5.markup_without_object", "E5.newlines_then_call",
            "E5.response_then_call", "E5.three_calls",
        )
    },
    # step3's calls take one step per chunk, and the last chunk's call delta gets "{}"
    **{
        f"E3.{scenario}": "step3-steps"
        for scenario in (
            "block_never_closed", "content_then_call_no_thinking", "enable_thinking_false",
            "multibyte", "n2_logprobs", "no_parameters", "other_call_type", "reason_one_call",
            "reason_two_calls", "typed_values", "unknown_tool", "usage_chunk",
        )
    },
    # gigachat3 sends a chunk's text as content until the opener is in the text, so how
    # much of ``function call<|role_sep|>`` and the JSON after it leaks depends on chunks
    "J5.call_only": "gigachat3-opener-chunk",
    # hy_v4 sends arguments by length: an open value that never pairs streams as far as
    # the chunks let it
    "U5.malformed_arguments": "hy-length-diff",
    # olmo3 reasoning reads B1's markers as text too: every stream with an answer after
    # its reasoning
    **{
        f"B1.{scenario}": "olmo3-text-markers"
        for scenario in (
            "closing_paren_next_line", "content_then_call", "indented_line", "json_literals",
            "malformed_arguments", "multibyte", "n2_logprobs", "reason_one_call",
            "reason_two_calls", "text_after_closing", "two_calls_one_line", "unknown_tool",
            "usage_chunk",
        )
    },
    # internlm holds text from <|action_start|> until the whole marker is in, sends the first
    # arguments up to the chunk's text, and fails the stream at a second marker
    **{
        f"E6.{scenario}": "internlm-chunk-reading"
        for scenario in ("call_cut_length", "no_arguments", "other_action", "two_calls")
    },
    # functiongemma drops the text that shares a chunk with <start_function_call> or follows
    # <end_function_call> in its chunk, and never names a call whose `{` comes with its end
    **{
        f"T1.{scenario}": "functiongemma-chunk-reading"
        for scenario in (
            "call_cut_length", "content_then_call", "multibyte", "no_arguments",
            "text_after_call",
        )
    },
    # plamo3 fails the stream at the chunk that brings arguments before any name
    "P2.arguments_before_name": "plamo3-failed-stream",
    "P4.arguments_before_name": "plamo3-failed-stream",
    # minicpm5 reads the whole text again each chunk from where it stopped: the start of a
    # call tag goes out as content until "<function" is whole, one closed block per chunk
    **{
        f"M4.{scenario}": "minicpm5-chunk-reading"
        for scenario in (
            "alias", "arguments_wrapper", "call_cut_length", "cdata_and_entities",
            "collapsed_tags", "content_then_call", "cut_in_name", "duplicate_param",
            "function_prefix_text", "missing_required", "multibyte", "n2_logprobs",
            "not_xml_fallback", "one_call", "param_without_name", "properties_wrapper",
            "set_literal", "text_after_call", "think_then_call", "two_calls", "typed_values",
            "unknown_tool", "usage_chunk",
        )
    },
    # apertus sends a block chunk's content only with a call piece, holds a possible marker
    # start, and cuts each reading's arguments: where chunk boundaries fall decides
    **{
        f"T6.{scenario}": "apertus-chunk-reading"
        for scenario in ("call_cut_length", "content_then_call", "multibyte", "no_suffix")
    },
    # lfm2 reads the list again each chunk and slices its JSON by what was sent: a string
    # whose quotes nest, or a call cut short, sends what its chunks' readings let through
    **{f"T5.{scenario}": "lfm2-chunk-reading" for scenario in ("call_cut_length", "nested_quotes")},
    # jamba loses the text before <tool_calls> in the marker's chunk, sends the first
    # arguments up to the chunk's text (none while that text is not in their dump), and
    # then the middle two readings do not share
    **{
        f"T3.{scenario}": "jamba-chunk-reading"
        for scenario in (
            "arguments_not_object", "call_cut_length", "compact_json", "content_then_call",
            "multibyte",
        )
    },
}  # fmt: skip
CONTEXT_FIELDS = ("prompt_tokens", "prompt_token_ids", "chat_request", "completion_request")

# A call's answer: its status, its decoded body, and the body's ``stream_state`` as the
# bytes it came in (None when it has none), for a client that sends them back verbatim.
Answer = tuple[int, Any, bytes | None]
Post = Callable[[str, bytes, str], Answer]
# How a client sends back the state a reply carried: the bytes as they came (as
# app/transports/client.py does), or decoded and re-encoded with ``json.dumps`` defaults
# (as a ``requests`` or ``aiohttp`` user does). The app answers both without a decode.
Echo = Literal["verbatim", "json.dumps"]


def load_cases(config: str) -> list[dict[str, Any]]:
    with gzip.open(GOLDEN_DIR / f"golden-{config}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def flags_of(case: dict[str, Any]) -> tuple[str, ...]:
    return tuple(case["server_flags"])


# The bundled tokenizer each family's transcripts were recorded with, by the first
# letter of the configuration.
_TOKENIZERS = {"C": "qwen3", "D": "deepseek", "G": "gpt-oss"}
# Families recorded with a synthetic tokenizer (tests/support/synthetic_tokenizers.py).
_SYNTHETIC = {
    "M": "minimax_m2",
    "K": "kimi_k2",
    "Z": "glm45",
    "Q": "longcat",
    "Y": "seed_oss",
    "F": "granite",
    "I": "inkling",
    "V": "poolside",
}
# Test tokenizers built from packages: Llama's from llama-models, Mistral's (S) from
# mistral-common's tekken file, by configuration.
_LLAMA_FAMILIES = {"L1": "llama3", "L2": "llama4", "L3": "llama3", "U1": "llama3", "U2": "llama3"}
_TEKKEN_TOKENIZERS = {"S1": "mistral_v13", "S2": "mistral_v3"}
# Configurations recorded with a bundled tokenizer other than their letter's.
_BUNDLED_BY_CONFIG = {"N1": "deepseek"}
# Synthetic tokenizers chosen by configuration rather than by letter.
_SYNTHETIC_BY_CONFIG = {
    "N2": "nemotron_v3",
    "P1": "phi4_mini",
    "O1": "olmo3",
    "W1": "glm45",
    "W2": "minimax_m3",
    "W3": "minimax_m3",
    "W4": "nemotron_v3",
    "W5": "k2_horizon",
    "E1": "ernie45",
    "E2": "ernie45",
    "E3": "step3",
    "E4": "step3",
    "E5": "ernie45",
    **dict.fromkeys(("J1", "J2", "J3", "J4"), "muse"),
    "J5": "gigachat3",
    "A1": "gemma4",
    "A2": "nemotron_v3",
    "A3": "granite",
    **dict.fromkeys(("H1", "H2", "H3"), "cohere"),
    "H4": "nemotron_v3",
    "H5": "poolside",
    "U3": "hy",
    "U4": "hy",
    "U5": "hy",
    "U6": "hy",
    "B1": "olmo3",
    "B2": "olmo3",
    "B3": "dots",
    "E6": "internlm2",
    "T1": "functiongemma",
    "P2": "plamo3",
    "P3": "plamo3",
    "P4": "plamo3",
    "M5": "minicpmv",
    "M6": "minicpmv",
    "M4": "nemotron_v3",
    "K2": "kimi_k3",
    "K3": "kimi_k3",
    "K4": "k2_horizon",
    "K5": "kimi_k3",
    "T6": "apertus",
    "T5": "lfm2",
    "T3": "jamba",
    **dict.fromkeys(("X1", "X2"), "hf"),
    **dict.fromkeys(("X3", "X4"), "beam"),
    "X5": "hf_xml",
}


def tokenizer_of(case: dict[str, Any]) -> str:
    """The bundled name or model directory a case's transcript was recorded with."""
    config = case["config"]
    if config in _SYNTHETIC_BY_CONFIG:  # before the letter's (K2 and K3 are Kimi K3's)
        return str(synthetic_model(_SYNTHETIC_BY_CONFIG[config]))
    if config[0] in _SYNTHETIC:
        return str(synthetic_model(_SYNTHETIC[config[0]]))
    if config in _LLAMA_FAMILIES:
        return str(llama_tokenizer_dir(_LLAMA_FAMILIES[config]))
    if config in _TEKKEN_TOKENIZERS:
        return str(tekken_tokenizer_dir(_TEKKEN_TOKENIZERS[config]))
    if config in _BUNDLED_BY_CONFIG:
        return _BUNDLED_BY_CONFIG[config]
    return _TOKENIZERS[config[0]]


# A folder the test run's processes share (tests/conftest.py makes it): each synthetic
# tokenizer is written once per run, not once per pytest-xdist worker (about 2 s each).
SHARED_FOLDER = "DERENDER_TEST_SHARED_DIR"


@functools.cache
def synthetic_model(family: str) -> Path:
    """The family's synthetic tokenizer directory, built once per test run (or process,
    outside one)."""
    shared = os.environ.get(SHARED_FOLDER)
    if shared is None:
        folder = Path(tempfile.mkdtemp(prefix=f"synthetic-{family}-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return write_synthetic_tokenizer(family, folder)
    final = Path(shared) / f"synthetic-{family}"
    if not final.exists():
        # written aside and renamed whole: a worker that loses the race keeps the other's
        written = write_synthetic_tokenizer(family, Path(tempfile.mkdtemp(dir=shared)))
        try:
            written.rename(final)
        except OSError:
            shutil.rmtree(written, ignore_errors=True)
    return final


@dataclass
class Call:
    body: bytes
    content_type: str
    expected: dict[str, Any]
    lane: int | None


def stream_body(case: dict[str, Any], chunk: dict[str, Any], state: Any) -> dict[str, Any]:
    omit = set(case.get("omit") or ())
    body: dict[str, Any] = {"stream": True}
    if case.get("model") is not None and "model" not in omit:
        body["model"] = case["model"]
    body["generate_chunk"] = chunk
    if state is not None:
        body["stream_state"] = state
    for key in CONTEXT_FIELDS:
        if case.get(key) is not None and key not in omit:
            body[key] = case[key]
    return body


_HEAD = ("stream", "model")  # the keys stream_body puts before the chunk


def stream_bodies(case: dict[str, Any]) -> Callable[[dict[str, Any], bytes | None], bytes]:
    """``json.dumps(stream_body(case, chunk, state))``, byte for byte, but for the state,
    given as the JSON to send (None: none); the case's context (its prompt and request,
    the bulk of every body) is encoded once per case."""
    fields = stream_body(case, {}, None).items()
    head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields if k in _HEAD)
    tail = "".join(f", {json.dumps(k)}: {json.dumps(v)}" for k, v in fields if k in CONTEXT_FIELDS)
    opening, closing = f"{{{head}, ".encode(), f"{tail}}}".encode()

    def encode(chunk: dict[str, Any], state: bytes | None) -> bytes:
        kept = b"" if state is None else b', "stream_state": ' + state
        return b'%s"generate_chunk": %s%s%s' % (opening, json.dumps(chunk).encode(), kept, closing)

    return encode


class _ToolIds:
    """Numbers distinct tool-call ids by first appearance, keeping their shape."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value not in self.seen:
            shape = re.sub(r"[0-9a-f]{8,}", lambda m: f"<hex{len(m.group())}>", value)
            if re.fullmatch(r"[A-Za-z0-9]{9}", value):
                shape = "<alnum9>"  # Mistral's ids
            self.seen[value] = f"<tool-id#{len(self.seen)}:{shape}>"
        return self.seen[value]


def _normalize_reply(body: Any, ids: _ToolIds, deltas: bool = True) -> Any:
    """``created`` and tool-call ids made comparable; ``deltas=False`` blanks deltas.
    Copies only what it changes: ``body`` may be a recorded reply, compared again."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    if isinstance(body.get("created"), int) and not isinstance(body["created"], bool):
        body["created"] = "<int>"
    if isinstance(body.get("choices"), list):
        body["choices"] = [_normalize_choice(c, ids, deltas) for c in body["choices"]]
    return body


def _normalize_choice(choice: Any, ids: _ToolIds, deltas: bool) -> Any:
    if not isinstance(choice, dict):
        return choice
    choice = dict(choice)
    for key in ("message", "delta"):
        part = choice.get(key)
        if isinstance(part, dict) and isinstance(part.get("tool_calls"), list):
            calls = [
                call | {"id": ids(call["id"])}
                if isinstance(call, dict) and call.get("id") is not None
                else call
                for call in part["tool_calls"]
            ]
            choice[key] = part | {"tool_calls": calls}
    if not deltas and "delta" in choice:
        choice["delta"] = "<delta>"
    return choice


def _normalize_state(state: Any, ids: _ToolIds) -> Any:
    if isinstance(state, dict) and isinstance(state.get("last_tool_call_ids"), list):
        return state | {"last_tool_call_ids": [ids(x) for x in state["last_tool_call_ids"]]}
    return state


def differences(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Exact comparison: key order, nulls, list lengths, strings byte for byte.

    An expected int must arrive as an int; an expected float may arrive as an int.
    """
    found: list[str] = []
    _differences(expected, actual, path, found)
    return found


def _differences(expected: Any, actual: Any, path: str, found: list[str]) -> None:
    kind = type(expected)
    if kind is type(actual) and (kind is str or kind is int or expected is None):
        if expected != actual:
            found.append(f"{path}: expected {expected!r:.200} got {actual!r:.200}")
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            found.append(f"{path}: expected an object, got {actual!r:.120}")
            return
        if list(expected) != list(actual):
            found.append(f"{path}: keys {list(actual)} != expected {list(expected)}")
        for key in expected:
            if key in actual:
                _differences(expected[key], actual[key], f"{path}.{key}", found)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            found.append(
                f"{path}: expected {json.dumps(expected)[:200]} got {json.dumps(actual)[:200]}"
            )
            return
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _differences(e, a, f"{path}[{i}]", found)
    elif isinstance(expected, bool) or isinstance(actual, bool):
        if expected is not actual:
            found.append(f"{path}: expected {expected!r} got {actual!r}")
    elif isinstance(expected, int | float):
        same_kind = isinstance(actual, int) or (
            isinstance(expected, float) and isinstance(actual, float)
        )
        if not same_kind or float(expected) != float(actual):
            found.append(f"{path}: expected {expected!r} got {actual!r}")
    elif expected != actual or type(expected) is not type(actual):
        found.append(f"{path}: expected {expected!r:.200} got {actual!r:.200}")


def replay(
    case: dict[str, Any], post: Post, deltas: bool | None = None, echo: Echo = "json.dumps"
) -> list[str]:
    """Run every call of a case through ``post`` and list what differs from vLLM, each
    reply's state sent back as ``echo`` says.

    Unless ``deltas`` says otherwise, a documented deviation's deltas are left out of
    the comparison; the rest of each chunk and the final states must still match.
    """
    ids = (_ToolIds(), _ToolIds())  # expected's and ours, numbered independently
    if deltas is None:
        deltas = case["id"] not in DEVIATIONS
    problems: list[str] = []
    endpoint = case["endpoint"]
    if case["kind"].endswith("_stream"):
        states: dict[int, bytes | None] = {}
        encode = stream_bodies(case)
        for i, (chunk, lane, expected) in enumerate(
            zip(case["chunks"], case["lanes"], case["expected"], strict=True)
        ):
            body = encode(chunk, states.get(lane))
            status, reply, sent_back = post(endpoint, body, "application/json")
            problems += _compare_call(expected, status, reply, ids, f"call {i}", deltas)
            if status == 200 and isinstance(reply, dict):
                if echo == "json.dumps":
                    state = reply.get("stream_state")
                    sent_back = None if state is None else json.dumps(state).encode()
                states[lane] = sent_back
        return problems
    raw = case.get("raw_body")
    body = raw.encode() if raw is not None else json.dumps(case["request"]).encode()
    content_type = case.get("content_type", "application/json")
    status, reply, _ = post(endpoint, body, content_type)
    return _compare_call(case["expected"], status, reply, ids, "reply")


def _compare_call(
    expected: dict[str, Any],
    status: int,
    reply: Any,
    ids: tuple[_ToolIds, _ToolIds],
    where: str,
    deltas: bool = True,
) -> list[str]:
    if status != expected["status"]:
        return [f"{where}: status {status} != {expected['status']}: {json.dumps(reply)[:300]}"]
    if status != 200:
        error = reply.get("error", {}) if isinstance(reply, dict) else {}
        want = expected["body"]["error"]
        return [
            f"{where}: error.{key} {error.get(key)!r} != {want[key]!r}"
            for key in ("type", "code")
            if error.get(key) != want[key]
        ]
    if "body" in expected:
        return [
            f"{where}: {d}"
            for d in differences(
                _normalize_reply(expected["body"], ids[0]), _normalize_reply(reply, ids[1])
            )
        ]
    if not isinstance(reply, dict) or list(reply) != ["chunk", "stream_state"]:
        return [f"{where}: reply keys are not exactly chunk, stream_state"]
    problems = [
        f"{where}: {d}"
        for d in differences(
            _normalize_reply(expected["chunk"], ids[0], deltas),
            _normalize_reply(reply["chunk"], ids[1], deltas),
        )
    ]
    if "stream_state" in expected:
        problems += [
            f"{where} state: {d}"
            for d in differences(
                _normalize_state(expected["stream_state"], ids[0]),
                _normalize_state(reply["stream_state"], ids[1]),
            )
        ]
    return problems


def fold_reply(messages: dict[int, dict[str, Any]], reply: dict[str, Any]) -> None:
    """Fold one chat stream reply's deltas into the messages a client assembles,
    per choice index."""
    for choice in reply["chunk"]["choices"]:
        message = messages.setdefault(
            choice["index"], {"content": "", "reasoning": "", "calls": {}}
        )
        delta = choice["delta"]
        message["content"] += delta["content"] or ""
        message["reasoning"] += delta["reasoning"] or ""
        for call in delta.get("tool_calls", []):
            name, arguments = message["calls"].get(call["index"], ("", ""))
            function = call["function"]
            message["calls"][call["index"]] = (
                name or function["name"] or "",
                arguments + (function["arguments"] or ""),
            )
