"""Held text that the output can grow without bound costs what each chunk adds.

Each case keeps one parser's held text growing while the markup it waits for never
comes, one long token per chunk (the vocabulary's longest where a tokenizer is at hand,
100 characters elsewhere), and checks that eight times the chunks cost about eight
times as much: a copy or a reading of the whole held text per chunk would make it
about 64 times as much.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import pytest

from app.examples.hostile_tokens import (
    continuation_pair_id,
    longest_blank_tokens,
    longest_tokens,
)
from app.examples.response_templates import QWEN3_RESPONSE_TEMPLATE, QWEN35_RESPONSE_TEMPLATE
from app.tokens.tokenizer import Tokenizer
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
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec, Vocabulary
from tests.support.synthetic_tokenizers import FAMILY_TOKENS
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


# Parsers built by name on a vocabulary of their markers, each fed a head, then the
# same 100 characters per chunk.
_MARKERS = ("<|python_tag|>", "<tool_call>", "</tool_call>")
_VOCAB = Vocabulary(token_ids={marker: 1000 + i for i, marker in enumerate(_MARKERS)})
_SAVE_NOTE = ToolSpec(
    "save_note",
    {"type": "object", "properties": {"body": {"type": "string"}, "n": {"type": "integer"}}},
)
_WORD = "abcdefghij" * 10
_BLANK = " " * 100
_POOLSIDE_CALL = "<tool_call>save_note\n<arg_key>n</arg_key>"


def _named(
    tool: str, head: str, unit: str, tool_choice: str = "auto"
) -> Callable[[str], Callable[[], Step]]:
    """``tool``'s stream fed ``head``, then ``unit`` per chunk."""
    factory = ParserFactory(tool, None, True, _VOCAB)
    options = ParseOptions(tools=(_SAVE_NOTE,), tool_choice=tool_choice)

    def start() -> Step:
        stream = factory.stream_for_request(options, "seed")
        stream.step(head, [1], None, [])
        return lambda: stream.step(unit, [1], None, [])

    return lambda long_text: start


@functools.cache
def _inkling_tokenizer() -> Tokenizer:
    return qwen3_with_tokens(*FAMILY_TOKENS["inkling"])


def _blank_tokens(
    tool: str | None, reasoning: str, tokenizer: Callable[[], Tokenizer], head: str
) -> Callable[[str], Callable[[], Step]]:
    """The pair's stream fed ``head`` a token per chunk, then the vocabulary's longest
    blank token per chunk (as ``bench hostile``'s long blank tokens)."""

    def build(long_text: str) -> Callable[[], Step]:
        vocab = tokenizer()
        factory = ParserFactory(tool, reasoning, True, vocab.vocabulary)
        options = ParseOptions(tools=(_SAVE_NOTE,), tool_choice="auto")
        blank = longest_blank_tokens(vocab, 1)[0]
        text = vocab.decode([blank])

        def start() -> Step:
            stream = factory.stream_for_request(options, "seed")
            for token in vocab.encode(head):
                stream.step(vocab.decode([token]), [token], None, [])
            return lambda: stream.step(text, [blank], None, [])

        return start

    return build


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
    # K2 Horizon holds content while it is only whitespace; its open call group grows
    # by every chunk, empty ones included.
    "k2_horizon: blank content": (_named("k2_horizon", "", _BLANK), 1_000),
    "k2_horizon: blank content, tool_choice none": (
        _named("k2_horizon", "", _BLANK, "none"),
        1_000,
    ),
    "k2_horizon: empty chunks in an open group": (
        _named("k2_horizon", "x<ifm|tool_calls>", ""),
        1_000,
    ),
    # Poolside holds what it reads until the tag it waits for comes.
    "poolside: a name that never ends": (_named("poolside_v1", "<tool_call>", _WORD), 1_000),
    "poolside: a key that never ends": (
        _named("poolside_v1", "<tool_call>save_note\n<arg_key>", _WORD),
        1_000,
    ),
    "poolside: text before a value": (_named("poolside_v1", _POOLSIDE_CALL, _WORD), 1_000),
    "poolside: a value that is no string": (
        _named("poolside_v1", _POOLSIDE_CALL + "<arg_value>", _WORD),
        1_000,
    ),
    "poolside: text after a value": (
        _named("poolside_v1", _POOLSIDE_CALL + "<arg_value>1</arg_value>", _WORD),
        1_000,
    ),
    # The marker engine holds content while it is only whitespace and no call opened.
    "engine: blank content (qwen3_coder)": (_named("qwen3_coder", "", _BLANK), 1_000),
    # xLAM and Llama 3 JSON keep the whole text: it grows in place, never copied.
    "xlam: a string argument": (
        _named("xlam", '[{"name": "save_note", "arguments": {"body": "', _WORD),
        1_000,
    ),
    "llama3_json: a string argument": (
        _named("llama3_json", '{"name": "save_note", "parameters": {"body": "', _WORD),
        1_000,
    ),
    # A reasoning parser holds content while it is only whitespace, and the stream stays
    # with it until reasoning ends: Granite 4.2's ends only once the answer brings
    # something besides newlines, Inkling's never by a token.
    "granite_thinking: blank content after reasoning": (
        _blank_tokens(
            "qwen3_coder",
            "granite_thinking_parser",
            functools.partial(bundled_tokenizer, "qwen3"),
            "Short thought.</think>",
        ),
        1_000,
    ),
    "inkling: blank content after a thinking block": (
        _blank_tokens(
            "inkling",
            "inkling",
            _inkling_tokenizer,
            "<|content_thinking|>Short thought.<|end_message|>",
        ),
        1_000,
    ),
    # The engine's reasoning holds a reasoning delta's trailing whitespace until more
    # reasoning comes: a blank reasoning grows it by every chunk.
    "engine: blank reasoning (kimi_k2)": (
        _blank_tokens(None, "kimi_k2", functools.partial(bundled_tokenizer, "qwen3"), "x"),
        1_000,
    ),
    "engine: blank reasoning held by the tool parser (inkling)": (
        _blank_tokens("inkling", None, _inkling_tokenizer, "<|content_thinking|>x"),
        1_000,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_held_text_costs_linear_time(case: str, long_text: str) -> None:
    """Eight times the chunks cost about eight times as much."""
    build, chunks = CASES[case]
    start = build(long_text)
    start()  # warm: the first stream builds caches
    small = _cost_per_chunk(start, chunks)
    large = _cost_per_chunk(start, 8 * chunks)
    assert large < 2.5 * small, f"{small * 1e6:.1f} then {large * 1e6:.1f} us per chunk"
