"""K2 Horizon (``k2_horizon`` reasoning and tools) on its synthetic tokenizer: what the golden
corpus does not reach. Hostile outputs (markers, halves of them, other efforts' blocks)
never raise, and a snapshot restored at any chunk continues identically. Which marker
ends reasoning depends on the chunking in vLLM (its closer wins over an earlier call
section in the same chunk: docs/parity.md), so no chunking invariance is claimed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.k2_horizon_tools import arguments
from parsers.families.kimi_k3_markup import SPACE
from parsers.registry import ParserFactory
from parsers.types import OutputRefused, ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import PROPS, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

PIECES = [
    "<ifm|think>",
    "</ifm|think>",
    "<ifm|think_fast>",
    "</ifm|think_fast>",
    "<ifm|tool_calls>",
    "</ifm|",
    "<ifm|th",
    "<",
    "Reasoning. ",
    "東京 🌤️",
    "\n",
]
outputs = st.lists(st.sampled_from(PIECES), min_size=1, max_size=30).map("".join)


@pytest.fixture(scope="module")
def k2h_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic K2 Horizon tokenizer."""
    folder = tmp_path_factory.mktemp("k2h")
    return load_tokenizer(str(write_synthetic_tokenizer("k2_horizon", folder)))


@settings(PROPS, max_examples=25)
@given(
    output=outputs,
    cuts=st.lists(st.integers(0, 120), max_size=10),
    restore=st.integers(0, 30),
    effort=st.sampled_from([{}, {"reasoning_effort": "medium"}, {"reasoning_effort": "x"}]),
)
def test_hostile_output_parses_and_a_restored_snapshot_continues(
    k2h_tokenizer: Tokenizer, output: str, cuts: list[int], restore: int, effort: dict[str, str]
) -> None:
    factory = ParserFactory(None, "k2_horizon", False, k2h_tokenizer.vocabulary)
    opts = ParseOptions(chat_template_kwargs=effort)
    factory.for_request(opts).parse(output, [], "seed")
    chunks = chunked(k2h_tokenizer.encode(output), cuts)
    deltas = stream(k2h_tokenizer, factory, opts, chunks)
    at = restore % (len(chunks) + 1)
    assert stream(k2h_tokenizer, factory, opts, chunks, restore_at=at) == deltas


# ---------------------------------------------------------------------------- its calls

CALL_PIECES = [
    "<ifm|tool_calls>",
    "</ifm|tool_calls>",
    "<ifm|tool_call>",
    "</ifm|tool_call>",
    "<ifm|arg_key>",
    "</ifm|arg_key>",
    "<ifm|arg_type>",
    "</ifm|arg_type>",
    "<ifm|arg_value>",
    "</ifm|arg_value>",
    "get_weather",
    "city",
    "days",
    "int",
    "any",
    "3",
    " ",
    "\n",
    "Paris",
    '{"name": "get_weather", "arguments": {"days": "2"}}',
    "<ifm|tool",
]
call_outputs = st.lists(st.sampled_from(CALL_PIECES), min_size=1, max_size=30).map("".join)
TOOLS = (
    ToolSpec(
        "get_weather",
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
    ),
)
# vLLM's argument pattern, its \s spelled out (the regex module's White_Space).
_S = "[" + re.escape("".join(sorted(SPACE))) + "]*"
ARG_PATTERN = re.compile(
    "<ifm\\|arg_key>(.*?)</ifm\\|arg_key>" + _S + "(?:<ifm\\|arg_type>(.*?)</ifm\\|arg_type>"
    + _S + ")?<ifm\\|arg_value>(.*?)</ifm\\|arg_value>",
    re.DOTALL,
)  # fmt: skip


@settings(PROPS, max_examples=200)
@given(body=call_outputs)
def test_the_argument_scan_finds_what_vllms_pattern_finds(body: str) -> None:
    """One pass over the tags' places, the matches of the backtracking pattern."""
    expected = [
        (m.start(), m.end(), m.group(1), m.group(2), m.group(3)) for m in ARG_PATTERN.finditer(body)
    ]
    assert list(arguments(body, 0)) == expected


@settings(PROPS, max_examples=40)
@given(
    output=call_outputs,
    cuts=st.lists(st.integers(0, 120), max_size=10),
    restore=st.integers(0, 30),
    fmt=st.sampled_from(["xml", "xml_typed", "json"]),
    choice=st.sampled_from(["auto", "none"]),
    reasoning=st.sampled_from([None, "k2_horizon"]),
)
def test_hostile_calls_parse_and_a_restored_snapshot_continues(
    k2h_tokenizer: Tokenizer,
    output: str,
    cuts: list[int],
    restore: int,
    fmt: str,
    choice: str,
    reasoning: str | None,
) -> None:
    factory = ParserFactory("k2_horizon", reasoning, True, k2h_tokenizer.vocabulary)
    opts = ParseOptions(
        tools=TOOLS, tool_choice=choice, chat_template_kwargs={"tool_call_format": fmt}
    )
    factory.for_request(opts).parse(output, [], "seed")
    chunks = chunked(k2h_tokenizer.encode(output), cuts)
    deltas = stream(k2h_tokenizer, factory, opts, chunks)
    at = restore % (len(chunks) + 1)
    assert stream(k2h_tokenizer, factory, opts, chunks, restore_at=at) == deltas


def test_a_format_vllm_does_not_know_is_refused(k2h_tokenizer: Tokenizer) -> None:
    factory = ParserFactory("k2_horizon", None, True, k2h_tokenizer.vocabulary)
    opts = ParseOptions(
        tools=TOOLS, tool_choice="auto", chat_template_kwargs={"tool_call_format": "yaml"}
    )
    with pytest.raises(OutputRefused, match="Unsupported tool_call_format 'yaml'"):
        factory.for_request(opts).parse("Hi.", [], "seed")
