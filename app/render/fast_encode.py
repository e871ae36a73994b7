"""Prompt tokenization at tiktoken speed where it provably gives transformers' ids.

A /render request is mostly tokenization: a 32,000-token prompt costs transformers'
fast tokenizer tens of milliseconds, most of it around the BPE rather than in it.
quicktok (already installed for the bundled gpt-oss tokenizer) runs tiktoken's exact
BPE over the same rank tables. It is used for a tokenizer only when its vocabulary is
quicktok's byte for byte (every id's bytes and every added token's text), its
normalizer is none or NFC (applied here first: no special token's text changes under
NFC, and no composition reaches across one), and both agree on a probe text that
exercises the pre-tokenizer's character classes; else transformers tokenizes.
"""

from __future__ import annotations

import json
import unicodedata
import weakref
from collections.abc import Callable
from typing import Any

from app.tokens.tokenizer import Tokenizer, piece_bytes

# quicktok's bundled encodings by their vocabulary sizes (checked again once loaded): only
# one of the tokenizer's size is loaded, as each takes a second or two.
_ENCODINGS = {
    "qwen3": 151_669,
    "o200k_harmony": 201_088,
    "o200k_base": 200_019,
    "cl100k_base": 100_277,
    "llama3": 128_256,
}

# Text the pre-tokenizer patterns split differently if they differ at all: letters of
# several scripts, digits in runs, contractions in both cases, whitespace runs and
# newlines before text, punctuation runs, and combining marks.
_PROBE = (
    "Hello, World! It's I'M you'RE we've they'd HE'LL 12345678 3.14159 x2y3\n\n\n  indented"
    "\t\ttabs   spaces  \r\n trailing   \n héllo e\u0301 ñandú Ω≈ç√ 日本語のテキスト 한국어 "
    "русский текст عربي ... ?!? --- *** ''' \"\"\" {[()]} <tag> </tag> a_b-c.d/e\\f @#$%^& "
    "🙂👍🏽 1,000,000 0x1F 2026-12-02T08:00:00Z   \n"
)


# Proven once per loaded tokenizer (a second or two): apps built around the same one
# (tests build many) share the result.
_proven: weakref.WeakKeyDictionary[Tokenizer, Callable[[str], list[int]] | None] = (
    weakref.WeakKeyDictionary()
)


def fast_encoder(tokenizer: Tokenizer) -> Callable[[str], list[int]] | None:
    """An encoder giving ``tokenizer.encode``'s ids faster, or None when none is proven."""
    if tokenizer not in _proven:
        _proven[tokenizer] = _prove(tokenizer)
    return _proven[tokenizer]


def _prove(tokenizer: Tokenizer) -> Callable[[str], list[int]] | None:
    try:
        import quicktok
    except ImportError:
        return None
    normalize = _normalizer(tokenizer.hf)
    if normalize is None or not _byte_level(tokenizer.hf):
        return None
    for name, size in _ENCODINGS.items():
        if size != tokenizer.vocab_size:
            continue
        encoding = quicktok.get_encoding(name)
        if not _same_vocabulary(encoding, tokenizer):
            continue
        encode = _encoder(encoding, normalize)
        specials = "".join(sorted(encoding.special_tokens_set))
        probe = _PROBE + specials + _PROBE[::-1]
        if encode(probe) == tokenizer.encode(probe):
            return encode
    return None


def _encoder(encoding: Any, normalize: Callable[[str], str]) -> Callable[[str], list[int]]:
    def encode(text: str) -> list[int]:
        ids: list[int] = encoding.encode(normalize(text), allowed_special="all")
        return ids

    return encode


def _state(component: Any) -> dict[str, Any] | None:
    if component is None:
        return None
    state = json.loads(component.__getstate__())
    return state if isinstance(state, dict) else None


def _normalizer(hf: Any) -> Callable[[str], str] | None:
    state = _state(hf.backend_tokenizer.normalizer)
    if state is None:
        return lambda text: text
    if state.get("type") == "NFC":
        return lambda text: unicodedata.normalize("NFC", text)
    return None


def _byte_level(hf: Any) -> bool:
    state = _state(hf.backend_tokenizer.decoder)
    return state is not None and state.get("type") == "ByteLevel"


def _same_vocabulary(encoding: Any, tokenizer: Tokenizer) -> bool:
    if encoding.n_vocab != tokenizer.vocab_size:
        return False
    hf = tokenizer.hf
    added = {token.content: token_id for token_id, token in hf.added_tokens_decoder.items()}
    if set(added) != set(encoding.special_tokens_set):
        return False
    if any(encoding.encode_single_token(text) != token_id for text, token_id in added.items()):
        return False
    added_ids = set(added.values())
    for token_id in range(tokenizer.vocab_size):
        if token_id in added_ids:
            continue
        piece = tokenizer.piece(token_id)
        if piece is None or encoding.decode_single_token_bytes(token_id) != piece_bytes(piece):
            return False
    return True
