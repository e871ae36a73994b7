"""Olmo 3 reasoning (``olmo3``): think markers spelled in ordinary tokens, read as text.

The streamed cases are what vLLM 0.33.0's ``Olmo3ReasoningParser`` answered for the
same chunks of text (golden O1 records whole streams on a synthetic tokenizer without
think tokens); generated chunks check that a snapshot restored anywhere continues
identically and that a storm of marker pieces costs what it reads.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.olmo3 import (
    Olmo3Markers,
    Olmo3Reasoning,
    Olmo3ReasoningState,
    extract_olmo3,
    partly_overlaps,
)
from parsers.registry import ParserFactory
from tests.support.streams import PROMPT, options, run
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

Reply = tuple[str | None, str | None] | None

# (chunks of text, vLLM's (reasoning, content) per chunk, None where it sent nothing)
STREAMS: list[tuple[list[str], list[Reply]]] = [
    (
        ["Plan", " it", ".</", "think", ">", "Answer", "."],
        [("Plan", None), (" it", None), None, None, (".", None), (None, "Answer"), (None, ".")],
    ),
    (
        ["Okay. ", "<think>", "Plan.", "</think>", "Done"],
        [("Okay. ", None), ("", None), ("Plan.", None), (None, ""), (None, "Done")],
    ),
    (
        ["a<b", " and ", "c>d", ". ", "</think>", "x"],
        [("a<b", None), (" and ", None), ("c>d", None), (". ", None), (None, ""), (None, "x")],
    ),
    (
        ["<think>", "Plan.</think>First.</think>Second.", " more"],
        [("", None), ("Plan.</think>First.", None), (None, "Second. more")],
    ),
    (["Plan.", "</think>", "Use x ", "</"], [("Plan.", None), (None, ""), (None, "Use x "), None]),
    (["A <think> B <think> C </think> D </think> E", " tail"], [(None, "A "), (None, " B ")]),
    (["", "x", "", "</think>", "y"], [None, ("x", None), None, (None, ""), (None, "y")]),
    (["t", "h", "i", "n", "k", "!"], [None, None, None, None, None, ("think!", None)]),
]


@pytest.fixture(scope="module")
def olmo_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic Olmo 3 tokenizer: Qwen3's vocabulary without its think tokens."""
    return load_tokenizer(str(write_synthetic_tokenizer("olmo3", tmp_path_factory.mktemp("o"))))


def replies(reasoning: Olmo3Reasoning, chunks: list[str]) -> list[Reply]:
    out: list[Reply] = []
    for chunk in chunks:
        delta = reasoning.stream(chunk, [])
        out.append(None if delta is None else (delta.reasoning, delta.content))
    return out


@pytest.mark.parametrize(("chunks", "expected"), STREAMS)
def test_chunks_of_text_stream_as_vllms(
    tokenizer: Tokenizer, chunks: list[str], expected: list[Reply]
) -> None:
    assert replies(Olmo3Reasoning(Olmo3Markers(tokenizer.vocabulary)), chunks) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>Plan.</think>Answer.", ("Plan.", "Answer.")),
        ("Plan.</think>A</think>B", ("Plan.", "A</think>B")),
        ("Okay <think>Plan.</think>", ("Okay <think>Plan.", None)),
        ("</think>", (None, None)),
        ("Plan only", (None, "Plan only")),
    ],
)
def test_one_shot_splits_at_the_first_end(text: str, expected: tuple[str | None, ...]) -> None:
    assert extract_olmo3(text) == expected


def test_overlap_follows_vllms_string_overlap() -> None:
    assert partly_overlaps("", "<think>") and partly_overlaps("in", "<think>")
    assert partly_overlaps("ab<th", "<think>") and partly_overlaps("k> ok", "<think>")
    assert not partly_overlaps("<think>", "<think>") and not partly_overlaps("x<think>y", "<think>")
    assert not partly_overlaps("hello world", "<think>") and not partly_overlaps("x", "<think>")


def test_a_spelled_end_in_the_ids_ends_reasoning_for_the_tool_parser(
    olmo_tokenizer: Tokenizer,
) -> None:
    assert olmo_tokenizer.vocabulary.id_of("<think>") is None
    markers = Olmo3Markers(olmo_tokenizer.vocabulary)
    assert markers.holds_end(olmo_tokenizer.encode("a </think>"))
    assert not markers.holds_end(olmo_tokenizer.encode("\n\n</think>\n\n"))  # ">\n\n" is one
    # ".</" is one token of its own: vLLM's id test misses it, the text test does not
    assert not markers.holds_end(olmo_tokenizer.encode("Plan.</think>"))
    factory = ParserFactory("hermes", "olmo3", True, olmo_tokenizer.vocabulary)
    text = 'Plan </think><tool_call>\n{"name": "count", "arguments": {"n": 1}}\n</tool_call>'
    ids = olmo_tokenizer.encode(text)
    folded, _ = run(olmo_tokenizer, factory, options(), [[i] for i in ids], "stop")
    assert folded.reasoning == "Plan "
    assert [name for name, _ in folded.calls.values()] == ["count"]
    # In one chunk the reading stops at the end marker, and vLLM hands the tool parser
    # no ids and no text of that chunk: the call is lost.
    folded, _ = run(olmo_tokenizer, factory, options(), [ids], "stop")
    assert (folded.reasoning, folded.calls) == ("Plan ", {})


def test_a_prompt_that_spells_the_end_makes_the_output_content(olmo_tokenizer: Tokenizer) -> None:
    factory = ParserFactory(None, "olmo3", True, olmo_tokenizer.vocabulary)
    reasoning = factory.stream_for_request(options(), "seed").reasoning
    assert reasoning is not None
    assert reasoning.is_reasoning_end(olmo_tokenizer.encode(PROMPT + "<think>\nx </think>"))
    assert not reasoning.is_reasoning_end(olmo_tokenizer.encode(PROMPT + "<think>\n"))


PIECES = ["<", ">", "</", "think", "<think>", "</think>", "th", "k>", "a", " ", "Plan.", ""]


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.lists(st.sampled_from(PIECES), max_size=4).map("".join), max_size=30))
def test_a_snapshot_restored_anywhere_continues_identically(
    tokenizer: Tokenizer, chunks: list[str]
) -> None:
    markers = Olmo3Markers(tokenizer.vocabulary)
    expected = replies(Olmo3Reasoning(markers), chunks)
    for cut in range(len(chunks) + 1):
        first = Olmo3Reasoning(markers)
        head = replies(first, chunks[:cut])
        kept = msgspec.msgpack.decode(msgspec.msgpack.encode(first.s), type=Olmo3ReasoningState)
        assert head + replies(Olmo3Reasoning(markers, kept), chunks[cut:]) == expected


def test_a_marker_piece_storm_reads_the_buffer_once(tokenizer: Tokenizer) -> None:
    """Held pieces, then markers galore in one read: the buffer grows by parts and is
    read from a cursor (a rescanning reader would take quadratic time here)."""
    reasoning = Olmo3Reasoning(Olmo3Markers(tokenizer.vocabulary))
    for _ in range(20_000):
        assert reasoning.stream(">", []) is None
    reasoning.stream("x<think>" * 20_000, [])
    out = [reasoning.stream("y", []) for _ in range(20_000)]
    assert all(delta is not None and delta.content == "x" for delta in out[:19_999])
    assert len(reasoning.s.buffer.parts) < 64
