"""jamba: what the golden corpus cannot show (one-shot corners, a long call past the
re-read budget, the cost of text after the calls, a snapshot mid-stream)."""

from __future__ import annotations

import json

import msgspec
import pytest

from parsers.families.jamba import END, START, JambaState, JambaStream, extract_calls
from parsers.types import Delta

START_ID = 7
ARGUMENTS = {"body": "word " * 20_000, "unit": "celsius"}  # vLLM drops some closers
CALLS = START + json.dumps([{"name": "save_note", "arguments": ARGUMENTS}]) + END


def _pieces(text: str, size: int) -> list[str]:
    """``text`` in chunks of ``size`` characters, ``<tool_calls>`` a chunk of its own."""
    head, body = text.split(START, 1)
    return [head, START] + [body[i : i + size] for i in range(0, len(body), size)]


def _stream(
    pieces: list[str], state: JambaState | None = None
) -> tuple[JambaStream, list[Delta | None]]:
    stream = JambaStream(START_ID, "seed", state or JambaState())
    deltas = [stream.stream(p, [START_ID] if p == START else [1, 2]) for p in pieces]
    return stream, deltas


def _fold(deltas: list[Delta | None]) -> tuple[str, list[str], dict[int, str]]:
    content, names, arguments = "", [], {}
    for delta in deltas:
        if delta is None:
            continue
        content += delta.content or ""
        names += [call.name for call in delta.tool_calls if call.name]
        for call in delta.tool_calls:
            arguments[call.index] = arguments.get(call.index, "") + (call.arguments or "")
    return content, names, arguments


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # No closing marker, a call without arguments, a name that is no string, no
        # array: the whole output is content, as vLLM's reading fails.
        (START + '[{"name": "f", "arguments": {}}]', (False, [], None)),
        (START + '[{"name": "f"}]' + END, (False, [], None)),
        (START + '[{"name": 5, "arguments": {}}]' + END, (False, [], None)),
        (START + '{"name": "f", "arguments": {}}' + END, (False, [], None)),
        # One space before the marker is no content; the first array is read.
        (
            " " + START + '[{"name": "f", "arguments": {"a":1}}]' + END + START + "[]" + END,
            (True, [("f", '{"a": 1}')], None),
        ),
        ("Hi." + START + "[]" + END, (True, [], "Hi.")),
    ],
)
def test_one_shot_reads_as_vllm_does(
    output: str, expected: tuple[bool, list[tuple[str, str]], str | None]
) -> None:
    found = extract_calls(output)
    called, calls, content = expected
    assert found.tools_called == called
    assert [(c.name, c.arguments) for c in found.calls] == calls
    assert found.content == (content if called else output)


def test_a_long_string_argument_costs_what_each_chunk_adds() -> None:
    """Text that only lengthens an open string is not read again (string mode); what
    follows the string reads the call again, within the budget."""
    pieces = _pieces("Saving." + CALLS, 4)
    stream, deltas = _stream(pieces[:-20])
    assert stream.s.string is not None and stream.s.reread < 2 * len(stream.s.held)
    deltas += [stream.stream(piece, [1]) for piece in pieces[-20:]]
    content, names, arguments = _fold(deltas)
    rest = stream.remaining_arguments()
    settled = _fold([stream.finish()])[2].get(0, "")
    assert (content, names) == ("Saving.", ["save_note"])
    assert json.loads(arguments[0] + rest + settled) == ARGUMENTS


def test_a_call_past_the_reread_budget_is_settled_by_the_last_chunk() -> None:
    escaped = {"body": 'say \\"hi\\" ' * 10_000}
    calls = START + json.dumps([{"name": "save_note", "arguments": escaped}]) + END
    stream, deltas = _stream(_pieces("Saving." + calls, 4))
    assert stream.s.starved  # 100 KB read again per chunk is past the budget
    content, names, arguments = _fold([*deltas, stream.finish()])
    assert (content, names) == ("Saving.", ["save_note"])
    assert json.loads(arguments[0]) == escaped


def test_text_after_the_calls_is_not_read_again() -> None:
    calls = START + json.dumps([{"name": "f", "arguments": {"a": "b"}}]) + END
    stream, deltas = _stream(_pieces(calls, 3))
    read = stream.s.reread
    tail = [stream.stream("more text ", [1]) for _ in range(20_000)]
    assert stream.s.reread == read and not stream.s.starved
    assert all(d is not None and d.tool_calls[0].arguments == "" for d in tail)
    assert _fold(deltas)[2][0] + stream.remaining_arguments() == '{"a": "b"}'


def test_calls_before_the_current_one_are_not_read_again() -> None:
    """Each chunk reads the current call and what follows it, not the array before it."""
    body = ", ".join(json.dumps({"name": "f", "arguments": {"i": i}}) for i in range(300))
    stream, deltas = _stream(_pieces(START + "[" + body + "]" + END, 5))
    assert not stream.s.starved
    assert stream.s.reread < 8 * len(stream.s.held)
    names = _fold(deltas)[1]
    assert names == ["f"] * 300


@pytest.mark.parametrize("cut", [3, 9, 17, 30])
def test_a_snapshot_mid_stream_goes_on_as_the_stream_would(cut: int) -> None:
    calls = [{"name": "f", "arguments": {"a": "x y", "b": [1]}}, {"name": "g", "arguments": {}}]
    pieces = _pieces("Hi." + START + json.dumps(calls) + END + "\nDone.", 3)
    _, expected = _stream(pieces)
    first, head = _stream(pieces[:cut])
    kept = msgspec.msgpack.decode(msgspec.msgpack.encode(first.s), type=JambaState)
    _, rest = _stream(pieces[cut:], kept)
    assert head + rest == expected
