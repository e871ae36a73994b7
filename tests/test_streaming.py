"""Streams that change servers, retry chunks, or replay long histories."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.apps import AppFactory
from tests.support.golden import DEVIATIONS, differences, flags_of, load_cases, stream_body

PARSED = ("C1", "C2", "C3", "C4", "C5", "C6")
STREAMS = [c for config in PARSED for c in load_cases(config) if c["kind"] == "chat_stream"]


def vllm_state(case: dict[str, Any], upto: int, lane: int) -> dict[str, Any]:
    """The stream_state vLLM's server returns for ``lane`` after calls ``[0, upto)``.

    Built from the recorded requests and replies alone, as another server would
    have built it.
    """
    ids: list[int] = []
    lens: list[int] = []
    role_sent = tools_streamed = False
    call_ids: list[str] = []
    for chunk, chunk_lane, expected in zip(
        case["chunks"][:upto], case["lanes"][:upto], case["expected"][:upto], strict=True
    ):
        if chunk_lane != lane or not chunk["choices"]:
            continue
        role_sent = True
        token_ids = chunk["choices"][0].get("token_ids") or []
        if token_ids:
            ids += token_ids
            lens.append(len(token_ids))
        for call in expected["chunk"]["choices"][0]["delta"].get("tool_calls", []):
            tools_streamed = True
            if call["id"] is not None and call["index"] >= len(call_ids):
                call_ids.append(call["id"])
    return {
        "prev_tokens": [],
        "prefix_offset": 0,
        "read_offset": 0,
        "role_sent": role_sent,
        "logprob_context_token_ids": ids[-4:],
        "logprob_text_offset": 0,
        "output_token_ids": ids,
        "output_chunk_lens": lens,
        "tools_streamed": tools_streamed,
        "last_tool_call_ids": call_ids,
    }


@pytest.fixture(scope="module")
def clients(make_app: AppFactory) -> dict[tuple[str, ...], TestClient]:
    return {flags: TestClient(make_app(flags)) for flags in {flags_of(c) for c in STREAMS}}


def post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def without_created(reply: dict[str, Any]) -> dict[str, Any]:
    reply = json.loads(json.dumps(reply))
    reply["chunk"]["created"] = 0
    return reply


def test_vllm_state_rebuilds_the_recorded_final_state() -> None:
    for case in STREAMS:
        for i, expected in enumerate(case["expected"]):
            if "stream_state" in expected:
                lane = case["lanes"][i]
                built = vllm_state(case, len(case["chunks"]), lane)
                assert built == expected["stream_state"], case["id"]


@pytest.mark.parametrize("case", STREAMS, ids=[c["id"] for c in STREAMS])
def test_stream_moves_to_another_server_mid_way(
    case: dict[str, Any], clients: dict[tuple[str, ...], TestClient]
) -> None:
    """A state built by vLLM's server, sent with the next chunk, gives vLLM's chunk."""
    client = clients[flags_of(case)]
    for k in sorted({1, len(case["chunks"]) // 2, len(case["chunks"]) - 1}):
        lane = case["lanes"][k]
        has_history = any(lane_k == lane for lane_k in case["lanes"][:k])
        state = vllm_state(case, k, lane) if has_history else None
        reply = post(client, case["endpoint"], stream_body(case, case["chunks"][k], state))
        expected = dict(case["expected"][k]["chunk"], created=reply["chunk"]["created"])
        deltas = case["id"] not in DEVIATIONS
        problems = list(
            differences(
                _ids_as_placeholders(expected, deltas), _ids_as_placeholders(reply["chunk"], deltas)
            )
        )
        assert not problems, f"chunk {k}: {problems[:4]}"


def _ids_as_placeholders(chunk: dict[str, Any], deltas: bool) -> dict[str, Any]:
    chunk = json.loads(json.dumps(chunk))
    for choice in chunk["choices"]:
        for call in choice["delta"].get("tool_calls", []):
            if call["id"] is not None:
                call["id"] = "<id>"
        if not deltas:
            choice["delta"] = "<delta>"
    return chunk


@pytest.mark.parametrize("case", STREAMS[::7], ids=[c["id"] for c in STREAMS[::7]])
def test_retrying_a_chunk_returns_the_same_chunk(
    case: dict[str, Any], clients: dict[tuple[str, ...], TestClient]
) -> None:
    client = clients[flags_of(case)]
    states: dict[int, Any] = {}
    for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
        body = stream_body(case, chunk, states.get(lane))
        first = post(client, case["endpoint"], body)
        again = post(client, case["endpoint"], body)
        assert without_created(first) == without_created(again)
        states[lane] = first["stream_state"]


def test_tool_call_ids_are_deterministic(clients: dict[tuple[str, ...], TestClient]) -> None:
    case = next(c for c in STREAMS if c["id"] == "C1.tool_same_twice/chat_stream#t3")
    client = clients[flags_of(case)]
    runs: list[list[str]] = []
    for _ in range(2):
        state = None
        for chunk in case["chunks"]:
            state = post(client, case["endpoint"], stream_body(case, chunk, state))["stream_state"]
        assert state is not None
        runs.append(state["last_tool_call_ids"])
    assert runs[0] == runs[1]
    assert len(set(runs[0])) == 2
    assert all(i.startswith("chatcmpl-tool-") and len(i) == 30 for i in runs[0])
