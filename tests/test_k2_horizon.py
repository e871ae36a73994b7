"""K2 Horizon (``k2_horizon`` reasoning) on its synthetic tokenizer: what the golden
corpus does not reach. Hostile outputs (markers, halves of them, other efforts' blocks)
never raise, and a snapshot restored at any chunk continues identically. Which marker
ends reasoning depends on the chunking in vLLM (its closer wins over an earlier call
section in the same chunk: docs/parity.md), so no chunking invariance is claimed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tokenizer import Tokenizer, load_tokenizer
from parsers.registry import ParserFactory
from parsers.types import ParseOptions
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
