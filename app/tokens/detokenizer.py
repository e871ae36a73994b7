"""Incremental detokenization with vLLM's semantics.

The state is a small window of vocab pieces with two offsets: text is emitted for the
pieces after ``read_offset`` as the difference between decoding the window from
``prefix_offset`` with and without them, which defeats the decoder's context-dependent
clean-ups. A trailing U+FFFD means an unfinished UTF-8 sequence, so nothing is
emitted until a later token completes it. After every token the window is trimmed to
what can still be read, so it stays a handful of pieces long however long the stream.

When nothing is pending (the window was all read) and the new id is whole characters
(``Tokenizer.whole_text``), decoding the window with the id adds exactly the id's own
text: it is emitted and the window becomes that one piece, what the full step gives,
without decoding anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.tokens.tokenizer import Tokenizer

# Prompt ids read to seed the window: vLLM's offset of 5 plus 2 for special tokens.
_SEED_OFFSET = 5
SEED_IDS = _SEED_OFFSET + 2
# Piece characters that hold at least one whole character (4 bytes) however pieces spell
# bytes ("<0x80>" in byte-fallback vocabularies): see Detokenizer._unfinished_tail.
_TAIL_CHARS = 32


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
        pieces = tokenizer.pieces(prompt_token_ids[-SEED_IDS:], skip_special)
        read = len(pieces)
        return cls(pieces, max(read - _SEED_OFFSET, 0), read)


class Detokenizer:
    """Turns token ids into text one id at a time, continuing a ``DecodeWindow``."""

    __slots__ = ("_special", "_tokenizer", "_whole_texts", "window")

    def __init__(self, tokenizer: Tokenizer, window: DecodeWindow, skip_special: bool) -> None:
        self._tokenizer = tokenizer
        self._whole_texts = tokenizer.whole_texts  # asked of every id
        self._special = tokenizer.special_ids if skip_special else frozenset()
        self.window = window

    def decode(self, token_ids: Sequence[int]) -> str:
        """Feed ids and return the text they complete."""
        if len(token_ids) == 1:
            return self.step(token_ids[0])
        return "".join([self.step(t) for t in token_ids])

    def step(self, token_id: int) -> str:
        """Feed one id and return the text it completes (``decode`` of one id)."""
        window = self.window
        if (
            window.prefix_offset <= window.read_offset == len(window.prev_tokens)
            and token_id not in self._special
        ):
            whole = self._whole_texts[token_id]
            if whole is not None:
                window.prev_tokens = [whole[1]]
                window.prefix_offset = 0
                window.read_offset = 1
                return whole[0]
        return self._decoded(token_id)

    def _decoded(self, token_id: int) -> str:
        """What decoding the window with ``token_id`` adds (the full step)."""
        tokenizer = self._tokenizer
        window = self.window
        if 0 <= token_id < tokenizer.vocab_size:
            new = [] if token_id in self._special else [tokenizer.piece(token_id) or ""]
        else:
            new = [""]
        prev, prefix, read = self._rebased()
        if self._unfinished_tail(prev, prefix, new):
            # Nothing to emit: grow the window in place, as the full check would.
            prev += new
            return ""
        pieces = prev + new
        prefix_text = tokenizer.tokens_to_string(pieces[prefix:read])
        full_text = tokenizer.tokens_to_string(pieces[prefix:])
        if len(full_text) > len(prefix_text) and not full_text.endswith("\ufffd"):
            text = full_text[len(prefix_text) :]
            prefix, read = read, len(pieces)
        else:
            text = ""
        # Trim what can no longer be read and rebase the offsets onto the window.
        window.prev_tokens = pieces[prefix:]
        window.read_offset = read - prefix
        window.prefix_offset = 0
        return text

    def _rebased(self) -> tuple[list[str], int, int]:
        """The window from where reading can start (offsets may come from a client)."""
        window = self.window
        prev, prefix, read = window.prev_tokens, window.prefix_offset, window.read_offset
        start = min(prefix, read, len(prev))
        if start:
            prev = window.prev_tokens = prev[start:]
            prefix, read = prefix - start, read - start
            window.prefix_offset, window.read_offset = prefix, read
        return prev, prefix, read

    def _unfinished_tail(self, prev: list[str], prefix: int, new: list[str]) -> bool:
        """Whether the window's text still ends in an unfinished character, judged from
        its last few pieces only.

        A run of bytes that never completes (invalid UTF-8) would otherwise make every
        token decode the whole growing window: quadratic. A character is at most four
        bytes, so a tail of ``_TAIL_CHARS`` piece characters (four byte-fallback pieces
        at worst) ends in U+FFFD exactly when the whole window does. When the tail
        reaches back to ``prefix`` it is the whole window and the full check runs.
        """
        if prefix:
            return False
        chars = sum(len(piece) for piece in new)
        start = len(prev)
        while start > 0 and chars < _TAIL_CHARS:
            start -= 1
            chars += len(prev[start])
        if start == 0:
            return False
        return self._tokenizer.tokens_to_string(prev[start:] + new).endswith("\ufffd")
