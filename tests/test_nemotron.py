"""Nemotron 3 reasoning (``nemotron_v3``): Qwen3's format with held trailing whitespace and
the forced-content swap, as vLLM 0.33.0 answers (golden N2 records it)."""

from __future__ import annotations

from typing import Any

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.registry import ParserFactory
from tests.support.streams import PROMPT, options, run, stream

FORCE = {"force_nonempty_content": True}
OFF = {"enable_thinking": False}


@pytest.mark.parametrize(
    ("kwargs", "text", "expected"),
    [
        ({}, "Plan. \n</think>\n\nAnswer.", ("Plan.", "\n\nAnswer.")),
        ({}, "Plan. ", ("Plan.", None)),
        (FORCE, "Plan. ", (None, "Plan.")),
        (FORCE, "Plan.</think>\n", ("\n", "Plan.")),
        (FORCE, "Plan.</think>Answer.", ("Plan.", "Answer.")),
        (OFF, "Answer.", (None, "Answer.")),
        (OFF, " ", (" ", None)),
    ],
)
def test_one_shot_swaps_an_empty_answer_when_content_is_forced(
    tokenizer: Tokenizer, kwargs: dict[str, Any], text: str, expected: tuple[Any, Any]
) -> None:
    factory = ParserFactory(None, "nemotron_v3", True, tokenizer.vocabulary)
    parsed = factory.for_request(options(chat_template_kwargs=kwargs)).parse(
        text, tokenizer.encode(PROMPT), "seed"
    )
    assert (parsed.reasoning, parsed.content) == expected


def test_a_stream_still_reasoning_at_its_end_repeats_the_reasoning_as_content(
    tokenizer: Tokenizer,
) -> None:
    """vLLM sends what streamed as reasoning (its held whitespace too) once more, as the
    last chunk's content, when the request forces content."""
    factory = ParserFactory("qwen3_coder", "nemotron_v3", True, tokenizer.vocabulary)
    ids = tokenizer.encode("Plan the answer. \n")
    for chunks in ([[i] for i in ids], [ids]):
        forced, deltas = run(
            tokenizer, factory, options(chat_template_kwargs=FORCE), chunks, "length"
        )
        assert (forced.reasoning, forced.content) == ("Plan the answer.", "Plan the answer. \n")
        last = deltas[-1]
        assert last is not None and last.content == "Plan the answer. \n"
        plain, _ = run(tokenizer, factory, options(), chunks, "length")
        assert (plain.reasoning, plain.content) == ("Plan the answer.", "")


def test_an_ended_reasoning_is_not_repeated_and_the_state_restores(tokenizer: Tokenizer) -> None:
    factory = ParserFactory("qwen3_coder", "nemotron_v3", True, tokenizer.vocabulary)
    opts = options(chat_template_kwargs=FORCE)
    ids = tokenizer.encode("Plan.</think>Done.")
    folded, expected = run(tokenizer, factory, opts, [[i] for i in ids], "stop")
    assert (folded.reasoning, folded.content) == ("Plan.", "Done.")
    for cut in range(len(ids) + 1):
        assert stream(tokenizer, factory, opts, [[i] for i in ids], "stop", cut) == expected
    cut_short = tokenizer.encode("Plan more")
    _, expected = run(tokenizer, factory, opts, [[i] for i in cut_short], "length")
    for cut in range(len(cut_short) + 1):
        restored = stream(tokenizer, factory, opts, [[i] for i in cut_short], "length", cut)
        assert restored == expected
