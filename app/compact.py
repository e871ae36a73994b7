"""The compact stream state (docs/transports.md): a parsed stream's state without its
history, which the client keeps instead.

The history gives way to its length and a digest that names it with the stream's
context, so a chunk carrying a compact state is answered only by the live session
that continues exactly it. The digest is chained chunk by chunk (O(chunk) to extend),
so neither a reply nor a lookup reads the history again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

from app.protocol import CompactStreamState, StreamState

STATE_HEADER = "X-Derender-State"
COMPACT_MODE = "compact"
_STATE_KEY = STATE_HEADER.lower().encode()  # ASGI header names are lower case

_DIGEST_BYTES = 16
_state_decoder = msgspec.json.Decoder(CompactStreamState | None)


class HistoryDigest:
    """A running digest of a stream's chunks, boundaries included."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = bytes(_DIGEST_BYTES)

    @classmethod
    def of(cls, token_ids: Sequence[int], chunk_lens: Sequence[int]) -> HistoryDigest:
        """The digest of a history given whole (a restored session's)."""
        digest = cls()
        start = 0
        for size in chunk_lens:
            digest.extend(token_ids[start : start + size])
            start += size
        return digest

    def extend(self, token_ids: Sequence[int]) -> None:
        chunk = msgspec.msgpack.encode(token_ids)
        self._value = hashlib.blake2b(self._value + chunk, digest_size=_DIGEST_BYTES).digest()

    def named(self, context: bytes) -> str:
        """The digest of the history under ``context`` (the stream's fingerprint digest):
        two streams sharing a request id and a history still differ."""
        return hashlib.blake2b(context + self._value, digest_size=_DIGEST_BYTES).hexdigest()


def compact(state: StreamState, output_digest: str) -> CompactStreamState:
    """``state`` with its history given as its length and ``output_digest``."""
    return CompactStreamState(
        prev_tokens=state.prev_tokens,
        prefix_offset=state.prefix_offset,
        read_offset=state.read_offset,
        role_sent=state.role_sent,
        logprob_context_token_ids=state.logprob_context_token_ids,
        logprob_text_offset=state.logprob_text_offset,
        output_tokens=len(state.output_token_ids),
        output_digest=output_digest,
        tools_streamed=state.tools_streamed,
        last_tool_call_ids=state.last_tool_call_ids,
    )


def compact_of(state: StreamState, context: bytes) -> CompactStreamState:
    """A full state as compact, its history digested whole (a chunk on the full path:
    it reads the history anyway)."""
    digest = HistoryDigest.of(state.output_token_ids, state.output_chunk_lens)
    return compact(state, digest.named(context))


def wants_compact(headers: dict[bytes, bytes]) -> bool:
    """Whether a request asked for compact states (any other value of the header is the
    vLLM protocol's full state)."""
    return headers.get(_STATE_KEY, b"").strip().lower() == COMPACT_MODE.encode()


def read_compact(raw: bytes) -> CompactStreamState | None:
    """The sent state if it is a compact one, else None (no state, or a full one).

    A full state decodes too (its history skipped, unknown to this type) with an empty
    digest; a compact state is small, so reading it costs O(1) whatever the stream's
    length. Raises ``msgspec.ValidationError`` or ``DecodeError`` for a malformed one.
    """
    state = _state_decoder.decode(raw)
    if state is None or not state.output_digest:
        return None
    return state
