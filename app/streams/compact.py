"""The compact stream state (docs/transports.md): a parsed stream's state without what
grows with the stream (its history and pinned tool-call ids), which the client keeps
instead.

They give way to their lengths and a digest that names them with the stream's
context, so a chunk carrying a compact state is answered only by the live session
that continues exactly it. The digest is chained item by item (O(chunk) to extend),
so neither a reply nor a lookup reads the history again.
"""

from __future__ import annotations

import msgspec
import xxhash

from app.wire.protocol import CompactStreamState, StreamState

STATE_HEADER = "X-Derender-State"
COMPACT_MODE = "compact"
_STATE_KEY = STATE_HEADER.lower().encode()  # ASGI header names are lower case

_COMPACT = COMPACT_MODE.encode()
_DIGEST_BYTES = 16


class _CompactKey(msgspec.Struct):
    """The key that tells a compact state from a full one, whatever its value."""

    output_digest: msgspec.Raw = msgspec.Raw()


_key_decoder = msgspec.json.Decoder(_CompactKey | None)


class StreamDigest:
    """The running digest of what a compact state leaves out: the history, chunk by
    chunk (its boundaries included), and the pinned tool-call ids, one by one. The
    history is one hash fed the stream's context (a fixed-size digest) and then each
    chunk as a JSON array, so a chunk costs one update and the name one finalization;
    the arrays delimit themselves, so the hash reads one history one way only. It does
    not depend on when it was taken: a session kept live and one rebuilt by replay name
    the same stream the same way. It folds in what was added since it was last taken,
    so a stream that never asks for a compact state never pays for one.

    XXH3-128, not a cryptographic hash: its finalization costs a seventh of BLAKE2s's.
    The digest is a name, not a secret or a MAC: a compact state is answered only by
    the live session whose own name equals it (a Redis snapshot is HMAC'd apart), so
    the name need only keep distinct histories apart by accident (128 bits) and be
    made only by whoever knows the context and the history it names, as any hash of
    them is."""

    __slots__ = ("_chunks_seen", "_context", "_history", "_ids", "_ids_seen")

    def __init__(self) -> None:
        # The hash of the history so far, after the context it was begun under (a
        # placeholder until the first is named).
        self._history = _EMPTY
        self._context: bytes | None = None
        self._ids = bytes(_DIGEST_BYTES)
        self._chunks_seen = self._ids_seen = 0

    def named(
        self,
        context: bytes,
        token_ids: list[int],
        chunk_lens: list[int],
        call_ids: list[str],
    ) -> bytes:
        """The digest of a state's history (``token_ids`` in chunks of ``chunk_lens``)
        and tool-call ids under ``context`` (the stream's fingerprint digest: two streams
        sharing a request id and a history still differ), in hex as a state's bytes
        carry it. They continue what it was last taken of: a stream's history and pinned
        ids only grow."""
        history = self._history
        if context is not self._context and context != self._context:
            history = self._begun(context)  # a session has one context
        chunks, seen = len(chunk_lens), self._chunks_seen
        if seen + 1 == chunks and chunk_lens[-1] == 1:  # most replies
            history.update(b"[%d]" % token_ids[-1])
            self._chunks_seen = chunks
        elif seen < chunks:
            at = len(token_ids) - sum(chunk_lens[seen:])  # where the unseen chunks begin
            for size in chunk_lens[seen:]:
                history.update(_json(token_ids[at : at + size]))
                at += size
            self._chunks_seen = chunks
        if call_ids:
            return self._with_ids(history, call_ids)
        return history.hexdigest().encode()  # cheaper than hexlify(digest())

    def _with_ids(self, history: xxhash.xxh3_128, call_ids: list[str]) -> bytes:
        """The name of ``history`` with ``call_ids``, the ids' chain grown by those it
        has not seen."""
        if self._ids_seen < len(call_ids):
            for call_id in call_ids[self._ids_seen :]:
                self._ids = _link(self._ids, call_id.encode())
            self._ids_seen = len(call_ids)
        # After the arrays, a byte no JSON array starts with, then the ids' chain.
        named = history.copy()
        named.update(_IDS_MARK + self._ids)
        return named.hexdigest().encode()

    def _begun(self, context: bytes) -> xxhash.xxh3_128:
        """The history's hash begun again under ``context``."""
        self._history = xxhash.xxh3_128(context)
        self._context = context
        self._chunks_seen = 0
        return self._history


_json = msgspec.json.Encoder().encode  # an array of ints: b"[%d]" % id for one
_IDS_MARK = b";"
_EMPTY = xxhash.xxh3_128()


def _link(chain: bytes, item: bytes) -> bytes:
    """The ids' chain after ``item`` (the chain is of fixed size: the two read apart)."""
    return xxhash.xxh3_128_digest(chain + item)


def compact(
    state: StreamState,
    digest: StreamDigest,
    context: bytes,
    history: tuple[list[int], list[int]] | None = None,
) -> CompactStreamState:
    """``state`` with its history (``history``, its ids and chunk lengths, when the
    state leaves it to the session) and tool-call ids given as their lengths and the
    digest that names them (``digest``'s, under ``context``)."""
    token_ids, chunk_lens = history or (state.output_token_ids, state.output_chunk_lens)
    call_ids = state.last_tool_call_ids
    return CompactStreamState(  # by position: keywords cost a lookup each
        state.prev_tokens,
        state.prefix_offset,
        state.read_offset,
        state.role_sent,
        state.logprob_context_token_ids,
        state.logprob_text_offset,
        len(token_ids),  # output_tokens
        digest.named(context, token_ids, chunk_lens, call_ids).decode(),  # output_digest
        state.tools_streamed,
        len(call_ids),  # tool_calls
    )


def compact_of(state: StreamState, context: bytes) -> CompactStreamState:
    """A full state as compact, its history digested whole (a chunk on the full path:
    it reads the history anyway)."""
    return compact(state, StreamDigest(), context)


def wants_compact(headers: dict[bytes, bytes]) -> bool:
    """Whether a request asked for compact states (any other value of the header is the
    vLLM protocol's full state)."""
    sent = headers.get(_STATE_KEY)
    return sent is not None and sent.strip().lower() == _COMPACT


def is_compact(raw: bytes) -> bool:
    """Whether the sent state is meant as a compact one: it has ``output_digest``,
    however its key is spelled (JSON escapes included) and whatever its value (a
    malformed one is refused by the compact path's decode, never read as a full state).
    A state that is not a JSON object is not; the full path's decode says what is wrong.
    """
    try:
        found = _key_decoder.decode(raw)
    except msgspec.DecodeError:
        return False
    return found is not None and bool(found.output_digest)
