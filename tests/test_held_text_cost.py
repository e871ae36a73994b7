"""Text a parser holds while the output may still make it something else grows with a
hostile output: each case streams one that keeps it growing, one long token per chunk,
and checks that eight times the chunks cost about eight times as much (a copy or a scan
of the held text per chunk would make it about 64 times as much).

The unit stands for one of the vocabulary's longest tokens (about a hundred characters;
bench/hostile.py streams the real ones): the longer each chunk, the sooner a per-chunk
copy of everything held shows.
"""

from __future__ import annotations

import time

import pytest

from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec, Vocabulary

# The markers the families below look up as tokens (the text streamed spells them).
MARKERS = ("<|python_tag|>", "<tool_call>", "</tool_call>")
VOCAB = Vocabulary(token_ids={marker: 1000 + i for i, marker in enumerate(MARKERS)})
TOOLS = (
    ToolSpec(
        "save_note",
        {"type": "object", "properties": {"body": {"type": "string"}, "n": {"type": "integer"}}},
    ),
)
WORD = "abcdefghij" * 10
BLANK = " " * 100
POOLSIDE_CALL = "<tool_call>save_note\n<arg_key>n</arg_key>"


class Case:
    """A parser configuration, what opens the held text, and what grows it."""

    def __init__(self, tool: str | None, head: str, unit: str, tool_choice: str = "auto") -> None:
        self.tool, self.head, self.unit, self.tool_choice = tool, head, unit, tool_choice


CASES = {
    # K2 Horizon holds content while it is only whitespace; its open call group grows
    # by every chunk, empty ones included.
    "k2_horizon blank content": Case("k2_horizon", "", BLANK),
    "k2_horizon blank content, tool_choice none": Case("k2_horizon", "", BLANK, "none"),
    "k2_horizon empty chunks in an open group": Case("k2_horizon", "x<ifm|tool_calls>", ""),
    # Poolside holds what it reads until the tag it waits for comes.
    "poolside name that never ends": Case("poolside_v1", "<tool_call>", WORD),
    "poolside key that never ends": Case("poolside_v1", "<tool_call>save_note\n<arg_key>", WORD),
    "poolside text before a value": Case("poolside_v1", POOLSIDE_CALL, WORD),
    "poolside value that is no string": Case("poolside_v1", POOLSIDE_CALL + "<arg_value>", WORD),
    "poolside text after a value": Case(
        "poolside_v1", POOLSIDE_CALL + "<arg_value>1</arg_value>", WORD
    ),
    # xLAM and Llama 3 JSON keep the whole text: it grows in place, never copied.
    "xlam string argument": Case("xlam", '[{"name": "save_note", "arguments": {"body": "', WORD),
    "llama3_json string argument": Case(
        "llama3_json", '{"name": "save_note", "parameters": {"body": "', WORD
    ),
}


def _cost_per_chunk(case: Case, chunks: int) -> float:
    """CPU seconds per chunk streaming ``case.unit`` ``chunks`` times after its head."""
    factory = ParserFactory(case.tool, None, True, VOCAB)
    options = ParseOptions(tools=TOOLS, tool_choice=case.tool_choice)
    best = float("inf")
    for _ in range(3):
        stream = factory.stream_for_request(options, "seed")
        stream.step(case.head, [1], None, [])
        start = time.process_time()
        for _ in range(chunks):
            stream.step(case.unit, [1], None, [])
        stream.step("", [1], "stop", [])
        best = min(best, time.process_time() - start)
    return best / chunks


@pytest.mark.parametrize("name", CASES)
def test_held_text_costs_linear_time(name: str) -> None:
    small = _cost_per_chunk(CASES[name], 1_000)
    large = _cost_per_chunk(CASES[name], 8_000)
    assert large < 2.5 * small
