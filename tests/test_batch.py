"""Batch frames (docs/transports.md) on the WebSocket endpoints and the batch POSTs: a
frame's entries are answered in order as single chunks would be, a bad entry answers
for itself, a frame over its bounds is refused whole, and a long frame yields the event
loop. Parity over the golden transcripts and under injected misses is
tests/test_transport_parity.py's."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from msgspec import Raw
from starlette.testclient import TestClient

from app.serving.metrics import Metrics
from app.transports.batch import TURN_SECONDS, answered
from app.transports.client import DEMO_OUTPUT_IDS, DEMO_PROMPT_IDS, DerenderClient, split
from tests.support.apps import AppFactory
from tests.support.replies import without_created

pytestmark = pytest.mark.usefixtures("no_internal_errors")

PARSED = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSED += ["--enable-auto-tool-choice"]
CHAT_PATH = "/v1/chat/completions/derender"
COMPLETIONS_PATH = "/v1/completions/derender"
CHAT = {"messages": [{"role": "user", "content": "Hi"}]}
CHUNKS = split(DEMO_OUTPUT_IDS, [2, 1, 3])
NAMES = ("s1", "s2", "s3")


def _chunk(request_id: str, step: int) -> dict[str, Any]:
    finish = "stop" if step == len(CHUNKS) - 1 else None
    choice = {"index": 0, "token_ids": CHUNKS[step], "finish_reason": finish}
    return {"request_id": request_id, "choices": [choice]}


def _entry(request_id: str, step: int, state: Any = None, context: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"generate_chunk": _chunk(request_id, step)}
    if context or step == 0:
        entry.update(chat_request=CHAT, prompt_token_ids=list(DEMO_PROMPT_IDS))
    if state is not None:
        entry["stream_state"] = state
    return entry


def _frame(entries: list[Any]) -> str:
    return json.dumps({"batch": entries})


def _expected(http: TestClient) -> dict[str, list[bytes]]:
    """Each stream's chunks from the vLLM protocol, one POST per chunk."""
    client = DerenderClient("http://testserver", http=http)
    expected = {}
    for name in NAMES:
        stream = client.stream(name, chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
        expected[name] = [
            _chunk_bytes(stream.send(chunk, "stop" if step == len(CHUNKS) - 1 else None).body)
            for step, chunk in enumerate(CHUNKS)
        ]
    return expected


def _chunk_bytes(reply: bytes) -> bytes:
    """A reply's chunk, ``created`` zeroed."""
    chunk = json.loads(reply)["chunk"]
    return without_created(json.dumps(chunk, separators=(",", ":")).encode())


@pytest.fixture
def http(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(PARSED)) as client:
        yield client


def test_a_frame_on_a_connection_answers_each_stream_as_the_full_protocol(
    http: TestClient,
) -> None:
    expected = _expected(http)
    got: dict[str, list[bytes]] = {name: [] for name in NAMES}
    with http.websocket_connect(CHAT_PATH + "/ws") as socket:
        for step in range(len(CHUNKS)):
            socket.send_text(_frame([_entry(name, step) for name in NAMES]))
            replies = json.loads(socket.receive_text())["batch"]
            assert [(r["request_id"], r["index"]) for r in replies] == [(n, 0) for n in NAMES]
            for reply in replies:
                got[reply["request_id"]].append(_chunk_bytes(json.dumps(reply).encode()))
    assert got == expected


def test_entries_continued_on_a_worker_thread_answer_as_inline_ones(
    make_app: AppFactory,
) -> None:
    """With ``--inline-tokens 0`` every continued chunk takes the worker-thread path."""
    with TestClient(make_app(PARSED)) as inline:
        expected = _expected(inline)
    http = TestClient(make_app([*PARSED, "--inline-tokens", "0"]))
    got: dict[str, list[bytes]] = {name: [] for name in NAMES}
    with http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        for step in range(len(CHUNKS)):
            socket.send_text(_frame([_entry(name, step) for name in NAMES]))
            for reply in json.loads(socket.receive_text())["batch"]:
                got[reply["request_id"]].append(_chunk_bytes(json.dumps(reply).encode()))
    assert got == expected


def test_a_bad_entry_answers_for_itself_and_single_messages_still_work(
    make_app: AppFactory,
) -> None:
    http = TestClient(make_app([*PARSED, "--max-request-bytes", "2000"]))
    with http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        large = _entry("big", 0)
        large["prompt_token_ids"] = [198] * 1000
        bad_tokens = _entry("bad", 0)
        bad_tokens["generate_chunk"]["choices"][0]["token_ids"] = [-5]
        entries = [_entry("a", 0), "junk", _entry("unknown", 1), large, bad_tokens, _entry("b", 0)]
        socket.send_text(_frame(entries))
        replies = json.loads(socket.receive_text())["batch"]
        assert [r.get("request_id") for r in replies] == ["a", None, "unknown", "big", "bad", "b"]
        assert [r["error"]["code"] for r in replies if "error" in r] == [
            400,
            "stream_state_required",
            413,
            400,
        ]
        assert "chunk" in replies[0] and "chunk" in replies[-1]
        # Both streams stayed open on the connection: a single message continues one.
        socket.send_text(json.dumps(_entry("a", 1)))
        assert json.loads(socket.receive_text())["request_id"] == "a"
        socket.send_text(_frame([_entry("b", 1)]))
        assert "chunk" in json.loads(socket.receive_text())["batch"][0]


def test_a_frame_over_its_bounds_is_refused_whole_and_the_streams_stay(
    make_app: AppFactory,
) -> None:
    flags = [*PARSED, "--batch-max-entries", "2", "--batch-max-bytes", "3000"]
    http = TestClient(make_app(flags))
    with http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        socket.send_text(_frame([_entry("a", 0)]))
        assert "chunk" in json.loads(socket.receive_text())["batch"][0]
        refused = {
            "entries": _frame([_entry("a", 1)] * 3),
            "bytes": _frame([_entry("a", 1), {"padding": "x" * 3000}]),
            "not a list": json.dumps({"batch": {"a": 1}}),
        }
        for why, frame in refused.items():
            socket.send_text(frame)
            reply = json.loads(socket.receive_text())
            assert reply["request_id"] is None, why
            assert reply["error"]["code"] == (413 if why == "bytes" else 400), why
        socket.send_text(_frame([_entry("a", 1)]))  # nothing of the refused frames ran
        replies = json.loads(socket.receive_text())["batch"]
        assert replies[0]["chunk"]["choices"][0]["delta"]["reasoning"] == "The"


def _post_frame(http: TestClient, entries: list[Any], path: str = CHAT_PATH) -> list[Any]:
    reply = http.post(path + "/batch", json={"batch": entries})
    assert reply.status_code == 200, reply.text
    replies: list[Any] = reply.json()["batch"]
    return replies


def test_a_batch_post_answers_as_compact_posts_and_a_miss_as_their_409(
    http: TestClient,
) -> None:
    """Each entry as a compact POST: the replies carry compact states; after an
    eviction every entry gets stream_state_required, and the chunk re-sent in full gives
    the full protocol's chunk."""
    expected = _expected(http)
    got: dict[str, list[bytes]] = {name: [] for name in NAMES}
    histories: dict[str, list[int]] = {name: [] for name in NAMES}
    states: dict[str, Any] = {}
    for step in range(len(CHUNKS)):
        if step == 2:
            http.app.service.store.cache.clear()
        entries = [_entry(name, step, states.get(name)) for name in NAMES]
        replies = _post_frame(http, entries)
        if step == 2:
            assert [r["error"]["code"] for r in replies] == ["stream_state_required"] * 3
            full = []
            for name in NAMES:
                state = {k: v for k, v in states[name].items() if k not in
                         ("output_tokens", "output_digest", "tool_calls")}  # fmt: skip
                state["output_token_ids"] = histories[name]
                state["output_chunk_lens"] = [len(c) for c in CHUNKS[:step]]
                full.append(_entry(name, step, state, context=True))
            replies = _post_frame(http, full)
        for name, reply in zip(NAMES, replies, strict=True):
            assert reply["request_id"] == name
            assert "output_digest" in reply["stream_state"]
            got[name].append(_chunk_bytes(json.dumps(reply).encode()))
            states[name] = reply["stream_state"]
            histories[name] += CHUNKS[step]
    assert got == expected


def test_a_batch_post_refuses_a_malformed_frame_whole(make_app: AppFactory) -> None:
    http = TestClient(make_app([*PARSED, "--batch-max-entries", "2", "--batch-max-bytes", "3000"]))
    with http:
        for body, status in (
            (b"{not json", 400),
            (b'{"generate_chunk": {}}', 400),
            (b'{"batch": 3}', 400),
            (json.dumps({"batch": [{}] * 3}).encode(), 400),
            (json.dumps({"batch": ["x" * 3000]}).encode(), 413),
        ):
            reply = http.post(CHAT_PATH + "/batch", content=body, headers={"content-type":
                              "application/json"})  # fmt: skip
            assert reply.status_code == status, reply.text
            assert reply.json()["error"]["code"] == status
        replies = _post_frame(http, ["junk", _entry("a", 0)])
        assert replies[0]["error"]["code"] == 400 and "chunk" in replies[1]


def test_completions_entries_answer_as_completions_posts(make_app: AppFactory) -> None:
    http = TestClient(make_app([]))
    body = {
        "stream": True,
        "generate_chunk": {"request_id": "c", "choices": [{"index": 0, "token_ids": [9707]}]},
        "completion_request": {"prompt": "Hi"},
    }
    with http:
        alone = http.post(COMPLETIONS_PATH, json=body).json()
        entry = _post_frame(http, [body], COMPLETIONS_PATH)[0]
        with http.websocket_connect(COMPLETIONS_PATH + "/ws") as socket:
            socket.send_text(_frame([body]))
            on_socket = json.loads(socket.receive_text())["batch"][0]
    for reply in (entry, on_socket):
        assert reply["request_id"] == "c"
        assert reply["chunk"] | {"created": 0} == alone["chunk"] | {"created": 0}
        assert reply["stream_state"] == alone["stream_state"]


def test_a_long_frame_lets_the_event_loop_turn_between_entries() -> None:
    """Entries that each take a turn's worth of work: the loop turns between them, so
    another task runs while the frame is answered."""
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def busy(entry: bytes) -> tuple[bytes, int]:
        until = time.perf_counter() + TURN_SECONDS
        while time.perf_counter() < until:
            pass
        return entry, 200

    async def main() -> tuple[bytes, int]:
        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        before = turns
        reply = await answered([Raw(b"1")] * 20, busy, Metrics(), "chat")
        task.cancel()
        return reply, turns - before

    reply, during = asyncio.run(main())
    assert reply == b'{"batch":[' + b",".join([b"1"] * 20) + b"]}"
    assert during >= 19
