"""HY-V4's and HY-V3's tool calls (``hy_v4``, ``hy_v3``): what their goldens (U5, U6)
and the shared harnesses leave out.

Their streams send arguments by length, as vLLM's do, so chunkings may differ
(docs/parity.md, hy-length-diff) and the shared any-chunking claims do not hold; here,
on HY's synthetic tokenizer: the one-shot readings, hostile output that never raises,
and a snapshot restored anywhere continuing identically.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.hy_tools import HyTools, HyV3Tools, pairs, spaced_pairs
from tests.support.parity import chunked
from tests.support.streams import factory_for, options, run, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

CALL = (
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>n</arg_key><arg_value>3</arg_value></tool_call>"
)
PIECES = [
    "<tool_calls>",
    "</tool_calls>",
    "<tool_call>",
    "</tool_call>",
    "get_weather",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "city",
    "Paris",
    '"q"\\',
    "\n",
    "</think>",
    "[1, 2",
    "<tool_sep>",
]


@pytest.fixture(scope="module")
def hy(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    return load_tokenizer(str(write_synthetic_tokenizer("hy", tmp_path_factory.mktemp("hy"))))


@pytest.mark.parametrize(
    ("output", "calls"),
    [
        (f"Sure.<tool_calls>{CALL}</tool_calls>", 1),
        (f"<tool_calls>{CALL}{CALL}</tool_calls>", 2),
        (f"<tool_calls>{CALL}", 0),  # the block never closes
        ("<tool_calls><tool_call>f<arg_key>a</arg_key>\n<arg_value>1</arg_value></tool_call>"
         "</tool_calls>", 0),  # text between a key and its value
        ("<tool_calls><tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
         "</tool_calls>", 0),  # no name
    ],
)  # fmt: skip
def test_the_one_shot_reading_is_strict(output: str, calls: int) -> None:
    found = HyTools(options()).extract(output, "seed")
    assert len(found.calls) == calls
    assert found.content == (output if not calls else output.split("<tool_calls>")[0] or None)


def test_a_key_given_twice_keeps_its_last_value_one_shot() -> None:
    body = (
        "<arg_key>n</arg_key><arg_value>1</arg_value><arg_key>n</arg_key><arg_value>2</arg_value>"
    )
    assert pairs(body) == ([("n", "1"), ("n", "2")], False)
    output = f"<tool_calls><tool_call>count{body}</tool_call></tool_calls>"
    [call] = HyTools(options()).extract(output, "seed").calls
    assert call.arguments == '{"n": 2}'


def test_hy_v3_reads_whatever_calls_it_finds_once_the_block_opens() -> None:
    spaced = "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
    assert spaced_pairs(spaced) == [("city", "Paris")]
    output = f"Sure.<tool_calls><tool_call>get_weather<tool_sep>{spaced}</tool_call>"
    [call] = HyV3Tools(options()).extract(output, "seed").calls
    assert (call.name, call.arguments) == ("get_weather", '{"city": "Paris"}')
    nothing = HyV3Tools(options()).extract("<tool_calls><tool_call>x", "seed")
    assert nothing.tools_called and not nothing.calls and nothing.content is None


@settings(max_examples=25, deadline=None)
@given(
    parser=st.sampled_from(["hy_v4", "hy_v3"]),
    parts=st.lists(st.sampled_from(PIECES), max_size=40),
    cuts=st.lists(st.integers(0, 120), max_size=12),
    at=st.integers(0, 20),
)
def test_hostile_output_streams_and_restores_identically(
    hy: Tokenizer, parser: str, parts: list[str], cuts: list[int], at: int
) -> None:
    factory = factory_for(hy, parser, "hy_v4")
    output = "".join(parts)
    factory.for_request(options()).parse(output, [], "seed")
    chunks = chunked(hy.encode(output), cuts)
    _, deltas = run(hy, factory, options(), chunks, "stop")
    restored = stream(hy, factory, options(), chunks, "stop", restore_at=at % (len(chunks) + 1))
    assert restored == deltas


def test_a_call_streams_its_name_then_its_arguments(hy: Tokenizer) -> None:
    factory = factory_for(hy, "hy_v4", "hy_v4")
    ids = hy.encode(f"Plan.</think><tool_calls>{CALL}</tool_calls><|im_end|>")
    folded, _ = run(hy, factory, options(), [[i] for i in ids], "stop")
    assert folded.reasoning == "Plan."
    # get_weather's schema has no n: its value stays text
    assert list(folded.calls.values()) == [["get_weather", '{"city": "Paris", "n": "3"}']]
