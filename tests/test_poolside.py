"""Poolside's ``poolside_v1`` reasoning with the synthetic test tokenizer (Qwen3's
vocabulary plus Laguna's role tags, tests/support/synthetic_tokenizers.py); the cases
are what vLLM 0.33.0 answered (tests/golden/golden-V1 holds the transcripts)."""

from __future__ import annotations

import pytest

from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.registry import ParserConfigError, ParserFactory
from parsers.types import ParseOptions, Vocabulary
from tests.support.streams import assemble
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

EARLIER = (
    "<user>17 × 23?<|im_end|>\n<assistant><think>x</think>391.<|im_end|>\n<user>And 24?<|im_end|>\n"
)


@pytest.fixture(scope="module")
def laguna(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    folder = tmp_path_factory.mktemp("p")
    return load_tokenizer(str(write_synthetic_tokenizer("poolside", folder)))


def _streamed(tokenizer: Tokenizer, thinking: bool, prompt: str, output: str) -> tuple[str, str]:
    factory = ParserFactory(None, "poolside_v1", False, tokenizer.vocabulary)
    options = ParseOptions(chat_template_kwargs={"enable_thinking": thinking})
    session = StreamSession(
        tokenizer, factory.stream_for_request(options, "seed"), tokenizer.encode(prompt)
    )
    deltas = [session.feed([i], [i], None)[0] for i in tokenizer.encode(output)]
    folded = assemble(deltas)
    return folded.reasoning, folded.content


def test_an_earlier_turns_think_end_leaves_this_turns_reasoning_open(laguna: Tokenizer) -> None:
    """vLLM: the prompt is read back only to ``<assistant>``, so a ``</think>`` in an
    earlier turn does not make this turn's output content (deepseek_v3 would)."""
    output = "Plus 17.</think>408."
    assert _streamed(laguna, True, EARLIER + "<assistant>", output) == ("Plus 17.", "408.")
    # deepseek_v3 reads the whole prompt: the earlier </think> ends reasoning.
    factory = ParserFactory(None, "deepseek_v3", False, laguna.vocabulary)
    options = ParseOptions(chat_template_kwargs={"enable_thinking": True})
    session = StreamSession(
        laguna, factory.stream_for_request(options, "seed"), laguna.encode(EARLIER + "<assistant>")
    )
    folded = assemble([session.feed([i], [i], None)[0] for i in laguna.encode(output)])
    assert folded.reasoning == ""


def test_without_thinking_everything_is_content(laguna: Tokenizer) -> None:
    output = "Plus 17.</think>408."
    assert _streamed(laguna, False, "<assistant>", output) == ("", output)


def test_a_tokenizer_without_the_assistant_tag_is_refused_at_start_up() -> None:
    vocab = Vocabulary({"<think>": 1, "</think>": 2})
    with pytest.raises(ParserConfigError, match="<assistant>"):
        ParserFactory(None, "poolside_v1", False, vocab)
