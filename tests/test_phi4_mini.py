"""Phi-4-mini JSON tool calls (``phi4_mini_json``): the one-shot reading vLLM 0.33.0 gives
(golden P1 records it on a synthetic tokenizer), and a stream that sends nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.phi4_mini import extract_phi4_mini
from parsers.registry import ParserFactory
from parsers.types import FunctionCall
from tests.support.streams import options, run

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    ("text", "called", "calls", "content"),
    [
        ("Sunny.", False, [], "Sunny."),
        (f"Sure. functools[{CALL}]", True, [("get_weather", '{"city": "Paris"}')], None),
        (
            'functools[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "arguments": "s"}]',
            True,
            [("a", '{"x": 1}'), ("b", '"s"')],
            None,
        ),
        # the first ] after functools[ ends the array, so this one is no JSON
        ('functools[{"name": "a", "arguments": {"x": [1]}}]', True, [], None),
        ('functools[{"name": "a", "arguments": }]', True, [], None),
        ('functools[{"arguments": {}}]', False, [], 'functools[{"arguments": {}}]'),
        ('functools[{"name": 1, "arguments": {}}]', False, [], 'functools[{"name": 1, "arguments": {}}]'),  # noqa: E501
        ('functools[{"name": "a"}]', False, [], 'functools[{"name": "a"}]'),
        ('functools["a"]', False, [], 'functools["a"]'),
        (f"functools[{CALL}", False, [], f"functools[{CALL}"),
        ("functools[" + "[" * 5000 + "]", False, [], "functools[" + "[" * 5000 + "]"),
        ("functools[" + "9" * 5000 + "]", False, [], "functools[" + "9" * 5000 + "]"),
        ("functools[]", True, [], None),
    ],
)  # fmt: skip
def test_one_shot_reads_as_vllm(
    text: str, called: bool, calls: list[tuple[str, str]], content: str | None
) -> None:
    found = extract_phi4_mini(text)
    assert (found.tools_called, found.content) == (called, content)
    assert found.calls == [FunctionCall(name, arguments) for name, arguments in calls]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["functools[", "]", "[", "{", "}", '"name": "a"', '"arguments": ', ", "]),
        max_size=30,
    ).map("".join)
)
def test_hostile_text_never_raises_and_reads_the_first_array(text: str) -> None:
    found = extract_phi4_mini(text)
    if found.tools_called:
        start = text.index("functools[") + len("functools[")
        try:
            members = json.loads("[" + text[start : text.index("]", start)] + "]")
        except ValueError:
            members = []
        assert len(found.calls) == len(members)


def test_the_stream_sends_nothing(tokenizer: Tokenizer) -> None:
    """vLLM's stream returns nothing once the tool parser reads the output."""
    factory = ParserFactory("phi4_mini_json", None, True, tokenizer.vocabulary)
    text = f"Let me check. functools[{CALL}]"
    ids = tokenizer.encode(text)
    folded, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    assert (folded.content, folded.calls) == ("", {})
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert [c.name for c in parsed.tool_calls] == ["get_weather"] and parsed.content is None
