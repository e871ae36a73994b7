"""internlm: what the golden corpus cannot show (a long call past the re-read budget, a
snapshot mid-stream, the requests vLLM's parser fails)."""

from __future__ import annotations

import json

import msgspec
import pytest

from parsers.families.internlm import InternlmState, InternlmStream, extract_call
from parsers.types import Delta, OutputRefused

MARKER = "<|action_start|><|plugin|>"
ARGUMENTS = {"body": "word " * 20_000, "n": [1, 2.5, None]}
CALL = MARKER + "\n" + json.dumps({"name": "save_note", "parameters": ARGUMENTS}) + "<|action_end|>"


def _pieces(text: str, size: int) -> list[str]:
    """``text`` in chunks of ``size`` characters, each marker a chunk of its own."""
    head, body = text.split(MARKER)
    body, end = body.split("<|action_end|>")
    return (
        [head, "<|action_start|>", "<|plugin|>"]
        + [body[i : i + size] for i in range(0, len(body), size)]
        + ["<|action_end|>" + end]
    )


def _fold(deltas: list[Delta | None]) -> tuple[str, list[str], str]:
    content, names, arguments = "", [], ""
    for delta in deltas:
        if delta is None:
            continue
        content += delta.content or ""
        names += [call.name for call in delta.tool_calls if call.name]
        arguments += "".join(call.arguments or "" for call in delta.tool_calls)
    return content, names, arguments


def test_a_call_past_the_reread_budget_is_settled_by_the_last_chunk() -> None:
    stream = InternlmStream("seed", InternlmState())
    deltas = [stream.stream(piece) for piece in _pieces("Saving." + CALL, 4)]
    assert stream.s.starved  # 100 KB read again per chunk is past the budget
    content, names, arguments = _fold([*deltas, stream.finish()])
    assert (content, names) == ("Saving.", ["save_note"])
    assert json.loads(arguments) == ARGUMENTS


@pytest.mark.parametrize("cut", [40, 90, 131])
def test_a_snapshot_mid_stream_goes_on_as_the_stream_would(cut: int) -> None:
    text = 'Hi.<|action_start|><|plugin|>\n{"name": "f", "parameters": {"a": "x y", "b": [1]}}'
    pieces = _pieces(text + "<|action_end|>", 3)
    whole = InternlmStream("seed", InternlmState())
    expected = _fold([whole.stream(piece) for piece in pieces])
    first = InternlmStream("seed", InternlmState())
    head = [first.stream(piece) for piece in pieces[: cut // 10]]
    kept = msgspec.json.decode(msgspec.json.encode(first.s), type=InternlmState)
    rest = InternlmStream("seed", kept)
    assert _fold(head + [rest.stream(piece) for piece in pieces[cut // 10 :]]) == expected


def test_what_vllm_fails_is_refused() -> None:
    with pytest.raises(OutputRefused, match=r"too many values to unpack \(expected 2\)"):
        extract_call(CALL + CALL)
    with pytest.raises(OutputRefused, match="Expecting value"):
        extract_call(MARKER + '{"name": "f", "parameters": }<|action_end|>')
    stream = InternlmStream("seed", InternlmState())
    for piece in _pieces(CALL, 50):
        stream.stream(piece)
    with pytest.raises(OutputRefused):
        stream.stream(MARKER)
