"""Generated model outputs: calls of ``TOOLS`` (tests/support/streams.py) with
arguments that stress the parsers (CJK and emoji, quotes, braces and markup inside
strings, zero-argument calls)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

STRINGS = [
    "Paris",
    "東京 👩‍👩‍👧",
    'say "hi"',
    "{not json}",
    "</tool_call> inside",
    "a\\b",
    "<tool",
]
# Plain text an output may hold instead of calls or around them.
WORDS = [
    "Paris",
    " and",
    " 東京",
    " 👍🏽",
    " café",
    " {braces}",
    ' "quotes"',
    " <",
    " </thi",
    " a<b",
]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map("".join)
# A call: a tool's name and its arguments.
args = st.sampled_from(
    [("get_weather", {"city": s}) for s in STRINGS] + [("count", {"n": 3}), ("noop", {})]
)


@st.composite
def llama_output(draw: st.DrawFn) -> str:
    """Llama 3 JSON calls separated by ``; ``, with or without ``<|python_tag|>``."""
    calls = draw(st.lists(args, min_size=1, max_size=3))
    key = draw(st.sampled_from(["parameters", "arguments"]))
    body = "; ".join(json.dumps({"name": n, key: a}, ensure_ascii=False) for n, a in calls)
    return draw(st.sampled_from(["<|python_tag|>", ""])) + body
