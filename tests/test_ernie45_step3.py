"""ERNIE-4.5's and Step-3's streams where the golden corpus cannot reach: ERNIE's
``<0x0A>`` newline token (the synthetic tokenizer has none) and Step-3's one step per
chunk on text cut anywhere. Every expected delta is what vLLM 0.33.0's parser gave for
the same chunks (scripts/check_legacy_parsers.py compares them on random outputs)."""

from __future__ import annotations

import pytest

from parsers.families.ernie45 import ErnieMarkers, ErnieToolState, ErnieToolStream
from parsers.families.step3 import (
    BLOCK_BEGIN,
    BLOCK_END,
    CALL_BEGIN,
    CALL_END,
    SEP,
    Step3ToolState,
    Step3ToolStream,
)
from parsers.types import Delta, ParseOptions, ToolSpec, Vocabulary

ERNIE_IDS = {
    "<think>": 1,
    "</think>": 2,
    "<response>": 3,
    "</response>": 4,
    "<tool_call>": 5,
    "</tool_call>": 6,
    "<0x0A>": 7,
}
TEXTS = {i: ("\n" if token == "<0x0A>" else token) for token, i in ERNIE_IDS.items()}
TEXTS |= {10: "Hi", 11: " there"}


Pieces = tuple[str | None, list[tuple[int, str | None, str | None]]]


def _pieces(delta: Delta | None) -> Pieces | None:
    """A delta's content and call pieces (None: no delta at all, which sends nothing)."""
    if delta is None:
        return None
    return delta.content, [(c.index, c.name, c.arguments) for c in delta.tool_calls]


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        # Newlines opening the answer go while only newline tokens came before (an
        # empty delta, not none, as vLLM's).
        ([[7], [7, 10], [11]], [(None, []), ("Hi", []), (" there", [])]),
        ([[7, 7, 10, 7]], [("Hi", [])]),
        # After a <response> or </response> token, a chunk opening with a newline loses it.
        ([[3], [7, 10], [7, 4], [7]], [(None, []), ("Hi", []), ("\n", []), (None, [])]),
        ([[10], [4, 7, 11]], [("Hi", []), (None, [])]),
        # Text before a <tool_call> loses its trailing newlines only in its own chunk.
        ([[10, 7], [5, 10]], [("Hi", []), (None, [])]),
    ],
)
def test_ernie45_newline_token_reads_as_vllms(
    chunks: list[list[int]], expected: list[Pieces | None]
) -> None:
    stream = ErnieToolStream(ErnieMarkers(Vocabulary(ERNIE_IDS)), "seed", ErnieToolState())
    deltas = [stream.stream("".join(TEXTS[i] for i in chunk), chunk) for chunk in chunks]
    assert [_pieces(delta) for delta in deltas] == expected


OPTIONS = ParseOptions(
    tools=(ToolSpec("count", {"type": "object", "properties": {"n": {"type": "integer"}}}),),
    tool_choice="auto",
)
CALL = (
    f'{CALL_BEGIN}function{SEP}<steptml:invoke name="count">'
    f'<steptml:parameter name="n"> 7 </steptml:parameter></steptml:invoke>{CALL_END}'
)
NAME = (None, [(0, "count", None)])
ARGUMENTS = (None, [(0, None, '{"n": 7}')])


@pytest.mark.parametrize(
    ("pieces", "expected", "remaining"),
    [
        # A possible start of the block is held; the block's marker then ends the text
        # before it; each step sends one thing.
        (
            ["Hi ", " <｜tool", "_calls_begin｜>", CALL, f"{BLOCK_END}Done", ""],
            [("Hi ", []), None, (" ", []), NAME, ARGUMENTS, ("Done", [])],
            "{}",
        ),
        # Held text that turns out not to begin the block goes out whole.
        (["Hi", " <｜tool", " x"], [("Hi", []), None, (" <｜tool x", [])], ""),
        # A whole block in one chunk: only its first step is ever taken.
        ([f"{BLOCK_BEGIN}{CALL}{BLOCK_END}Done."], [NAME], "{}"),
        (
            [BLOCK_BEGIN, CALL, "", "", BLOCK_END, "Done."],
            [None, NAME, ARGUMENTS, None, None, ("Done.", [])],
            "{}",
        ),
    ],
)
def test_step3_takes_one_step_per_chunk_as_vllm(
    pieces: list[str], expected: list[Pieces | None], remaining: str
) -> None:
    stream = Step3ToolStream(OPTIONS, "seed", Step3ToolState())
    assert [_pieces(stream.stream(piece, [])) for piece in pieces] == expected
    assert stream.remaining_arguments() == remaining
