"""The incremental JSON scanner agrees with json.loads on every prefix of any text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.readers.jsonscan import JsonScanner

json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
).map(json.dumps)
noise = st.text(alphabet='{}[]":,.-+eE0123456789 \n\t\\ua-zNIfn\u00a0\x01', max_size=30)


def loads_ok(text: str) -> bool:
    try:
        json.loads(text.strip())
    except (ValueError, RecursionError):
        return False
    return True


def check_every_prefix(text: str, cuts: list[int]) -> None:
    scanner = JsonScanner()
    fed = 0
    for cut in sorted({c % (len(text) + 1) for c in cuts} | {len(text)}):
        scanner.feed(text[fed:cut])
        fed = cut
        assert scanner.complete == loads_ok(text[:cut]), repr(text[:cut])


@settings(max_examples=400, deadline=None)
@given(text=json_text, cuts=st.lists(st.integers(0, 400), max_size=10))
def test_valid_json_and_its_prefixes(text: str, cuts: list[int]) -> None:
    check_every_prefix(text, [*cuts, *range(len(text))])


@settings(max_examples=600, deadline=None)
@given(text=noise | json_text.map(lambda t: t[: len(t) // 2] + "x" + t[len(t) // 2 :]))
def test_arbitrary_text(text: str) -> None:
    check_every_prefix(text, list(range(len(text))))
