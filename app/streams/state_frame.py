"""The bytes of a plain chunk's carried state, written around its few changing values.

A plain one-id chunk (``ParsedStreamDerenderer.continued``) carries the state the
previous chunk did, but for its logprob context and its history (which the session
keeps, as JSON and as a running digest). A frame is cut once from msgspec's own
encoding of that state, at those values, and then writes each such chunk's state as
the bytes msgspec would: neither the state nor its compact form is built or encoded
again. The frame belongs to the one state object it was cut for (``state``): a chunk
that changes anything else carries a new object and is encoded the ordinary way.
"""

from __future__ import annotations

import msgspec

from app.streams.state_json import IDS_OPEN, LENS_OPEN, NO_HISTORY
from app.wire.protocol import CompactStreamState, StreamState, encoder

_CONTEXT_KEY = b'"logprob_context_token_ids":'
_COUNT_KEY = b'"output_tokens":'
_DIGEST_KEY = b',"output_digest":"'
_ints = msgspec.json.Encoder().encode


class StateFrame:
    """A state's encodings, full (its history left to the session) and compact, cut at
    its logprob context, history and the history's count and digest. Each is cut when
    first asked; ``state`` is the state object it writes now (the plain path moves it
    on to each plain chunk's state)."""

    __slots__ = ("_compact", "_full", "state")

    def __init__(self, state: StreamState) -> None:
        self.state = state
        self._compact: bytes | None = None
        self._full: tuple[bytes, bytes, bytes] | None = None

    def full(self, ids: bytes | bytearray, lens: bytes | bytearray) -> bytes:
        """``state`` as ``encoder.encode`` writes it with the session's history, its
        arrays ``ids`` and ``lens`` as ``HistoryJson`` keeps them (open: without their
        closing brackets), copied once, in one join."""
        state = self.state
        if self._full is None:
            self._full = _full_frame(state)
        head, middle, tail = self._full
        context = _ints(state.logprob_context_token_ids)
        return b"".join((head, context, middle, ids, LENS_OPEN, lens, tail))

    def compact(self, count: int, digest: bytes) -> bytes:
        """``state`` as ``encoder.encode`` writes its compact form, with a history of
        ``count`` ids named ``digest`` (both not at their defaults: a plain chunk grew
        it). The frame is a template: one formatting writes the three values."""
        state = self.state
        template = self._compact
        if template is None:
            template = self._compact = _compact_frame(state)
        return template % (_ints(state.logprob_context_token_ids), count, digest)


def _cut_context(encoded: bytes) -> tuple[bytes, int]:
    """The bytes before the logprob context's array, and where the array ends."""
    start = encoded.index(_CONTEXT_KEY) + len(_CONTEXT_KEY)
    return encoded[:start], encoded.index(b"]", start) + 1


def _full_frame(state: StreamState) -> tuple[bytes, bytes, bytes]:
    encoded = encoder.encode(msgspec.structs.replace(state, logprob_context_token_ids=[0]))
    head, end = _cut_context(encoded)
    at = encoded.index(NO_HISTORY, end)
    return head, encoded[end:at] + IDS_OPEN, b"]" + encoded[at + len(NO_HISTORY) :]


def _compact_frame(state: StreamState) -> bytes:
    compact = CompactStreamState(  # by position, as app/streams/compact.py builds it
        state.prev_tokens,
        state.prefix_offset,
        state.read_offset,
        state.role_sent,
        [0],  # not empty, as a chunk's context is not: the key is written
        state.logprob_text_offset,
        1,
        "0",
        state.tools_streamed,
        len(state.last_tool_call_ids),
    )
    encoded = encoder.encode(compact)
    head, end = _cut_context(encoded)
    count = encoded.index(_COUNT_KEY, end) + len(_COUNT_KEY)
    digest = encoded.index(_DIGEST_KEY, count) + len(_DIGEST_KEY)
    pieces = (head, encoded[end:count], encoded[encoded.index(b'"', digest) :])
    head, middle, tail = (piece.replace(b"%", b"%%") for piece in pieces)  # escaped
    return b"".join((head, b"%b", middle, b"%d", _DIGEST_KEY, b"%b", tail))
