"""Kimi K3 (``kimi_k3`` reasoning and tools) on its synthetic tokenizer (K3's three
special tokens): what the golden corpus does not reach. Outputs written as the model
writes them assemble the same message in every chunking and agree with the one-shot
parse; hostile outputs never raise; a snapshot restored at any chunk continues
identically. (Cost: ``python -m bench hostile --configs kimi_k3+kimi_k3``.)"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.kimi_k3_markup import Elements, ElementState, Tag, TagState, first, remove
from parsers.registry import ParserFactory
from parsers.types import ParseOptions
from tests.support.outputs import args, text
from tests.support.parity import chunked, chunking_invariant
from tests.support.streams import PROPS, TOOLS, options, run, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

THINK_END = "<|close|>think<|sep|>"
PIECES = [
    "<|open|>",
    "<|close|>",
    "<|sep|>",
    "think",
    "response",
    "tools",
    "call",
    " ",
    '<|open|>call tool="count" index="1"<|sep|>',
    '<|open|>argument key="n" type="number"<|sep|>',
    "<|close|>argument<|sep|>",
    "<|close|>call<|sep|>",
    THINK_END,
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|open|>tools<|sep|>",
    "Reasoning. ",
    "東京 🌤️",
    "[[{",
    '"',
]
hostile = st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join)
PAIRS = [("kimi_k3", "kimi_k3"), ("kimi_k3", None), (None, "kimi_k3")]
KWARGS = [{}, {"thinking": False}, {"enable_thinking": False}]


@pytest.fixture(scope="module")
def k3(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic Kimi K3 tokenizer."""
    return load_tokenizer(str(write_synthetic_tokenizer("kimi_k3", tmp_path_factory.mktemp("k3"))))


@st.composite
def written(draw: st.DrawFn) -> str:
    """An output as the model writes it: reasoning, a response, typed calls."""
    out = draw(text) + THINK_END
    if draw(st.booleans()):
        out += f"<|open|>response<|sep|>{draw(text)}<|close|>response<|sep|>"
    calls = draw(st.lists(args, max_size=3))
    if calls:
        out += "<|open|>tools<|sep|>"
        for index, (name, arguments) in enumerate(calls, 1):
            out += f'<|open|>call tool="{name}" index="{index}"<|sep|>'
            for key, value in arguments.items():
                kind = "string" if isinstance(value, str) else "number"
                out += (
                    f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}'
                    "<|close|>argument<|sep|>"
                )
            out += "<|close|>call<|sep|>"
        out += "<|close|>tools<|sep|>"
    return out + "<|close|>message<|sep|>"


@settings(PROPS, max_examples=40)
@given(
    output=written(),
    cuts=st.lists(st.integers(0, 200), max_size=12),
    pair=st.sampled_from(PAIRS),
    kwargs=st.sampled_from(KWARGS),
)
def test_written_outputs_stream_as_the_one_shot_parse_in_any_chunking(
    k3: Tokenizer,
    output: str,
    cuts: list[int],
    pair: tuple[str | None, str | None],
    kwargs: dict[str, bool],
) -> None:
    reasoning, tool = pair
    factory = ParserFactory(tool, reasoning, True, k3.vocabulary)
    opts = options(chat_template_kwargs=kwargs)
    ids = k3.encode(output)
    one_token, _ = run(k3, factory, opts, [[i] for i in ids], "stop")
    folded, _ = run(k3, factory, opts, chunked(ids, cuts), "stop")
    # With thinking off the reasoning is text before a late response opener (no claim).
    if chunking_invariant(reasoning, output, tool) and not (kwargs and "<|open|>r" in output):
        assert folded == one_token
    parsed = factory.for_request(opts).parse(output, [], "seed")
    assert folded.reasoning == (parsed.reasoning or "")
    if tool is not None:
        streamed = [folded.calls[index] for index in sorted(folded.calls)]
        assert [name for name, _ in streamed] == [call.name for call in parsed.tool_calls]
        for (_, arguments), call in zip(streamed, parsed.tool_calls, strict=True):
            assert json.loads(arguments) == json.loads(call.arguments)


@settings(PROPS, max_examples=40)
@given(
    output=hostile,
    cuts=st.lists(st.integers(0, 120), max_size=10),
    restore=st.integers(0, 40),
    pair=st.sampled_from(PAIRS),
    kwargs=st.sampled_from(KWARGS),
    choice=st.sampled_from(["auto", "none"]),
)
def test_hostile_output_parses_and_a_restored_snapshot_continues(
    k3: Tokenizer,
    output: str,
    cuts: list[int],
    restore: int,
    pair: tuple[str | None, str | None],
    kwargs: dict[str, bool],
    choice: str,
) -> None:
    reasoning, tool = pair
    factory = ParserFactory(tool, reasoning, True, k3.vocabulary)
    opts = ParseOptions(tools=TOOLS, tool_choice=choice, chat_template_kwargs=kwargs)
    factory.for_request(opts).parse(output, [], "seed")
    chunks = chunked(k3.encode(output), cuts)
    deltas = stream(k3, factory, opts, chunks)
    at = restore % (len(chunks) + 1)
    assert stream(k3, factory, opts, chunks, restore_at=at) == deltas


def test_tags_are_found_as_vllms_patterns_find_them() -> None:
    """Whitespace around the word, a failed candidate restarting at the character that
    failed it, attributes up to the first separator, leftmost elements."""
    tools = Tag("<|open|>", "tools")
    assert first(tools, "x<|open|> tools\n<|sep|>y") == (1, 23)
    assert first(tools, "<|open|>tool<|open|>tools<|sep|>") == (12, 32)
    assert first(tools, "<|open|>toolsx<|sep|>") is None
    assert remove(Tag("<|close|>", "message"), "a<|close|>message<|sep|>b<|close|>message") == (
        "ab<|close|>message"
    )
    calls = Elements.of("call")
    section = (
        '<|open|>call tool="a"<|open|>call tool="b"<|sep|>x<|close|> call <|sep|>'
        "<|open|>calls<|sep|><|open|>call <|sep|>y<|close|>call<|sep|>"
    )
    assert calls.feed(ElementState(), section, 0) == [
        ('tool="a"<|open|>call tool="b"', "x"),
        ("", "y"),
    ]
    # The same, a character at a time.
    state, found = ElementState(), []
    for at, ch in enumerate(section):
        found += calls.feed(state, ch, at)
    assert found == calls.feed(ElementState(), section, 0)
    # A tag split anywhere is found once.
    scan = TagState()
    ends = [tools.scan(scan, piece, at) for at, piece in enumerate("<|open|>tools<|sep|>")]
    assert ends.count(1) == 1 and ends[-1] == 1
