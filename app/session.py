"""A parsed stream's live session: what one choice carries from chunk to chunk.

It holds the incremental detokenizer window (special tokens kept, seeded from
the prompt), the parser with its stream-processor state, the history it has
consumed (token ids and chunk lengths), and the last request it answered with the
state its reply carried: a hit continues from that request without decoding it
again. A session is built fresh for a stream's first chunk or rebuilt from the
client-carried ``stream_state`` by replaying the history with its original chunk
boundaries, which leaves it exactly where the previous chunk left it. Either way,
the next chunk is fed the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
from msgspec import Raw

from app import budget
from app.detokenizer import DecodeWindow, Detokenizer
from app.protocol import ChatStreamDerenderRequest, encoder
from app.tokenizer import Tokenizer
from parsers.stream import ChatStream, ChatStreamState
from parsers.types import Delta


@dataclass(slots=True)
class Fingerprint:
    """What a session depends on besides its history: the server's parser settings and
    the request's ``chat_request`` and ``prompt_token_ids`` as sent. Compared byte for
    byte (a long prompt compares far faster than it hashes); hashed once, for the Redis
    key and envelope of the session's snapshots."""

    settings: bytes
    chat_request: Raw
    prompt_token_ids: Raw
    _digest: bytes | None = field(default=None, compare=False, repr=False)

    def detached(self) -> Fingerprint:
        """A copy that does not keep the request body it was read from alive."""
        return Fingerprint(
            self.settings,
            Raw(bytes(self.chat_request)),
            Raw(bytes(self.prompt_token_ids)),
            self._digest,
        )

    @property
    def digest(self) -> bytes:
        if self._digest is None:
            digest = hashlib.blake2b(self.settings, digest_size=16)
            digest.update(self.chat_request)
            digest.update(b"\x00")
            digest.update(self.prompt_token_ids)
            self._digest = digest.digest()
        return self._digest


class SessionSnapshot(msgspec.Struct, array_like=True):
    """A session's state besides what the request carries (prompt, history): plain
    data, so it travels as msgpack bytes and restores without replaying anything."""

    parser: ChatStreamState
    prev_tokens: list[str]
    prefix_offset: int
    read_offset: int


_snapshot_decoder = msgspec.msgpack.Decoder(SessionSnapshot)


class StreamSession:
    def __init__(
        self, tokenizer: Tokenizer, parser: ChatStream, prompt_token_ids: Sequence[int]
    ) -> None:
        window = DecodeWindow.seeded(tokenizer, prompt_token_ids, skip_special=False)
        self.detokenizer = Detokenizer(tokenizer, window, skip_special=False)
        self.parser = parser
        self.prompt_token_ids = prompt_token_ids
        self.output_token_ids: list[int] = []
        self.output_chunk_lens: list[int] = []
        self._ids_json = bytearray(b"[")
        self._lens_json = bytearray(b"[")
        self.answered: ChatStreamDerenderRequest | None = None
        # The request bytes it continues, detached; set when it is first kept.
        self.fingerprint: Fingerprint | None = None

    def snapshot(self) -> bytes:
        window = self.detokenizer.window
        saved = SessionSnapshot(
            self.parser.state, window.prev_tokens, window.prefix_offset, window.read_offset
        )
        return msgspec.msgpack.encode(saved)

    @staticmethod
    def load_snapshot(snapshot: bytes) -> SessionSnapshot | None:
        """The snapshot's contents, or None when the bytes are not one."""
        try:
            return _snapshot_decoder.decode(snapshot)
        except msgspec.DecodeError:
            return None

    def resume(self, saved: SessionSnapshot, token_ids: list[int], chunk_lens: list[int]) -> None:
        """Continue where ``saved`` was taken, after ``token_ids`` in ``chunk_lens`` chunks.

        The parser was built from ``saved.parser``; this restores the rest.
        """
        self.detokenizer.window = DecodeWindow(
            saved.prev_tokens, saved.prefix_offset, saved.read_offset
        )
        self.output_token_ids = list(token_ids)
        self.output_chunk_lens = list(chunk_lens)
        self._ids_json = bytearray(encoder.encode(token_ids)[:-1])
        self._lens_json = bytearray(encoder.encode(chunk_lens)[:-1])

    def replay(self, token_ids: list[int], chunk_lens: Sequence[int]) -> None:
        """Feed an earlier stream's chunks again, as they first arrived."""
        start = 0
        for size in chunk_lens:
            chunk = token_ids[start : start + size]
            start += size
            self.feed(chunk, chunk, None)
            budget.check()

    def feed(
        self, token_ids: list[int], text_ids: list[int], finish_reason: str | None
    ) -> tuple[Delta | None, str | None]:
        """Parse one chunk; ``text_ids`` are the ids whose text it shows (no stop token).

        A chunk with neither tokens nor a finish reason leaves the parser alone.
        """
        delta: Delta | None = None
        finish: str | None = None
        if token_ids or finish_reason is not None:
            text = self.detokenizer.decode(text_ids) if token_ids else ""
            delta, finish = self.parser.step(text, token_ids, finish_reason, self.prompt_token_ids)
        if token_ids:
            comma = b"," if self.output_chunk_lens else b""
            self._ids_json += comma + ",".join(map(str, token_ids)).encode()
            self._lens_json += comma + str(len(token_ids)).encode()
            self.output_token_ids += token_ids
            self.output_chunk_lens.append(len(token_ids))
        return delta, finish

    def history_json(self) -> tuple[Raw, Raw]:
        """``output_token_ids`` and ``output_chunk_lens`` as JSON, as msgspec encodes
        them, kept up to date chunk by chunk so a reply never re-encodes the history."""
        return Raw(b"".join((self._ids_json, b"]"))), Raw(b"".join((self._lens_json, b"]")))
