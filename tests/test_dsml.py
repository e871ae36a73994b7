"""DeepSeek's DSML parsers: ``deepseek_v32`` / ``deepseek_v4`` / ``deepseek_v41`` tools and
``deepseek_v4`` / ``deepseek_v41`` reasoning.

Outputs run through a labelled test tokenizer: the bundled Qwen3 vocabulary plus
``｜DSML｜`` as one added token, so DSML markers span several tokens as they do with
DeepSeek's own tokenizer (``<think>`` and ``</think>`` are single tokens in both).
The hand-written cases are what vLLM 0.33.0's derender server answered for the same
outputs with DeepSeek-V4's tokenizer (one-shot, and streams of 1, 3 and random
chunk sizes); generated outputs check chunking, one-shot agreement and restore.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.dsml_args import (
    ArgsState,
    ArgsStream,
    Dialect,
    ParamScan,
    Schema,
    arguments_json,
)
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import Assembled, chunked
from tests.support.streams import PROMPT, PROPS, assemble, stream
from tests.support.tokenizers import qwen3_with_tokens

DSML = "｜DSML｜"
DIALECT = Dialect("<｜DSML｜parameter", "</｜DSML｜parameter>")
TOOLS = (
    ToolSpec(
        "get_weather",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "opts": {"type": "object"},
            },
        },
    ),
    ToolSpec("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}}),
)
WRAPPERS = {"deepseek_v32": "function_calls", "deepseek_v4": "tool_calls", "deepseek_v41": "calls"}
STR, JSON = ' string="true"', ' string="false"'


@pytest.fixture(scope="module")
def dsml_tokenizer() -> Tokenizer:
    """Qwen3's vocabulary with ``｜DSML｜`` added (a test tokenizer)."""
    return qwen3_with_tokens(DSML)


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


def invoke(name: str, params: list[tuple[str, str, str]], spaced: bool = False) -> str:
    tag, close = ("<｜DSML｜ ", "</｜DSML｜ ") if spaced else ("<｜DSML｜", "</｜DSML｜")
    body = "".join(f'{tag}parameter name="{k}"{s}>{v}{close}parameter>\n' for k, s, v in params)
    return f'{tag}invoke name="{name}">\n{body}{close}invoke>\n'


def block(config: str, calls: str) -> str:
    if config == "deepseek_v41":
        return f"<｜DSML｜ calls>\n{calls}</｜DSML｜ calls>"
    wrapper = WRAPPERS[config]
    return f"<｜DSML｜{wrapper}>\n{calls}</｜DSML｜{wrapper}>"


def calls_of(config: str, *calls: tuple[str, list[tuple[str, str, str]]]) -> str:
    return block(config, "".join(invoke(n, p, config == "deepseek_v41") for n, p in calls))


# ------------------------------------------------------------------ one-shot, as vLLM reads


@pytest.mark.parametrize("config", sorted(WRAPPERS))
def test_parameters_become_typed_json(dsml_tokenizer: Tokenizer, config: str) -> None:
    factory = ParserFactory(config, None, True, dsml_tokenizer.vocabulary)
    text = "Sure.\n\n" + calls_of(
        config,
        ("get_weather", [("city", STR, "Paris"), ("days", JSON, "3"), ("opts", STR, '{"x": 1}')]),
        ("get_time", [("tz", STR, "東京 <UTC+9>")]),
    )
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert parsed.content == "Sure.\n\n"  # vLLM keeps the whitespace (no strip with tools)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"city": "Paris", "days": 3, "opts": {"x": 1}}'),
        ("get_time", '{"tz": "東京 <UTC+9>"}'),
    ]


def test_wrappers_unwrap_and_text_after_the_block_is_dropped(dsml_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("deepseek_v32", None, True, dsml_tokenizer.vocabulary)
    wrapped = calls_of(
        "deepseek_v32", ("get_weather", [("arguments", JSON, '{"city": "Rome", "days": "2"}')])
    )
    parsed = factory.for_request(options()).parse(wrapped + "\ntrailing", None, "seed")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"city": "Rome", "days": 2}')
    ]
    assert parsed.content is None
    # No string attribute: JSON if it parses, else the text.
    bare = calls_of("deepseek_v32", ("get_time", [("tz", "", '"UTC"'), ("x", "", "not json")]))
    parsed = factory.for_request(options()).parse(bare, None, "seed")
    assert parsed.tool_calls[0].arguments == '{"tz": "UTC", "x": "not json"}'


def test_v4_reasoning_defaults_to_thinking(dsml_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("deepseek_v4", "deepseek_v4", True, dsml_tokenizer.vocabulary)
    text = "Plan it.\n</think>\n\nDone." + calls_of(
        "deepseek_v4", ("get_time", [("tz", STR, "UTC")])
    )
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("Plan it.", "\n\nDone.")
    assert [c.name for c in parsed.tool_calls] == ["get_time"]
    off = options(chat_template_kwargs={"reasoning_effort": "none"})
    parsed = factory.for_request(off).parse("<think>x</think>Plain", None, "seed")
    assert (parsed.reasoning, parsed.content) == ("x", "Plain")  # <think> still opens it


def test_a_call_inside_reasoning_ends_it(dsml_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("deepseek_v4", "deepseek_v4", True, dsml_tokenizer.vocabulary)
    text = "Plan " + calls_of("deepseek_v4", ("get_weather", [("city", STR, "Paris")]))
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert parsed.reasoning == "Plan"
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"city": "Paris"}')
    ]


# ------------------------------------------------------------------ streams vLLM sent


def test_one_token_per_chunk_streams_as_vllm(dsml_tokenizer: Tokenizer) -> None:
    """vLLM holds a ``"`` that may open ``">``; the name goes when the body starts;
    a string value streams at each ``>``; the object closes at ``</invoke>``."""
    factory = ParserFactory("deepseek_v32", None, True, dsml_tokenizer.vocabulary)
    prefix = 'He said "hi" ok'
    ids = dsml_tokenizer.encode(prefix)
    deltas = stream(dsml_tokenizer, factory, options(), [[i] for i in ids], finish="length")
    pieces = [d.content for d in deltas if d is not None]
    assert "".join(p or "" for p in pieces) == prefix
    assert not any(p and p.endswith('"') for p in pieces)
    text = calls_of("deepseek_v32", ("get_weather", [("city", STR, "a<b>c"), ("days", JSON, "3")]))
    ids = dsml_tokenizer.encode(text)
    deltas = stream(dsml_tokenizer, factory, options(), [[i] for i in ids])
    sent = [c.arguments for d in deltas if d for c in d.tool_calls if c.arguments]
    assert sent[0] == '{"city": "'
    assert "".join(sent) == '{"city": "a<b>c", "days": 3}'
    names = [c.name for d in deltas if d for c in d.tool_calls if c.name]
    assert names == ["get_weather"]


def test_tool_choice_none_with_a_legacy_reasoning_parser_passes_text(
    dsml_tokenizer: Tokenizer,
) -> None:
    """vLLM streams raw text for ``none`` unless both parsers are engine-based."""
    text = "a " + calls_of("deepseek_v32", ("get_time", [("tz", STR, "UTC")]))
    ids = dsml_tokenizer.encode(text)
    none = ParseOptions(tools=TOOLS, tool_choice="none")
    mixed = ParserFactory("deepseek_v32", "deepseek_v3", True, dsml_tokenizer.vocabulary)
    folded = assemble(stream(dsml_tokenizer, mixed, none, [[i] for i in ids]))
    assert folded.content == text
    engine = ParserFactory("deepseek_v32", None, True, dsml_tokenizer.vocabulary)
    folded = assemble(stream(dsml_tokenizer, engine, none, [[i] for i in ids]))
    assert (folded.content, folded.calls) == ("a ", {})


# ------------------------------------------------------------------ the argument decoder


def test_the_parameter_scan_follows_vllms_pattern() -> None:
    raw = (
        '<｜DSML｜parameter name="a">1<｜DSML｜parameter  name="b" string="true">x>y'
        '</｜DSML｜parameter><｜DSML｜parameter name="">z</｜DSML｜parameter>'
        '<｜DSML｜parameter name="c" other="1">w</｜DSML｜parameter>'
    )
    params = ParamScan().advance(raw, DIALECT)
    assert [(p.name, p.is_string, p.value) for p in params] == [
        ("a", False, "1"),  # ended by the next opener
        ("b", True, "x>y"),
    ]


class CountedText(str):
    """Text that counts the characters its slices copy (each a re-read of the text)."""

    copied = 0

    def __getitem__(self, key: Any) -> str:
        piece = super().__getitem__(key)
        CountedText.copied += len(piece)
        return piece


@pytest.mark.parametrize(
    ("head", "unit"),
    [
        ("", '<parameter name="k'),  # a '<' while looking for a parameter
        ('<｜DSML｜parameter name="a" string="true">', '<parameter name="k'),  # in a value
        ('<｜DSML｜parameter name="a" string="true">', "<｜DSML｜parameter x"),  # no name=
    ],
)
def test_a_storm_of_candidate_tags_is_read_once(head: str, unit: str) -> None:
    """Each ``<`` that only might start a tag is read in place, never by copying the
    rest of the body: what is copied (values, single characters) stays linear."""
    raw = CountedText(head + unit * 5_000)
    CountedText.copied = 0
    assert ParamScan().advance(raw, DIALECT) == []
    assert CountedText.copied <= 2 * len(raw)


def test_a_long_string_value_streams_by_what_it_adds() -> None:
    """Each ``>`` sends the escaped text since the last one, never the whole value."""
    state = ArgsState()
    args = ArgsStream(state, DIALECT, Schema({"city": {"type": "string"}}))
    raw = '<｜DSML｜parameter name="city" string="true">'
    assert args.piece(raw, raw) == '{"city": "'
    for i in range(200):
        piece = '<p class="x">' + str(i)
        raw += piece
        assert args.piece(raw, piece) == '<p class=\\"x\\">' + str(i)
    raw += "</｜DSML｜parameter>"
    assert args.piece(raw, "</｜DSML｜parameter>") is None
    assert args.final(raw) == '"}'
    assert json.loads(arguments_json(raw, DIALECT, Schema({})))["city"].count("<p") == 200


# ------------------------------------------------------------------ generated outputs

WORDS = ["Paris", " and", " 東京", " 👍🏽", ' "quotes"', " <b>", "</", "\n", ">", '"']
VALUES = ["Paris", "東京 👩‍👩‍👧", 'say "hi"', "{not json}", "a<b>c</b>", "3", '{"x": [1, 2]}', ""]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map("".join)
param = st.tuples(
    st.sampled_from(["city", "days", "opts", "tz", "arguments", "zz"]),
    st.sampled_from([STR, JSON, ""]),
    st.sampled_from(VALUES),
)
# One value per key: a repeated key streams its first value and then stops, in vLLM
# as here (the sent prefix no longer matches), so only one-shot has the last value.
call = st.tuples(
    st.sampled_from(["get_weather", "get_time", "launch"]),
    st.lists(param, max_size=3, unique_by=lambda p: p[0]),
)
CONFIGS = {
    "deepseek_v32": ("deepseek_v32", None),
    "deepseek_v4": ("deepseek_v4", "deepseek_v4"),
    "deepseek_v41": ("deepseek_v41", "deepseek_v41"),
}


@st.composite
def case(draw: st.DrawFn) -> tuple[str, str, list[int], list[int], str]:
    config = draw(st.sampled_from(sorted(CONFIGS)))
    out = ""
    if CONFIGS[config][1] is not None and draw(st.booleans()):
        out += draw(text) + "</think>"
    calls = draw(st.lists(call, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    if calls:
        out += calls_of(config, *calls)
        if draw(st.booleans()):
            out += draw(text)
    cuts_a = draw(st.lists(st.integers(0, 400), max_size=30))
    cuts_b = draw(st.lists(st.integers(0, 400), max_size=30))
    finish = draw(st.sampled_from(["stop", "length"]))
    return config, out, cuts_a, cuts_b, finish


def _factory(tokenizer: Tokenizer, config: str) -> ParserFactory:
    tools, reasoning = CONFIGS[config]
    return ParserFactory(tools, reasoning, True, tokenizer.vocabulary)


@PROPS
@given(generated=case())
def test_any_chunking_assembles_the_same_message(
    dsml_tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str]
) -> None:
    config, output, cuts_a, cuts_b, finish = generated
    factory = _factory(dsml_tokenizer, config)
    ids = dsml_tokenizer.encode(output)
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
    baseline = assemble(stream(dsml_tokenizer, factory, options(), [[i] for i in ids], finish))
    for cuts in (cuts_a, cuts_b, [10**6]):
        folded = assemble(stream(dsml_tokenizer, factory, options(), chunked(ids, cuts), finish))
        if finish == "length":
            folded, expected = _last_arguments_cut(folded, baseline)
        else:
            expected = baseline
        assert folded == expected, (output, cuts)


def _last_arguments_cut(a: Assembled, b: Assembled) -> tuple[Assembled, Assembled]:
    """Two streams of an output cut by ``length``, the last call's arguments cut to the
    shorter of the two where it is a prefix of the other: a string value streams only at
    a delta holding a ``>`` (docs/parity.md, DSML), so whether its text after the last
    one was sent depends on where the chunks fell, as in vLLM."""
    if not a.calls or a.calls.keys() != b.calls.keys():
        return a, b
    last = max(a.calls)
    (name_a, args_a), (name_b, args_b) = a.calls[last], b.calls[last]
    shorter, longer = sorted((args_a, args_b), key=len)
    if name_a != name_b or not longer.startswith(shorter):
        return a, b
    a = dataclasses.replace(a, calls={**a.calls, last: [name_a, shorter]})
    b = dataclasses.replace(b, calls={**b.calls, last: [name_b, shorter]})
    return a, b


def _space_then_held_at_the_end(reasoning: str) -> bool:
    """Reasoning that ends in whitespace and then what may still start a marker (the
    ``"`` of ``">``, a ``<``): the engine holds that start to the end, and the stream
    then drops the whitespace before it, where one-shot keeps it, as vLLM does
    (``test_whitespace_before_text_held_to_the_end_is_dropped``)."""
    return re.search(r'\s("|<\S*)$', reasoning) is not None


@pytest.mark.parametrize("config", ["deepseek_v4", "deepseek_v41"])
@pytest.mark.parametrize(("output", "streamed"), [('a\n"', 'a"'), ('a "', 'a"')])
def test_whitespace_before_text_held_to_the_end_is_dropped(
    dsml_tokenizer: Tokenizer, config: str, output: str, streamed: str
) -> None:
    """What vLLM 0.33.0's render server streams (checked with DeepSeek-V4's tokenizer,
    in one chunk, one token per chunk and split at the newline): reasoning's trailing
    whitespace is held, the ``"`` that may start ``">`` is held to the end, and the end
    drops the whitespace, so ``a\\n"`` streams ``a"`` where one-shot reads ``a\\n"``."""
    factory = _factory(dsml_tokenizer, config)
    ids = dsml_tokenizer.encode(output)
    for chunks in ([ids], [[i] for i in ids]):
        assert assemble(stream(dsml_tokenizer, factory, options(), chunks)).reasoning == streamed
    parsed = factory.for_request(options()).parse(output, dsml_tokenizer.encode(PROMPT), "seed")
    assert parsed.reasoning == output and _space_then_held_at_the_end(output)


@PROPS
@given(generated=case())
def test_streams_agree_with_the_one_shot_parse(
    dsml_tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str]
) -> None:
    config, output, cuts, _, _ = generated
    factory = _factory(dsml_tokenizer, config)
    ids = dsml_tokenizer.encode(output)
    folded = assemble(stream(dsml_tokenizer, factory, options(), chunked(ids, cuts)))
    parsed = factory.for_request(options()).parse(output, dsml_tokenizer.encode(PROMPT), "seed")
    if not _space_then_held_at_the_end(parsed.reasoning or ""):
        assert folded.reasoning == (parsed.reasoning or "")
    streamed = [folded.calls[i] for i in sorted(folded.calls)]
    assert streamed == [[c.name, c.arguments] for c in parsed.tool_calls]
    assert folded.content.strip() == (parsed.content or "").strip()


@PROPS
@given(generated=case(), cut=st.integers(0, 300))
def test_snapshot_and_restore_continue_identically(
    dsml_tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str], cut: int
) -> None:
    config, output, cuts, _, finish = generated
    factory = _factory(dsml_tokenizer, config)
    chunks = chunked(dsml_tokenizer.encode(output), cuts)
    expected = stream(dsml_tokenizer, factory, options(), chunks, finish)
    restored = stream(dsml_tokenizer, factory, options(), chunks, finish, cut % (len(chunks) + 1))
    assert restored == expected


def test_whitespace_held_before_content_keeps_its_place(dsml_tokenizer: Tokenizer) -> None:
    """Content that is whitespace so far is held (calls may follow); when the next chunk
    brings text and a call together, the held whitespace goes first, as one-shot has it."""
    factory = _factory(dsml_tokenizer, "deepseek_v4")
    output = 'Paris</think> "quotes"' + block(
        "deepseek_v4", invoke("get_weather", [("city", STR, "Oslo")])
    )
    ids = dsml_tokenizer.encode(output)
    cut = len(dsml_tokenizer.encode('Paris</think> "'))
    for chunks in ([[i] for i in ids], [ids[:cut], ids[cut:]], [ids]):
        folded = assemble(stream(dsml_tokenizer, factory, options(), chunks))
        assert folded.content == ' "quotes"'
