"""The pythonic parser on hostile output: same language as vLLM's pattern, linear, no raise.

vLLM matches a call list with a backtracking pattern that can run for ever; ours is a
one-pass recognizer, checked here against the pattern itself on short strings (where
the pattern finishes). The streamed scanner is checked on generated outputs that mix
well-formed calls with nesting, quote and escape storms, junk and cuts: it never
raises, agrees with the one-shot parse where the output is well-formed, and gives the
same message for every chunking. Deadlines are generous hang detectors, not timings.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.pythonic import PythonicStream, PythonicTools, starts_with_call_list
from parsers.types import Delta
from tests.support.parity import Assembled, chunked
from tests.support.streams import PROMPT, factory_for, options, run, stream

# vLLM 0.33.0's pattern (pythonic_tool_parser.py), kept only as the reference.
VLLM_CALL_LIST = re.compile(
    r"\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*"
    r"([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]",
    re.DOTALL,
)
HANG = settings(
    max_examples=60,
    deadline=timedelta(seconds=30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# ------------------------------------------------------------------ the recognizer

PATTERN_ALPHABET = [*'[]()=, \n\tab_1"', "A", "é", "٣", "\x1c", "\xa0"]


@settings(max_examples=3000, deadline=None)
@given(
    st.text(st.sampled_from(PATTERN_ALPHABET), max_size=16).map(lambda t: "[" + t)
    | st.text(st.sampled_from(PATTERN_ALPHABET), max_size=16)
)
@example("[a()]")
@example("[a(), b()]")
@example("[a() b()]")
@example("[a(),]")
@example("[a(b=)]")
@example("[a() b(), c(d=1)]")
def test_recognizer_accepts_what_the_vllm_pattern_matches(text: str) -> None:
    assert starts_with_call_list(text) == (VLLM_CALL_LIST.match(text) is not None)


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ('[get_weather(city="Paris")]', True),
        ('[f(a=1), g(b="x")] and then prose', True),
        ("[f(), g(), h(a=[1, 2])]", True),
        ("[f() g(a=1)]", True),
        ("[f(), g() h()]", True),
        ("[f() g(), h()]", False),
        ("[f(), ]", False),
        ("[f(1)]", False),
        ("[f(a=1]", False),
        ("[f(a=1) ] x", True),
        ("[_f(a=1)]", False),
        ("[é(a=1)]", False),
        ("[f٣(a=1)]", True),
        (" [f(a=1)]", False),
        ("[]", False),
    ],
)
def test_recognizer_cases(text: str, matches: bool) -> None:
    assert starts_with_call_list(text) is matches
    assert (VLLM_CALL_LIST.match(text) is not None) is matches


def test_recognizer_finishes_where_the_pattern_backtracks() -> None:
    call = 'f(a={"k": [1, True, None], "m": {"n": False}}, b=[1, 2], c=None)'
    text = "[" + ", ".join([call] * 2000) + " oops"
    assert starts_with_call_list(text) is False
    assert PythonicTools().extract(text, "seed").tools_called is False


# ------------------------------------------------------------------ generated outputs

STRING_PIECES = ["a", "é", "東", " ", "=", ",", ":", "(", ")", "[", "]", "{", "}", "\\n", "\\\\"]
strings = st.lists(st.sampled_from(STRING_PIECES), max_size=6).map("".join)
scalars = st.one_of(
    st.integers(-999, 999).map(str),
    st.sampled_from(["True", "False", "None", "true", "null"]),
    strings.map(lambda s: f'"{s}"'),
    strings.map(lambda s: f"'{s}'"),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(strings, inner), max_size=3).map(
            lambda pairs: "{" + ", ".join(f'"k{i}{k}": {v}' for i, (k, v) in enumerate(pairs)) + "}"
        ),
    ),
    max_leaves=6,
)


@st.composite
def well_formed(draw: st.DrawFn) -> str:
    calls = []
    for name in draw(st.lists(st.sampled_from(["get_weather", "count", "a.b"]), min_size=1)):
        keys = draw(st.lists(st.sampled_from(["city", "n", "opts"]), unique=True, max_size=3))
        calls.append(f"{name}({', '.join(f'{k}={draw(values)}' for k in keys)})")
    return "[" + ", ".join(calls[:3]) + "]"


HOSTILE = [
    "[a(b=" * 40,
    "[f(x=" + "[" * 250,
    '[f(a="' + "\\\"'\\\\" * 30,
    "[f(a=1), " * 30,
    "[" + "(" * 30 + ")" * 31,
    '"""x")""',
    "f(a=(1, 2), b={1, 2}, c=f'x', d=-(-1), e=1j)",
    "# a comment\n",
    "\\\n",
    "\x00",
    "\\N{NOT A NAME}",
    "\\x4",
    "] trailing [",
    "{'a': 1, 'a': 2}",
]


@st.composite
def adversarial(draw: st.DrawFn) -> tuple[str, bool]:
    """A pythonic output and whether it is left well-formed."""
    output = draw(well_formed())
    if draw(st.booleans()):
        return output, True
    junk = draw(st.sampled_from(HOSTILE))
    at = draw(st.integers(0, len(output)))
    mutated = output[:at] + junk + output[at:]
    cut = draw(st.integers(0, len(mutated)))
    return (mutated[: max(1, cut)] if draw(st.booleans()) else mutated), False


def folded_stream(
    tokenizer: Tokenizer, output: str, cuts: list[int], finish: str
) -> tuple[Assembled, list[Delta | None]]:
    factory = factory_for(tokenizer, "pythonic", None)
    ids = tokenizer.encode(output)
    return run(tokenizer, factory, options(), chunked(ids, cuts), finish)


@HANG
@given(generated=adversarial(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_any_chunking_assembles_the_same_message(
    tokenizer: Tokenizer, generated: tuple[str, bool], cuts: list[int]
) -> None:
    output, _ = generated
    ids = tokenizer.encode(output)
    for finish in ("stop", "length"):
        factory = factory_for(tokenizer, "pythonic", None)
        baseline, _ = run(tokenizer, factory, options(), [[i] for i in ids], finish)
        folded, _ = folded_stream(tokenizer, output, cuts, finish)
        assert folded == baseline, (output, cuts)


@HANG
@given(generated=adversarial(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_well_formed_streams_agree_with_the_one_shot_parse(
    tokenizer: Tokenizer, generated: tuple[str, bool], cuts: list[int]
) -> None:
    output, intact = generated
    factory = factory_for(tokenizer, "pythonic", None)
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    folded, _ = folded_stream(tokenizer, output, cuts, "stop")
    if not intact or not parsed.tool_calls:
        return  # the one-shot pattern refuses dotted names vLLM's stream accepts
    assert [call.name for call in parsed.tool_calls] == [n for n, _ in folded.calls.values()]
    for (_, streamed), call in zip(folded.calls.values(), parsed.tool_calls, strict=True):
        assert json.loads(streamed) == json.loads(call.arguments)


@HANG
@given(generated=adversarial(), cuts=st.lists(st.integers(0, 400), max_size=30), at=st.integers())
def test_snapshots_continue_identically(
    tokenizer: Tokenizer, generated: tuple[str, bool], cuts: list[int], at: int
) -> None:
    output, _ = generated
    factory = factory_for(tokenizer, "pythonic", None)
    ids = tokenizer.encode(output)
    chunks = chunked(ids, cuts)
    _, expected = run(tokenizer, factory, options(), chunks, "length")
    deltas = stream(
        tokenizer, factory, options(), chunks, "length", restore_at=at % (len(chunks) + 1)
    )
    assert deltas == expected


@pytest.mark.parametrize(
    ("output", "calls"),
    [
        ("[f(x=" + "[" * 5000 + "]" * 5000 + ")]", 0),
        ("[f(x=" + "-" * 5000 + "1)]", 0),
        ("[f(x=" + '{"k": ' * 3000, 0),
        ('[f(a="' + "\\" * 5001 + '")]', 0),
        ("[" + "f(a=1), " * 3000 + "f(a=2)]", 3001),
    ],
)
def test_deep_or_long_outputs_end_as_content_or_calls(
    tokenizer: Tokenizer, output: str, calls: int
) -> None:
    """Nesting past Python's limits is content one-shot; the stream stops, never raises."""
    factory = factory_for(tokenizer, "pythonic", None)
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    folded, _ = folded_stream(tokenizer, output, [10**6], "length")
    assert len(parsed.tool_calls) == calls
    assert parsed.content == (None if calls else output)
    assert len(folded.calls) == calls or not calls


# ------------------------------------------------------------------ vLLM parity


def test_text_after_the_list_cut_by_length_ends_without_content(tokenizer: Tokenizer) -> None:
    """vLLM sends ``content: null`` on the last chunk once text after the list stops parsing."""
    output = '[get_weather(city="Paris")] Done.'
    folded, deltas = folded_stream(tokenizer, output, list(range(400)), "length")
    whole, _ = folded_stream(tokenizer, output, [], "length")
    assert whole == folded
    assert folded.calls == {0: ["get_weather", '{"city": "Paris"}']}
    assert deltas[-1] is None or (deltas[-1].content is None and not deltas[-1].tool_calls)


@pytest.mark.parametrize(
    "output",
    [
        '[get_weather(city="Paris"), count(n=3)"',
        '[get_weather(city="Paris"), count(n=3)][',
        '[get_weather(city="Paris")[',
    ],
)
def test_a_call_closed_inside_a_malformed_token_is_not_sent(
    tokenizer: Tokenizer, output: str
) -> None:
    """vLLM never sees a closed call whose ``)`` shares a token with what breaks the list."""
    ids = tokenizer.encode(output)
    factory = factory_for(tokenizer, "pythonic", None)
    folded, deltas = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    assert folded.calls[0][0] == "get_weather"
    assert 1 not in folded.calls
    assert deltas[-1] is None or not deltas[-1].tool_calls
    whole, _ = run(tokenizer, factory, options(), [ids], "stop")
    assert whole == folded


@pytest.mark.parametrize(
    "output",
    [
        '[get_weather(city="k0 東"), count(n=3), get_wea',
        '[get_weather(city="k0 東"), count(n=3)"',
        '[count(n=1), get_weather(city=("東", 1)), count(n=2)] x',
    ],
)
def test_a_character_split_across_tokens_keeps_the_chunk_boundaries(
    tokenizer: Tokenizer, output: str
) -> None:
    """A chunk holding a character split over two tokens still settles as one token per chunk."""
    ids = tokenizer.encode(output)
    factory = factory_for(tokenizer, "pythonic", None)
    per_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "length")
    whole, _ = run(tokenizer, factory, options(), [ids], "length")
    assert whole == per_token


def _seconds_per_space(run: int) -> float:
    """CPU seconds per space of a string's end: ``run`` in one chunk, then one a chunk."""
    stream = PythonicStream("seed")
    stream.stream('[f(a="x')
    began = time.process_time()
    stream.stream(" " * run)
    for _ in range(1_000):
        stream.stream(" ")
    spent = time.process_time() - began
    delta = stream.stream('y")]')
    assert delta is not None and delta.tool_calls
    assert delta.tool_calls[0].arguments == " " * (run + 1_000) + 'y"}'
    return spent / (run + 1_000)


def test_white_space_held_at_a_strings_end_costs_what_it_adds() -> None:
    """White space vLLM strips while it ends the text is held a piece at a time, never
    copied per character or chunk: at 4x the run, a space costs about the same."""
    small, large = (_seconds_per_space(run) for run in (150_000, 600_000))
    assert large < 2.5 * max(small, 1e-6)
