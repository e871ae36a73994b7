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
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import msgspec

from app.protocol import StreamState

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

    __slots__ = ("_ids", "_lens", "separator")

    def __init__(
        self, separator: str, token_ids: Sequence[int] = (), chunk_lens: Sequence[int] = ()
    ) -> None:
        self.separator = separator
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
        glue = self.separator if len(self._lens) > 1 else ""
        self._ids += f"{glue}{self.separator.join(map(str, token_ids))}".encode()
        self._lens += f"{glue}{len(token_ids)}".encode()

    def arrays(self) -> tuple[bytes, bytes]:
        return b"".join((self._ids, b"]")), b"".join((self._lens, b"]"))

    def size(self) -> int:
        return sys.getsizeof(self) + sys.getsizeof(self._ids) + sys.getsizeof(self._lens)


def json_dumps_echo(state: StreamState, history: HistoryJson) -> bytes:
    """``json.dumps(json.loads(encoded state))``: what a ``json.dumps`` client sends back
    for ``state`` whose history is ``history`` (kept with ``JSON_DUMPS``).

    Only the small fields around the history are encoded here (json.dumps of a dict is
    its items joined by ``", "``, so the history's two items are spliced in verbatim).
    """
    assert history.separator == JSON_DUMPS
    head = json.dumps({key: getattr(state, name) for name, key in _BEFORE}).encode()
    tail = json.dumps({key: getattr(state, name) for name, key in _AFTER}).encode()
    ids, lens = history.arrays()
    return b"".join(
        (head[:-1], b", ", _IDS_KEY, b": ", ids, b", ", _LENS_KEY, b": ", lens, b", ", tail[1:])
    )
