"""The tokenizers tests run on: the bundled ones, loaded once, and labelled test
tokenizers (Qwen3's vocabulary plus a family's markers as added tokens)."""

from __future__ import annotations

import functools

from tokenizers import AddedToken
from transformers import AutoTokenizer

from app.tokens.tokenizer import Tokenizer, load_tokenizer, resolve_model_dir


@functools.cache
def bundled_tokenizer(name: str) -> Tokenizer:
    """A bundled tokenizer (``qwen3``, ``deepseek``, ``gpt-oss``...) or a test tokenizer's
    directory, loaded once per test session."""
    return load_tokenizer(name)


def qwen3_with_tokens(*texts: str) -> Tokenizer:
    """A test tokenizer: Qwen3's vocabulary plus ``texts`` as added, non-special tokens.

    The added ids follow Qwen3's, so every other id means what it means to Qwen3, and a
    family whose parser finds markers by id sees them as single tokens, as its own
    tokenizer has them.
    """
    hf = AutoTokenizer.from_pretrained(str(resolve_model_dir("qwen3")), local_files_only=True)
    hf.add_tokens([AddedToken(text, special=False, normalized=False) for text in texts])
    return Tokenizer(hf, default_max_model_len=32_768, model_eos_token_ids=[])
