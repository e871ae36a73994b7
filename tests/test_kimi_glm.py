"""Kimi K2 (``kimi_k2``) and GLM-4.5/4.7 (``glm45`` / ``glm47``) parsers, with synthetic
test tokenizers (tests/support/synthetic_tokenizers.py: Qwen3's vocabulary plus each family's
markers as single tokens).

The hand-written cases are what vLLM 0.33.0's derender server answered for the same
outputs and synthetic tokenizers (one-shot, and one token per chunk); generated
outputs check that every chunking assembles one message, that a snapshot restored at
any chunk continues identically, and that streams agree with the one-shot parse
where vLLM's do.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.glm import PairScan
from parsers.families.kimi_k2 import JsonHold, header_id_and_name
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import chunked, chunking_invariant
from tests.support.streams import PROPS, assemble, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

TOOLS = (
    ToolSpec(
        "get_weather",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    ),
    ToolSpec("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}}),
)
SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


@pytest.fixture(scope="module")
def kimi_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic Kimi K2 tokenizer."""
    return load_tokenizer(str(write_synthetic_tokenizer("kimi_k2", tmp_path_factory.mktemp("k"))))


@pytest.fixture(scope="module")
def glm_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic GLM tokenizer."""
    return load_tokenizer(str(write_synthetic_tokenizer("glm45", tmp_path_factory.mktemp("z"))))


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


def kimi_call(header: str, arguments: str) -> str:
    return f"{CALL}{header}{ARGS}{arguments}{CALL_END}"


def glm_call(name: str, pairs: list[tuple[str, str]]) -> str:
    body = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in pairs)
    return f"<tool_call>{name}\n{body}</tool_call>"


def one_token_calls(tokenizer: Tokenizer, factory: ParserFactory, text: str) -> list[Any]:
    """The tool-call pieces of a one-token-per-chunk stream, as (index, name, arguments)."""
    ids = tokenizer.encode(text)
    deltas = stream(tokenizer, factory, options(), [[i] for i in ids])
    return [
        (call.index, call.name, call.arguments)
        for delta in deltas
        if delta is not None
        for call in delta.tool_calls
    ]


# ------------------------------------------------------------------ Kimi K2, as vLLM answers


def test_kimi_header_is_the_call_id_and_the_closing_brace_waits(kimi_tokenizer: Tokenizer) -> None:
    """vLLM: reasoning loses its trailing space, the header is the call's id, the name
    goes with the first argument text, the object's ``}`` waits for the call's end,
    and text after the section is dropped; one-shot types ``"3"`` by the schema."""
    factory = ParserFactory("kimi_k2", "kimi_k2", True, kimi_tokenizer.vocabulary)
    args = '{"city": "Paris", "days": "3"}'
    text = (
        f"Plan. </think>Sure.{SECTION}{kimi_call('functions.get_weather:0', args)}{SECTION_END} bye"
    )
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("Plan.", "Sure.")
    [call] = parsed.tool_calls
    assert (call.id, call.name) == ("functions.get_weather:0", "get_weather")
    assert call.arguments == '{"city": "Paris", "days": 3}'
    pieces = one_token_calls(kimi_tokenizer, factory, text)
    assert pieces[0] == (0, "get_weather", '{"')
    assert [p[2] for p in pieces[1:]] == [
        "city", '":', ' "', "Paris", '",', ' "', "days", '":', ' "', "3", '"', "}",
    ]  # fmt: skip
    folded = assemble(stream(kimi_tokenizer, factory, options(), [kimi_tokenizer.encode(text)]))
    assert folded.content == "Sure." and folded.calls == {0: ["get_weather", args]}


def test_kimi_a_headerless_call_is_lost_and_keeps_its_index(kimi_tokenizer: Tokenizer) -> None:
    """vLLM: a header that is not ``NAME:N`` names no call (no ``"name"`` in its JSON
    either); the next call streams as index 1, one-shot lists it alone."""
    factory = ParserFactory("kimi_k2", "kimi_k2", True, kimi_tokenizer.vocabulary)
    lost = kimi_call("get_weather", '{"city": "Paris"}')
    kept = kimi_call("functions.get_time:7", '{"tz": "UTC"}')
    text = f"Plan.</think>{SECTION}{lost}{kept}{SECTION_END}after"
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert [(c.id, c.name, c.arguments) for c in parsed.tool_calls] == [
        ("functions.get_time:7", "get_time", '{"tz": "UTC"}')
    ]
    assert parsed.content is None
    pieces = one_token_calls(kimi_tokenizer, factory, text)
    assert pieces[0] == (1, "get_time", '{"')
    assert "".join(p[2] for p in pieces) == '{"tz": "UTC"}'


@pytest.mark.parametrize(
    ("calls", "ids"),
    [
        ("", [("functions.functions:0", "functions")]),
        (
            kimi_call("functions.get_weather:0", '{"city": "Paris"}'),
            [("functions.get_weather:0", "get_weather"), ("functions.functions:0", "functions")],
        ),
        (
            kimi_call("xyz", '{"name": "get_time", "tz": "UTC"}'),
            [("functions.get_time:0", "get_time"), ("functions.functions:1", "functions")],
        ),
    ],
)
def test_kimi_a_call_without_a_usable_header_gets_vllms_kimi_id(
    kimi_tokenizer: Tokenizer, calls: str, ids: list[tuple[str, str]]
) -> None:
    """vLLM 0.33.0 (its render server, ``model_type: kimi_k2``): output cut right after
    ``<|tool_call_begin|>functions`` names a call ``functions`` with the id
    ``functions.functions:N``, N counting the ids made so in the output (a header's own id
    does not count), streamed in any chunking and one-shot alike."""
    factory = ParserFactory("kimi_k2", "kimi_k2", True, kimi_tokenizer.vocabulary)
    text = f"Plan.</think>{SECTION}{calls}{CALL}functions"
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert [(call.id, call.name) for call in parsed.tool_calls] == ids
    tokens = kimi_tokenizer.encode(text)
    for chunks in ([[i] for i in tokens], [tokens]):
        deltas = stream(kimi_tokenizer, factory, options(), chunks, "length")
        named = [(c.id, c.name) for d in deltas if d is not None for c in d.tool_calls if c.id]
        assert named == ids


def test_kimi_header_reading() -> None:
    assert header_id_and_name(" functions.get_weather:12 \n") == (
        "functions.get_weather:12",
        "get_weather",
    )
    assert header_id_and_name("a::0") == ("a::0", "a")
    assert header_id_and_name("functions.f:1x:22y") == ("functions.f:1x:22", "f")
    assert header_id_and_name("functions.f:\u0663") == ("functions.f:\u0663", "f")
    assert header_id_and_name("functions.:0") is None
    assert header_id_and_name(":0") is None
    assert header_id_and_name("get_weather") is None


def test_kimi_json_hold_releases_a_closing_bracket_with_the_next_character() -> None:
    hold = JsonHold()
    assert hold.feed('{"a": [1, {"b": "}"}') == '{"a": [1, {"b": "}"}'
    assert hold.feed("]") == "]"
    assert hold.feed("}") == ""
    assert hold.feed("]") == ""
    assert hold.feed(" ") == "}] "
    assert hold.feed('"\\"}') == '"\\"}'
    assert hold.release() == ""


def _seconds_per_closer(run: int) -> float:
    """CPU seconds per one-character chunk that lengthens a held run of ``run`` closers."""
    hold = JsonHold()
    assert hold.feed("{}" + "]" * run) == "{"
    began = time.process_time()
    for _ in range(2_000):
        assert hold.feed("}") == ""
    spent = time.process_time() - began
    assert hold.feed(" ") == "}" + "]" * run + "}" * 2_000 + " "
    return spent / 2_000


def test_kimi_json_hold_costs_each_chunk_what_it_adds() -> None:
    """A long run of held closers grows a piece at a time, never copied per chunk: at
    4x the run, a chunk costs about the same (a copy per chunk would cost 4x)."""
    small, large = (_seconds_per_closer(run) for run in (250_000, 1_000_000))
    assert large < 2.5 * max(small, 5e-6)


def test_kimi_thinking_off_keeps_think_markup_as_content(kimi_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("kimi_k2", "kimi_k2", True, kimi_tokenizer.vocabulary)
    off = options(chat_template_kwargs={"thinking": False})
    parsed = factory.for_request(off).parse("<think>x</think>hello", None, "seed")
    assert (parsed.reasoning, parsed.content) == (None, "<think>x</think>hello")


# ------------------------------------------------------------------ GLM, as vLLM answers


def test_glm_values_are_typed_and_unknown_tools_dropped(glm_tokenizer: Tokenizer) -> None:
    """vLLM: a call to a tool the request lacks is no call, but takes index 0 in the
    stream; a repeated last key streams once its value passes what was sent."""
    factory = ParserFactory("glm47", "glm45", True, glm_tokenizer.vocabulary)
    weather = glm_call("get_weather", [("days", "3"), ("city", "Oslo"), ("city", "Oslo 2")])
    text = "Plan.</think>" + glm_call("get_stock", [("s", "A")]) + "\n" + weather
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("Plan.", None)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"days": 3, "city": "Oslo 2"}')
    ]
    pieces = one_token_calls(glm_tokenizer, factory, text)
    assert pieces == [
        (1, "get_weather", None),
        (1, None, '{"days": '),
        (1, None, '3, "city": "'),
        (1, None, "Os"),
        (1, None, "lo"),
        (1, None, " "),
        (1, None, "2"),
        (1, None, '"}'),
    ]


def test_glm_prompt_that_closes_thinking_makes_everything_content(
    glm_tokenizer: Tokenizer,
) -> None:
    """GLM's template ends ``<|assistant|>\\n<think></think>`` when thinking is off."""
    factory = ParserFactory("glm45", "glm45", True, glm_tokenizer.vocabulary)
    prompt = glm_tokenizer.encode("<|user|>\nhi<|assistant|>\n<think></think>")
    parser = factory.for_request(options())
    parsed = parser.parse("Hi</think> there", prompt, "seed")
    assert (parsed.reasoning, parsed.content) == (None, "Hi there")
    assert parser.parse("Hi</think> there", None, "seed").reasoning == "Hi"


@pytest.mark.parametrize("space", ["  ", "\t", "\n"])
def test_glm_reasoning_whitespace_held_past_an_end_goes(
    glm_tokenizer: Tokenizer, space: str
) -> None:
    """vLLM reads reasoning's end after the chunk: whitespace held at the end of a
    reasoning delta goes when a chunk that is only ``</think>`` follows, and the
    reasoning opened again does not start with it (``axy``, not ``ax  y``)."""
    factory = ParserFactory("glm47", "glm45", True, glm_tokenizer.vocabulary)
    texts = ["a", "</think>", f"<think>x{space}", "</think>", "<think>y"]
    deltas = stream(glm_tokenizer, factory, options(), [glm_tokenizer.encode(t) for t in texts])
    assert [d.reasoning if d else None for d in deltas] == ["a", None, "x", None, "y"]


def test_glm_pair_scan_follows_vllms_pattern() -> None:
    scan = PairScan()
    raw = "<arg_key> a </arg_key> \n<arg_value>1</arg_value>"
    raw += "<arg_key>b</arg_key>x</arg_key><arg_value>2"
    assert scan.advance(raw) == [("a", "1")]
    assert (scan.open_key(raw), raw[scan.value_start :]) == ("b</arg_key>x", "2")
    assert scan.advance(raw + "</arg_value>") == [("b</arg_key>x", "2")]
    assert scan.open_key(raw + "</arg_value>") is None


# ------------------------------------------------------------------ generated outputs

MARKUP = ["<think>", "</think>", "<arg_key>", "</arg_value>", "<tool_call>", CALL_END, SECTION]
text = st.lists(
    st.sampled_from([*'ab <>/{}[]":,\\\n', "é", "東", "<arg", *MARKUP]), max_size=10
).map("".join)
json_args = st.dictionaries(
    st.sampled_from(["city", "days", "tz", "x"]), st.text('ab 1"{}', max_size=6), max_size=3
).map(lambda d: json.dumps(d, ensure_ascii=False))
kimi_headers = st.sampled_from(
    ["functions.get_weather:0", "functions.get_time:1", " functions.x:2\n", "bad", "a::3"]
)
glm_names = st.sampled_from(["get_weather", "get_time", "unknown", " get_time\n"])
glm_pairs = st.lists(st.tuples(st.sampled_from(["city", "days", "tz", "q"]), text), max_size=3)


@st.composite
def kimi_output(draw: st.DrawFn) -> str:
    out = draw(text) + "</think>" if draw(st.booleans()) else ""
    out += draw(text)
    calls = draw(st.lists(st.tuples(kimi_headers, json_args | text), max_size=3))
    if calls:
        out += SECTION + "".join(kimi_call(h, a) for h, a in calls)
        out += SECTION_END if draw(st.booleans()) else ""
        out += draw(text)
    return out


@st.composite
def glm_output(draw: st.DrawFn) -> str:
    out = draw(text) + "</think>" if draw(st.booleans()) else ""
    out += draw(text)
    for name, pairs in draw(st.lists(st.tuples(glm_names, glm_pairs), max_size=3)):
        out += glm_call(name, pairs) + draw(text)
    return out


FAMILIES = {"kimi_k2": ("kimi_k2", "kimi_k2"), "glm45": ("glm45", "glm47")}


@st.composite
def case(draw: st.DrawFn) -> tuple[str, str, list[int], list[int], str]:
    family = draw(st.sampled_from(sorted(FAMILIES)))
    output = draw(kimi_output() if family == "kimi_k2" else glm_output())
    cuts_a = draw(st.lists(st.integers(0, 300), max_size=25))
    cuts_b = draw(st.lists(st.integers(0, 300), max_size=25))
    return family, output, cuts_a, cuts_b, draw(st.sampled_from(["stop", "length"]))


def _setup(
    family: str, kimi: Tokenizer, glm: Tokenizer, reasoning: bool = True
) -> tuple[Tokenizer, ParserFactory]:
    tokenizer = kimi if family == "kimi_k2" else glm
    names = FAMILIES[family]
    factory = ParserFactory(names[1], names[0] if reasoning else None, True, tokenizer.vocabulary)
    return tokenizer, factory


def _cut_after_content_between_calls(text: str) -> bool:
    """GLM text between calls, then a call the cut leaves open: vLLM's engine holds such
    text while calls share its chunk and never sends it when the open call ends the
    stream, so it is lost or not depending on the chunking (docs/parity.md,
    engine-held-content-at-cut, reproduced)."""
    closed = text.find("</tool_call>")
    return closed >= 0 and "<tool_call>" in text[closed:]


def _whitespace_then_text_beside_calls(text: str) -> bool:
    """GLM content beside a call that opens with whitespace, then text (before a call,
    between calls or after them), or whitespace alone beside a call and text beside a
    later one: vLLM's engine drops whitespace-only content once a call was seen if it
    ends a chunk, and sends it with the text when they share one (docs/parity.md,
    engine-whitespace-beside-calls, reproduced)."""
    if "<tool_call>" not in text:
        return False
    for candidate in (text, text.split("</think>", 1)[-1]):
        pieces = re.split(r"<tool_call>.*?(?:</tool_call>|$)", candidate, flags=re.S)
        if any(piece[:1].isspace() and piece.strip() for piece in pieces):
            return True
        blank = [i for i, piece in enumerate(pieces) if piece and not piece.strip()]
        if blank and any(piece.strip() for piece in pieces[blank[0] + 1 :]):
            return True
    return False


@PROPS
@given(generated=case(), reasoning=st.booleans())
def test_any_chunking_assembles_the_same_message(
    kimi_tokenizer: Tokenizer,
    glm_tokenizer: Tokenizer,
    generated: tuple[str, str, list[int], list[int], str],
    reasoning: bool,
) -> None:
    family, output, cuts_a, cuts_b, finish = generated
    tokenizer, factory = _setup(family, kimi_tokenizer, glm_tokenizer, reasoning)
    assume(not reasoning or chunking_invariant(FAMILIES[family][0], output))
    ids = tokenizer.encode(output)
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
        assume(not _cut_after_content_between_calls(tokenizer.decode(ids)))
    assume(not _whitespace_then_text_beside_calls(tokenizer.decode(ids)))
    baseline = assemble(stream(tokenizer, factory, options(), [[i] for i in ids], finish))
    for cuts in (cuts_a, cuts_b, [10**6]):
        folded = assemble(stream(tokenizer, factory, options(), chunked(ids, cuts), finish))
        assert folded == baseline, (output, cuts)


@PROPS
@given(generated=case(), cut=st.integers(0, 300))
def test_snapshot_and_restore_continue_identically(
    kimi_tokenizer: Tokenizer,
    glm_tokenizer: Tokenizer,
    generated: tuple[str, str, list[int], list[int], str],
    cut: int,
) -> None:
    family, output, cuts, _, finish = generated
    tokenizer, factory = _setup(family, kimi_tokenizer, glm_tokenizer)
    chunks = chunked(tokenizer.encode(output), cuts)
    expected = stream(tokenizer, factory, options(), chunks, finish)
    restored = stream(tokenizer, factory, options(), chunks, finish, cut % (len(chunks) + 1))
    assert restored == expected


def _plain(draw: st.DrawFn) -> str:
    return draw(st.text(st.sampled_from(list("ab .,é東")), min_size=1, max_size=10)).strip() or "a"


@st.composite
def agreeing(draw: st.DrawFn) -> tuple[str, str, list[int]]:
    """Outputs whose stream vLLM assembles as its one-shot parse: calls to known tools
    with string values, content without surrounding whitespace."""
    family = draw(st.sampled_from(sorted(FAMILIES)))
    out = _plain(draw) + "</think>" + _plain(draw)
    count = draw(st.integers(0, 2))
    calls = [(draw(st.sampled_from(["city", "tz"])), _plain(draw)) for _ in range(count)]
    if family == "kimi_k2":
        if calls:
            body = "".join(
                kimi_call(f"functions.get_time:{i}", json.dumps({k: v}, ensure_ascii=False))
                for i, (k, v) in enumerate(calls)
            )
            out += SECTION + body + SECTION_END
    else:
        out += "".join(glm_call("get_time", [(k, v)]) for k, v in calls)
    return family, out, draw(st.lists(st.integers(0, 300), max_size=25))


@PROPS
@given(generated=agreeing())
def test_streams_agree_with_the_one_shot_parse(
    kimi_tokenizer: Tokenizer, glm_tokenizer: Tokenizer, generated: tuple[str, str, list[int]]
) -> None:
    family, output, cuts = generated
    tokenizer, factory = _setup(family, kimi_tokenizer, glm_tokenizer)
    ids = tokenizer.encode(output)
    folded = assemble(stream(tokenizer, factory, options(), chunked(ids, cuts)))
    parsed = factory.for_request(options()).parse(output, None, "seed")
    assert folded.reasoning == (parsed.reasoning or "")
    assert folded.content == (parsed.content or "")
    streamed = [folded.calls[i] for i in sorted(folded.calls)]
    assert streamed == [[c.name, c.arguments] for c in parsed.tool_calls]


def test_synthetic_tokenizer_folder_holds_only_tokenizer_files(tmp_path: Path) -> None:
    folder = write_synthetic_tokenizer("glm45", tmp_path / "glm")
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    vocabulary = load_tokenizer(str(folder)).vocabulary
    assert "<|user|>" in vocabulary.special_tokens
    assert vocabulary.id_of("<arg_key>") is not None
    assert "<arg_key>" not in vocabulary.special_tokens
