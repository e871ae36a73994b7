"""GrowingText reads as the string it stands for, and stays a few parts long."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from parsers.growing_text import GrowingText

_PIECES = st.lists(st.text(alphabet="ab<>/", max_size=9), max_size=40)


def _grown(pieces: list[str]) -> GrowingText:
    text = GrowingText()
    for piece in pieces:
        text.append(piece)
    return text


@given(_PIECES, st.text(alphabet="ab<>", min_size=1, max_size=4), st.integers(-3, 400))
@example(["<"], "<", -1)  # a start from the end (a find: read as an empty slice)
def test_find_slices_and_indexing_read_as_the_joined_string(
    pieces: list[str], sub: str, start: int
) -> None:
    grown, joined = _grown(pieces), "".join(pieces)
    assert len(grown) == len(joined)
    assert grown.find(sub, start) == joined.find(sub, start)
    assert grown.find(sub, start, start + 5) == joined.find(sub, start, start + 5)
    assert grown.startswith(sub, start) == joined.startswith(sub, start)
    assert grown[start : start + 7] == joined[start : start + 7]
    assert grown[start:] == joined[start:]
    assert grown[-3:] == joined[-3:]
    if -len(joined) <= start < len(joined):
        assert grown[start] == joined[start]
    assert grown.text() == joined


def test_parts_stay_logarithmic_and_snapshots_round_trip() -> None:
    grown = _grown(["x" * (i % 7 + 1) for i in range(20_000)])
    assert len(grown.parts) <= 20
    restored = msgspec.msgpack.decode(msgspec.msgpack.encode(grown), type=GrowingText)
    assert restored == grown and restored.text() == grown.text()


def test_a_snapshot_whose_size_disagrees_with_its_parts_is_refused() -> None:
    encoded = msgspec.msgpack.encode({"parts": ["ab"], "size": 3})
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(encoded, type=GrowingText)


@given(pieces=st.lists(st.text(max_size=6), max_size=30), count=st.integers(0, 8))
def test_dropping_the_last_characters_gives_them_back(pieces: list[str], count: int) -> None:
    grown, joined = _grown(pieces), "".join(pieces)
    dropped = grown.drop_last(count)
    kept = joined[: max(0, len(joined) - count)]
    assert (dropped, grown.text(), len(grown)) == (joined[len(kept) :], kept, len(kept))
    grown.append("tail")
    assert grown.text() == kept + "tail"
