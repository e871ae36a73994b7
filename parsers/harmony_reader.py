"""Harmony's message framing, read token by token; what a header says is the package's.

The ``openai-harmony`` package's ``StreamableParser.process`` costs ~45 µs for every
token outside a message's text (each call encodes the ``<|start|>`` or ``<|message|>``
marker afresh), so an output that is all header, or all tokens refused before a
``<|start|>``, cost a gpt-oss stream 50 to 80 µs a token. The framing around that is
small, and read here as the package reads it: before a message only ``<|start|>`` is
taken (any other token is refused); a header keeps every token until ``<|message|>``; a
message's text is its tokens' bytes, shown as they form whole characters (an invalid
sequence as one U+FFFD, as the package's decoder shows it), and a stop token ends it.
What a header means (role, channel, recipient, content type, or a refusal) is still
asked of the package, once per header at its ``<|message|>``, and remembered by its
tokens. tests/test_gptoss.py checks the reader against the package token by token.
"""

from __future__ import annotations

import codecs
from typing import Any

from msgspec import Struct

# What one token did.
TOOK, OPENED, TEXT, ENDED, REFUSED = range(5)
# Where the reader is: waiting for <|start|>, in a header, in a message's text.
EXPECT_START, HEADER, CONTENT = range(3)
# Headers remembered by their tokens: a few, short ones (real headers are ~10 tokens).
_HEADERS_KEPT = 256
_HEADER_TOKENS_KEPT = 64


class MessageHeader(Struct, frozen=True):
    role: str
    channel: str | None
    recipient: str | None
    content_type: str | None


# A header no tokens make: what the header cache answers for one it does not hold.
_UNKNOWN = MessageHeader("", None, None, None)


class Framing:
    """The marker ids, and what the package says of a header and of a token's bytes."""

    def __init__(self, encoding: Any, start_id: int, message_id: int) -> None:
        self.encoding = encoding
        self.start_id = start_id
        self.message_id = message_id
        self.stop_ids = frozenset(encoding.stop_tokens())
        self._headers: dict[tuple[bool, tuple[int, ...]], MessageHeader | None] = {}
        self._bytes: dict[int, bytes | None] = {}

    def header(self, assistant: bool, tokens: list[int]) -> MessageHeader | None:
        """The header these tokens make (``assistant``: the role was given, as it is
        for the first message), or None when the package refuses it."""
        key = (assistant, tuple(tokens))
        known = self._headers.get(key, _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        from openai_harmony import HarmonyError, Role, StreamableParser

        parser = StreamableParser(self.encoding, Role.ASSISTANT if assistant else None)
        try:
            if not assistant:
                parser.process(self.start_id)
            for token_id in tokens:
                parser.process(token_id)
            parser.process(self.message_id)
        except HarmonyError:
            header = None
        else:
            role = parser.current_role
            header = MessageHeader(
                role.value if role is not None else "",
                parser.current_channel,
                parser.current_recipient,
                parser.current_content_type,
            )
        if len(tokens) <= _HEADER_TOKENS_KEPT:
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


class HarmonyReader:
    """One output's framing. ``tokens`` is the open message's token list, kept by the
    caller's state and maintained here (what the parser took since the last message
    ended or was refused); a reader built on a carried list replays it, once.
    ``started``: past the first message, so waiting for ``<|start|>``; ``assistant``: the
    role the package was given (assistant) still stands, as it does until a header is
    read (a refused header leaves it).
    """

    def __init__(
        self,
        framing: Framing,
        tokens: list[int],
        *,
        started: bool,
        assistant: bool = True,
        keep_text: bool = False,
    ) -> None:
        self.framing = framing
        self.tokens = tokens
        self.phase = EXPECT_START if started else HEADER
        self.assistant = assistant
        self._header_from = 0
        self.header: MessageHeader | None = None
        # The text a token showed (TEXT), and the finished messages when ``keep_text``.
        self.delta = ""
        self.keep_text = keep_text
        self.messages: list[tuple[MessageHeader, str]] = []
        self._text: list[str] = []
        self._held = b""
        self._broken = False
        carried = list(tokens)
        tokens.clear()
        for token_id in carried:
            self.process(token_id)

    def process(self, token_id: int) -> int:
        """Read one token: TOOK, OPENED (a header read), TEXT (``delta`` holds what it
        shows, maybe nothing), ENDED (a stop token) or REFUSED (the open message, if
        any, is dropped and the reader waits for ``<|start|>``)."""
        phase = self.phase
        if phase == CONTENT:
            if token_id in self.framing.stop_ids:
                self._end()
                return ENDED
            self.tokens.append(token_id)
            self._decode(token_id)
            return TEXT
        if phase == HEADER:
            if token_id != self.framing.message_id:
                self.tokens.append(token_id)
                return TOOK
            header = self.framing.header(self.assistant, self.tokens[self._header_from :])
            if header is None:
                return self._refuse()
            self.tokens.append(token_id)
            self.header = header
            self.assistant = False
            self.phase = CONTENT
            return OPENED
        if token_id != self.framing.start_id:
            return self._refuse()
        self.tokens.append(token_id)
        self._header_from = len(self.tokens)
        self.phase = HEADER
        return TOOK

    def close(self) -> bool:
        """End of output: an open message ends; True when a header was cut off (the
        package refuses the end there), its tokens left for the caller to recover."""
        if self.phase == CONTENT:
            self._end()
        return self.phase == HEADER

    def _decode(self, token_id: int) -> None:
        """What this token shows, as the package decodes a message's bytes: the whole
        characters so far; an invalid sequence shows as one U+FFFD and the bytes after it
        wait for the next token; an unfinished character waits."""
        raw = self.framing.token_bytes(token_id)
        if raw is None or self._broken:
            # No such token (the server refuses its id): nothing shows again.
            self._broken = True
            self.delta = ""
            return
        held = self._held + raw
        try:
            text, used = codecs.utf_8_decode(held, "strict", False)
        except UnicodeDecodeError as error:
            text = held[: error.start].decode() + "\ufffd"
            self._held = held[error.end :]
        else:
            self._held = held[used:]
        self.delta = text
        if self.keep_text:
            self._text.append(text)

    def _end(self) -> None:
        if self.keep_text and self.header is not None:
            self._text.append(self._held.decode("utf-8", "replace"))
            self.messages.append((self.header, "".join(self._text)))
        self._text.clear()
        self._held = b""
        self._broken = False
        self.header = None
        self.tokens.clear()
        self.phase = EXPECT_START

    def _refuse(self) -> int:
        self.tokens.clear()
        self.header = None
        self.phase = EXPECT_START
        return REFUSED
