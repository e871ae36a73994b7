"""Hermes streaming keeps only what it still needs of a region: same deltas as before.

``tests/test_parser_properties.py`` checks the stream against the one-shot parse; this
checks, on hostile regions too, that the deltas equal those of the
whole-region stream (commit 9fe8f34) and that a region's kept text stays small while
one long call streams.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Struct, field

from parsers.families.hermes import HERMES_TAGS, HermesStream, KeyMatch, _tag_overlap
from parsers.ids import opening_call_delta
from parsers.readers.jsonscan import JsonScanner, JsonScanState
from parsers.types import Delta, DeltaToolCall
from tests.support.streams import PROPS

TOOL_START, TOOL_END = HERMES_TAGS.start, HERMES_TAGS.end


class WholeRegion(Struct):
    body: str = ""
    closed: bool = False
    fed: int = 0
    json: JsonScanState = field(default_factory=JsonScanState)
    name: KeyMatch = field(default_factory=KeyMatch)
    arguments: KeyMatch = field(default_factory=KeyMatch)


class ReferenceStream:
    """The whole-region stream (commit 9fe8f34), kept as the oracle."""

    def __init__(self) -> None:
        self.mode = "content"
        self.pending = ""
        self.regions: list[WholeRegion] = []
        self.calls: list[list[str | int | None]] = []  # [name, streamed]
        self.done_regions = 0

    def stream(self, text: str) -> Delta | None:
        content = self._consume(text)
        deltas: list[DeltaToolCall] = []
        for i in range(self.done_regions, len(self.regions)):
            if not self._region_deltas(i, deltas):
                break
        if content or deltas:
            return Delta(content=content or None, tool_calls=deltas)
        return None

    def finish(self) -> Delta | None:
        if self.mode != "content" or not self.pending:
            return None
        content, self.pending = self.pending, ""
        return Delta(content=content)

    def _consume(self, text: str) -> str:
        content = ""
        while text:
            if self.mode == "region":
                region = self.regions[-1]
                searched = max(0, len(region.body) - len(TOOL_END) + 1)
                region.body += text
                end = region.body.find(TOOL_END, searched)
                if end < 0:
                    return content
                text = region.body[end + len(TOOL_END) :]
                region.body = region.body[:end]
                region.closed = True
                self.mode, self.pending = "between", ""
                continue
            buffer = self.pending + text
            start = buffer.find(TOOL_START)
            if start < 0:
                keep = _tag_overlap(buffer, TOOL_START)
                if self.mode == "content":
                    content += buffer[: len(buffer) - keep]
                self.pending = buffer[len(buffer) - keep :]
                return content
            if self.mode == "content":
                content += buffer[:start]
            self.mode, self.pending = "region", ""
            self.regions.append(WholeRegion())
            text = buffer[start + len(TOOL_START) :]
        return content

    def _region_deltas(self, index: int, deltas: list[DeltaToolCall]) -> bool:
        region = self.regions[index]
        if index >= len(self.calls):
            self.calls.append([None, 0])
        call = self.calls[index]
        body = region.body
        if not region.closed:
            body = body[: len(body) - _tag_overlap(body, TOOL_END)]
            JsonScanner(region.json).feed(body[region.fed :])
            region.fed = len(body)
        end = len(body.rstrip())
        scanner = JsonScanner(region.json)
        drop_brace = region.closed or scanner.complete or scanner.failed
        if call[0] is None:
            region.name.advance(body, "name", want_value=True)
            if region.name.phase != "done":
                return False
            call[0] = body[region.name.value_start : region.name.value_end]
            deltas.append(opening_call_delta("seed", index, call[0]))
        region.arguments.advance(body, "arguments", want_value=False)
        if region.arguments.phase == "found":
            start = region.arguments.value_start
            stop = max(end, start)
            if drop_brace and stop > start and body[stop - 1] == "}":
                stop -= 1
                while stop > start and body[stop - 1].isspace():
                    stop -= 1
            streamed = call[1]
            assert isinstance(streamed, int)
            if stop - start > streamed:
                call[1] = stop - start
                deltas.append(DeltaToolCall(index=index, arguments=body[start + streamed : stop]))
        if region.closed and call[0] is not None and index == self.done_regions:
            self.done_regions += 1
        return True


PARTS = [
    "<tool_call>",
    "</tool_call>",
    "</tool_",
    "<tool_",
    '{"name": "f", "arguments": ',
    '{"name": "g", "arguments": {"a": ',
    '"name"',
    '"arguments"',
    ": ",
    "{",
    "}",
    " ",
    "\n",
    '"',
    '\\"',
    "\\",
    ",",
    "x",
    "12",
    "[[",
    "]]",
    '"f"',
    "text ",
    "东京 ",
]
hostile_hermes = st.lists(st.sampled_from(PARTS), min_size=1, max_size=40).map("".join)


def pieces_of(output: str, cuts: list[int]) -> list[str]:
    bounds = sorted({c % (len(output) + 1) for c in cuts} | {0, len(output)})
    return [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def assert_same_deltas(pieces: list[str]) -> None:
    reference, stream = ReferenceStream(), HermesStream("seed")
    for piece in pieces:
        assert stream.stream(piece) == reference.stream(piece), "".join(pieces)
    assert stream.finish() == reference.finish()


@settings(PROPS, max_examples=400)
@given(output=hostile_hermes, cuts=st.lists(st.integers(0, 900), max_size=40))
def test_same_deltas_as_the_whole_region_stream(output: str, cuts: list[int]) -> None:
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


def test_a_long_call_keeps_little_text() -> None:
    stream = HermesStream("seed")
    stream.stream('<tool_call>{"name": "f", "arguments": {"text": "')
    for _ in range(5000):
        stream.stream("word ")
        assert len(stream.s.regions[0].text) < 40


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="<tol_cal>/x", max_size=30), tag=st.sampled_from([TOOL_START, TOOL_END])
)
def test_tag_overlap_is_the_longest_proper_prefix_text_ends_with(text: str, tag: str) -> None:
    longest = max((size for size in range(1, len(tag)) if text.endswith(tag[:size])), default=0)
    assert _tag_overlap(text, tag) == longest
