"""Large one-shot responses handled in pieces, so no single C call holds the GIL long.

msgspec encodes a value in one C call that holds the GIL throughout (a 24 MB response:
about 80 ms), and a decoded request is freed in one C call when its last reference
goes (16 x 16,384 logprob entries: about 30 ms); meanwhile no other thread runs, the
event loop that answers ``/health`` included. Here a struct's nested structs and long
lists are encoded apart, long lists in slices of ``SLICE`` entries, and the pieces join
to the very bytes that encoding the whole value at once gives; decoded logprobs are
freed a slice at a time.

A struct is encoded with each part to encode apart replaced by a marker, a NUL byte
that msgspec never emits (it escapes control characters inside strings), and the
parts are spliced in where the markers stand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
from msgspec import Raw, Struct

from app.wire.protocol import GenerateResponse, encoder

# Entries of a list encoded per call: about 0.1 MB of logprobs (2 MB with 20 top
# logprobs each), well under a millisecond's hold of the GIL.
SLICE = 1024

_MARK = b"\0"
_MARKER = Raw(_MARK)


def encode_pieces(value: Any) -> list[bytes]:
    """The JSON of ``value`` as pieces to join (or send one after another)."""
    pieces: list[bytes] = []
    _encode_into(value, pieces)
    return pieces


def encode_response(envelope: Struct, choices: Iterable[Struct]) -> Iterator[bytes]:
    """The JSON of ``envelope`` with ``choices`` as its ``choices``, in pieces; each
    choice is derendered, encoded and yielded in turn (so a caller that counts the
    bytes can stop before the rest is built)."""
    head, tail = _marked(envelope, ["choices"])
    yield head + b"["
    for index, choice in enumerate(choices):
        pieces = [b","] if index else []
        _encode_into(choice, pieces)
        yield from pieces
    yield b"]" + tail


def free_in_slices(responses: list[GenerateResponse]) -> None:
    """Free decoded logprobs a slice at a time, before the request goes.

    A request's objects are freed in one C call when its last reference goes, holding
    the GIL as long as an encode: 16 x 16,384 logprob entries take about 30 ms.
    """
    for gen in responses:
        for choice in gen.choices:
            content = choice.logprobs.content if choice.logprobs is not None else None
            while content:
                del content[-SLICE:]


def _encode_into(value: Any, pieces: list[bytes]) -> None:
    if isinstance(value, Struct) and not value.__struct_config__.omit_defaults:
        apart = [name for name in value.__struct_fields__ if _worth_apart(getattr(value, name))]
        if apart:
            parts = _marked(value, apart)
            for part, name in zip(parts, apart, strict=False):
                pieces.append(part)
                _encode_into(getattr(value, name), pieces)
            pieces.append(parts[-1])
            return
    elif isinstance(value, list) and len(value) > SLICE:
        pieces.append(b"[")
        for start in range(0, len(value), SLICE):
            if start:
                pieces.append(b",")
            pieces.append(encoder.encode(value[start : start + SLICE])[1:-1])
        pieces.append(b"]")
        return
    pieces.append(encoder.encode(value))


def _worth_apart(value: Any) -> bool:
    """A nested struct (it may hold a long list), or a long list."""
    return isinstance(value, Struct) or (isinstance(value, list) and len(value) > SLICE)


def _marked(value: Struct, names: list[str]) -> list[bytes]:
    """The JSON of ``value`` cut where the fields ``names`` go: one more part than names."""
    parts = encoder.encode(msgspec.structs.replace(value, **dict.fromkeys(names, _MARKER)))
    cut = parts.split(_MARK)
    if len(cut) != len(names) + 1:
        raise AssertionError("a marker was lost or a NUL byte was encoded")
    return cut
