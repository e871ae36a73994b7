"""dots tool calls (``dots``): what the shared harnesses do not cover.

Typed ``<parameter>`` values and the blocks vLLM drops, one-shot; hostile block soup
streamed in any chunking (the golden corpus, B3, pins the rest).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.dots import DotsTools
from parsers.registry import ParserFactory
from parsers.types import ToolSpec
from tests.support.parity import chunked
from tests.support.streams import options, run

WEATHER = ToolSpec(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "temp": {"type": "number"},
            "hourly": {"type": "boolean"},
            "unit": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Unit"}]},
        },
        "$defs": {"Unit": {"type": "string"}},
    },
)


def test_parameters_are_typed_by_the_schema_and_undeclared_calls_dropped() -> None:
    output = (
        "Checking.\n<dots_function_call>\n<invoke name='get_weather'>"
        '<parameter name=city> 42 </parameter><parameter name="days">3</parameter>'
        '<parameter name="temp">2.0</parameter><parameter name="hourly">1</parameter>'
        '<parameter name="unit">12</parameter><parameter name="extra">[1, "a"]</parameter>'
        '</invoke>\n<invoke name="nope"></invoke>\n</dots_function_call>'
    )
    found = DotsTools((WEATHER,)).extract(output, "seed")
    assert found.content == "Checking."
    [call] = found.calls
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {
        "city": "42",
        "days": 3,
        "temp": 2,
        "hourly": True,
        "unit": "12",
        "extra": '[1, "a"]',  # not in the schema: a string
    }
    unknown = '<dots_function_call>\n<invoke name="nope"></invoke>\n</dots_function_call>'
    assert DotsTools((WEATHER,)).extract(unknown, "seed").content == unknown


PIECES = [
    "<dots_function_call>",
    "</dots_function_call>",
    "<dots_",
    '<invoke name="count">',
    "<invoke name=",
    "</invoke>",
    '<parameter name="n">',
    "</parameter>",
    '{"name": "count", "arguments": {"n": 3}}',
    "{",
    "}",
    '"',
    "\\",
    "\n",
    " ",
    "3",
    "text",
]


@settings(
    max_examples=25,
    deadline=60_000,  # a hang detector only
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    output=st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_hostile_blocks_give_the_same_calls_in_any_chunking(
    tokenizer: Tokenizer, output: str, cuts: list[int]
) -> None:
    """The calls: content depends on the chunking where vLLM's does (a closing marker
    outside a block is taken out of the chunk's text only when a reading ends there)."""
    factory = ParserFactory("dots", None, True, tokenizer.vocabulary)
    factory.for_request(options()).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    by_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    by_cuts, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    assert by_cuts.calls == by_token.calls
