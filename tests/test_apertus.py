"""apertus: vLLM 0.33.0's stream on chunkings the golden corpus does not show, a long
argument streamed a token at a time, snapshots mid-stream, and the block readings that
stop (docs/parity.md, apertus-unread-block)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from parsers.families.apertus import ApertusState, ApertusStream, extract_calls
from parsers.types import Delta

PREFIX, SUFFIX = "<|tools_prefix|>", "<|tools_suffix|>"

# Chunks, and each chunk's delta from vLLM 0.33.0's parser fed the same chunks
# (content, then [index, name, arguments] per call piece; None: no delta).
VLLM_STREAMS: list[tuple[list[str], list[Any]]] = [
    (
        # numbers_held_until_they_end
        [
            "Let me check. <|tools_prefix|>",
            '[{"get_weather": {"city": "Par',
            'is", "days": 1',
            '2, "unit"',
            ': "celsius"}}]',
            "<|tools_suffix|>",
            " Done.",
        ],
        [
            None,
            [None, [[0, "get_weather", ""], [0, None, '{"city": "Par']]],
            [None, [[0, None, "is"]]],
            [None, [[0, None, '", "days": 12']]],
            [None, [[0, None, ', "unit": "celsius"}']]],
            None,
            [" Done.", []],
        ],
    ),
    (
        # held_marker_starts_and_catch_up
        [
            "Hi <",
            "|x <",
            '<|tools_prefix|>[{"f": {"a": [1, 2',
            '.5], "b": {"c": tr',
            'ue}}}, {"g": null}]',
            " after",
        ],
        [
            ["Hi ", []],
            ["<|x ", []],
            ["<", [[0, "f", ""], [0, None, '{"a": [1']]],
            [None, [[0, None, ', 2.5], "b": {"c": true']]],
            [None, [[0, None, "}}"], [1, "g", ""]]],
            None,
        ],
    ),
    (
        # junk_after_leading_blank
        ['<|tools_prefix|> [{"f": {}}] junk<|tools_suffix|>', "tail"],
        [None, ["tail", []]],
    ),
    (
        # lone_object_number
        ['<|tools_prefix|>{"f": 1', "2<|tools_suffix|>"],
        [None, [None, [[0, "f", ""], [0, None, "12"]]]],
    ),
    (
        # stripped_ends_in_strings
        ['<|tools_prefix|>[{"f": {"a": "x}\\"]"', ', "b": "  ,"}}, {"g": {}}', "]<|tools_suffix|>"],
        [
            [None, [[0, "f", ""], [0, None, '{"a": "x}\\']]],
            [None, [[0, None, '"]", "b": "  ,"}'], [1, "g", ""], [1, None, "{"]]],
            [None, [[1, None, "}"]]],
        ],
    ),
    (
        # surrogate_pair
        ['<|tools_prefix|>[{"f": {"a": "\\ud83d\\ude00"}}]<|tools_suffix|>'],
        [[None, [[0, "f", ""], [0, None, '{"a": "😀"}']]]],
    ),
    (
        # two_elements_one_chunk
        ['<|tools_prefix|>[{"f": {"a": "x"}}, {"g": {"b":', " 1}}]"],
        [
            [None, [[0, "f", ""], [0, None, '{"a": "x"}'], [1, "g", ""], [1, None, "{"]]],
            [None, [[1, None, '"b": 1}']]],
        ],
    ),
]


def _delta(delta: Delta | None) -> Any:
    if delta is None:
        return None
    return [delta.content, [[c.index, c.name, c.arguments] for c in delta.tool_calls]]


def _stream(chunks: list[str], restore_at: int = -1) -> list[Any]:
    state = ApertusState()
    deltas = []
    for i, chunk in enumerate(chunks):
        if i == restore_at:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=ApertusState)
        deltas.append(_delta(ApertusStream("seed", state).stream(chunk)))
    return deltas


@pytest.mark.parametrize(("chunks", "expected"), VLLM_STREAMS)
def test_streams_as_vllm_does(chunks: list[str], expected: list[Any]) -> None:
    assert _stream(chunks) == expected
    for cut in range(len(chunks)):
        assert _stream(chunks, restore_at=cut) == expected


def test_a_long_argument_streams_a_piece_per_token() -> None:
    body = "word " * 20_000
    text = PREFIX + json.dumps([{"save_note": {"body": body, "n": [1, 2.5]}}]) + SUFFIX
    stream = ApertusStream("seed", ApertusState())
    pieces = [stream.stream(text[i : i + 4]) for i in range(0, len(text), 4)]
    arguments = "".join(c.arguments or "" for d in pieces if d for c in d.tool_calls)
    assert json.loads(arguments) == {"body": body, "n": [1, 2.5]}
    assert len(stream.s.block.elements[0].head) == len(arguments)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "body",
    [
        '[{"f": {"a": 1, "a": 2}}]',  # a key twice
        '["text", {"f": {}}]',  # an element that is no object
        '[{"f": {"a": "x\ny"}}]',  # a raw control character
        '[{"f": {"a": "\\ud83d x"}}]',  # an unpaired surrogate escape
        "[" + '{"f": ' * 3 + "[" * 250,  # nested past the bound
    ],
)
def test_what_the_reader_does_not_read_ends_the_blocks_calls(body: str) -> None:
    stream = ApertusStream("seed", ApertusState())
    for ch in PREFIX + body:
        stream.stream(ch)
    assert stream.s.block is not None and stream.s.block.phase == "dead"
    assert stream.stream(SUFFIX + " after") in (None, Delta(content=" after"))


def test_one_shot_reads_as_vllm_does() -> None:
    output = "Checking. " + PREFIX + '[{"f": {"a": 1}}, {}, {"g": null}] x' + SUFFIX + " y"
    calls = extract_calls(output)
    assert calls.tools_called
    assert [(c.name, c.arguments) for c in calls.calls] == [("f", '{"a": 1}'), ("g", "null")]
    assert calls.content == "Checking.\nx\ny"
    cut = extract_calls(PREFIX + '[{"f": {"a": "b')
    assert [(c.name, c.arguments) for c in cut.calls] == [("f", '{"a": "b"}')]
    broken = PREFIX + "[{{]" + SUFFIX
    assert extract_calls(broken).tools_called is False
    assert extract_calls(broken).content == broken
