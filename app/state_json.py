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
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from app.protocol import StreamState, encoder

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


class HistoryJson:
    """A stream's token ids and chunk lengths as two JSON arrays, items joined by
    ``separator``, grown by each chunk in O(chunk)."""

    __slots__ = ("_glue", "_ids", "_lens", "separator")

    def __init__(
        self, separator: str, token_ids: Sequence[int] = (), chunk_lens: Sequence[int] = ()
    ) -> None:
        self.separator = separator
        self._glue = separator.encode()
        self._ids = self._opened(token_ids)
        self._lens = self._opened(chunk_lens)

    def _opened(self, values: Sequence[int]) -> bytearray:
        """``values`` as a JSON array without its closing bracket, encoded at C speed
        (an array of ints has a comma between items and nowhere else)."""
        compact = msgspec.json.encode(values)[:-1]
        if self.separator != COMPACT:
            compact = compact.replace(b",", self.separator.encode())
        return bytearray(compact)

    def extend(self, token_ids: Sequence[int]) -> None:
        """Append one chunk (never empty)."""
        glue = self._glue if len(self._lens) > 1 else b""
        if len(token_ids) == 1:  # most chunks
            self._ids += b"%s%d" % (glue, token_ids[0])
            self._lens += glue + b"1"
            return
        self._ids += glue + self._glue.join(b"%d" % token_id for token_id in token_ids)
        self._lens += b"%s%d" % (glue, len(token_ids))

    def arrays(self) -> tuple[bytes, bytes]:
        return b"".join((self._ids, b"]")), b"".join((self._lens, b"]"))

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
        return sys.getsizeof(self) + sys.getsizeof(self._ids) + sys.getsizeof(self._lens)


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
