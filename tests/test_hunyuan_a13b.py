"""Hunyuan-A13B (``hunyuan_a13b``): what the shared harnesses do not cover.

vLLM's one-shot readings are backtracking patterns; ours are ``str.find`` scans, checked
here against those patterns on generated texts. vLLM's streamed reasoning takes one
token per chunk (any other chunk is a 400 there), so its golden (U1) is one token per
chunk; ours reads any chunk a token at a time, checked here on Llama 3.1's vocabulary
(A13B's marker ids) against one token per chunk, with a snapshot restored mid-stream.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.hunyuan_a13b import extract_a13b, split_block
from tests.support.llama_tokenizers import llama_tokenizer_dir
from tests.support.parity import chunked
from tests.support.streams import factory_for, options, run, stream

# vLLM's patterns (HunyuanA13BReasoningParser, HunyuanA13BToolParser).
_FULL = re.compile(r"(?:<think>\n(.*?)\n</think>\n<answer>\n)?(.*?)\n</answer>", re.DOTALL)
_HALF = re.compile(r"<think>\n(.*?)\n</think>\n<answer>\n(.*)", re.DOTALL)
_BLOCK = re.compile(r"<tool_calls>([\s\S]*?)</tool_calls>", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)

PIECES = ["<think>\n", "\n</think>\n<answer>\n", "\n</answer>", "<think>", "</think>", "\n"]
PIECES += ["<tool_calls>", "</tool_calls>", "[]", '[{"name": "f", "arguments": {}}]', "x", " "]
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
EXAMPLES = settings(max_examples=25, deadline=None)


def vllm_split(text: str) -> tuple[str | None, str | None]:
    found = _FULL.findall(text)
    if found:
        reasoning, content = found[0]
        return reasoning or None, content or None
    found = _HALF.findall(text)
    if found:
        reasoning, content = found[0]
        content = content.removesuffix("\n</answer>")
        return reasoning or None, content or None
    return None, text


def vllm_block(text: str) -> tuple[str, str] | None:
    for match in _BLOCK.finditer(text):
        start, end = match.span()
        spans = [m.span() for m in _THINK.finditer(text)]
        if not any(start > a and end < b for a, b in spans):
            body = match.group(1).strip()
            try:
                json.loads(body)
            except ValueError:
                continue
            return text[:start], body
    return None


@EXAMPLES
@given(text=texts)
def test_the_reasoning_split_reads_as_vllms_patterns(text: str) -> None:
    assert extract_a13b(text) == vllm_split(text)


@EXAMPLES
@given(text=texts)
def test_the_call_block_is_the_one_vllms_loop_finds(text: str) -> None:
    assert split_block(text) == vllm_block(text)


@pytest.fixture(scope="module")
def llama3() -> Tokenizer:
    return load_tokenizer(str(llama_tokenizer_dir("llama3")))


TURNS = [
    "<think>\nThe user wants 17 × 23.\n</think>\n<answer>\n391.\n</answer><|eot_id|>",
    "<think>\n\n</think>\n<answer>\n391.\n</answer><|eot_id|>",
    "<think>\nPlan 東京 🗼.\n</think>\n<answer>\n<tool_calls>"
    '[{"name": "get_weather", "arguments": {"city": "東京"}}]</tool_calls>\n</answer><|eot_id|>',
    "<think>\nA run that breaks: </think> and \n</think>\n<answers\n more.",
    "No think block at all.",
]


@settings(max_examples=20, deadline=None)
@given(turn=st.sampled_from(TURNS), cuts=st.lists(st.integers(0, 80), max_size=12))
def test_any_chunking_reasons_as_one_token_per_chunk(
    llama3: Tokenizer, turn: str, cuts: list[int]
) -> None:
    factory = factory_for(llama3, "hunyuan_a13b", "hunyuan_a13b")
    ids = llama3.encode(turn)
    by_token, _ = run(llama3, factory, options(), [[i] for i in ids], "stop")
    by_cuts, deltas = run(llama3, factory, options(), chunked(ids, cuts), "stop")
    assert by_cuts == by_token
    restored = stream(llama3, factory, options(), chunked(ids, cuts), "stop", restore_at=1)
    assert restored == deltas


def test_reasoning_and_a_call_come_apart_as_in_the_golden(llama3: Tokenizer) -> None:
    factory = factory_for(llama3, "hunyuan_a13b", "hunyuan_a13b")
    ids = llama3.encode(TURNS[2])
    folded, _ = run(llama3, factory, options(), chunked(ids, [7, 19]), "stop")
    assert folded.reasoning == "Plan 東京 🗼.\n"
    assert folded.content == ""
    assert list(folded.calls.values()) == [["get_weather", '{"city": "東京"}']]
