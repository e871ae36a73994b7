"""The tokens of a vocabulary that cost a parser most where it holds text: the longest
plain-text ones, the longest blank ones, the longest made of given characters, and bytes
that form no character alone. ``bench hostile`` streams them, and the linear-cost tests
stream the same ones, so both meet the worst case of the vocabulary they run."""

from __future__ import annotations

from collections.abc import Callable

from app.tokens.tokenizer import Tokenizer, piece_bytes

# Characters that may end, escape or mark up a string value in some format.
_NOT_IN_VALUES = frozenset("\"'\\<>[]{}|`")


def _plain_in_values(text: str) -> bool:
    return text.isprintable() and _NOT_IN_VALUES.isdisjoint(text) and "\ufffd" not in text


def longest_tokens(
    tokenizer: Tokenizer, count: int = 16, keep: Callable[[str], bool] = _plain_in_values
) -> list[int]:
    """The vocabulary's ``count`` longest tokens whose text ``keep`` accepts; by default
    those that are plain text inside a string value of every format (printable, no
    quote, bracket, markup or escape character). Only the longest pieces are read."""
    by_piece = sorted(
        range(tokenizer.vocab_size), key=lambda i: len(tokenizer.piece(i) or ""), reverse=True
    )
    found: list[tuple[int, int]] = []
    for token_id in by_piece[: 200 * count]:
        text = tokenizer.token_text(token_id)
        if token_id not in tokenizer.special_ids and keep(text):
            found.append((-len(text), token_id))
    return [token_id for _, token_id in sorted(found)[:count]]


def longest_blank_tokens(tokenizer: Tokenizer, count: int = 16) -> list[int]:
    """The vocabulary's ``count`` longest tokens that are only whitespace."""
    return longest_tokens(tokenizer, count, str.isspace)


def longest_token_of(tokenizer: Tokenizer, chars: str) -> int:
    """The vocabulary's longest token made only of ``chars`` (the whole vocabulary is
    read: such tokens are rarely among the longest)."""
    allowed = set(chars)
    texts = ((tokenizer.token_text(i), i) for i in range(tokenizer.vocab_size))
    return max((t for t in texts if t[0] and set(t[0]) <= allowed), key=lambda t: len(t[0]))[1]


def invalid_byte_id(tokenizer: Tokenizer) -> int:
    """A token that is one byte no UTF-8 text can hold alone (it decodes to U+FFFD)."""
    return next(i for i in range(tokenizer.vocab_size) if tokenizer.decode([i]) == "\ufffd")


def continuation_pair_id(tokenizer: Tokenizer) -> int:
    """A token of two UTF-8 continuation bytes: no text can hold it alone."""
    return next(
        i
        for i in range(tokenizer.vocab_size)
        if len(raw := piece_bytes(tokenizer.piece(i) or "")) == 2
        and all(0x80 <= b < 0xC0 for b in raw)
    )
