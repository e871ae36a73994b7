"""The stream client helper and the X-Derender-Stream-Id convention it follows."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from starlette.testclient import TestClient

from app.tokens.tokenizer import Tokenizer
from app.transports.client import (
    DEMO_OUTPUT_IDS,
    DEMO_PROMPT_IDS,
    DerenderClient,
    ReplyError,
    StreamHistory,
    main,
    split,
)
from app.wire.protocol import StreamState
from app.wire.routing import STREAM_ID_HEADER
from tests.support.apps import AppFactory
from tests.support.replies import without_created

PARSERS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSERS += ["--enable-auto-tool-choice"]
CHAT = {"messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture
def http(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(PARSERS)) as client:
        yield client


def test_split_cycles_through_sizes() -> None:
    assert split(list(range(7)), [1, 3]) == [[0], [1, 2, 3], [4], [5, 6]]
    assert split([], [2]) == []
    with pytest.raises(ValueError):
        split([1], [0])


def test_a_stream_threads_its_state_and_keeps_its_session(http: TestClient) -> None:
    sent: list[str | None] = []
    http.event_hooks["request"].append(lambda r: sent.append(r.headers.get(STREAM_ID_HEADER)))
    client = DerenderClient("http://testserver", http=http)
    stream = client.stream("client-1", chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
    replies = stream.run(DEMO_OUTPUT_IDS, [1, 2])
    assert sent == ["client-1"] * len(replies)
    assert [r.cache for r in replies] == ["miss"] + ["hit"] * (len(replies) - 1)
    deltas = [r.chunk["choices"][0]["delta"] for r in replies]
    one_shot = http.post(
        "/v1/chat/completions/derender",
        json={
            "generate_response": {
                "request_id": "client-1",
                "choices": [{"index": 0, "finish_reason": "stop", "token_ids": DEMO_OUTPUT_IDS}],
            },
            "chat_request": CHAT,
            "prompt_token_ids": DEMO_PROMPT_IDS,
        },
    ).json()["choices"][0]["message"]
    for key in ("reasoning", "content"):
        assert "".join(d.get(key) or "" for d in deltas) == one_shot[key]
    assert replies[-1].chunk["choices"][0]["finish_reason"] == "stop"


def test_a_stream_without_the_header_gets_the_same_bytes(http: TestClient) -> None:
    def run(route: bool) -> list[bytes]:
        client = DerenderClient("http://testserver", http=http, route=route)
        stream = client.stream("same", chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
        return [without_created(r.body) for r in stream.run(DEMO_OUTPUT_IDS, [3])]

    assert run(route=False) == run(route=True)


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/chat/completions/derender", {"chat_request": CHAT, "prompt_token_ids": [1]}),
        ("/v1/completions/derender", {}),
    ],
)
def test_a_header_naming_another_stream_is_refused(
    http: TestClient, path: str, extra: dict[str, object]
) -> None:
    body = {
        "stream": True,
        "generate_chunk": {"request_id": "a", "choices": [{"index": 0, "token_ids": [9707]}]},
        **extra,
    }
    for header, status in ((None, 200), ("a", 200), ("b", 400)):
        headers = {} if header is None else {STREAM_ID_HEADER: header}
        reply = http.post(path, json=body, headers=headers)
        assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["type"] == "BadRequestError"
    assert error["param"] == "generate_chunk.request_id"
    assert STREAM_ID_HEADER in error["message"] and "'b'" in error["message"]


def test_an_error_reply_raises(http: TestClient) -> None:
    client = DerenderClient("http://testserver", http=http)
    stream = client.stream("bad", chat_request={"messages": "no"}, prompt_token_ids=[1])
    with pytest.raises(ReplyError) as raised:
        stream.send([9707])
    assert raised.value.status == 400
    assert b"messages" in raised.value.body


def test_the_demo_says_what_it_cannot_reach(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["http://127.0.0.1:1"]) == 1
    assert "cannot reach http://127.0.0.1:1" in capsys.readouterr().err


def test_a_compact_state_rebuilds_the_full_one(http: TestClient, tokenizer: Tokenizer) -> None:
    """The full state the client rebuilds from a compact reply and its history (tool-call
    ids included) is the one the full protocol's reply carried."""
    compact = DerenderClient("http://testserver", "compact", http=http)
    full = DerenderClient("http://testserver", http=http)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    # One request id (tool-call ids derive from it): the two streams take turns with
    # the session, so the compact one keeps re-sending its rebuilt state in full.
    streams = [
        client.stream("one-id", chat_request=CHAT | {"tools": [tool]}, prompt_token_ids=[1])
        for client in (compact, full)
    ]
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    output = tokenizer.encode("<think>\nhm\n</think>\n\nOk.\n" + call + "\n" + call)
    for chunk in split(output, [2, 1]):
        small, large = (stream.send(chunk) for stream in streams)
        assert b"output_digest" in bytes(small.stream_state)
        rebuilt = msgspec.json.decode(streams[0].full_state() or b"", type=StreamState)
        assert rebuilt == msgspec.json.decode(bytes(large.stream_state), type=StreamState)
    assert len(streams[0].history.tool_call_ids) == 2 and compact.resends > 0
    assert b"last_tool_call_ids" not in bytes(small.stream_state)
    plain = StreamHistory()
    plain.keep({"choices": [{"token_ids": [1, 2]}]}, {}, b'{"role_sent":true}')
    assert plain.full_state() == b'{"role_sent":true}'  # nothing to rebuild
