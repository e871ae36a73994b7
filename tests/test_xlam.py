"""xLAM on hostile and unusual output: no exception, no hang, the same message whatever the
chunking, agreement with the one-shot parse where vLLM agrees, and two cases checked
against vLLM 0.33.0 (docs/parity.md).

Deadlines here only catch hangs; speed is measured elsewhere (the linearity run).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.xlam import XlamStream, split_calls
from parsers.registry import ParserFactory
from tests.support.parity import Assembled, chunked
from tests.support.streams import PROMPT, options, run, stream

HOSTILE = settings(
    max_examples=60,
    deadline=60_000,  # a hang detector, not a speed claim
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Pieces of xLAM syntax, block markers and the characters that trip scanners.
PIECES = [
    "[", "]", "{", "}", ":", ",", " ", "\n", '"', "\\", '\\"', "\x0b", "\u3000",
    '"name"', '"arguments"', '"name": "f"', '"arguments": {', '"arguments": {}', '"f"',
    "```", "```json\n", "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "</think>",
    "json", "null", "1e5", "-0", "東京", "👍🏽", "text ",
]  # fmt: skip
PLAIN_STRINGS = ["Paris", 'say "hi"', "a\\b", "</tool_call>", "```", "東京"]
# vLLM's argument pattern ignores strings: a brace in one ends or nests the arguments.
BRACED_STRINGS = ["{x}", "} ]"]
TRAILING = ["", " ", " and then some text", "\nDone.", " {braces}", ' "quotes"']


@st.composite
def call_array(draw: st.DrawFn, strings: list[str] = PLAIN_STRINGS + BRACED_STRINGS) -> str:
    """A call array as xLAM writes it, in any of its wrappings, maybe with text after."""
    calls = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["get_weather", "count", "noop"]),
                st.dictionaries(
                    st.sampled_from(["city", "n", "q"]),
                    st.one_of(st.sampled_from(strings), st.integers(-5, 5)),
                    max_size=2,
                ),
            ),
            min_size=1,
            max_size=3,
        )
    )
    separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
    array = json.dumps(
        [{"name": n, "arguments": a} for n, a in calls],
        ensure_ascii=draw(st.booleans()),
        separators=separators,
    )
    wrapper = draw(
        st.sampled_from(
            [
                "{}",
                "Let me check.\n```json\n{}\n```",
                "<tool_call>{}</tool_call>",
                "[TOOL_CALLS]{}",
                "thinking</think>{}",
                "thinking</think>\n```json\n{}\n```",
            ]
        )
    )
    return wrapper.format(array) + draw(st.sampled_from(TRAILING))


soup = st.lists(st.sampled_from(PIECES), min_size=1, max_size=80).map("".join)
hostile_output = st.one_of(soup, call_array())


def xlam_factory(tokenizer: Tokenizer) -> ParserFactory:
    return ParserFactory("xlam", None, True, tokenizer.vocabulary)


@HOSTILE
@given(output=hostile_output, cuts=st.lists(st.integers(0, 400), max_size=30))
def test_hostile_output_never_raises(tokenizer: Tokenizer, output: str, cuts: list[int]) -> None:
    """Arbitrary syntax soup included. (On soup vLLM's own view of the output jumps between
    blocks from chunk to chunk, so no chunking invariance is claimed for it.)"""
    factory = xlam_factory(tokenizer)
    factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    ids = tokenizer.encode(output)
    for chunks in ([[i] for i in ids], chunked(ids, cuts), [ids]):
        run(tokenizer, factory, options(), chunks, "stop")


@HOSTILE
@given(output=call_array(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_any_chunking_assembles_the_same_message(
    tokenizer: Tokenizer, output: str, cuts: list[int]
) -> None:
    factory = xlam_factory(tokenizer)
    ids = tokenizer.encode(output)
    baseline, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    for chunks in (chunked(ids, cuts), [ids]):
        folded, _ = run(tokenizer, factory, options(), chunks, "stop")
        assert folded == baseline, (output, cuts)


@HOSTILE
@given(output=call_array(PLAIN_STRINGS), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_streams_agree_with_the_one_shot_parse(
    tokenizer: Tokenizer, output: str, cuts: list[int]
) -> None:
    """Where the one-shot parse finds calls and no brace hides in an argument string,
    vLLM's stream finds the same calls; so does ours."""
    factory = xlam_factory(tokenizer)
    ids = tokenizer.encode(output)
    folded, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    if not parsed.tool_calls:
        return
    assert [name for name, _ in folded.calls.values()] == [c.name for c in parsed.tool_calls]
    for (_, streamed), call in zip(folded.calls.values(), parsed.tool_calls, strict=True):
        assert json.loads(streamed) == json.loads(call.arguments)


@HOSTILE
@given(output=hostile_output, cuts=st.lists(st.integers(0, 400), max_size=30), cut=st.integers())
def test_snapshot_and_restore_continue_identically(
    tokenizer: Tokenizer, output: str, cuts: list[int], cut: int
) -> None:
    factory = xlam_factory(tokenizer)
    ids = tokenizer.encode(output)
    chunks = chunked(ids, cuts)
    _, expected = run(tokenizer, factory, options(), chunks, "length")
    deltas = stream(
        tokenizer, factory, options(), chunks, "length", restore_at=cut % (len(chunks) + 1)
    )
    assert deltas == expected


# ------------------------------------------------------------------ deep nesting


def test_deep_nesting_ends_as_content(tokenizer: Tokenizer) -> None:
    depth = 3000
    output = '[{"name": "f", "arguments": ' + "{" * depth + "}" * depth + "}]"
    parsed = xlam_factory(tokenizer).for_request(options()).parse(output, [], "seed")
    assert parsed.tool_calls == []
    assert parsed.content == output
    stream = XlamStream("seed")
    for start in range(0, len(output), 7):
        stream.stream(output[start : start + 7])
    stream.finish()


def test_deep_but_bounded_nesting_still_parses() -> None:
    arguments = {"a": [[[[{"b": 1}]]]]}
    output = json.dumps([{"name": "f", "arguments": arguments}])
    assert split_calls(output) == (None, output)


# ------------------------------------------------------------------ vLLM 0.33.0 cases


def _assemble(tokenizer: Tokenizer, chunks: list[list[int]]) -> Assembled:
    return run(tokenizer, xlam_factory(tokenizer), options(), chunks, "stop")[0]


def test_two_calls_then_text_stream_the_same_whatever_the_chunking(tokenizer: Tokenizer) -> None:
    """vLLM streams the first call's arguments as written with one token per chunk, and
    loses them (or sends them re-serialized) with larger chunks; we send them as written
    in every chunking, and the last chunk settles what no step sent."""
    output = (
        '[{"name":"get_weather","arguments":{"n":3}},'
        '{"name":"count","arguments":{"o":{"a":[1,2]}}}]\nDone.'
    )
    ids = tokenizer.encode(output)
    expected = {0: ["get_weather", '{"n":3}'], 1: ["count", '{"o":{"a":[1,2]}}']}
    sizes = [5, 8, 5, 2, 7, 3, 6, 8, 2, 3, 6, 2, 3, 8]
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    for chunks in ([[i] for i in ids], chunked(ids, bounds), [ids]):
        folded = _assemble(tokenizer, chunks)
        assert folded.calls == expected
        assert folded.content == ""
    # The one-shot parse, like vLLM's, finds no array in it: the text after it breaks it.
    parsed = xlam_factory(tokenizer).for_request(options()).parse(output, [], "seed")
    assert (parsed.content, parsed.tool_calls) == (output, [])


def test_an_array_in_tool_call_tags_leaves_empty_content(tokenizer: Tokenizer) -> None:
    """vLLM 0.33.0 answers content "" (not null) beside the calls of a tagged array."""
    output = '<tool_call>[{"name": "f", "arguments": {"a": 1}}]</tool_call>'
    parsed = xlam_factory(tokenizer).for_request(options()).parse(output, [], "seed")
    assert parsed.content == ""
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("f", '{"a": 1}')]
    ids = tokenizer.encode(output)
    folded = _assemble(tokenizer, [[i] for i in ids])
    assert (folded.content, folded.calls) == ("", {0: ["f", '{"a": 1}']})
