"""Incremental detokenization with vLLM's semantics.

The state is a small window of vocab pieces with two offsets: text is emitted for the
pieces after ``read_offset`` as the difference between decoding the window from
``prefix_offset`` with and without them, which defeats the decoder's context-dependent
clean-ups. A trailing U+FFFD means an unfinished UTF-8 sequence, so nothing is
emitted until a later token completes it. After every token the window is trimmed to
what can still be read, so it stays a handful of pieces long however long the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.tokenizer import Tokenizer

# Prompt ids read to seed the window: vLLM's offset of 5 plus 2 for special tokens.
_SEED_OFFSET = 5
_SEED_IDS = _SEED_OFFSET + 2


@dataclass(slots=True)
class DecodeWindow:
    """The incremental-decode window carried between tokens (and chunks)."""

    prev_tokens: list[str]
    prefix_offset: int = 0
    read_offset: int = 0

    @classmethod
    def seeded(
        cls, tokenizer: Tokenizer, prompt_token_ids: Sequence[int] | None, skip_special: bool
    ) -> DecodeWindow:
        """Prime the window with the prompt's tail, as the engine's detokenizer does.

        Without it, tokenizers that mark word starts (SentencePiece) lose the leading
        space of the first output token.
        """
        if not prompt_token_ids:
            return cls([])
        pieces = tokenizer.pieces(prompt_token_ids[-_SEED_IDS:], skip_special)
        read = len(pieces)
        return cls(pieces, max(read - _SEED_OFFSET, 0), read)


class Detokenizer:
    """Turns token ids into text one id at a time, continuing a ``DecodeWindow``."""

    __slots__ = ("_special", "_tokenizer", "window")

    def __init__(self, tokenizer: Tokenizer, window: DecodeWindow, skip_special: bool) -> None:
        self._tokenizer = tokenizer
        self._special = tokenizer.special_ids if skip_special else frozenset()
        self.window = window

    def decode(self, token_ids: Sequence[int]) -> str:
        """Feed ids and return the text they complete."""
        return "".join([self._step(t) for t in token_ids])

    def _step(self, token_id: int) -> str:
        tokenizer = self._tokenizer
        window = self.window
        prev = window.prev_tokens
        prefix = window.prefix_offset
        read = window.read_offset
        if 0 <= token_id < tokenizer.vocab_size:
            new = [] if token_id in self._special else [tokenizer.piece(token_id) or ""]
        else:
            new = [""]
        # Offsets may come from the client; reading starts where the window can.
        start = min(prefix, read, len(prev))
        pieces = prev[start:] + new
        prefix_text = tokenizer.tokens_to_string(pieces[prefix - start : read - start])
        full_text = tokenizer.tokens_to_string(pieces[prefix - start :])
        if len(full_text) > len(prefix_text) and not full_text.endswith("\ufffd"):
            text = full_text[len(prefix_text) :]
            prefix, read = read, len(prev) + len(new)
        else:
            text = ""
        # Trim what can no longer be read and rebase the offsets onto the window.
        window.prev_tokens = (prev + new)[prefix:]
        window.read_offset = read - prefix
        window.prefix_offset = 0
        return text
