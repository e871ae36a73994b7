"""MiniMax M3 (``minimax_m3``): what the shared harnesses do not cover.

The element reader is checked against what vLLM 0.33.0's converter gave for the same
bodies (nesting, arrays by schema, repeated names, mixed text, malformed and too-deep
elements). Hostile outputs, on the synthetic M3 tokenizer with both parsers, never
raise, and a snapshot restored at any chunk continues identically: vLLM's M3 reasoning
reads the whole text per chunk, so its stream depends on the chunking and only our own
invariants are claimed here (the goldens pin the rest).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.minimax_m3_args import NAMESPACE, read_arguments
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import PROPS, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

NS = NAMESPACE
PROPERTIES = {
    "n": {"type": "integer"},
    "xs": {"type": "array", "items": {"type": "integer"}},
    "o": {"type": "object", "properties": {"k": {"type": "boolean"}}},
    "empty": {"type": "array"},
}
TOOLS = (ToolSpec("count", {"type": "object", "properties": PROPERTIES}),)


def _e(name: str, body: str) -> str:
    return f"{NS}<{name}>{body}{NS}</{name}>"


def _nested(depth: int) -> str:
    return f"{NS}<d>" * depth + "x" + f"{NS}</d>" * depth


# Bodies and what vLLM 0.33.0's MiniMax M3 converter made of them.
READINGS = [
    (
        "\n" + _e("n", "7") + "\n" + _e("xs", _e("item", "1") + _e("item", "2")) + "\n",
        {"n": 7, "xs": [1, 2]},
    ),
    (
        _e("o", _e("k", "true") + " mixed " + _e("$text", "t")),
        {"o": {"k": True, "$text": "t", "$$text": " mixed "}},
    ),
    (_e("tag", "a") + _e("tag", "b") + _e("tag", "c"), {"tag": ["a", "b", "c"]}),
    (_e("empty", "  "), {"empty": []}),
    (_e("a", "1") + "junk" + _e("b", "2"), {"a": "1"}),
    (_e("a", "1") + f"{NS}<>x{NS}</>" + _e("b", "2"), {"a": "1"}),
    (_nested(129), {}),
    (_e("a", _e("b", "1") + f"{NS}</c>"), {}),
    (_e("n", "seven"), {"n": "seven"}),
]


@pytest.mark.parametrize(("body", "expected"), READINGS)
def test_bodies_read_as_vllm_reads_them(body: str, expected: dict[str, Any]) -> None:
    assert json.loads(read_arguments(body, PROPERTIES)) == expected


def test_the_deepest_element_vllm_reads_is_read() -> None:
    value: Any = json.loads(read_arguments(_nested(128), {}))
    for _ in range(127):
        value = value["d"]
    assert value == {"d": "x"}


def test_a_storm_of_openers_reads_in_linear_time() -> None:
    """Elements opened and never closed, and openers without a name's end: each body
    is read once, however it is built."""
    for body in (f"{NS}<d>" * 50_000, f"{NS}<" * 50_000, _e("a", "1") * 20_000):
        started = time.perf_counter()
        read_arguments(body, PROPERTIES)
        assert time.perf_counter() - started < 2.0


@pytest.fixture(scope="module")
def m3_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic MiniMax M3 tokenizer."""
    folder = tmp_path_factory.mktemp("m3")
    return load_tokenizer(str(write_synthetic_tokenizer("minimax_m3", folder)))


PIECES = [
    "<mm:think>",
    "</mm:think>",
    "<mm:th",
    "</mm",
    "<",
    ">",
    "Reasoning. ",
    "東京 🌤️",
    "\n",
    f"{NS}<tool_call>",
    f"{NS}</tool_call>",
    f'{NS}<invoke name="count">',
    f"{NS}<invoke name='count'>",
    f"{NS}<invoke name=",
    f"{NS}</invoke>",
    _e("n", "12"),
    _e("xs", _e("item", "1")),
    f"{NS}<o>",
    f"{NS}</o>",
    NS,
    f"{NS}<",
    '{"name": "count"}',
]
outputs = st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join)


@settings(PROPS, max_examples=25)
@given(
    output=outputs,
    cuts=st.lists(st.integers(0, 200), max_size=12),
    restore=st.integers(0, 40),
    mode=st.sampled_from([{}, {"thinking_mode": "enabled"}]),
)
def test_hostile_output_parses_and_a_restored_snapshot_continues(
    m3_tokenizer: Tokenizer, output: str, cuts: list[int], restore: int, mode: dict[str, str]
) -> None:
    factory = ParserFactory("minimax_m3", "minimax_m3", True, m3_tokenizer.vocabulary)
    opts = ParseOptions(tools=TOOLS, tool_choice="auto", chat_template_kwargs=mode)
    factory.for_request(opts).parse(output, [], "seed")
    chunks = chunked(m3_tokenizer.encode(output), cuts)
    expected = stream(m3_tokenizer, factory, opts, chunks)
    at = restore % (len(chunks) + 1)
    assert stream(m3_tokenizer, factory, opts, chunks, restore_at=at) == expected
