"""Granite's tool parsers: ``granite4`` (JSON objects in ``<tool_call>`` tags).

The hand-written cases follow vLLM 0.33.0's code for the same outputs (the golden F1
transcripts pin the common ones against its server); where vLLM's stream loses text
depending on the chunking, the cases pin our correction (docs/parity.md,
``granite4-chunk-losses``). Generated outputs are in tests/test_parser_properties.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import run

TOOLS = (ToolSpec("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}}),)
GOOD = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


@pytest.fixture(scope="module")
def granite4(tokenizer: Tokenizer) -> ParserFactory:
    return ParserFactory("granite4", None, True, tokenizer.vocabulary)


@pytest.mark.parametrize(
    "output",
    [
        f"</tool_call>{GOOD}",  # a closing tag with no call open
        f"<tool_call>{GOOD}",  # two openings in a row
        f"<tool_call></tool_call>{GOOD}",  # an empty call
        f"{GOOD}<tool_call>{{",  # a call never closed
        f'{GOOD}<tool_call>{{"name": "get_time"}}</tool_call>',  # no arguments
        '<tool_call>{"name": "get_time", "arguments": null}</tool_call>',
        '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
        f"{GOOD}<tool_call>[1]</tool_call>",  # not an object
        f"{GOOD}<tool_call>{{,}}</tool_call>",  # not JSON
    ],
)
def test_one_shot_keeps_every_call_or_none(granite4: ParserFactory, output: str) -> None:
    parsed = granite4.for_request(options()).parse(output, [], "seed")
    assert parsed.tool_calls == []
    assert parsed.content == output


def test_one_shot_content_is_the_text_outside_the_tags(granite4: ParserFactory) -> None:
    output = f"Checking.\n{GOOD}\n{GOOD.replace('UTC', 'CET')} Done."
    parsed = granite4.for_request(options()).parse(output, [], "seed")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_time", '{"tz": "UTC"}'),
        ("get_time", '{"tz": "CET"}'),
    ]
    assert parsed.content == "Checking.\n\n Done."


def _streamed(tokenizer: Tokenizer, factory: ParserFactory, output: str, cuts: list[int]) -> Any:
    ids = tokenizer.encode(output)
    folded, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    return folded


@pytest.mark.parametrize("cuts", [[], [3], [10**6]])
def test_a_call_without_arguments_ends_what_the_stream_sends(
    tokenizer: Tokenizer, granite4: ParserFactory, cuts: list[int]
) -> None:
    output = f'Hi. {GOOD}<tool_call>{{"name": "get_time"}}</tool_call> later {GOOD} text'
    folded = _streamed(tokenizer, granite4, output, cuts or list(range(1, 200)))
    assert folded.content == "Hi. "
    assert list(folded.calls.values()) == [["get_time", '{"tz": "UTC"}']]


@pytest.mark.parametrize("cuts", [[], [10**6]])
def test_text_sharing_a_chunk_with_a_malformed_call_is_kept(
    tokenizer: Tokenizer, granite4: ParserFactory, cuts: list[int]
) -> None:
    """vLLM loses the whole chunk's delta there; every chunking here sends it."""
    output = f"Before <tool_call>{{,}}</tool_call> after {GOOD}"
    folded = _streamed(tokenizer, granite4, output, cuts or list(range(1, 200)))
    assert folded.content == "Before  after "
    assert list(folded.calls.values()) == [["get_time", '{"tz": "UTC"}']]


def test_a_partial_opening_tag_is_held_and_dropped_at_the_end(
    tokenizer: Tokenizer, granite4: ParserFactory
) -> None:
    assert _streamed(tokenizer, granite4, "a <tool", []).content == "a "
    assert _streamed(tokenizer, granite4, "a <tool b", []).content == "a <tool b"


# ---------------------------------------------------------------- granite (reasoning phrases)

THOUGHT, RESPONSE = "Here is my thought process:", "Here is my response:"


@pytest.fixture(scope="module")
def granite(tokenizer: Tokenizer) -> ParserFactory:
    return ParserFactory(None, "granite", True, tokenizer.vocabulary)


@pytest.mark.parametrize(
    ("output", "reasoning", "content"),
    [
        (f"{THOUGHT} a {RESPONSE} b", " a ", " b"),
        (f"Sure. Here's my thought process:a{RESPONSE}", "a", None),  # anywhere, one-shot
        (f"{THOUGHT} a", None, f"{THOUGHT} a"),  # no response phrase: all content
        ("just text", None, "just text"),
    ],
)
def test_one_shot_finds_the_phrases_anywhere(
    granite: ParserFactory, output: str, reasoning: str | None, content: str | None
) -> None:
    parsed = granite.for_request(options()).parse(output, [], "seed")
    assert (parsed.reasoning, parsed.content) == (reasoning, content)


@pytest.mark.parametrize(
    ("output", "finish", "reasoning", "content"),
    [
        (f"{THOUGHT} a {RESPONSE} b", "stop", " a ", " b"),
        (f"Sure. {THOUGHT} a {RESPONSE} b", "stop", "", f"Sure. {THOUGHT} a {RESPONSE} b"),
        (f"{THOUGHT} a Here is my", "length", " a ", ""),  # a partial phrase is dropped
        (f"{THOUGHT} a He", "length", " a He", ""),  # no Here yet: sent at the end
        ("Here is my", "length", "", ""),  # a partial opening is never sent
    ],
)
@pytest.mark.parametrize("one_chunk", [False, True])
def test_the_stream_reasons_only_from_the_opening_phrase(
    tokenizer: Tokenizer,
    granite: ParserFactory,
    output: str,
    finish: str,
    reasoning: str,
    content: str,
    one_chunk: bool,
) -> None:
    ids = tokenizer.encode(output)
    chunks = [ids] if one_chunk else [[i] for i in ids]
    folded, _ = run(tokenizer, granite, options(), chunks, finish)
    assert (folded.reasoning, folded.content) == (reasoning, content)
