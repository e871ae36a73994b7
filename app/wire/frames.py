"""The bytes of an encoded struct around some of its values, cut once from msgspec's
own encoding of it with a marker in each place: joined around other values, they give
the bytes msgspec would write for them, without building or encoding the struct (what a
stream's every chunk would otherwise pay for)."""

from __future__ import annotations

from typing import Any

from app.wire.protocol import encoder


def cut(value: Any, markers: list[bytes]) -> list[bytes]:
    """``value`` encoded, cut at ``markers`` (as encoded, in the order written, each
    written once): the pieces before each, and the rest after the last."""
    rest = encoder.encode(value)
    pieces = []
    for marker in markers:
        piece, found, rest = rest.partition(marker)
        assert found and marker not in rest, "each marker is written once"
        pieces.append(piece)
    return [*pieces, rest]
