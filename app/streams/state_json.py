"""A parsed stream's ``stream_state`` as JSON bytes, kept as its client sends it back.

A reply carries the whole history (``output_token_ids``, ``output_chunk_lens``) and the
next request echoes it; a hit must prove the echo is the state the reply carried. The
history is kept as JSON, grown chunk by chunk, so neither the reply nor that check
encodes it again. Two encodings cover the clients met in practice:

- ours (msgspec's compact encoding): clients that pass the state through as bytes;
- Python's ``json.dumps`` defaults (``", "`` and ``": "`` separators, ASCII escapes):
  clients written with ``requests``, ``aiohttp`` or ``urllib``, which parse each reply
  and re-encode the next body.

Bytes equal to ``json.dumps`` of the state we sent decode to that state, so comparing
them proves what decoding would. Any other encoding is checked by decoding it.

Even skipping the history costs: a JSON decoder reads every id to find where the
state ends (twice as slowly with ``json.dumps``'s spaces). So a chunk body's two
history arrays are lifted out before it is decoded (``lift_history``): found by their
keys, cut at their closing brackets, each replaced by a ``0``. The body's state then
decodes in O(1) and a hit compares it, placeholders included, with the state the
session expects, and the lifted arrays with the session's history, byte for byte.

A Redis snapshot is found by a digest of the state it continues, taken the same way:
the lifted state's bytes and a digest of each history array (``state_digest``). A
session keeps running digests of its arrays, so naming the state it hands out costs
O(chunk); a restore hashes the arrays it was sent once and adopts them, and their
digests, as the session's history, never decoding them into ints.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from app.wire.protocol import StreamState, encoder

if TYPE_CHECKING:
    from app.streams.state_frame import StateFrame

COMPACT = ","
JSON_DUMPS = ", "

_FIELDS = msgspec.structs.fields(StreamState)
_NAMES = [f.name for f in _FIELDS]
_IDS_AT = _NAMES.index("output_token_ids")
# The history is the two adjacent fields with other fields around them.
assert _NAMES[_IDS_AT + 1] == "output_chunk_lens" and 0 < _IDS_AT < len(_NAMES) - 2
_BEFORE = [(f.name, f.encode_name) for f in _FIELDS[:_IDS_AT]]
_AFTER = [(f.name, f.encode_name) for f in _FIELDS[_IDS_AT + 2 :]]
_IDS_KEY = json.dumps(_FIELDS[_IDS_AT].encode_name).encode()
_LENS_KEY = json.dumps(_FIELDS[_IDS_AT + 1].encode_name).encode()
# A state without a history as we encode it has this where its history goes: found as
# written, since a string's quotes are escaped in it.
NO_HISTORY = b"%s:[],%s:[]" % (_IDS_KEY, _LENS_KEY)
# Before each array of a history as it is kept (open: its closing bracket follows).
IDS_OPEN = _IDS_KEY + b":"
LENS_OPEN = b"],%s:" % _LENS_KEY


class HistoryJson:
    """A stream's token ids and chunk lengths as two JSON arrays, items joined by
    ``separator``, grown by each chunk in O(chunk), with a running digest of each (for
    ``state_digest``). The digests fold in what was appended since they were last taken,
    so a stream whose state is never named by one (no Redis) never hashes it."""

    __slots__ = (
        "_glue",
        "_id_after",
        "_ids",
        "_ids_hash",
        "_ids_hashed",
        "_lens",
        "_lens_hash",
        "_lens_hashed",
        "_one_after",
        "separator",
    )

    def __init__(
        self, separator: str, token_ids: Sequence[int] = (), chunk_lens: Sequence[int] = ()
    ) -> None:
        self._separated(separator)
        self._ids = self._opened(token_ids)
        self._lens = self._opened(chunk_lens)
        self._ids_hash, self._lens_hash = hashlib.sha256(), hashlib.sha256()
        self._ids_hashed = self._lens_hashed = 0

    @classmethod
    def adopted(cls, history: LiftedHistory) -> HistoryJson:
        """The history as sent, in our encoding (``canonical``), taken as it is: one
        pass to copy each array (and one to hash it, when its digest is taken), none to
        decode it."""
        adopted = cls.__new__(cls)
        adopted._separated(COMPACT)
        adopted._ids = bytearray(history.token_ids[:-1])
        adopted._lens = bytearray(history.chunk_lens[:-1])
        adopted._ids_hash, adopted._lens_hash = hashlib.sha256(), hashlib.sha256()
        adopted._ids_hashed = adopted._lens_hashed = 0
        return adopted

    def _separated(self, separator: str) -> None:
        """Items joined by ``separator``, and what a one-id chunk appends to each array
        made once: the id's format, its length's bytes."""
        self.separator = separator
        self._glue = separator.encode()
        self._id_after = self._glue + b"%d"
        self._one_after = self._glue + b"1"

    def _opened(self, values: Sequence[int]) -> bytearray:
        """``values`` as a JSON array without its closing bracket, encoded at C speed
        (an array of ints has a comma between items and nowhere else)."""
        compact = msgspec.json.encode(values)[:-1]
        if self.separator != COMPACT:
            compact = compact.replace(b",", self.separator.encode())
        return bytearray(compact)

    def extend(self, token_ids: Sequence[int]) -> None:
        """Append one chunk (never empty)."""
        lens = self._lens
        if len(token_ids) == 1:  # most chunks
            if len(lens) > 1:
                self._ids += self._id_after % token_ids[0]
                lens += self._one_after
            else:
                self._ids += b"%d" % token_ids[0]
                lens += b"1"
            return
        glue = self._glue if len(lens) > 1 else b""
        self._ids += glue + self._glue.join(b"%d" % token_id for token_id in token_ids)
        lens += b"%s%d" % (glue, len(token_ids))

    def arrays(self) -> tuple[bytes, bytes]:
        return b"".join((self._ids, b"]")), b"".join((self._lens, b"]"))

    def state(self, state: StreamState, frame: StateFrame | None = None) -> bytes:
        """``state``, whose history is left empty, as we encode it with these arrays as
        its history: they are copied once, into the state's bytes. ``frame``: the
        session's, which writes ``state`` if it is its state (a plain chunk's)."""
        if frame is not None and frame.state is state:
            return frame.full(self._ids, self._lens)
        encoded = encoder.encode(state)
        at = encoded.index(NO_HISTORY)
        before, after = encoded[:at], encoded[at + len(NO_HISTORY) :]
        pieces = (before, IDS_OPEN, self._ids, LENS_OPEN, self._lens, b"]", after)
        return b"".join(pieces)

    def digest(self) -> bytes:
        """A digest of both arrays as ``arrays`` gives them, in O(what was appended since
        it was last taken)."""
        if self._ids_hashed < len(self._ids):
            self._ids_hash.update(memoryview(self._ids)[self._ids_hashed :])
            self._ids_hashed = len(self._ids)
        if self._lens_hashed < len(self._lens):
            self._lens_hash.update(memoryview(self._lens)[self._lens_hashed :])
            self._lens_hashed = len(self._lens)
        return _closed_digest(self._ids_hash) + _closed_digest(self._lens_hash)

    def decoded(self) -> tuple[list[int], list[int]]:
        """The token ids and chunk lengths as ints (one decode of the whole history)."""
        ids, lens = self.arrays()
        return _ints.decode(ids), _ints.decode(lens)

    def tail(self, count: int) -> list[int]:
        """The last ``count`` token ids, read from the end of the array."""
        start = len(self._ids)
        for _ in range(count):
            if start <= 1:
                break
            start = self._ids.rfind(b",", 0, start - 1) + 1 or 1
        return _ints.decode(b"".join((b"[", self._ids[start:], b"]")))

    def diverges(self, other: HistoryJson) -> bool:
        """Whether the two token-id histories differ before the shorter one ends
        (app/wire/advisories.py's ``diverges`` on the ints, here on our encoding of them)."""
        shorter, longer = sorted((self._ids, other._ids), key=len)
        if not longer.startswith(shorter):
            return True
        return len(shorter) > 1 and len(longer) > len(shorter) and longer[len(shorter)] != 44

    def holds(self, history: LiftedHistory) -> bool:
        """Whether ``history`` is these arrays, byte for byte (compared in place)."""
        ids, lens = history.token_ids, history.chunk_lens
        return (
            len(ids) == len(self._ids) + 1
            and len(lens) == len(self._lens) + 1
            and ids.endswith(b"]")
            and lens.endswith(b"]")
            and ids.startswith(self._ids)
            and lens.startswith(self._lens)
        )

    def size(self) -> int:
        return (
            sys.getsizeof(self)
            + sys.getsizeof(self._ids)
            + sys.getsizeof(self._lens)
            + 2 * HASH_STATE_BYTES
        )


_ints = msgspec.json.Decoder(list[int])
# What a running SHA-256 keeps besides its Python object (OpenSSL's buffer and state,
# outside Python's allocator: measured ~250 bytes of RSS each).
HASH_STATE_BYTES = 256
_DIGEST_BYTES = 16


def _closed_digest(running: Any) -> bytes:
    closed = running.copy()
    closed.update(b"]")
    return bytes(closed.digest()[:_DIGEST_BYTES])


def state_digest(lifted: bytes, history_digest: bytes) -> bytes:
    """What names a full state in its Redis snapshot's envelope: its bytes as we encode
    them with the history lifted (``compact_lifted``) and its arrays' digest
    (``HistoryJson.digest``)."""
    return hashlib.sha256(b"".join((b"full\x00", history_digest, lifted))).digest()[:_DIGEST_BYTES]


def encoded_state(state: StreamState) -> tuple[bytes, Callable[[], bytes]]:
    """A decoded state as we encode it, and what gives its ``state_digest`` (a chunk on
    the full path: it holds ints, encoded once for both)."""
    ids, lens = encoder.encode(state.output_token_ids), encoder.encode(state.output_chunk_lens)
    whole = msgspec.structs.replace(
        state, output_token_ids=msgspec.Raw(ids), output_chunk_lens=msgspec.Raw(lens)
    )

    def digest() -> bytes:
        history = b"".join(hashlib.sha256(a).digest()[:_DIGEST_BYTES] for a in (ids, lens))
        return state_digest(compact_lifted(state), history)

    return encoder.encode(whole), digest


def compact_state_digest(carried: bytes) -> bytes:
    """What names a compact state (docs/transports.md) in its snapshot's envelope."""
    return hashlib.sha256(b"compact\x00" + carried).digest()[:_DIGEST_BYTES]


def json_dumps_echo(state: StreamState, ids: bytes, lens: bytes) -> bytes:
    """``json.dumps(json.loads(encoded state))``: what a ``json.dumps`` client sends back
    for ``state`` whose history is the arrays ``ids`` and ``lens`` (as JSON, written with
    ``JSON_DUMPS``, or lifted ``PLACEHOLDER``s).

    Only the small fields around the history are encoded here (json.dumps of a dict is
    its items joined by ``", "``, so the history's two items are spliced in verbatim).
    """
    head = json.dumps({key: getattr(state, name) for name, key in _BEFORE}).encode()
    tail = json.dumps({key: getattr(state, name) for name, key in _AFTER}).encode()
    return b"".join(
        (head[:-1], b", ", _IDS_KEY, b": ", ids, b", ", _LENS_KEY, b": ", lens, b", ", tail[1:])
    )


def compact_lifted(state: StreamState) -> bytes:
    """``state`` as we encode it, its history arrays lifted (``PLACEHOLDER``s)."""
    lifted = msgspec.structs.replace(
        state, output_token_ids=_PLACEHOLDER_RAW, output_chunk_lens=_PLACEHOLDER_RAW
    )
    return encoder.encode(lifted)


PLACEHOLDER = b"0"
_PLACEHOLDER_RAW = msgspec.Raw(PLACEHOLDER)
_SPACES = re.compile(rb"[ \t\r\n]*")


@dataclass(frozen=True, slots=True)
class LiftedHistory:
    """A chunk body's two history arrays, as sent."""

    token_ids: bytes
    chunk_lens: bytes

    def tokens(self) -> int:
        """How many ids the token-id array holds, if it is one (counted, not decoded)."""
        return self.token_ids.count(b",") + 1 if self.token_ids != b"[]" else 0


def lift_history(body: bytes) -> tuple[bytes, LiftedHistory] | None:
    """``body`` with its history arrays replaced by ``PLACEHOLDER``s, and the arrays.

    None unless each key appears exactly once outside the arrays, each followed by an
    array. A key cannot occur inside a JSON string (its quotes would be escaped
    there), so each is a key of some object; that it is the state's, and that the
    arrays hold what the session holds, is for the hit to prove: it compares the
    lifted state (keys and placeholders included) and the arrays with what it
    expects, byte for byte. A few passes over the body, at C speed.
    """
    ids = _array_after(body, _IDS_KEY)
    lens = _array_after(body, _LENS_KEY)
    if ids is None or lens is None:
        return None
    (first_start, first_end), (second_start, second_end) = sorted((ids, lens))
    if first_end > second_start:
        return None
    lifted = b"".join(
        (
            body[:first_start],
            PLACEHOLDER,
            body[first_end:second_start],
            PLACEHOLDER,
            body[second_end:],
        )
    )
    return lifted, LiftedHistory(body[ids[0] : ids[1]], body[lens[0] : lens[1]])


def _array_after(body: bytes, key: bytes) -> tuple[int, int] | None:
    """Where the array that is ``key``'s value lies (up to its first closing bracket),
    if the key appears once outside it and is followed by a colon and an array."""
    at = body.find(key)
    if at < 0:
        return None
    colon = _SPACES.match(body, at + len(key))
    assert colon is not None  # the pattern matches the empty string
    if body[colon.end() : colon.end() + 1] != b":":
        return None
    spaces = _SPACES.match(body, colon.end() + 1)
    assert spaces is not None
    opening = spaces.end()
    if body[opening : opening + 1] != b"[":
        return None
    closing = body.find(b"]", opening)
    if closing < 0 or body.find(key, closing) >= 0:
        return None
    return opening, closing + 1


# What our encoding of an int array never holds: a sent array with none of these that
# decodes as ints is written as we write it.
_FOREIGN = (b" ", b"\n", b"\r", b"\t", b"-")


def canonical(history: LiftedHistory) -> bool:
    """Whether the lifted arrays may be our encoding of a history: no whitespace, no
    sign (a look at C speed; what they hold is proven by the digest they must match)."""
    arrays = (history.token_ids, history.chunk_lens)
    return not any(byte in array for array in arrays for byte in _FOREIGN)


_LiftedState: Any = msgspec.defstruct(
    "_LiftedState",
    [
        (f.name, int, 0)
        if i in (_IDS_AT, _IDS_AT + 1)
        else (
            f.name,
            f.type,
            msgspec.field(default_factory=f.default_factory)
            if f.default is msgspec.NODEFAULT
            else f.default,
        )
        for i, f in enumerate(_FIELDS)
    ],
)
_lifted_decoder = msgspec.json.Decoder(_LiftedState)


def lifted_state(sent: bytes) -> StreamState | None:
    """The state a body carried with its history lifted, if it is one we encoded: its
    fields but the history (left empty), else None (the full path reads it)."""
    try:
        decoded = _lifted_decoder.decode(sent)
    except msgspec.DecodeError:
        return None
    state = StreamState(
        **{name: getattr(decoded, name) for name in _NAMES if name not in _HISTORY_NAMES}
    )
    return state if compact_lifted(state) == sent else None


_HISTORY_NAMES = frozenset(_NAMES[_IDS_AT : _IDS_AT + 2])
