"""GigaChat 3: what its stream keeps off the arguments' end and adds at the last chunk,
on behaviour the golden transcripts do not reach (raw control characters, which
``json.loads(strict=False)`` accepts; a name alone in the last chunk)."""

from __future__ import annotations

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.streams import run

TOOLS = (ToolSpec("f", {"type": "object", "properties": {"s": {"type": "string"}}}),)
OPTIONS = ParseOptions(tools=TOOLS, tool_choice="auto")


def _stream(
    tokenizer: Tokenizer, output: str, chunks: int = 1, finish: str = "stop"
) -> tuple[str, dict[int, list[str]]]:
    factory = ParserFactory("gigachat3", None, True, tokenizer.vocabulary)
    ids = tokenizer.encode(output)
    pieces = [ids[i : i + chunks] for i in range(0, len(ids), chunks)]
    folded, _ = run(tokenizer, factory, OPTIONS, pieces, finish)
    return folded.content, folded.calls


@pytest.mark.parametrize("chunks", [1, 3])
def test_the_objects_closing_brace_is_kept_off_once_json_precedes_it(
    tokenizer: Tokenizer, chunks: int
) -> None:
    """A raw newline inside a string is JSON to ``strict=False``: the outer ``}`` goes."""
    output = '<|function_call|>{"name": "f", "arguments": {"s": "a\nb"}}'
    _, calls = _stream(tokenizer, output, chunks)
    assert calls == {0: ["f", '{"s": "a\nb"}']}


def test_a_name_alone_in_the_last_chunk_gets_empty_arguments(tokenizer: Tokenizer) -> None:
    """vLLM's server adds ``{}`` when the last chunk names a call whose arguments never
    streamed: here the whole output is one chunk."""
    output = '<|function_call|>{"name": "f", "arguments": {"s": "x'
    _, calls = _stream(tokenizer, output, chunks=10**6, finish="length")
    assert calls == {0: ["f", "{}"]}
