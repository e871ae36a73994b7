"""PLaMo 3 (``plamo3``): what the goldens (P2, P3) and the shared harnesses do not cover.

On the synthetic PLaMo tokenizer (Qwen3's vocabulary plus PLaMo's marker pieces, so
each marker is several tokens): which cut markers the end of a stream drops (vLLM
compares token ids), how the prompt is read back, the requests vLLM's parser fails,
and hostile outputs built from PLaMo's markers and their pieces, which never raise
(but for vLLM's own refusals), continue identically from a snapshot at any chunk, and
cost time linear in the output.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.plamo3 import (
    ONE_SHOT_REFUSED,
    STREAM_REFUSED,
    PlamoGrammars,
    PlamoReasoning,
    PlamoReasoningState,
)
from parsers.registry import ParserFactory
from parsers.types import OutputRefused, ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import PROPS, assemble, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

TOOLS = (
    ToolSpec("count", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    ToolSpec("note", {"type": "object", "properties": {"body": {"type": "string"}}}),
)
B, E = "<|plamo:begin_", "<|plamo:end_"
THINK_END = f"{E}think:plamo|>"
ARGS_OPEN = f"{B}tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"


def request(name: str | None, arguments: str) -> str:
    named = "" if name is None else f"{B}tool_name:plamo|>{name}{E}tool_name:plamo|>"
    return (
        f"{B}tool_request:plamo|>{named}{ARGS_OPEN}{arguments}"
        f"{E}tool_arguments:plamo|>{E}tool_request:plamo|>"
    )


def calls(*requests: str) -> str:
    return f"{B}tool_requests:plamo|>{''.join(requests)}{E}tool_requests:plamo|>"


@pytest.fixture(scope="module")
def plamo(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic PLaMo 3 tokenizer."""
    return load_tokenizer(str(write_synthetic_tokenizer("plamo3", tmp_path_factory.mktemp("p"))))


def factory(tokenizer: Tokenizer, reasoning: str | None = "plamo3") -> ParserFactory:
    return ParserFactory("plamo3", reasoning, True, tokenizer.vocabulary)


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, **({"tool_choice": "auto"} | kwargs))


def test_a_cut_marker_is_dropped_only_where_its_ids_begin_a_markers(plamo: Tokenizer) -> None:
    markers = PlamoGrammars(plamo.vocabulary).thinking
    for kept in (f"{E}", f"{E}think", f"{B}tool", f"{B}tool_requests", f"{E}tool_arguments"):
        assert markers.strip_cut(f"ab{kept}") == "ab", kept
    # a marker's name token cut in the middle, or the head before any anchor: no prefix
    for text in (f"ab{B}tool_req", "ab<|plamo:", f"ab{B}think:plamo|>x", f"ab{B}nothing"):
        assert markers.strip_cut(text) == text, text
    assert markers.strip_cut(f"{E}think") is None
    # without thinking, the think markers are no markers at all
    assert PlamoGrammars(plamo.vocabulary).plain.strip_cut(f"ab{E}think") == f"ab{E}think"


def test_the_prompt_ends_reasoning_by_the_end_markers_ids(plamo: Tokenizer) -> None:
    grammars = PlamoGrammars(plamo.vocabulary)

    def ended(prompt: str, **kwargs: object) -> bool:
        opts = ParseOptions(chat_template_kwargs=dict(kwargs))
        parser = PlamoReasoning(grammars, opts, PlamoReasoningState())
        return parser.is_reasoning_end(plamo.encode(prompt))

    turn = "<|plamo:tag|>user<|plamo:msg|>hi<|plamo:tag|>assistant<|plamo:msg|>"
    assert not ended(turn)
    assert not ended(f"{turn}{B}think:plamo|>")
    assert ended(f"{turn}{B}think:plamo|>plan{THINK_END}")
    assert not ended(f"{B}think:plamo|>x{THINK_END}{turn}")  # a turn's end stops the scan
    assert ended(turn, enable_thinking=False)
    assert not ended(turn, thinking=False)  # vLLM's PLaMo parser reads enable_thinking only


def test_the_switching_chunk_hands_on_its_ids_after_the_end_marker(plamo: Tokenizer) -> None:
    parser = PlamoReasoning(PlamoGrammars(plamo.vocabulary), ParseOptions(), PlamoReasoningState())
    ids = plamo.encode(f"plan{THINK_END}answer")
    assert parser.content_ids(ids) == plamo.encode("answer")
    tail = plamo.encode(THINK_END)[-1:] + plamo.encode("answer")
    assert parser.content_ids(tail) == tail  # the marker split across chunks: all of them


def test_arguments_before_any_name_fail_the_request_as_vllms_do(plamo: Tokenizer) -> None:
    output = f"plan{THINK_END}{calls(request(None, '{}'))}"
    with pytest.raises(OutputRefused, match=ONE_SHOT_REFUSED):
        factory(plamo).for_request(options()).parse(output, [], "seed")
    with pytest.raises(OutputRefused, match=STREAM_REFUSED):
        stream(plamo, factory(plamo), options(), [plamo.encode(output)])
    # tool_choice none reads the calls and drops them: nothing fails
    none = options(tool_choice="none")
    assert factory(plamo).for_request(none).parse(output, [], "seed").tool_calls == []


def test_a_call_without_a_name_is_named_by_its_arguments(plamo: Tokenizer) -> None:
    body = '{"name": "count", "arguments": {"n": 3}}'
    output = f"plan{THINK_END}{calls(request('', body))}"
    ids = plamo.encode(output)
    folded = assemble(stream(plamo, factory(plamo), options(), [[i] for i in ids]))
    # mid-stream the arguments go out from the name's closing quote, as vLLM's do
    assert folded.calls == {0: ["count", body[body.index('count"') + 5 :]]}
    parsed = factory(plamo).for_request(options()).parse(output, [], "seed")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("count", body)]


PIECES = [
    f"{B}think:plamo|>",
    THINK_END,
    f"{B}tool_requests:plamo|>",
    f"{E}tool_requests:plamo|>",
    f"{B}tool_request:plamo|>",
    f"{E}tool_request:plamo|>",
    f"{B}tool_name:plamo|>count{E}tool_name:plamo|>",
    f"{B}tool_name:plamo|>",
    f"{E}tool_name:plamo|>",
    ARGS_OPEN,
    f"{E}tool_arguments:plamo|>",
    "<|plamo:tag|>",
    "<|plamo:msg|>",
    B,
    E,
    ":plamo|>",
    "<|plamo:",
    "tool_",
    '{"n": 1',
    "}",
    "]]",
    '"name": "count"',
    " 東京 🌤️",
    "\n",
    "<|im_end|>",
]
outputs = st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join)


@settings(PROPS, max_examples=40)
@given(
    output=outputs,
    cuts=st.lists(st.integers(0, 200), max_size=12),
    restore=st.integers(0, 40),
    thinking=st.sampled_from([{}, {"enable_thinking": False}]),
    reasoning=st.sampled_from(["plamo3", None]),
)
def test_hostile_output_parses_and_a_restored_snapshot_continues(
    plamo: Tokenizer,
    output: str,
    cuts: list[int],
    restore: int,
    thinking: dict[str, bool],
    reasoning: str | None,
) -> None:
    made = factory(plamo, reasoning)
    opts = options(chat_template_kwargs=thinking)
    try:
        made.for_request(opts).parse(output, [], "seed")
    except OutputRefused as refused:
        assert str(refused) == ONE_SHOT_REFUSED
    chunks = chunked(plamo.encode(output), cuts)
    try:
        expected = stream(plamo, made, opts, chunks, finish="length")
    except OutputRefused as refused:
        assert str(refused) == STREAM_REFUSED
        return
    at = restore % (len(chunks) + 1)
    assert stream(plamo, made, opts, chunks, finish="length", restore_at=at) == expected


@pytest.mark.parametrize(
    "output",
    [
        # one long call, a token per chunk: each chunk costs what it adds
        f"plan{THINK_END}{B}tool_requests:plamo|>{B}tool_request:plamo|>"
        f'{B}tool_name:plamo|>note{E}tool_name:plamo|>{ARGS_OPEN}{{"body": "' + "x y " * 20_000,
        # a storm of anchors that never complete a marker, in reasoning and in arguments
        "plan" + f"{B}tool_" * 8_000,
        f"plan{THINK_END}{calls()}{B}tool_request:plamo|>{B}tool_name:plamo|>" + f"note{E}" * 8_000,
        # a name never closed, and brackets held and released one after another
        f"plan{THINK_END}{B}tool_requests:plamo|>{B}tool_request:plamo|>"
        f"{B}tool_name:plamo|>c{E}tool_name:plamo|>{ARGS_OPEN}" + "{}" * 20_000,
    ],
    ids=["long_arguments", "anchor_storm", "name_storm", "bracket_storm"],
)
def test_hostile_streams_cost_linear_time(plamo: Tokenizer, output: str) -> None:
    ids = plamo.encode(output)
    started = time.perf_counter()
    stream(plamo, factory(plamo), options(), [[i] for i in ids], finish="length")
    factory(plamo).for_request(options()).parse(output, [], "seed")
    assert time.perf_counter() - started < 20.0
