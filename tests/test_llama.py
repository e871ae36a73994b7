"""Llama 3.1 and Llama 4 on their real vocabularies: llama3_json, llama4_json, llama4_pythonic.

The tokenizers are built at test time from Meta's ``llama-models`` package
(tests/support/llama_tokenizers.py). Hand cases are what vLLM 0.33.0's parsers answered for
the same text deltas; the properties run real token ids through stream sessions:
any chunking assembles the same message, a snapshot restored at any chunk continues
identically, and well-formed calls stream as the one-shot parse finds them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.llama4_pythonic import Llama4PythonicStream, Llama4PythonicTools
from parsers.registry import ParserConfigError, ParserFactory
from parsers.types import Delta
from tests.support.llama_tokenizers import llama_tokenizer_dir
from tests.support.outputs import args, llama_output, text
from tests.support.parity import Assembled, chunked
from tests.support.processes import run_cli
from tests.support.streams import PROMPT, PROPS, factory_for, options, run, stream
from tests.support.tokenizers import bundled_tokenizer


def llama(family: str) -> Tokenizer:
    """The family's tokenizer, loaded once per session (shared with the golden replays)."""
    return bundled_tokenizer(str(llama_tokenizer_dir(family)))


# ------------------------------------------------------------------ the fixtures

SAMPLES = [
    "Hello, world! 東京 🗼 [get_weather(city='Paris')]  \n\n",
    '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "don't I'M 12345 \t\r\n  x",
]


@pytest.mark.parametrize("family", ["llama3", "llama4"])
def test_the_fixture_encodes_as_meta_tokenizer(family: str) -> None:
    import importlib

    meta = importlib.import_module(f"llama_models.{family}.tokenizer").Tokenizer.get_instance()
    tokenizer = llama(family)
    for sample in SAMPLES:
        expected = meta.encode(sample, bos=False, eos=False, allowed_special="all")
        assert tokenizer.encode(sample) == expected
    assert tokenizer.vocab_size == meta.n_words
    for token, token_id in meta.special_tokens.items():
        assert tokenizer.vocabulary.id_of(token) == token_id


@pytest.mark.parametrize(
    ("family", "marker", "marker_id", "eos_ids"),
    [
        ("llama3", "<|python_tag|>", 128010, {128001, 128008, 128009}),
        ("llama4", "<|python_start|>", 200016, {200001, 200007, 200008}),
    ],
)
def test_a_model_directory_loads_offline_with_its_markers_as_text(
    family: str, marker: str, marker_id: int, eos_ids: set[int]
) -> None:
    folder = llama_tokenizer_dir(family)
    assert {p.name for p in Path(folder).iterdir()} == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    tokenizer = llama(family)
    assert tokenizer.vocabulary.id_of(marker) == marker_id
    assert tokenizer.model_eos_token_ids == eos_ids
    assert tokenizer.default_max_model_len == 131072
    # Meta's files declare only BOS and EOS special: the call markers reach parsers.
    assert marker_id not in tokenizer.special_ids
    assert tokenizer.pieces([marker_id], skip_special=True) == [marker]


# ------------------------------------------------------------------ start-up


def test_llama4_json_refuses_the_llama4_vocabulary_as_vllm_does() -> None:
    """vLLM 0.33.0: ``--tool-call-parser llama4_json cannot be used with the tokenizer``
    (its parser finds no ``<|python_tag|>``, which Llama 4's vocabulary lacks)."""
    for name in ("llama4_json", "llama3_json"):
        with pytest.raises(ParserConfigError, match=r"llama._json.*<\|python_tag\|>"):
            ParserFactory(name, None, True, llama("llama4").vocabulary)
    ParserFactory("llama4_json", None, True, llama("llama3").vocabulary)
    ParserFactory("llama4_pythonic", None, True, llama("llama4").vocabulary)
    # Without --enable-auto-tool-choice the tool parser is inactive: vLLM starts.
    assert not ParserFactory("llama4_json", None, False, llama("llama4").vocabulary).configured


def test_the_server_refuses_to_start_llama4_json_on_llama4() -> None:
    model = str(llama_tokenizer_dir("llama4"))
    flags = ("--tool-call-parser", "llama4_json", "--enable-auto-tool-choice")
    result = run_cli("--model", model, *flags)
    assert result.returncode != 0
    assert "<|python_tag|>" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ llama4_pythonic by hand

START, END = "<|python_start|>", "<|python_end|>"


@pytest.mark.parametrize(
    ("output", "called", "content"),
    [
        (f"{START}[a(x=1)]{END}", True, None),
        (f"{START}[a(x=1)]{END}more", False, "[a(x=1)]more"),
        (f"{START}hello{END}", False, "hello"),
        (f"Sure. {START}[a(x=1)]{END}", False, f"Sure. {START}[a(x=1)]{END}"),
        (f"{START}\n[a(x=1)]", False, "\n[a(x=1)]"),
        ("[a(x=1)]", True, None),
    ],
)
def test_one_shot_drops_the_markers_of_an_opening_python_start(
    output: str, called: bool, content: str | None
) -> None:
    extracted = Llama4PythonicTools().extract(output, "seed")
    assert (extracted.tools_called, extracted.content) == (called, content)
    if called:
        assert [(c.name, c.arguments) for c in extracted.calls] == [("a", '{"x": 1}')]


def _call(index: int, name: str | None, arguments: str) -> tuple[int, str | None, str]:
    return index, name, arguments


# (content, [(index, name, arguments)]) per delta, None for no delta: vLLM 0.33.0's
# Llama4PythonicToolParser on the same deltas.
Step = tuple[str | None, list[tuple[int, str | None, str | None]]] | None


@pytest.mark.parametrize(
    ("deltas", "expected"),
    [
        (
            [START, "[a(", "x=1", ")]", END, "mor", "e"],
            [None, None, None, (None, [_call(0, "a", '{"x": 1}')]), ("", []), None, None],
        ),
        (
            [START, "\n[a", "(x=", "1),", " b(", "y='", "q')", "]\n", END],
            [
                None,
                None,
                None,
                (None, [_call(0, "a", '{"x": 1}')]),
                None,
                (None, [_call(1, "b", '{"y": "')]),
                (None, [_call(1, None, 'q"}')]),
                ("", []),
                ("", []),
            ],
        ),
        ([START, "hel", "lo", END], [None, None, None, None]),
        (
            ["Sur", "e. ", START, "[a("],
            [("Sur", []), ("e. ", []), (START, []), ("[a(", [])],
        ),
        ([START, " [a", "(x=1)]"], [None, None, None]),
        (["<", "b>hi"], [None, ("<b>hi", [])]),
    ],
)
def test_streaming_follows_vllm(deltas: list[str], expected: list[Step]) -> None:
    """vLLM's deltas, except that a possible marker's start is held (the last case:
    vLLM sends ``<`` at once; docs/parity.md llama4-marker-prefix)."""
    stream = Llama4PythonicStream("seed")
    assert [_step(stream.stream(delta, None)) for delta in deltas] == expected


def test_a_marker_spelled_across_deltas_leaks_nothing() -> None:
    """vLLM sends ``<|py`` as content, then reads the call once the marker completes;
    held back here, the message is the one a single delta gives."""
    stream = Llama4PythonicStream("seed")
    steps = [_step(stream.stream(d, None)) for d in ("<|py", "thon_start|>", "[a(x=1)]")]
    assert steps == [None, None, (None, [_call(0, "a", '{"x": 1}')])]
    cut = Llama4PythonicStream("seed")
    assert cut.stream("<|python_st", None) is None
    assert _step(cut.finish()) == ("<|python_st", [])


def _step(delta: Delta | None) -> Step:
    if delta is None:
        return None
    calls = [(c.index, c.name, c.arguments) for c in delta.tool_calls or []]
    return delta.content, calls


# ------------------------------------------------------------------ properties


@st.composite
def llama4_output(draw: st.DrawFn) -> str:
    """Pythonic calls, bare or inside Llama 4's markers, or plain text."""
    if draw(st.integers(0, 4)) == 0:
        return draw(text)
    calls = draw(st.lists(args, min_size=1, max_size=3))
    rendered = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    listed = "[" + ", ".join(rendered) + "]"
    wrapper = draw(
        st.sampled_from(["{}", START + "{}" + END, START + "{}", START + "\n{}\n" + END])
    )
    return wrapper.format(listed)


@st.composite
def stream_case(draw: st.DrawFn) -> tuple[str, str, list[int], list[int], list[int], str]:
    family, tool = draw(st.sampled_from([("llama4", "llama4_pythonic"), ("llama3", "llama3_json")]))
    output = draw(llama4_output() if family == "llama4" else llama_output())
    eot = llama(family).eos_token_id
    assert eot is not None
    ids = [*llama(family).encode(output), eot]
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
    cuts = draw(st.lists(st.integers(0, 200), max_size=20))
    other = draw(st.lists(st.integers(0, 200), max_size=20))
    return family, tool, ids, cuts, other, finish


@PROPS
@given(case=stream_case())
def test_any_chunking_assembles_the_same_message(
    case: tuple[str, str, list[int], list[int], list[int], str],
) -> None:
    family, tool, ids, cuts, other, finish = case
    tokenizer = llama(family)
    factory = factory_for(tokenizer, tool, None)
    baseline, _ = run(tokenizer, factory, options(), [[i] for i in ids], finish)
    for chunking in (cuts, other, [10**6]):
        folded, _ = run(tokenizer, factory, options(), chunked(ids, chunking), finish)
        if tool == "llama3_json":
            baseline, folded = (
                _as_every_chunking(baseline, finish),
                _as_every_chunking(folded, finish),
            )
        assert folded == baseline, (tokenizer.decode(ids), chunking)


def _as_every_chunking(message: Assembled, finish: str) -> Assembled:
    """What of a llama3_json stream every chunking assembles, as in vLLM: the last
    chunk's step adds the current call's unstreamed arguments only when it carries a
    call piece, so empty arguments arrive as ``{}`` or not at all, and a call cut short
    ends where its readings last agreed, or flushed (its name and the calls before it
    are the same)."""
    calls = {i: [name, "" if args == "{}" else args] for i, (name, args) in message.calls.items()}
    if calls and finish == "length":
        calls[max(calls)][1] = ""
    return Assembled(message.content, message.reasoning, calls)


@PROPS
@given(case=stream_case(), at=st.integers(0, 200))
def test_a_restored_snapshot_continues_identically(
    case: tuple[str, str, list[int], list[int], list[int], str], at: int
) -> None:
    family, tool, ids, cuts, _, finish = case
    tokenizer = llama(family)
    factory = factory_for(tokenizer, tool, None)
    chunks = chunked(ids, cuts)
    _, expected = run(tokenizer, factory, options(), chunks, finish)
    restored = stream(tokenizer, factory, options(), chunks, finish, at % (len(chunks) + 1))
    assert restored == expected


@PROPS
@given(case=stream_case())
def test_well_formed_calls_stream_as_one_shot_finds_them(
    case: tuple[str, str, list[int], list[int], list[int], str],
) -> None:
    family, tool, ids, cuts, _, finish = case
    if finish == "length":
        return
    tokenizer = llama(family)
    factory = factory_for(tokenizer, tool, None)
    output = tokenizer.decode(ids[:-1])
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    if not parsed.tool_calls:
        return
    folded, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    assert [name for name, _ in folded.calls.values()] == [c.name for c in parsed.tool_calls]
    for (_, streamed), call in zip(folded.calls.values(), parsed.tool_calls, strict=True):
        # vLLM streams empty arguments (one-shot ``{}``) only with a name in the last chunk.
        assert json.loads(streamed or "{}") == json.loads(call.arguments) or not (
            streamed or json.loads(call.arguments)
        )
