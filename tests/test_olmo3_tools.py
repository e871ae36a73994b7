"""Olmo 3's call lines (``olmo3`` tools): what the shared harnesses do not cover.

The one-shot reading of the lines, the lines the stream stops at, and hostile line
soup streamed in any chunking (the golden corpus, B1 and B2, pins the rest).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.olmo3_tools import Olmo3Tools, Olmo3ToolStream
from parsers.registry import ParserFactory
from tests.support.parity import Assembled, chunked
from tests.support.streams import options, run

CALLS = "<function_calls>\nget_weather(city='Paris', unit=null)\ncount(n=3)\n</function_calls>"


def one_shot(output: str) -> list[tuple[str, dict[str, object]]]:
    found = Olmo3Tools().extract(output, "seed")
    return [(call.name, json.loads(call.arguments)) for call in found.calls]


def test_one_shot_reads_the_marked_lines_and_drops_the_text_around_them() -> None:
    expected = [("get_weather", {"city": "Paris", "unit": None}), ("count", {"n": 3})]
    assert one_shot(CALLS) == expected
    assert one_shot(f"Let me check.\n{CALLS}\nDone.") == expected
    assert one_shot("get_weather(city='Paris')\n\n  count(n=3)  ") == [
        ("get_weather", {"city": "Paris"}),
        ("count", {"n": 3}),
    ]
    prose = "<function_calls>\nI will look it up.\n</function_calls>"
    assert Olmo3Tools().extract(prose, "seed").content == prose


def streamed(pieces: list[str]) -> Assembled:
    stream = Olmo3ToolStream("seed")
    folded = Assembled()
    for piece in pieces:
        folded.add(stream.stream(piece))
    folded.add(stream.finish())
    return folded


@pytest.mark.parametrize(
    ("output", "arguments"),
    [
        (CALLS, ['{"city": "Paris", "unit": null}', '{"n": 3}']),
        # Python refuses an indented line: the calls stop before it.
        (CALLS.replace("\ncount", "\n  count"), ['{"city": "Paris", "unit": null}']),
        # A line break inside brackets parses only before a closer.
        (
            "<function_calls>\nget_weather(city='Paris'\n)\ncount(n=3)",
            ['{"city": "Paris"}', '{"n": 3}'],
        ),
        ("<function_calls>\nget_weather(city='Paris',\nunit='c')\ncount(n=3)", ['{"city": "Paris']),
        # Text after the closing marker, and a tag that is not the opening one.
        (f"{CALLS}\nDone.", ['{"city": "Paris", "unit": null}', '{"n": 3}']),
        ("<tool>\ncount(n=3)\n</tool>", []),
    ],
)
def test_the_stream_reads_the_lines_vllm_can_parse(output: str, arguments: list[str]) -> None:
    folded = streamed(list(output))
    assert [arguments for _, arguments in folded.calls.values()] == arguments
    assert not folded.content


PIECES = [
    "<function_calls>",
    "</function_calls>",
    "<function_",
    "\n",
    "  ",
    "get_weather(",
    "count(n=3)",
    "city=",
    "'Paris'",
    '"東京 👍"',
    "null",
    ", ",
    ",",
    ")",
    "(",
    "[1, ",
    "]",
    "{'k': ",
    "}",
    "<",
    "\\",
    "'",
]


@settings(
    max_examples=25,
    deadline=60_000,  # a hang detector only
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    body=st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_hostile_lines_assemble_the_same_in_any_chunking(
    tokenizer: Tokenizer, body: str, cuts: list[int]
) -> None:
    factory = ParserFactory("olmo3", None, True, tokenizer.vocabulary)
    output = "<function_calls>\n" + body
    factory.for_request(options()).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    by_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    by_cuts, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    assert by_cuts == by_token


@pytest.mark.parametrize(
    "tokens",
    [
        # The token that breaks the lines also closes the call before it.
        ["<function_calls>", "\nget_weather(city='Paris'", ")\n  count", "(n=3)"],
        ["<function_calls>", "\ncount(n=3", ")\n</function_", "calls>", "\nDone."],
    ],
)
def test_a_token_that_breaks_the_lines_sends_nothing_in_any_chunking(tokens: list[str]) -> None:
    def token_text(token_id: int) -> str:
        return tokens[token_id]

    def fold(chunks: list[list[int]]) -> Assembled:
        stream = Olmo3ToolStream("seed", token_text=token_text)
        folded = Assembled()
        for ids in chunks:
            folded.add(stream.stream("".join(tokens[i] for i in ids), ids))
        folded.add(stream.finish())
        return folded

    ids = list(range(len(tokens)))
    assert fold([ids]) == fold([[i] for i in ids])
