"""lfm2: vLLM 0.33.0's stream on chunkings the golden corpus does not show, snapshots
mid-stream, a long list past the re-read bound, and the one-shot repairs."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from parsers.families.lfm2 import READ_LIMIT, Lfm2State, Lfm2Stream, extract_calls
from parsers.types import Delta

START, END = "<|tool_call_start|>", "<|tool_call_end|>"

# Chunks, and each chunk's delta from vLLM 0.33.0's parser fed the same chunks
# (content, then [index, name, arguments] per call piece; None: no delta).
VLLM_STREAMS: list[tuple[list[str], list[Any]]] = [
    (
        # numbers_and_quotes_at_chunk_ends
        [
            "Let me check. <|tool_call_start|>[get_weather(",
            "city='Par",
            "is', days=1",
            "2.5, unit",
            "='celsius')]",
            "<|tool_call_end|>",
            " Done.",
        ],
        [
            ["Let me check. ", []],
            [None, [[0, "get_weather", '{"city": "Par']]],
            None,
            None,
            [None, [[0, None, 'is", "days": 12.5, "unit": "celsius"}']]],
            ["", []],
            [" Done.", []],
        ],
    ),
    (
        # echo_dropped
        [
            "<|tool_call_start|>[f(a='x')]<|tool_call_end|>",
            "[f(a='x')]",
            "<|tool_call_end|>",
            " It is sunny.",
        ],
        [[None, [[0, "f", '{"a": "x"}']]], ["", []], ["", []], [" It is sunny.", []]],
    ),
    (
        # nested_quotes_repaired_at_the_end
        ["<|tool_call_start|>[f(cmd='sed -n '", "1,9p' f.py', b=1)]", "<|tool_call_end|>"],
        [None, None, [None, [[0, "f", '{"cmd": "sed -n \'1,9p\' f.py", "b": 1}']]]],
    ),
    (
        # repaired_values
        ["<|tool_call_start|>[f(text='a\nb', month=07, from='x')]<|tool_call_end|>"],
        [[None, [[0, "f", '{"text": "a\\nb", "month": 7, "from": "x"}']]]],
    ),
    (
        # no_list_is_content
        ["Hi<|tool_call_start|>f(a=1)<|tool_call_end|>", " ok"],
        [["Hi", []], [" ok", []]],
    ),
    (
        # two_calls_one_chunk
        ["<|tool_call_start|>[f(a=1), ns.g(b=[1, {'c': None}])", "]<|tool_call_end|>"],
        [[None, [[0, "f", '{"a": 1}'], [1, "ns.g", '{"b": [1, {"c": null}]}']]], ["", []]],
    ),
]


def _delta(delta: Delta | None) -> Any:
    if delta is None:
        return None
    return [delta.content, [[c.index, c.name, c.arguments] for c in delta.tool_calls]]


def _stream(chunks: list[str], restore_at: int = -1) -> list[Any]:
    state = Lfm2State()
    deltas = []
    for i, chunk in enumerate(chunks):
        if i == restore_at:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=Lfm2State)
        deltas.append(_delta(Lfm2Stream("seed", state).stream(chunk)))
    return deltas


@pytest.mark.parametrize(("chunks", "expected"), VLLM_STREAMS)
def test_streams_as_vllm_does(chunks: list[str], expected: list[Any]) -> None:
    assert _stream(chunks) == expected
    for cut in range(len(chunks)):
        assert _stream(chunks, restore_at=cut) == expected


def test_a_list_past_the_read_limit_is_sent_when_its_end_marker_comes() -> None:
    body = "word " * (READ_LIMIT // 4)
    text = START + f"[save_note(body={body!r}, n=[1, 2.5])]"
    stream = Lfm2Stream("seed", Lfm2State())
    deltas = [stream.stream(text[i : i + 8]) for i in range(0, len(text), 8)]
    early = "".join(c.arguments or "" for d in deltas if d for c in d.tool_calls)
    assert early and len(early) < READ_LIMIT  # pieces stop at the limit
    last = stream.stream(END)
    assert last is not None
    arguments = early + "".join(c.arguments or "" for c in last.tool_calls)
    assert json.loads(arguments) == {"body": body, "n": [1, 2.5]}


def test_one_shot_repairs_as_vllm_does() -> None:
    output = f"Sure. {START}[f(cmd='sed -n '1,9p' f.py', b=1)]{END}[f()]{END} ok"
    calls = extract_calls(output)
    assert calls.tools_called
    assert [(c.name, json.loads(c.arguments)) for c in calls.calls] == [
        ("f", {"cmd": "sed -n '1,9p' f.py", "b": 1})
    ]
    assert calls.content == "Sure.\nok"
    repaired = extract_calls(f"{START}[f(month=07, from='a\nb')]{END}")
    assert [json.loads(c.arguments) for c in repaired.calls] == [{"month": 7, "from": "a\nb"}]
    assert not extract_calls(f"{START}[]{END}").tools_called
    assert not extract_calls(f"{START}f(a=1){END}").tools_called
