"""Prompt tokenization at tiktoken speed where it provably gives transformers' ids.

A /render request is mostly tokenization: a 32,000-token prompt costs transformers'
fast tokenizer tens of milliseconds, most of it around the BPE rather than in it.
quicktok (already installed for the bundled gpt-oss tokenizer) runs tiktoken's exact
BPE over the same rank tables. It is used for a tokenizer only when its vocabulary is
quicktok's byte for byte (every id's bytes and every added token's text), its
normalizer is none or NFC (applied here first: no special token's text changes under
NFC, and no composition reaches across one), and both agree on a probe text that
exercises the pre-tokenizer's character classes; else transformers tokenizes.

The two regex engines carry Unicode tables of different versions (tokenizers' Oniguruma
16.0, quicktok 17.0), so a character one of them knows and the other does not is a
letter to one and punctuation to the other, and the pre-tokens around it differ (U+10942,
a Sidetic letter of Unicode 17, before ":A"). Python's own tables are older than both
(3.11: 14.0; a test holds the engines agree on every character it assigns), so a text
holding a character they leave unassigned is tokenized by transformers.
"""

from __future__ import annotations

import functools
import json
import re
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
        encode = _encoder(encoding, normalize, tokenizer.encode)
        specials = "".join(sorted(encoding.special_tokens_set))
        probe = _PROBE + specials + _PROBE[::-1]
        if encode(probe) == tokenizer.encode(probe):
            return encode
    return None


def _encoder(
    encoding: Any, normalize: Callable[[str], str], slow: Callable[[str], list[int]]
) -> Callable[[str], list[int]]:
    _maybe_unassigned()  # built with the proof, not on the first request

    def encode(text: str) -> list[int]:
        if _holds_unassigned(text):
            return slow(text)
        ids: list[int] = encoding.encode(normalize(text), allowed_special="all")
        return ids

    return encode


def _holds_unassigned(text: str) -> bool:
    """Whether ``text`` holds a character Python's Unicode tables leave unassigned."""
    if text.isascii():
        return False
    found = _maybe_unassigned().search(text)
    if found is None:
        return False
    category = unicodedata.category
    return any(category(char) == "Cn" for char in set(text[found.start() :]))


@functools.cache
def _maybe_unassigned() -> re.Pattern[str]:
    """A class of the BMP characters Python's tables leave unassigned and of every astral
    one: ``re`` tests a class's BMP part on a bitmap but its astral ranges one by one
    (hundreds of unassigned ones), so an astral character's category is looked up."""
    ranges: list[list[int]] = []
    for code in range(0x80, 0x10000):
        if unicodedata.category(chr(code)) == "Cn":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    bmp = "".join(f"{chr(first)}-{chr(last)}" for first, last in ranges)
    return re.compile(f"[{bmp}\\U00010000-\\U0010ffff]")


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
