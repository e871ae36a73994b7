"""MiniMax M2's parsers: ``minimax_m2`` reasoning and tools, ``minimax_m2_append_think``.

Outputs run through the synthetic MiniMax tokenizer (tests/support/synthetic_tokenizers.py:
Qwen3's vocabulary plus ``<minimax:tool_call>`` and ``</minimax:tool_call>`` as
tokens; ``<think>`` and ``</think>`` are Qwen3's). The hand-written cases are what
vLLM 0.33.0's parsers answer for the same outputs (its engine config for MiniMax M2,
read from its sources and checked by the M golden transcripts); generated outputs
check chunking, one-shot agreement and restore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.minimax import MiniMaxParamScan
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import PROMPT, PROPS, assemble, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

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


@pytest.fixture(scope="module")
def mm_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic MiniMax tokenizer, loaded from its directory as a server loads it."""
    folder: Path = tmp_path_factory.mktemp("synthetic-minimax")
    return load_tokenizer(str(write_synthetic_tokenizer("minimax_m2", folder)))


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


def invoke(name: str, params: list[tuple[str, str]], quote: str = '"') -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params)
    return f"<invoke name={quote}{name}{quote}>\n{body}</invoke>\n"


def calls_of(*calls: tuple[str, list[tuple[str, str]]]) -> str:
    return (
        "<minimax:tool_call>\n" + "".join(invoke(n, p) for n, p in calls) + "</minimax:tool_call>"
    )


def factory(tokenizer: Tokenizer, reasoning: str | None = "minimax_m2") -> ParserFactory:
    return ParserFactory("minimax_m2", reasoning, True, tokenizer.vocabulary)


# ------------------------------------------------------------------ one-shot, as vLLM reads


def test_reasoning_then_typed_calls(mm_tokenizer: Tokenizer) -> None:
    text = "Plan it.\n</think>\n\nSure.\n" + calls_of(
        ("get_weather", [("city", "Paris"), ("days", "3"), ("opts", '{"x": 1}')]),
        ("get_time", [("tz", " 東京 <UTC+9> ")]),
    )
    parsed = factory(mm_tokenizer).for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("Plan it.", "Sure.")  # stripped beside calls
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"city": "Paris", "days": 3, "opts": {"x": 1}}'),
        ("get_time", '{"tz": " 東京 <UTC+9> "}'),  # values verbatim: whitespace is data
    ]


def test_unknown_tools_are_dropped_and_names_spelled_three_ways(mm_tokenizer: Tokenizer) -> None:
    text = (
        "<minimax:tool_call>\n"
        + invoke("get_stock", [("symbol", "AAPL")])
        + invoke("get_time", [("tz", "UTC")], quote="'")
        + "<invoke name=get_weather>\n<parameter name = 'city' >Oslo</parameter>\n"
        + "<parameter name=days>2</parameter>\n</invoke>\n</minimax:tool_call>"
    )
    parser = factory(mm_tokenizer).for_request(options())
    parsed = parser.parse(text, None, "seed")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_time", '{"tz": "UTC"}'),
        ("get_weather", '{"city": "Oslo", "days": 2}'),
    ]
    # Without tools in the request the message keeps no calls (vLLM assembles none).
    bare = ParseOptions(tools=None, tool_choice="auto")
    parsed = factory(mm_tokenizer).for_request(bare).parse(text, None, "seed")
    assert [c.name for c in parsed.tool_calls] == []  # calls are kept only with tools


def test_an_invoke_needs_no_wrapper_and_text_between_calls_is_dropped(
    mm_tokenizer: Tokenizer,
) -> None:
    text = (
        "Checking.\n"
        + invoke("get_time", [("tz", "UTC")])
        + "between "
        + invoke("get_time", [("tz", "CET")])
    )
    parsed = factory(mm_tokenizer, None).for_request(options()).parse(text, None, "seed")
    assert parsed.content == "Checking."
    assert [c.arguments for c in parsed.tool_calls] == ['{"tz": "UTC"}', '{"tz": "CET"}']


def test_a_call_section_ends_reasoning(mm_tokenizer: Tokenizer) -> None:
    text = "Plan " + calls_of(("get_time", [("tz", "UTC")]))
    parsed = factory(mm_tokenizer).for_request(options()).parse(text, None, "seed")
    assert parsed.reasoning == "Plan"
    assert [c.name for c in parsed.tool_calls] == ["get_time"]


def test_append_think_puts_the_tag_back_and_reads_no_reasoning(mm_tokenizer: Tokenizer) -> None:
    text = "Plan.</think>Sure." + calls_of(("get_time", [("tz", "UTC")]))
    append = factory(mm_tokenizer, "minimax_m2_append_think")
    parsed = append.for_request(options()).parse(text, None, "seed")
    # The tool parser reads from content, where </think> closes nothing and is dropped.
    assert (parsed.reasoning, parsed.content) == (None, "<think>Plan.Sure.")
    assert [c.name for c in parsed.tool_calls] == ["get_time"]
    plain = ParserFactory(None, "minimax_m2_append_think", True, mm_tokenizer.vocabulary)
    parsed = plain.for_request(options()).parse("Plan.</think>Sure.", None, "seed")
    assert (parsed.reasoning, parsed.content) == (None, "<think>Plan.</think>Sure.")
    ids = mm_tokenizer.encode("Plan.</think>Sure.")
    folded = assemble(stream(mm_tokenizer, plain, options(), [[i] for i in ids]))
    assert (folded.reasoning, folded.content) == ("", "<think>Plan.</think>Sure.")


# ------------------------------------------------------------------ streams


def test_one_token_per_chunk_streams_names_then_growing_json(mm_tokenizer: Tokenizer) -> None:
    text = "x</think>" + calls_of(("get_weather", [("city", "a<b>c"), ("days", "3")]))
    ids = mm_tokenizer.encode(text)
    deltas = stream(mm_tokenizer, factory(mm_tokenizer), options(), [[i] for i in ids])
    sent = [c.arguments for d in deltas if d for c in d.tool_calls if c.arguments]
    assert sent[0] == '{"city": "'
    assert "".join(sent) == '{"city": "a<b>c", "days": 3}'
    names = [c.name for d in deltas if d for c in d.tool_calls if c.name]
    assert names == ["get_weather"]


def test_reasoning_only_drops_a_stray_closer_one_shot(mm_tokenizer: Tokenizer) -> None:
    """vLLM's reasoning-only engine applies ``</minimax:tool_call>``'s own transition
    (it drops it) outside call markup, and passes it through inside. A stream hands
    content after ``</think>`` through untouched."""
    only = ParserFactory(None, "minimax_m2", True, mm_tokenizer.vocabulary)
    section = calls_of(("get_time", [("tz", "UTC")]))
    text = "r</think>a </minimax:tool_call>b" + section
    parsed = only.for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("r", "a b" + section)
    ids = mm_tokenizer.encode(text)
    folded = assemble(stream(mm_tokenizer, only, options(), [[i] for i in ids]))
    assert folded.content == "a </minimax:tool_call>b" + section


# ------------------------------------------------------------------ the parameter scan


def test_the_parameter_scan_follows_vllms_pattern() -> None:
    raw = (
        '<parameter name="a">1<parameter  name = "b" >x>y</ parameter >'
        '<parameter name=" ">z</parameter><parameter name=c d>no</parameter>'
        "<parameter name='e'>w</parameter>"
        '<parameter name="f"g>v</parameter><parameter name=h>open'
    )
    scan = MiniMaxParamScan()
    found = []
    while (param := scan.next_parameter(raw)) is not None:
        found.append(param)
    assert found == [("a", "1"), ("b", "x>y"), ("e", "w"), ('"f"g', "v")]
    assert scan.open_name(raw) == "h"
    assert raw[scan.name_end + 1 :] == "open"


def test_a_head_waits_for_its_end_one_character_at_a_time() -> None:
    raw = '<parameter name="a b" >value</parameter>'
    scan = MiniMaxParamScan()
    found = []
    for end in range(1, len(raw) + 1):
        while (param := scan.next_parameter(raw[:end])) is not None:
            found.append(param)
    assert found == [("a b", "value")]


# ------------------------------------------------------------------ generated outputs

WORDS = ["Paris", " and", " 東京", " 👍🏽", ' "quotes"', " <b>", "</", "\n", ">", '"', "'"]
VALUES = ["Paris", "東京 👩‍👩‍👧", 'say "hi"', "{not json}", "a<b>c</b>", "3", '{"x": [1, 2]}', ""]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map("".join)
param = st.tuples(st.sampled_from(["city", "days", "opts", "tz", "zz"]), st.sampled_from(VALUES))
call = st.tuples(
    st.sampled_from(["get_weather", "get_time", "launch"]),
    st.lists(param, max_size=3, unique_by=lambda p: p[0]),
)
REASONING = ("minimax_m2", "minimax_m2_append_think", None)


@st.composite
def case(draw: st.DrawFn) -> tuple[str | None, str, list[int], list[int], str]:
    reasoning = draw(st.sampled_from(REASONING))
    out = draw(text) + "</think>" if draw(st.booleans()) else ""
    calls = draw(st.lists(call, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    if calls:
        out += calls_of(*calls)
        if draw(st.booleans()):
            # Leading whitespace after calls is dropped or kept by the chunking, in vLLM
            # as here (docs/parity.md, engine-whitespace-beside-calls).
            out += draw(text).lstrip()
    cuts_a = draw(st.lists(st.integers(0, 400), max_size=30))
    cuts_b = draw(st.lists(st.integers(0, 400), max_size=30))
    finish = draw(st.sampled_from(["stop", "length"]))
    return reasoning, out, cuts_a, cuts_b, finish


@PROPS
@given(generated=case())
def test_any_chunking_assembles_the_same_message(
    mm_tokenizer: Tokenizer, generated: tuple[str | None, str, list[int], list[int], str]
) -> None:
    reasoning, output, cuts_a, cuts_b, finish = generated
    parsers = factory(mm_tokenizer, reasoning)
    ids = mm_tokenizer.encode(output)
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
    baseline = assemble(stream(mm_tokenizer, parsers, options(), [[i] for i in ids], finish))
    for cuts in (cuts_a, cuts_b, [10**6]):
        folded = assemble(stream(mm_tokenizer, parsers, options(), chunked(ids, cuts), finish))
        assert folded == baseline, (output, cuts)


@PROPS
@given(generated=case())
def test_streams_agree_with_the_one_shot_parse(
    mm_tokenizer: Tokenizer, generated: tuple[str | None, str, list[int], list[int], str]
) -> None:
    """Where vLLM's stream and one-shot agree: append_think streams calls only after a
    ``</think>`` (before it everything is content), and one-shot drops content that
    follows a call while a stream sends it."""
    reasoning, output, cuts, _, _ = generated
    parsers = factory(mm_tokenizer, reasoning)
    ids = mm_tokenizer.encode(output)
    folded = assemble(stream(mm_tokenizer, parsers, options(), chunked(ids, cuts)))
    parsed = parsers.for_request(options()).parse(output, mm_tokenizer.encode(PROMPT), "seed")
    streamed = [folded.calls[i] for i in sorted(folded.calls)]
    if reasoning != "minimax_m2_append_think" or "</think>" in output:
        assert streamed == [[c.name, c.arguments] for c in parsed.tool_calls], output
    if reasoning == "minimax_m2":
        assert folded.reasoning == (parsed.reasoning or ""), output
        if not parsed.tool_calls or output.endswith("</minimax:tool_call>"):
            assert folded.content.strip() == (parsed.content or "").strip(), output


@PROPS
@given(generated=case(), cut=st.integers(0, 300))
def test_snapshot_and_restore_continue_identically(
    mm_tokenizer: Tokenizer,
    generated: tuple[str | None, str, list[int], list[int], str],
    cut: int,
) -> None:
    reasoning, output, cuts, _, finish = generated
    parsers = factory(mm_tokenizer, reasoning)
    chunks = chunked(mm_tokenizer.encode(output), cuts)
    expected = stream(mm_tokenizer, parsers, options(), chunks, finish)
    restored = stream(mm_tokenizer, parsers, options(), chunks, finish, cut % (len(chunks) + 1))
    assert restored == expected


def test_arguments_json_is_valid_for_every_generated_call(mm_tokenizer: Tokenizer) -> None:
    text = calls_of(("get_weather", [("city", 'say "hi"'), ("opts", "{not json}")]))
    parsed = factory(mm_tokenizer, None).for_request(options()).parse(text, None, "seed")
    assert json.loads(parsed.tool_calls[0].arguments) == {"city": 'say "hi"', "opts": "{not json}"}


def test_whitespace_after_calls_goes_by_the_chunking_as_in_vllm(mm_tokenizer: Tokenizer) -> None:
    """Whitespace-only content after a call is dropped while no other content came, so
    text after a section keeps its leading space only if they share a chunk."""
    text = calls_of(("get_weather", [])) + ' "quotes"'
    ids = mm_tokenizer.encode(text)
    parsers = factory(mm_tokenizer, None)
    one_by_one = assemble(stream(mm_tokenizer, parsers, options(), [[i] for i in ids]))
    whole = assemble(stream(mm_tokenizer, parsers, options(), [ids]))
    assert (one_by_one.content, whole.content) == ('"quotes"', ' "quotes"')
