"""Held text that the output can grow without bound costs what each chunk adds.

Each case keeps one parser's held text growing, one of the vocabulary's longest tokens
per chunk (the markup a held text waits for never comes): a copy or a reading of the
whole held text per chunk would make the per-chunk cost grow with the stream's length.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import pytest

from app.examples.response_templates import QWEN3_RESPONSE_TEMPLATE, QWEN35_RESPONSE_TEMPLATE
from app.tokenizer import Tokenizer
from bench.hostile import continuation_pair_id, longest_tokens
from parsers.families.deepseek import (
    CALL_BEGIN,
    CALL_FINISH,
    CALLS_BEGIN,
    CALLS_END,
    SEP,
    DeepSeekToolStream,
    deepseek_grammar,
)
from parsers.families.harmony import HarmonyGrammar
from parsers.families.harmony_reader import CONTENT, HarmonyReader, ReaderState
from parsers.families.hermes import HERMES_TAGS, HermesState, HermesStream
from parsers.families.hy_tools import HyToolState, HyToolStream
from parsers.families.response_template import read_template
from parsers.families.template_regions import RegionReader, RegionState
from parsers.types import ParseOptions, ToolSpec
from tests.support.tokenizers import bundled_tokenizer, qwen3_with_tokens

Step = Callable[[], object]


def _cost_per_chunk(start: Callable[[], Step], chunks: int) -> float:
    """CPU seconds per chunk over ``chunks`` steps of a freshly started stream."""
    best = float("inf")
    for _ in range(3):
        step = start()
        began = time.process_time()
        for _ in range(chunks):
            step()
        best = min(best, time.process_time() - began)
    return best / chunks


@pytest.fixture(scope="module")
def long_text() -> str:
    """The longest token of Qwen3's vocabulary that is plain text in any value."""
    tokenizer = bundled_tokenizer("qwen3")
    return tokenizer.token_text(longest_tokens(tokenizer, 1)[0])


# ------------------------------------------------------------------ the cases


@functools.cache
def _deepseek_tokenizer() -> Tokenizer:
    return qwen3_with_tokens(CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_FINISH, SEP)


def _deepseek(head: list[tuple[str, str | None]], unit: str) -> Callable[[], Step]:
    """A V3 stream fed ``head`` (text, and the marker whose id comes with it), then
    ``unit`` per chunk."""
    vocab = _deepseek_tokenizer().vocabulary

    def start() -> Step:
        stream = DeepSeekToolStream(deepseek_grammar(vocab), "seed", fenced=True)
        for text, marker in head:
            stream.stream(text, [vocab.token_ids[marker]] if marker else [1])
        return lambda: stream.stream(unit, [1])

    return start


_NAMED = [(CALLS_BEGIN, CALLS_BEGIN), (CALL_BEGIN, CALL_BEGIN), ("function", None), (SEP, SEP)]


def deepseek_deferred(long_text: str) -> Callable[[], Step]:
    """A marker's id whose text never shows: the text after it waits for that text."""
    return _deepseek([(CALLS_BEGIN, CALLS_BEGIN), ("", CALL_BEGIN)], long_text)


def deepseek_name(long_text: str) -> Callable[[], Step]:
    """A call's name line that never ends."""
    return _deepseek(_NAMED, long_text)


def deepseek_fence(long_text: str) -> Callable[[], Step]:
    """Arguments ending in newlines and backticks that may yet be the closing fence
    (the vocabulary's longest run of them per chunk)."""
    vocab = _deepseek_tokenizer().vocabulary
    texts = (vocab.token_text(i) for i in vocab.token_ids.values())
    fence = max((text for text in texts if set(text) <= set("\n`")), key=len)
    return _deepseek([*_NAMED, ("f\n```json\n{", None)], fence)


def harmony_invalid_bytes(long_text: str) -> Callable[[], Step]:
    """A message's text of bytes that form no character: each token shows one U+FFFD
    and the rest of its bytes wait."""
    tokenizer = bundled_tokenizer("gpt-oss")
    framing = HarmonyGrammar(tokenizer.vocabulary).framing
    # Two lone continuation bytes: one shows, one more waits per token.
    token = continuation_pair_id(tokenizer)

    def start() -> Step:
        reader = HarmonyReader(framing, ReaderState(phase=CONTENT))
        return lambda: reader.process(token)

    return start


def hermes_name(long_text: str) -> Callable[[], Step]:
    """A call's name that never ends."""

    def start() -> Step:
        stream = HermesStream("seed", HermesState(), HERMES_TAGS)
        stream.stream('<tool_call>{"name": "')
        return lambda: stream.stream(long_text)

    return start


def template_name(long_text: str) -> Callable[[], Step]:
    """A response template's call opener whose name never ends (Qwen3.5's markup)."""
    template = read_template(QWEN35_RESPONSE_TEMPLATE)

    def start() -> Step:
        reader = RegionReader(template, {}, RegionState())
        reader.feed("Hi <tool_call><function=")
        return lambda: reader.feed(long_text)

    return start


def template_blank(long_text: str) -> Callable[[], Step]:
    """Whitespace that may lead to a call opener (Qwen3's ``\\s*<tool_call>``)."""
    template = read_template(QWEN3_RESPONSE_TEMPLATE)

    def start() -> Step:
        reader = RegionReader(template, {}, RegionState())
        reader.feed("Hi")
        return lambda: reader.feed(" " * len(long_text))

    return start


def hy_open_value(long_text: str) -> Callable[[], Step]:
    """An open string value, sent as it grows."""
    tool = ToolSpec("f", {"type": "object", "properties": {"a": {"type": "string"}}})
    options = ParseOptions(tools=(tool,), tool_choice="auto")

    def start() -> Step:
        stream = HyToolStream(options, "seed", 7, HyToolState())
        stream.stream("<tool_calls>", [7])
        stream.stream("<tool_call>f<arg_key>a</arg_key><arg_value>", [1])
        return lambda: stream.stream(long_text, [1])

    return start


# Each case and its chunk count: the larger stream has eight times as many.
CASES: dict[str, tuple[Callable[[str], Callable[[], Step]], int]] = {
    "engine: a marker's text never shows (deepseek)": (deepseek_deferred, 1_000),
    "deepseek: a name line that never ends": (deepseek_name, 1_000),
    "deepseek: a run that may be the closing fence": (deepseek_fence, 1_000),
    "harmony: invalid bytes piling up": (harmony_invalid_bytes, 20_000),
    "hermes: a name that never ends": (hermes_name, 1_000),
    "template_regions: a call's name that never ends": (template_name, 30),
    "template_regions: whitespace before an opener": (template_blank, 30),
    "hy_tools: an open string value": (hy_open_value, 1_000),
}


@pytest.mark.parametrize("case", CASES)
def test_held_text_costs_linear_time(case: str, long_text: str) -> None:
    """Eight times the chunks cost about eight times as much."""
    build, chunks = CASES[case]
    start = build(long_text)
    start()  # warm: the first stream builds caches
    small = _cost_per_chunk(start, chunks)
    large = _cost_per_chunk(start, 8 * chunks)
    assert large < 2.0 * small
