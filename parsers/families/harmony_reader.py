"""Harmony's message framing, read token by token, state kept as plain data.

The ``openai-harmony`` package's ``StreamableParser.process`` costs ~30 µs for every
token outside a message's text (each call encodes the ``<|start|>`` or ``<|message|>``
marker afresh), so the framing is read here, as the package reads it: before a message
only ``<|start|>`` is taken (any other token is refused); a header keeps every token
until ``<|message|>``, which reads it (parsers/families/harmony_header.py: one linear pass over
its text); a message's text is its tokens' bytes, shown as they form whole characters
(an invalid sequence as one U+FFFD, as the package's decoder shows it), and a stop token
ends it. Everything the reader holds between tokens is a ``ReaderState``, so a stream
restored from a snapshot continues where it was (an open header keeps its tokens, an open
message its header and unfinished character) without reading anything again.
tests/test_gptoss.py checks the reader against the package token by token.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from typing import Any, cast

from msgspec import Struct, field

from parsers.families.harmony_header import MessageHeader, read_header

# What one token did.
TOOK, OPENED, TEXT, ENDED, REFUSED = range(5)
# Where the reader is: waiting for <|start|>, in a header, in a message's text.
EXPECT_START, HEADER, CONTENT = range(3)
# The role the package is given for the first message.
_FIRST_ROLE = "assistant"
# Headers remembered by their tokens: a few, short ones (real headers are ~10 tokens and
# a stream repeats a handful; reading one costs ~10 µs, finding it ~1).
_HEADERS_KEPT = 256
_HEADER_TOKENS_KEPT = 64
# A header no tokens make: what the header cache answers for one it does not hold.
_UNKNOWN = MessageHeader("", None, None, None)
# Bytes of a message's held text decoded at once (more than the longest character).
_DECODE_WINDOW = 256


class Framing:
    """The marker ids, each token's bytes as the package decodes them, and what a
    header's tokens say."""

    def __init__(self, encoding: Any, start_id: int, message_id: int) -> None:
        self.encoding = encoding
        self.start_id = start_id
        self.message_id = message_id
        self.stop_ids = frozenset(encoding.stop_tokens())
        self._bytes: dict[int, bytes | None] = {}
        self._headers: dict[tuple[str | None, tuple[int, ...]], MessageHeader | None] = {}

    def header(self, role: str | None, tokens: list[int]) -> MessageHeader | None:
        """The header these tokens make (``role``: the one the parser was given, if
        any), or None when the package refuses it."""
        short = len(tokens) <= _HEADER_TOKENS_KEPT
        if short:
            key = (role, tuple(tokens))
            known = self._headers.get(key, _UNKNOWN)
            if known is not _UNKNOWN:
                return known
        text = self._text_of(tokens)
        header = read_header(text, role) if text is not None else None
        if short:
            if len(self._headers) >= _HEADERS_KEPT:
                # Streams parse in worker threads: one atomic step, never an eviction race.
                self._headers.clear()
            self._headers[key] = header
        return header

    def token_bytes(self, token_id: int) -> bytes | None:
        """The token's bytes (a special token's are its text); None for no token.
        Remembered per id, so at most the vocabulary's size."""
        found = self._bytes.get(token_id, b"")
        if found == b"":
            from openai_harmony import HarmonyError

            try:
                text = self.encoding.decode([token_id], errors="surrogateescape")
                found = text.encode("utf-8", "surrogateescape")
            except HarmonyError:
                found = None
            self._bytes[token_id] = found
        return found

    def _text_of(self, token_ids: Iterable[int]) -> str | None:
        """The tokens' text, as the package decodes a header: None when an id is no
        token or their bytes are not UTF-8."""
        known = self._bytes
        pieces = [known[t] if t in known else self.token_bytes(t) for t in token_ids]
        if None in pieces:
            return None
        try:
            return b"".join(cast(list[bytes], pieces)).decode()
        except UnicodeDecodeError:
            return None


def _shown(held: bytearray) -> str:
    """What the package shows of ``held`` now, taken from its front: the whole characters
    up to the first invalid sequence and one U+FFFD for it (the bytes after it wait), or
    every whole character.

    Read a window at a time: invalid bytes can pile up one token faster than one a token
    is shown, and the pile is neither copied nor read again per token. A window starts at
    a character's start and holds at least a character's length, so it finds the errors
    (and their ends) that decoding all of ``held`` would.
    """
    shown: list[str] = []
    start = 0
    while True:
        window = held[start : start + _DECODE_WINDOW]
        try:
            text, used = codecs.utf_8_decode(window, "strict", False)
        except UnicodeDecodeError as error:
            shown += (window[: error.start].decode(), "\ufffd")
            del held[: start + error.end]
            return "".join(shown)
        shown.append(text)
        if start + len(window) == len(held):
            del held[: start + used]
            return "".join(shown)
        start += used


class ReaderState(Struct):
    """The reader between tokens. ``started``: past the first message (ended or
    refused), so a header opens with ``<|start|>``; ``given_role``: the role the package
    was given (assistant) still stands, as it does until a header is read (a refused one
    leaves it); ``tokens``: the open header's, its ``<|start|>`` first (what vLLM
    recovers when the output ends in it); in a message, its ``header`` and the bytes
    ``held`` that form no whole character yet (``broken``: a token had no bytes)."""

    started: bool = False
    phase: int = HEADER
    given_role: bool = True
    tokens: list[int] = field(default_factory=list)
    header: MessageHeader | None = None
    held: bytearray = field(default_factory=bytearray)
    broken: bool = False


class HarmonyReader:
    """One output's framing, reading into ``state`` (kept by the caller's state).
    ``keep_text``: keep the finished messages (one-shot)."""

    def __init__(
        self, framing: Framing, state: ReaderState | None = None, *, keep_text: bool = False
    ) -> None:
        self.framing = framing
        self.s = state if state is not None else ReaderState()
        # The text a token showed (TEXT), and the finished messages when ``keep_text``.
        self.delta = ""
        self.keep_text = keep_text
        self.messages: list[tuple[MessageHeader, str]] = []
        self._text: list[str] = []

    @property
    def header(self) -> MessageHeader | None:
        """The open message's header."""
        return self.s.header

    def process(self, token_id: int) -> int:
        """Read one token: TOOK, OPENED (a header read), TEXT (``delta`` holds what it
        shows, maybe nothing), ENDED (a stop token) or REFUSED (the open message, if
        any, is dropped and the reader waits for ``<|start|>``)."""
        s = self.s
        phase = s.phase
        if phase == CONTENT:
            if token_id in self.framing.stop_ids:
                self._end()
                return ENDED
            self._decode(token_id)
            return TEXT
        if phase == HEADER:
            if token_id != self.framing.message_id:
                s.tokens.append(token_id)
                return TOOK
            return self._open()
        if token_id != self.framing.start_id:
            return self._refuse()
        s.tokens.append(token_id)
        s.phase = HEADER
        return TOOK

    def close(self) -> list[int] | None:
        """End of output: an open message ends; a header cut off (the package refuses
        the end there) is dropped and its tokens returned, for the caller to recover."""
        s = self.s
        if s.phase == CONTENT:
            self._end()
        if s.phase != HEADER:
            return None
        cut_off = s.tokens
        s.tokens = []
        s.phase = EXPECT_START
        s.started = True
        return cut_off

    def _open(self) -> int:
        """``<|message|>``: the header is read, or refused."""
        s = self.s
        role = _FIRST_ROLE if s.given_role else None
        header = self.framing.header(role, s.tokens[1:] if s.started else s.tokens)
        if header is None:
            return self._refuse()
        s.tokens.clear()
        s.header = header
        s.given_role = False
        s.phase = CONTENT
        return OPENED

    def _decode(self, token_id: int) -> None:
        """What this token shows, as the package decodes a message's bytes: the whole
        characters so far; an invalid sequence shows as one U+FFFD and the bytes after it
        wait for the next token; an unfinished character waits."""
        s = self.s
        raw = self.framing.token_bytes(token_id)
        if raw is None or s.broken:
            # No such token (the server refuses its id): nothing shows again.
            s.broken = True
            self.delta = ""
            return
        s.held += raw
        text = _shown(s.held)
        self.delta = text
        if self.keep_text:
            self._text.append(text)

    def _end(self) -> None:
        s = self.s
        if self.keep_text and s.header is not None:
            self._text.append(s.held.decode("utf-8", "replace"))
            self.messages.append((s.header, "".join(self._text)))
        self._text.clear()
        self._leave()

    def _refuse(self) -> int:
        self._leave()
        return REFUSED

    def _leave(self) -> None:
        """The open message, if any, is over: wait for ``<|start|>``."""
        s = self.s
        s.tokens.clear()
        s.header = None
        s.held.clear()
        s.broken = False
        s.phase = EXPECT_START
        s.started = True
