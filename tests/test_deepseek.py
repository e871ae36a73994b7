"""DeepSeek parsers: ``deepseek_v3`` reasoning, ``deepseek_v3`` / ``deepseek_v31`` tools.

Outputs run through a labelled test tokenizer: the bundled Qwen3 vocabulary plus
DeepSeek's tool markers as added tokens, so markers arrive as single ids as they do
with DeepSeek's own tokenizer. The hand-written cases are what vLLM 0.33.0's derender
server answered for the same outputs with DeepSeek-V4's tokenizer (one-shot and one
token per chunk); multi-token chunks are checked against the one-token stream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.families.deepseek import (
    CALL_BEGIN,
    CALL_FINISH,
    CALLS_BEGIN,
    CALLS_END,
    SEP,
    extract_v3,
    extract_v31,
)
from parsers.registry import ParserConfigError, ParserFactory
from parsers.types import Delta, FunctionCall, ParseOptions, ToolSpec, Vocabulary
from tests.support.parity import chunked
from tests.support.streams import PROMPT, PROPS, assemble, stream
from tests.support.tokenizers import qwen3_with_tokens

MARKERS = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_FINISH, SEP)
TOOLS = (
    ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("count", {"type": "object", "properties": {"n": {"type": "integer"}}}),
)


@pytest.fixture(scope="module")
def ds_tokenizer() -> Tokenizer:
    """Qwen3's vocabulary with DeepSeek's tool markers added (a test tokenizer)."""
    return qwen3_with_tokens(*MARKERS)


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


THINKING = options(chat_template_kwargs={"thinking": True})


def v31_call(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{arguments}{CALL_FINISH}"


def v3_call(name: str, arguments: str, kind: str = "function") -> str:
    return f"{CALL_BEGIN}{kind}{SEP}{name}\n```json\n{arguments}\n```{CALL_FINISH}"


# ------------------------------------------------------------------ one-shot, as vLLM reads


def test_v31_reads_each_call_raw_and_content_before_the_section() -> None:
    text = (
        "Sure."
        + CALLS_BEGIN
        + v31_call("get_weather", '{"city": "Paris"}')
        + v31_call("count", '{"n": 3}')
        + CALLS_END
        + "after"
    )
    found = extract_v31(text)
    assert found.tools_called
    assert found.calls == [
        FunctionCall("get_weather", '{"city": "Paris"}'),
        FunctionCall("count", '{"n": 3}'),
    ]
    assert found.content == "Sure."  # V3.1 drops the text after the section


def test_v31_skips_a_name_that_spans_lines_and_an_unclosed_call() -> None:
    text = CALLS_BEGIN + f"{CALL_BEGIN}bad\nname{SEP}{{}}{CALL_FINISH}" + v31_call("ok", "{}")
    assert extract_v31(text).calls == [FunctionCall("ok", "{}")]
    cut = CALLS_BEGIN + f"{CALL_BEGIN}get_weather{SEP}" + '{"city"'
    found = extract_v31(cut)
    assert (found.tools_called, found.calls, found.content) == (True, [], None)
    assert not extract_v31("no markers " + CALL_BEGIN).tools_called


def test_v3_reads_the_fenced_body_and_keeps_text_after_the_section() -> None:
    text = (
        "Sure."
        + CALLS_BEGIN
        + v3_call("get_weather", '{\n  "city": "Paris"\n}')
        + "\n"
        + v3_call("count", '{"n": 3}')
        + CALLS_END
        + "bye"
    )
    found = extract_v3(text)
    assert found.calls == [
        FunctionCall("get_weather", '{\n  "city": "Paris"\n}'),
        FunctionCall("count", '{"n": 3}'),
    ]
    assert found.content == "Sure.bye"


def test_v3_another_type_voids_every_call_and_a_bad_fence_skips_one() -> None:
    typed = CALLS_BEGIN + v3_call("a", "{}") + v3_call("b", "{}", kind="tool") + CALLS_END
    assert extract_v3(typed).tools_called is False
    assert extract_v3(typed).content == typed
    fence = CALLS_BEGIN + f"{CALL_BEGIN}function{SEP}a\n```\n{{}}\n```{CALL_FINISH}" + CALLS_END
    assert extract_v3(fence).calls == []


# ------------------------------------------------------------------ streams vLLM sent


def test_v31_one_token_per_chunk_streams_as_vllm(ds_tokenizer: Tokenizer) -> None:
    """vLLM: content, ``""`` for the section marker, the name alone, raw argument
    pieces, nothing for the call's end, ``""`` after it; finish ``tool_calls``."""
    factory = ParserFactory("deepseek_v31", "deepseek_v3", True, ds_tokenizer.vocabulary)
    text = "Ok." + CALLS_BEGIN + v31_call("get_weather", '{"city": "Paris"}') + CALLS_END
    ids = ds_tokenizer.encode(text)
    deltas = stream(ds_tokenizer, factory, options(), [[i] for i in ids])
    pieces = [ds_tokenizer.piece(i) for i in ids]
    begin = pieces.index(CALLS_BEGIN)
    assert [d.content for d in deltas[:begin] if d] == ["Ok", "."]
    assert deltas[begin] == Delta(content="")
    assert deltas[begin + 1] is None  # the call's begin marker alone
    name_at = pieces.index(SEP)
    assert all(d is None for d in deltas[begin + 1 : name_at])
    opening = deltas[name_at]
    assert opening is not None and [c.name for c in opening.tool_calls] == ["get_weather"]
    assert opening.tool_calls[0].arguments is None and opening.tool_calls[0].id is not None
    assert deltas[pieces.index(CALL_FINISH)] is None
    assert deltas[-1] == Delta(content="")
    assert assemble(deltas).calls == {0: ["get_weather", '{"city": "Paris"}']}


def test_a_name_goes_alone_and_its_arguments_follow(ds_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("deepseek_v31", None, True, ds_tokenizer.vocabulary)
    text = CALLS_BEGIN + v31_call("get_weather", '{"city": "Paris"}') + CALLS_END
    ids = ds_tokenizer.encode(text)
    sep = ids.index(ds_tokenizer.vocabulary.token_ids[SEP])
    deltas = stream(ds_tokenizer, factory, options(), [ids[: sep + 3], ids[sep + 3 :]])
    first, second = deltas
    assert first is not None and second is not None
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_weather", None)]
    assert second.tool_calls[0].arguments == '{"city": "Paris"}'


def test_deepseek_v3_reasoning_follows_the_thinking_kwarg(ds_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("deepseek_v31", "deepseek_v3", True, ds_tokenizer.vocabulary)
    text = "Hmm.</think>Ok." + CALLS_BEGIN + v31_call("count", '{"n": 1}') + CALLS_END
    prompt = ds_tokenizer.encode(PROMPT)
    thought = factory.for_request(THINKING).parse(text, prompt, "seed")
    assert (thought.reasoning, thought.content) == ("Hmm.", "Ok.")
    assert [c.name for c in thought.tool_calls] == ["count"]
    plain = factory.for_request(options()).parse(text, prompt, "seed")
    assert (plain.reasoning, plain.content) == (None, "Hmm.</think>Ok.")
    for opts, reasoning in ((THINKING, "Hmm."), (options(), "")):
        ids = ds_tokenizer.encode(text)
        folded = assemble(stream(ds_tokenizer, factory, opts, [[i] for i in ids]))
        assert folded.reasoning == reasoning


@pytest.mark.parametrize(
    ("kwargs", "thinks"),
    [
        ({}, True),
        ({"thinking": None}, True),
        ({"thinking": False}, False),
        ({"enable_thinking": False}, False),
        ({"thinking": False, "enable_thinking": True}, True),
        ({"other": 1}, True),
    ],
)
def test_holo2_reads_deepseek_v3s_switch_with_thinking_on_by_default(
    ds_tokenizer: Tokenizer, kwargs: dict[str, object], thinks: bool
) -> None:
    """vLLM's ``holo2``: ``deepseek_v3`` reasoning that thinks unless a kwarg says not."""
    factory = ParserFactory(None, "holo2", True, ds_tokenizer.vocabulary)
    opts = options(chat_template_kwargs=kwargs)
    text = "Hmm.</think>Ok."
    parsed = factory.for_request(opts).parse(text, ds_tokenizer.encode(PROMPT), "seed")
    expected = ("Hmm.", "Ok.") if thinks else (None, text)
    assert (parsed.reasoning, parsed.content) == expected
    ids = ds_tokenizer.encode(text)
    folded = assemble(stream(ds_tokenizer, factory, opts, [[i] for i in ids]))
    assert (folded.reasoning, folded.content) == (("Hmm.", "Ok.") if thinks else ("", text))


def test_the_parsers_are_registered_under_vllms_names(ds_tokenizer: Tokenizer) -> None:
    for tool in ("deepseek_v3", "deepseek_v31"):
        ParserFactory(tool, "deepseek_v3", True, ds_tokenizer.vocabulary)
    with pytest.raises(ParserConfigError, match="tool▁calls▁begin"):
        ParserFactory("deepseek_v31", None, True, Vocabulary({"<think>": 1, "</think>": 2}))
    # Without think tokens deepseek_v3 still starts: a request asking for thinking
    # then reads as one without.
    factory = ParserFactory(None, "deepseek_v3", False, Vocabulary({}))
    assert factory.for_request(THINKING).parse("a</think>b", None, "s").content == "a</think>b"


# ------------------------------------------------------------------ generated outputs

WORDS = ["Paris", " and", " 東京", " 👍🏽", " {braces}", ' "quotes"', " <", "\n", "`"]
STRINGS = ["Paris", "東京 👩‍👩‍👧", 'say "hi"', "{not json}", "```", "a\\b\n"]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map("".join)
call_args = st.sampled_from(
    [("get_weather", json.dumps({"city": s}, ensure_ascii=False)) for s in STRINGS]
    + [("count", '{"n": 3}'), ("count", '{\n  "n": 3\n}'), ("count", ""), ("count", "{n: 3")]
)


@st.composite
def deepseek_output(draw: st.DrawFn, fenced: bool, reasoning: bool) -> str:
    out = draw(text) + "</think>" if reasoning else ""
    calls = draw(st.lists(call_args, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    if calls:
        make = v3_call if fenced else v31_call
        out += CALLS_BEGIN + "".join(make(n, a) for n, a in calls) + CALLS_END
        if draw(st.booleans()):
            out += draw(text)
    return out


CONFIGS = {
    "deepseek_v31": ("deepseek_v31", False),
    "deepseek_v3": ("deepseek_v3", True),
}


@st.composite
def case(draw: st.DrawFn) -> tuple[str, bool, str, list[int], list[int], str]:
    config = draw(st.sampled_from(sorted(CONFIGS)))
    thinking = draw(st.booleans())
    output = draw(deepseek_output(CONFIGS[config][1], thinking))
    cuts_a = draw(st.lists(st.integers(0, 300), max_size=30))
    cuts_b = draw(st.lists(st.integers(0, 300), max_size=30))
    finish = draw(st.sampled_from(["stop", "length"]))
    return config, thinking, output, cuts_a, cuts_b, finish


def _setup(tokenizer: Tokenizer, config: str, thinking: bool) -> tuple[ParserFactory, ParseOptions]:
    factory = ParserFactory(CONFIGS[config][0], "deepseek_v3", True, tokenizer.vocabulary)
    return factory, THINKING if thinking else options()


@PROPS
@given(generated=case())
def test_any_chunking_assembles_the_same_message(
    ds_tokenizer: Tokenizer, generated: tuple[str, bool, str, list[int], list[int], str]
) -> None:
    config, thinking, output, cuts_a, cuts_b, finish = generated
    factory, opts = _setup(ds_tokenizer, config, thinking)
    ids = ds_tokenizer.encode(output)
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
    baseline = assemble(stream(ds_tokenizer, factory, opts, [[i] for i in ids], finish))
    for cuts in (cuts_a, cuts_b, [10**6]):
        folded = assemble(stream(ds_tokenizer, factory, opts, chunked(ids, cuts), finish))
        assert folded == baseline, (output, cuts)


@PROPS
@given(generated=case())
def test_streams_agree_with_the_one_shot_parse(
    ds_tokenizer: Tokenizer, generated: tuple[str, bool, str, list[int], list[int], str]
) -> None:
    config, thinking, output, cuts, _, _ = generated
    factory, opts = _setup(ds_tokenizer, config, thinking)
    ids = ds_tokenizer.encode(output)
    folded = assemble(stream(ds_tokenizer, factory, opts, chunked(ids, cuts)))
    parsed = factory.for_request(opts).parse(output, ds_tokenizer.encode(PROMPT), "seed")
    assert folded.reasoning == (parsed.reasoning or "")
    streamed = [folded.calls[i] for i in sorted(folded.calls)]
    assert streamed == [[c.name, c.arguments] for c in parsed.tool_calls]
    # V3.1's one-shot drops text after the section, which the stream sends as it
    # comes (as vLLM's does); whitespace-only content is null one-shot.
    if not parsed.tool_calls or config == "deepseek_v3":
        assert folded.content.strip() == (parsed.content or "").strip()


@PROPS
@given(generated=case(), cut=st.integers(0, 300))
def test_snapshot_and_restore_continue_identically(
    ds_tokenizer: Tokenizer, generated: tuple[str, bool, str, list[int], list[int], str], cut: int
) -> None:
    config, thinking, output, cuts, _, finish = generated
    factory, opts = _setup(ds_tokenizer, config, thinking)
    chunks = chunked(ds_tokenizer.encode(output), cuts)
    expected = stream(ds_tokenizer, factory, opts, chunks, finish)
    restored = stream(ds_tokenizer, factory, opts, chunks, finish, cut % (len(chunks) + 1))
    assert restored == expected
