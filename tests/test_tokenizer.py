"""The bundled qwen3 tokenizer reproduces Qwen3's real ids and flags."""

from __future__ import annotations

import pytest

from app.tokenizer import Tokenizer, TokenizerLoadError, load_tokenizer


def test_known_encodings(tokenizer: Tokenizer) -> None:
    encode = tokenizer._hf.encode
    assert encode("<|im_start|>user\n") == [151644, 872, 198]
    assert encode("晴れ 🌤") == [105212, 32021, 11162, 234, 97]


@pytest.mark.parametrize(
    ("token_id", "content", "special"),
    [
        (151643, "<|endoftext|>", True),
        (151644, "<|im_start|>", True),
        (151645, "<|im_end|>", True),
        (151656, "<|video_pad|>", True),
        (151657, "<tool_call>", False),
        (151658, "</tool_call>", False),
        (151665, "<tool_response>", False),
        (151666, "</tool_response>", False),
        (151667, "<think>", False),
        (151668, "</think>", False),
    ],
)
def test_added_tokens(tokenizer: Tokenizer, token_id: int, content: str, special: bool) -> None:
    assert tokenizer.piece(token_id) == content
    assert (token_id in tokenizer.special_ids) is special


def test_model_facts(tokenizer: Tokenizer) -> None:
    assert tokenizer.vocab_size == 151669
    assert tokenizer.eos_token_id == 151645
    assert tokenizer.model_eos_token_ids == {151643, 151645}
    assert tokenizer.default_max_model_len == 40960
    assert tokenizer.space_marker is None
    assert tokenizer.vocabulary.id_of("<|python_tag|>") is None
    assert tokenizer.vocabulary.id_of("<think>") == 151667
    assert "<|im_end|>" in tokenizer.vocabulary.special_tokens


def test_pieces_skip_only_special(tokenizer: Tokenizer) -> None:
    ids = [151644, 151667, 9707, 151645, 10**9]
    assert tokenizer.pieces(ids, skip_special=True) == ["<think>", "Hello", ""]
    assert tokenizer.pieces(ids, skip_special=False)[0] == "<|im_start|>"


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(TokenizerLoadError, match="never downloads"):
        load_tokenizer("no-such-org/no-such-model")
