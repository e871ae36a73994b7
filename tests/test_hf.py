"""vLLM's ``hf`` and ``beam`` parsers (the tokenizer configuration's response template):
what the shared harnesses and the golden corpus (X1, X2: Qwen3's markup; X3, X4: Gemma
4's) do not cover.

Start-up refusals, a template with named captures and a JSON dialect (Gemma 4's markup
as a response template) read alike in any chunking, the prompt's part of the message,
and delimiter searches that stay linear on held text.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.examples.response_templates import (
    GEMMA4_RESPONSE_TEMPLATE,
    QWEN3_RESPONSE_TEMPLATE,
    QWEN35_RESPONSE_TEMPLATE,
)
from parsers.families.hf import Prepared, TemplateStream, TemplateStreamState
from parsers.families.response_template import read_template
from parsers.families.template_patterns import PatternError, compile_pattern
from parsers.family import ParserUnavailable
from parsers.registry import ParserConfigError, ParserFactory
from parsers.stream import ChatStreamState
from parsers.types import Delta, ParseOptions, ToolSpec, Vocabulary

WEATHER = ToolSpec(
    "get_weather",
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
)


def _vocab(template: object) -> Vocabulary:
    return Vocabulary({}, response_template=template)  # type: ignore[arg-type]


def _stream(template: dict[str, Any], prompt: str, tools: bool = True) -> TemplateStream:
    stream = TemplateStream(
        Prepared(read_template(template), lambda ids: prompt),
        True,
        tools,
        "seed",
        TemplateStreamState(),
    )
    stream.use_request(ParseOptions(tools=(WEATHER,), tool_choice="auto"))
    stream.continue_prompt([0])
    return stream


def _fold(deltas: list[Delta | None]) -> tuple[str, str, list[tuple[str | None, str | None]]]:
    reasoning = "".join(d.reasoning or "" for d in deltas if d)
    content = "".join(d.content or "" for d in deltas if d)
    calls = [(c.name, c.arguments) for d in deltas if d for c in d.tool_calls]
    return reasoning, content, calls


def test_a_tokenizer_without_a_response_template_stops_the_server() -> None:
    with pytest.raises(ParserConfigError, match="requires `response_template` metadata"):
        ParserFactory("hf", "hf", True, Vocabulary({}))


def test_each_side_needs_its_field() -> None:
    no_thinking = json.loads(json.dumps(QWEN3_RESPONSE_TEMPLATE))
    del no_thinking["fields"]["thinking"]
    with pytest.raises(ParserConfigError, match=r"--reasoning-parser hf requires .* thinking"):
        ParserFactory(None, "hf", True, _vocab(no_thinking))
    ParserFactory("hf", None, True, _vocab(no_thinking))  # the tool side alone is served


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"start_anchor_pattern": "x"}, "cannot specify both"),
        ({"fields": {"tool_calls": {"open": "<a>", "content": "kv-lines"}}}, "not read"),
        ({"fields": {"tool_calls": {"open": "<a>", "content": "xml-inline"}}}, "tag_pattern"),
        ({"fields": {"tool_calls": {"open_pattern": "(?=<a>)<a>"}}}, "group kind"),
        ({"fields": {"tool_calls": {"open_pattern": "<a>{2}"}}}, "counted repeat"),
        ({"fields": {"tool_calls": {"open_pattern": r"\s*"}}}, "matches the empty string"),
        ({"fields": {"tool_calls": {"open": "<a>"}, "answer": {}}}, "unsupported semantic"),
        ({"fields": {"thinking": {"open": "<t>", "content": "json"}}}, "cannot be streamed"),
    ],
)
def test_what_is_not_read_is_refused_at_start_up(change: dict[str, Any], message: str) -> None:
    template = {**QWEN3_RESPONSE_TEMPLATE, **change}
    with pytest.raises(ParserUnavailable, match=message):
        read_template(template)


def test_patterns_outside_the_subset_are_named() -> None:
    for source in (r"a\bb", "a*?", "^a", r"(a)\1"):
        with pytest.raises(PatternError):
            compile_pattern(source)


# vLLM 0.33.0's stream (ResponseTemplateParser) on these outputs, in any chunking.
GEMMA4_CASES = [
    (
        "<|turn>model\n",
        '<|channel>thought\nplan<channel|>Hi<|tool_call>call:get_weather{city:<|"|>Paris, FR<|"|>,'
        "days:2}<tool_call|><|tool_call>call:get_weather{}<tool_call|>done<turn|>",
        (
            "plan",
            "Hidone",
            [("get_weather", '{"city": "Paris, FR", "days": 2}'), ("get_weather", "{}")],
        ),
    ),
    (
        "<|turn>model\n<|channel>thought\n",
        'still thinking<channel|>answer <|tool_call>call:get_weather{days:<|"|>3<|"|>}',
        ("still thinking", "answer ", [("get_weather", '{"days": 3}')]),
    ),
    (
        "<|turn>model\n",
        "x <|tool_call>call:get_weather{bad<tool_call|> y",
        ("", "x  y", []),
    ),
]


@pytest.mark.parametrize(("prompt", "output", "expected"), GEMMA4_CASES)
def test_named_captures_and_a_json_dialect_read_alike_in_any_chunking(
    prompt: str, output: str, expected: Any
) -> None:
    for size in (1, 2, 5, len(output)):
        stream = _stream(GEMMA4_RESPONSE_TEMPLATE, prompt)
        pieces = [output[i : i + size] for i in range(0, len(output), size)]
        deltas = [stream.step(p, [], i == len(pieces) - 1) for i, p in enumerate(pieces)]
        assert _fold(deltas) == expected, size
    parsed = _stream(GEMMA4_RESPONSE_TEMPLATE, prompt).parse(output, [])
    reasoning, content, calls = expected
    assert (parsed[0] or "", parsed[1] or "") == (reasoning, content)
    assert [(c.name, c.arguments) for c in parsed[2]] == calls


# Delimiters behind a run of characters that each may start one, at or past the reader's
# first stretch (64 characters), and vLLM 0.33.0's stream of each (checked with its
# ResponseTemplateParser in every chunking below: it reads them alike).
WINDOW_CASES = [
    ("<|turn>model\n", "x" * 63 + "<<turn|>Paris", ("", "x" * 63 + "<Paris", [])),
    ("<|turn>model\n", "<" * 127 + "<turn|>Paris", ("", "<" * 127 + "Paris", [])),
    ("<|turn>model\n", "<" * 128 + "<turn|>Paris", ("", "<" * 128 + "Paris", [])),
    (
        "<|turn>model\n",
        "<" * 127 + "<|channel>thought\nr<channel|>Paris",
        ("r", "<" * 127 + "Paris", []),
    ),
    (
        "<|turn>model\n",
        "<" * 63 + "<|tool_call>call:get_weather{days:2}<tool_call|>Paris",
        ("", "<" * 63 + "Paris", [("get_weather", '{"days": 2}')]),
    ),
]


@pytest.mark.parametrize(("prompt", "output", "expected"), WINDOW_CASES)
def test_a_delimiter_past_the_first_stretch_reads_alike_in_any_chunking(
    prompt: str, output: str, expected: Any
) -> None:
    for size in (1, 2, 3, 7, 63, 64, 65, len(output)):
        stream = _stream(GEMMA4_RESPONSE_TEMPLATE, prompt)
        pieces = [output[i : i + size] for i in range(0, len(output), size)]
        deltas = [stream.step(p, [], i == len(pieces) - 1) for i, p in enumerate(pieces)]
        assert _fold(deltas) == expected, size


# Outputs with a delimiter (or the start of one) 60 to 70 characters in, or as far past
# the reader's second stretch of 64, behind plain text and a run of characters that each
# start a delimiter's search (a search running at a stretch's end must not skip one).
_TEMPLATES = {
    "gemma4": (
        GEMMA4_RESPONSE_TEMPLATE,
        "<|turn>model\n",
        [
            "<turn|>",
            "<|channel>thought\nr<channel|>",
            "<|tool_call>call:get_weather{days:2}<tool_call|>",
        ],
    ),
    "qwen3": (
        QWEN3_RESPONSE_TEMPLATE,
        "<|im_start|>assistant\n<think>\n",
        [
            "</think>",
            "<|im_end|>",
            '\n<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
        ],
    ),
}


@st.composite
def _window_case(draw: st.DrawFn) -> tuple[str, str, list[int]]:
    name = draw(st.sampled_from(sorted(_TEMPLATES)))
    at = draw(st.integers(60, 70)) + draw(st.sampled_from([0, 64]))
    run = draw(st.integers(0, at))
    head = draw(st.sampled_from("x \n")) * (at - run) + draw(st.sampled_from("<|")) * run
    marker = draw(st.sampled_from(_TEMPLATES[name][2]))
    cut = draw(st.integers(0, len(marker)))
    output = head + marker[:cut] + draw(st.sampled_from(["", "Paris", "<"])) + marker[cut:]
    cuts = draw(st.lists(st.integers(0, len(output)), max_size=12))
    return name, output + "Paris", cuts


@settings(max_examples=150, deadline=None)
@given(generated=_window_case())
def test_any_chunking_reads_a_delimiter_near_the_stretch_end_alike(
    generated: tuple[str, str, list[int]],
) -> None:
    name, output, cuts = generated
    template, prompt, _ = _TEMPLATES[name]

    def read(pieces: list[str]) -> Any:
        stream = _stream(template, prompt)
        return _fold([stream.step(p, [], i == len(pieces) - 1) for i, p in enumerate(pieces)])

    bounds = sorted({0, len(output), *cuts})
    one_char = read(list(output))
    assert read([output]) == one_char
    assert read([output[a:b] for a, b in itertools.pairwise(bounds) if b > a]) == one_char


def test_call_markup_is_content_when_calls_are_not_read() -> None:
    stream = _stream(QWEN3_RESPONSE_TEMPLATE, "<|im_start|>assistant\n", tools=False)
    output = 'a\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>b'
    assert _fold([stream.step(output, [], True)]) == ("", output, [])


def test_a_snapshot_continues_mid_delimiter() -> None:
    output = 'plan</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"days": "4"}}'
    whole = _fold([_stream(QWEN3_RESPONSE_TEMPLATE, "<think>\n").step(output, [], True)])
    for cut in range(1, len(output)):
        first = _stream(QWEN3_RESPONSE_TEMPLATE, "<think>\n")
        deltas = [first.step(output[:cut], [], False)]
        kept = msgspec.msgpack.decode(msgspec.msgpack.encode(first.s), type=TemplateStreamState)
        second = TemplateStream(first.prepared, True, True, "seed", kept)
        second.use_request(ParseOptions(tools=(WEATHER,), tool_choice="auto"))
        deltas.append(second.step(output[cut:], [], True))
        # The output ends inside the call: its region is read as generated (vLLM's too).
        assert _fold(deltas) == whole == ("plan", "", [("get_weather", '{"days": 4}')])


def _seconds(output: str, chunk: int, template: dict[str, Any] = QWEN3_RESPONSE_TEMPLATE) -> float:
    stream = _stream(template, "<|im_start|>assistant\n")
    pieces = [output[i : i + chunk] for i in range(0, len(output), chunk)]
    start = time.process_time()
    for piece in pieces:
        stream.step(piece, [], False)
    stream.step("", [], True)
    return time.process_time() - start


@pytest.mark.parametrize("unit", [" ", "\n\n ", "<tool_cal ", "<think", " <|im_end"], ids=repr)
def test_held_text_costs_what_it_reads(unit: str) -> None:
    """Held white space and partial delimiters are read once, not once per chunk."""
    small, large = (_seconds(unit * n, 7) for n in (1_500, 6_000))
    assert large < 8 * max(small, 0.005)


def test_a_prompt_without_the_anchor_is_read_whole() -> None:
    stream = _stream(QWEN3_RESPONSE_TEMPLATE, "no anchor here <think>")
    assert _fold([stream.step("r</think>c", [], True)]) == ("r", "c", [])


def test_registry_builds_it_from_the_vocabulary() -> None:
    vocab = dataclasses.replace(_vocab(QWEN3_RESPONSE_TEMPLATE), decode=lambda ids: "<think>\n")
    factory = ParserFactory("hf", "hf", True, vocab)
    options = ParseOptions(tools=(WEATHER,), tool_choice="auto")
    parsed = factory.for_request(options).parse("a</think>b", [1], "seed")
    assert (parsed.reasoning, parsed.content) == ("a", "b")
    stream = factory.stream_for_request(options, "seed")
    deltas = [stream.step(t, [0], None, [1])[0] for t in ("a</th", "ink>b")]
    assert _fold(deltas) == ("a", "b", [])


def test_beam_reads_as_hf_and_combines_only_with_itself() -> None:
    vocab = _vocab(GEMMA4_RESPONSE_TEMPLATE)
    options = ParseOptions(tools=(WEATHER,), tool_choice="auto")
    _, output, expected = GEMMA4_CASES[0]
    for name in ("hf", "beam"):
        parsed = ParserFactory(name, name, True, vocab).for_request(options).parse(output, [], "s")
        assert (parsed.reasoning, parsed.content) == expected[:2]
        assert [(c.name, c.arguments) for c in parsed.tool_calls] == expected[2]
    with pytest.raises(ParserConfigError, match="cannot be combined"):
        ParserFactory("hf", "beam", True, vocab)
    no_calls = {
        **GEMMA4_RESPONSE_TEMPLATE,
        "fields": {
            k: v for k, v in GEMMA4_RESPONSE_TEMPLATE["fields"].items() if k != "tool_calls"
        },
    }
    with pytest.raises(ParserConfigError, match="--tool-call-parser beam requires"):
        ParserFactory("beam", None, True, _vocab(no_calls))


@pytest.mark.parametrize("unit", ["<parameter=a>x", "<parameter=a>\n</parameter", "<tool_call> "])
def test_xml_inline_calls_cost_what_they_read(unit: str) -> None:
    """Qwen3.5's calls: parameters that never close, read once when the call does."""
    head = "<tool_call>\n<function=get_weather>\n"
    small, large = (
        _seconds(head + unit * n + "</function></tool_call>", 7, QWEN35_RESPONSE_TEMPLATE)
        for n in (1_000, 4_000)
    )
    assert large < 8 * max(small, 0.005)


def test_a_restored_stream_keeps_what_it_made_of_the_prompt() -> None:
    """The prompt is read once per stream: a stream restored from its snapshot reads on
    inside the reasoning the prompt opened, without reading the prompt again."""
    vocab = dataclasses.replace(_vocab(QWEN3_RESPONSE_TEMPLATE), decode=lambda ids: "<think>\n")
    factory = ParserFactory("hf", "hf", True, vocab)
    options = ParseOptions(tools=(WEATHER,), tool_choice="auto")
    first = factory.stream_for_request(options, "seed")
    deltas = [first.step("plan <thi", [0], None, [1])[0]]
    state = msgspec.msgpack.decode(first.snapshot(), type=ChatStreamState)
    second = factory.stream_for_request(options, "seed", state)
    deltas.append(second.step("nk></think>answer", [0], "stop", [1])[0])
    assert _fold(deltas) == ("plan <think>", "answer", [])
