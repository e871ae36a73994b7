"""Gemma 4's argument reader against vLLM's converter, and its streamed arguments.

The expected JSON below is what vLLM 0.33.0's converter gives for each body (read whole,
then partial as a stream reads it); the goldens (A1) cover the markup around calls.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.families import gemma4_args
from parsers.families.gemma4 import Gemma4Markers, Gemma4Tools
from parsers.types import ParseOptions, ToolSpec, Vocabulary

D = '<|"|>'
MARKERS = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|turn>", D)
VOCAB = Vocabulary({t: 1000 + i for i, t in enumerate(MARKERS)}, frozenset(MARKERS))
WEATHER = ToolSpec(
    "get_weather",
    {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "opts": {}}},
)


def _read(body: str, partial: bool) -> str:
    start, end = gemma4_args.body_bounds(body, body.count("("), body.count(")"))
    return json.dumps(gemma4_args.read_fields(body, start, end, partial)[0], ensure_ascii=False)


@pytest.mark.parametrize(
    ("body", "whole", "partial"),
    [
        (f"city:{D}Paris{D},days:3}}", '{"city": "Paris", "days": "3"}', '{"city": "Paris"}'),
        (
            f"a:{{b:1,c:[1,{D}x,y{D},{{d:2}}]}},e:true",
            '{"a": {"b": "1", "c": ["1", "x,y", {"d": "2"}]}, "e": "true"}',
            '{"a": {"b": "1", "c": ["1", "x,y", {"d": "2"}]}}',
        ),
        ("k:1.,j:2", '{"k": "1.", "j": "2"}', "{}"),
        ("k:,j:1", "{}", "{}"),
        (f"{D}q{D}:{D}v", '{"q": "v"}', '{"q": "v"}'),
        ("a:[1,2", '{"a": ["1"]}', '{"a": ["1"]}'),
        (f'a:{D}x<|"|', '{"a": "x<|\\"|"}', '{"a": "x"}'),
        ("n:5)", '{"n": "5"}', "{}"),
        ("n:(5))", '{"n": "(5)"}', "{}"),
    ],
)
def test_bodies_read_as_vllm_reads_them(body: str, whole: str, partial: str) -> None:
    assert (_read(body, False), _read(body, True)) == (whole, partial)


def test_nesting_past_the_limit_keeps_its_text() -> None:
    depth = gemma4_args.MAX_DEPTH
    body = "a:" + "[" * (depth + 3) + "1" + "]" * (depth + 3)
    value = json.loads(_read(body, False))["a"]
    levels = 0
    while isinstance(value, list):
        value, levels = value[0], levels + 1
    assert (levels, value) == (depth, "[[[1]]]")


def _streamed(output: str, cuts: list[int]) -> tuple[str, str]:
    """The arguments a stream of ``output`` (cut at ``cuts``) sends, and one-shot's."""
    options = ParseOptions(tools=(WEATHER,), tool_choice="auto")
    markers = Gemma4Markers(VOCAB)
    stream = Gemma4Tools(markers, options, reasoning_markup_is_text=False, id_seed="s")
    bounds = sorted({0, len(output), *(c % (len(output) + 1) for c in cuts)})
    sent = []
    deltas = [stream.stream(output[a:b], []) for a, b in itertools.pairwise(bounds)]
    for delta in [*deltas, stream.finish()]:
        sent += [c.arguments or "" for c in (delta.tool_calls if delta else [])]
    one_shot = Gemma4Tools(markers, options, reasoning_markup_is_text=False)
    calls = one_shot.extract(output, "s").calls
    return "".join(sent), calls[0].arguments


NESTED = (
    f"<|tool_call>call:get_weather{{city:{D}Par{{is}}, <b>{D},days:3,"
    f"opts:{{deep:true,tags:[{D}a,b{D},2]}}}}<tool_call|>"
)


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, len(NESTED)), max_size=12))
def test_any_chunking_streams_the_one_shot_arguments(cuts: list[int]) -> None:
    streamed, whole = _streamed(NESTED, cuts)
    assert streamed == whole
    assert json.loads(whole) == {
        "city": "Par{is}, <b>",
        "days": 3,
        "opts": {"deep": "true", "tags": ["a,b", "2"]},
    }
