"""The compact state over HTTP and the WebSocket endpoints (docs/transports.md): what
each answers, refuses and bounds. Parity over the golden transcripts and under injected
misses is tests/test_transport_parity.py's."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from starlette.testclient import TestClient
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from app.streams.session import StreamSession
from app.transports.client import DEMO_OUTPUT_IDS, DEMO_PROMPT_IDS, DerenderClient, split
from app.transports.socket_streams import HeldStreams, OpenStream, SocketMessage
from app.wire.errors import StateRequired
from cache.sessions import SessionCache
from parsers.stream import ChatStream
from tests.support.apps import AppFactory, internal_errors
from tests.support.processes import redis_server, serving
from tests.support.replies import without_created

PARSED = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSED += ["--enable-auto-tool-choice"]
CHAT_PATH = "/v1/chat/completions/derender"
COMPACT = {"X-Derender-State": "compact"}
CHAT = {"messages": [{"role": "user", "content": "Hi"}]}
CHUNKS = split(DEMO_OUTPUT_IDS, [2, 1, 3])


def _chunk(request_id: str, step: int) -> dict[str, Any]:
    finish = "stop" if step == len(CHUNKS) - 1 else None
    choice = {"index": 0, "token_ids": CHUNKS[step], "finish_reason": finish}
    return {"request_id": request_id, "choices": [choice]}


def _body(request_id: str, step: int, state: Any = None, context: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"stream": True, "generate_chunk": _chunk(request_id, step)}
    if context:
        body.update(chat_request=CHAT, prompt_token_ids=list(DEMO_PROMPT_IDS))
    if state is not None:
        body["stream_state"] = state
    return body


def _full_replies(http: TestClient, request_id: str) -> list[bytes]:
    client = DerenderClient("http://testserver", http=http)
    stream = client.stream(request_id, chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
    return [without_created(reply.body) for reply in _send_all(stream)]


def _send_all(stream: Any) -> list[Any]:
    return [stream.send(chunk, "stop" if step == len(CHUNKS) - 1 else None) for step, chunk in
            enumerate(CHUNKS)]  # fmt: skip


def _chunks(bodies: list[bytes]) -> list[Any]:
    return [json.loads(body)["chunk"] for body in bodies]


@pytest.fixture
def http(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(PARSED)) as client:
        yield client


def _compact_stream(http: TestClient, request_id: str, steps: int) -> Any:
    """The state after ``steps`` compact chunks of a stream on ``http``."""
    state = None
    for step in range(steps):
        reply = http.post(
            CHAT_PATH, json=_body(request_id, step, state, state is None), headers=COMPACT
        )
        assert reply.status_code == 200, reply.text
        state = reply.json()["stream_state"]
    return state


def test_compact_replies_carry_the_history_as_its_length_and_digest(http: TestClient) -> None:
    state = None
    sources = []
    for step in range(len(CHUNKS) - 1):
        reply = http.post(CHAT_PATH, json=_body("c1", step, state, state is None), headers=COMPACT)
        assert reply.status_code == 200, reply.text
        state = reply.json()["stream_state"]
        sources.append(reply.headers["x-derender-cache"])
        assert "output_token_ids" not in state and "output_chunk_lens" not in state
        assert state["output_tokens"] == sum(map(len, CHUNKS[: step + 1]))
        assert len(state["output_digest"]) == 32
    assert sources == ["miss"] + ["hit"] * (len(CHUNKS) - 2)


def test_a_compact_chunk_no_live_session_continues_is_a_409(
    http: TestClient, make_app: AppFactory
) -> None:
    state = _compact_stream(http, "c2", 2)
    with TestClient(make_app(PARSED)) as other:  # another replica, or a restart
        reply = other.post(CHAT_PATH, json=_body("c2", 2, state, False), headers=COMPACT)
    assert reply.status_code == 409
    error = reply.json()["error"]
    assert error["code"] == "stream_state_required"
    assert error["type"] == "Conflict" and error["param"] == "stream_state"
    assert "re-send this chunk with its full stream_state" in error["message"]


def test_a_retried_compact_chunk_is_a_409_and_leaves_the_session_kept(http: TestClient) -> None:
    before = _compact_stream(http, "c3", 2)
    after = http.post(CHAT_PATH, json=_body("c3", 2, before, False), headers=COMPACT)
    assert after.status_code == 200
    retried = http.post(CHAT_PATH, json=_body("c3", 2, before, False), headers=COMPACT)
    assert retried.status_code == 409
    following = http.post(
        CHAT_PATH, json=_body("c3", 3, after.json()["stream_state"], False), headers=COMPACT
    )
    assert following.status_code == 200 and following.headers["x-derender-cache"] == "hit"


@pytest.mark.parametrize(
    "change",
    [
        {"output_digest": "0" * 32},
        {"output_tokens": 1},
        {"role_sent": False},
    ],
    ids=["digest", "length", "other-field"],
)
def test_a_compact_state_that_differs_from_the_sessions_is_a_409(
    http: TestClient, change: dict[str, Any]
) -> None:
    state = _compact_stream(http, "c4", 2) | change
    reply = http.post(CHAT_PATH, json=_body("c4", 2, state, False), headers=COMPACT)
    assert reply.status_code == 409, reply.text


def test_a_compact_state_without_the_header_is_refused(http: TestClient) -> None:
    """Read as a full state it would have no history: the stream would start over."""
    state = _compact_stream(http, "c8", 2)
    reply = http.post(CHAT_PATH, json=_body("c8", 2, state))
    assert reply.status_code == 400
    assert "X-Derender-State: compact" in reply.json()["error"]["message"]


def _escaped_key(body: dict[str, Any]) -> bytes:
    """``body`` as JSON with its state's ``output_digest`` key spelled with an escape."""
    encoded = json.dumps(body, separators=(",", ":")).encode()
    assert encoded.count(b'"output_digest"') == 1
    return encoded.replace(b'"output_digest"', b'"output\\u005fdigest"')


def test_a_compact_state_is_recognised_by_its_key_however_spelled(http: TestClient) -> None:
    """An escaped key is the same key: without the header the state is refused as a
    compact one (read as a full state it would lose its history), with it the chunk
    continues its session exactly as the plainly spelled state does."""
    json_type = {"Content-Type": "application/json"}
    body = _escaped_key(_body("c9", 2, _compact_stream(http, "c9", 2)))
    refused = http.post(CHAT_PATH, content=body, headers=json_type)
    assert refused.status_code == 400, refused.text
    assert "X-Derender-State: compact" in refused.json()["error"]["message"]
    body = _escaped_key(_body("c11", 2, _compact_stream(http, "c11", 2)))
    answered = http.post(CHAT_PATH, content=body, headers=json_type | COMPACT)
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-derender-cache"] == "hit"
    other = _compact_stream(http, "c10", 2)
    expected = http.post(CHAT_PATH, json=_body("c10", 2, other, False), headers=COMPACT).json()
    assert answered.json()["chunk"]["choices"] == expected["chunk"]["choices"]


def test_a_compact_chunk_with_another_streams_context_is_a_409(http: TestClient) -> None:
    state = _compact_stream(http, "c5", 2)
    body = _body("c5", 2, state) | {
        "chat_request": {"messages": [{"role": "user", "content": "No"}]}
    }
    assert http.post(CHAT_PATH, json=body, headers=COMPACT).status_code == 409
    same = http.post(CHAT_PATH, json=_body("c5", 2, state), headers=COMPACT)
    assert same.status_code == 200 and same.headers["x-derender-cache"] == "hit"


def test_the_full_resend_after_a_409_gives_the_full_protocols_chunks(
    http: TestClient, make_app: AppFactory
) -> None:
    expected = _chunks(_full_replies(http, "c6-full"))
    with TestClient(make_app(PARSED)) as other:
        client = DerenderClient("http://testserver", "compact", http=http)
        stream = client.stream("c6", chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
        replies = []
        for step, chunk in enumerate(CHUNKS):
            if step == 3:
                client.http = other  # the stream moves to a replica that never saw it
            replies.append(stream.send(chunk, "stop" if step == len(CHUNKS) - 1 else None))
    assert client.resends == 1
    assert [reply.cache for reply in replies][2:5] == ["hit", "miss", "hit"]
    got = _chunks([without_created(reply.body) for reply in replies])
    for mine, theirs in zip(got, expected, strict=True):
        assert mine | {"id": ""} == theirs | {"id": ""}


def test_the_full_resend_restores_from_redis(make_app: AppFactory) -> None:
    with redis_server() as redis:
        flags = [*PARSED, "--redis-url", redis.url, "--redis-secret", "transports"]
        with TestClient(make_app(flags)) as first, TestClient(make_app(flags)) as second:
            client = DerenderClient("http://testserver", "compact", http=first)
            stream = client.stream("c7", chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
            stream.send(CHUNKS[0])
            stream.send(CHUNKS[1])
            client.http = second
            reply = stream.send(CHUNKS[2])
    assert client.resends == 1
    assert reply.cache == "redis"


def test_the_compact_header_changes_nothing_for_a_plain_stream(make_app: AppFactory) -> None:
    with TestClient(make_app([])) as http:
        replies = []
        for headers in ({}, COMPACT):
            state = None
            bodies = []
            for step in range(len(CHUNKS)):
                reply = http.post(CHAT_PATH, json=_body("p1", step, state), headers=headers)
                state = reply.json()["stream_state"]
                bodies.append(without_created(reply.content))
            replies.append(bodies)
    assert replies[0] == replies[1]


# --------------------------------------------------------------------------- WebSocket


def _socket_message(request_id: str, step: int, context: bool) -> str:
    body = _body(request_id, step, context=context)
    del body["stream"]  # a message may leave it out
    return json.dumps(body)


def test_a_connection_carries_many_streams_each_as_the_full_protocol_gives_it(
    http: TestClient,
) -> None:
    expected = {name: _chunks(_full_replies(http, name)) for name in ("s1", "s2", "s3")}
    got: dict[str, list[Any]] = {name: [] for name in expected}
    with http.websocket_connect(CHAT_PATH + "/ws") as socket:
        for step in range(len(CHUNKS)):
            for name in expected:
                socket.send_text(_socket_message(name, step, step == 0))
                reply = json.loads(socket.receive_text())
                assert (reply["request_id"], reply["index"]) == (name, 0)
                reply["chunk"]["created"] = 0
                got[name].append(reply["chunk"])
    for name, chunks in expected.items():
        for chunk in chunks:
            chunk["created"] = 0
        assert got[name] == chunks


def test_a_bad_message_answers_its_stream_and_the_connection_stays(http: TestClient) -> None:
    with http.websocket_connect(CHAT_PATH + "/ws") as socket:
        socket.send_text(_socket_message("good", 0, True))
        assert "chunk" in json.loads(socket.receive_text())
        socket.send_text("{not json")
        error = json.loads(socket.receive_text())
        assert error["request_id"] is None and error["error"]["code"] == 400
        socket.send_text(_socket_message("unknown", 1, False))
        error = json.loads(socket.receive_text())
        assert error["request_id"] == "unknown"
        assert error["error"]["code"] == "stream_state_required"
        bad = json.loads(_socket_message("bad", 0, True))
        bad["generate_chunk"]["choices"][0]["token_ids"] = [-5]
        socket.send_text(json.dumps(bad))
        assert json.loads(socket.receive_text())["error"]["code"] == 400
        socket.send_text(_socket_message("good", 1, False))
        assert "chunk" in json.loads(socket.receive_text())


def test_a_failure_inside_a_parser_answers_a_500_on_its_stream_alone(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(PARSED)
    with TestClient(app) as http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        socket.send_text(_socket_message("first", 0, True))
        assert "chunk" in json.loads(socket.receive_text())

        def explode(*args: object) -> None:
            raise RuntimeError("parser bug")

        with monkeypatch.context() as patch, caplog.at_level(logging.ERROR, "derender_server"):
            # A parser's either way of stepping a chunk after a step: plain text (the
            # check made anew), or the full step.
            patch.setattr("parsers.stream._plain_check", explode)
            patch.setattr(ChatStream, "step", explode)
            socket.send_text(_socket_message("first", 1, False))
            error = json.loads(socket.receive_text())
        assert error["error"] == {
            "message": "internal error while derendering",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        }
        assert internal_errors(app) == 1 and "first" in caplog.records[-1].getMessage()
        socket.send_text(_socket_message("second", 0, True))
        assert "chunk" in json.loads(socket.receive_text())


def test_a_connection_refuses_a_stream_past_its_bound(make_app: AppFactory) -> None:
    http = TestClient(make_app([*PARSED, "--ws-max-streams", "2"]))
    with http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        for name in ("a", "b", "c"):
            socket.send_text(_socket_message(name, 0, True))
            reply = json.loads(socket.receive_text())
        assert "--ws-max-streams" in reply["error"]["message"]
        socket.send_text(_socket_message("a", 1, False))  # still open
        assert "chunk" in json.loads(socket.receive_text())


def _metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.split()[1])


def test_streams_a_connection_holds_count_in_the_stream_cache(make_app: AppFactory) -> None:
    """Held streams count in the cache's gauges beside kept HTTP sessions, the oldest
    is evicted past the bound (its next message gets stream_state_required, its full
    re-send resumes it), and a closed connection's streams stop counting."""
    app = make_app([*PARSED, "--stream-cache-size", "2"])
    cache = app.service.store.cache
    with TestClient(app) as http:
        assert http.post(CHAT_PATH, json=_body("kept", 0)).status_code == 200
        with http.websocket_connect(CHAT_PATH + "/ws") as socket:
            socket.send_text(_socket_message("a", 0, True))
            assert "chunk" in json.loads(socket.receive_text())
            metrics = http.get("/metrics").text
            assert _metric(metrics, "derender_cache_sessions") == 2
            assert _metric(metrics, "derender_cache_bytes") == cache.bytes > 0
            socket.send_text(_socket_message("a", 1, False))
            assert "chunk" in json.loads(socket.receive_text())
            socket.send_text(_socket_message("b", 0, True))  # "kept" goes
            assert "chunk" in json.loads(socket.receive_text())
            assert len(cache) == 2 and cache.entries() == []
            socket.send_text(_socket_message("c", 0, True))  # "a" goes
            assert "chunk" in json.loads(socket.receive_text())
            socket.send_text(_socket_message("a", 1, False))
            error = json.loads(socket.receive_text())
            assert error["request_id"] == "a"
            assert error["error"]["code"] == "stream_state_required"
            assert "evicted" in error["error"]["message"]
            # The full re-send of step 1 continues the state step 0's reply carried.
            full = json.loads(_socket_message("a", 1, True))
            full["stream_state"] = http.post(CHAT_PATH, json=_body("a", 0)).json()["stream_state"]
            socket.send_text(json.dumps(full))
            resumed = json.loads(socket.receive_text())
            assert resumed["chunk"]["choices"] == _http_replies(http, "a")[1]["choices"]
        assert (len(cache), cache.bytes) == (0, 0)  # the connection is gone


def _http_replies(http: TestClient, request_id: str) -> list[Any]:
    return [json.loads(body)["chunk"] for body in _full_replies(http, request_id)]


def test_a_plain_stream_evicted_from_a_connection_is_not_restarted(make_app: AppFactory) -> None:
    """Without a parser a chunk alone could open a stream; an evicted one's next chunk
    is refused instead, so no reply ever starts a live stream over."""
    with (
        TestClient(make_app(["--stream-cache-size", "1"])) as http,
        http.websocket_connect(CHAT_PATH + "/ws") as socket,
    ):
        for name in ("a", "b"):
            socket.send_text(_socket_message(name, 0, True))
            assert "chunk" in json.loads(socket.receive_text())
        socket.send_text(_socket_message("a", 1, False))
        assert json.loads(socket.receive_text())["error"]["code"] == "stream_state_required"
        socket.send_text(_socket_message("b", 1, False))
        assert "chunk" in json.loads(socket.receive_text())


def test_a_stream_evicted_while_its_message_is_answered_is_let_go_after_it() -> None:
    """A long chunk is answered on a worker thread while other streams come and go: if
    the cache evicts its stream meanwhile, the reply still goes out, but the connection
    keeps nothing of the stream, and its next message gets stream_state_required."""
    cache: SessionCache[StreamSession] = SessionCache(4, 1 << 20, 300.0)
    streams = HeldStreams(cache)
    key = ("r", 0)
    streams.put(key, OpenStream(request={"held": "x" * 1000}))
    message = msgspec.json.decode(_socket_message("r", 1, False), type=SocketMessage)
    stream = streams.continued(key, message)
    assert stream is not None and len(cache) == 1 and cache.bytes > 1000
    cache.clear()  # an eviction while the message is answered
    stream.request = {"held": "the reply's state"}  # as a plain lane ends its message
    streams.put(key, stream)
    assert stream.request is None and len(cache) == 0 and cache.bytes == 0
    with pytest.raises(StateRequired, match="evicted"):
        streams.continued(key, message)
    assert len(streams) == 0


def test_the_client_resumes_streams_the_cache_evicts_from_its_connection() -> None:
    """Two streams interleaved on one connection with room for one session: every
    chunk after the first finds its stream evicted, and app/transports/client.py re-sends it in
    full; the replies are the full protocol's."""
    with serving(*PARSED, "--stream-cache-size", "1") as base:
        with DerenderClient(base) as client:
            expected = {
                name: [without_created(reply.body) for reply in _send_all(
                    client.stream(name, chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS))]
                for name in ("x", "y")
            }  # fmt: skip
        with DerenderClient(base, "websocket") as client:
            streams = {
                name: client.stream(name, chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
                for name in expected
            }
            got: dict[str, list[Any]] = {name: [] for name in expected}
            for step, chunk in enumerate(CHUNKS):
                finish = "stop" if step == len(CHUNKS) - 1 else None
                for name, stream in streams.items():
                    got[name].append(json.loads(stream.send(chunk, finish).body)["chunk"])
            # The last stream's final chunk finds it held: the other's ended before.
            assert client.resends == len(expected) * (len(CHUNKS) - 1) - 1
    for name, bodies in expected.items():
        assert [chunk | {"created": 0} for chunk in got[name]] == [
            json.loads(body)["chunk"] | {"created": 0} for body in bodies
        ]


def test_an_oversized_message_is_refused_on_its_own(make_app: AppFactory) -> None:
    http = TestClient(make_app([*PARSED, "--max-request-bytes", "2000"]))
    with http, http.websocket_connect(CHAT_PATH + "/ws") as socket:
        large = json.loads(_socket_message("big", 0, True))
        large["prompt_token_ids"] = [198] * 1000
        socket.send_text(json.dumps(large))
        reply = json.loads(socket.receive_text())
        assert reply["error"]["code"] == 413 and reply["request_id"] == "big"
        socket.send_text(_socket_message("small", 0, True))
        assert "chunk" in json.loads(socket.receive_text())


def test_completions_stream_over_a_connection_as_over_http(make_app: AppFactory) -> None:
    path = "/v1/completions/derender"
    messages = [
        {"generate_chunk": _chunk("k1", step)} for step in range(len(CHUNKS))
    ]  # fmt: skip
    messages[0]["completion_request"] = {"prompt": "Hi"}
    messages[0]["prompt_token_ids"] = list(DEMO_PROMPT_IDS)
    with TestClient(make_app([])) as http:
        expected, state = [], None
        for message in messages:
            body = {"stream": True, **messages[0], **message}
            if state is not None:
                body["stream_state"] = state
            reply = http.post(path, json=body).json()
            state = reply["stream_state"]
            expected.append(reply["chunk"] | {"created": 0})
        with http.websocket_connect(path + "/ws") as socket:
            got = []
            for message in messages:
                socket.send_text(json.dumps(message))
                got.append(json.loads(socket.receive_text())["chunk"] | {"created": 0})
    assert got == expected


def test_the_handshake_needs_the_api_key_and_an_idle_connection_is_closed() -> None:
    flags = (*PARSED, "--api-key", "sesame", "--ws-idle-timeout", "0.5")
    with serving(*flags) as base:
        url = "ws" + base.removeprefix("http") + CHAT_PATH + "/ws"
        with pytest.raises(InvalidStatus) as refused:
            connect(url).close()
        assert refused.value.response.status_code == 403
        with pytest.raises(InvalidStatus):
            connect(url.replace("/ws", "/nope")).close()
        headers = {"Authorization": "Bearer sesame"}
        with connect(url, additional_headers=headers) as socket:
            socket.send(_socket_message("idle", 0, True))
            assert "chunk" in json.loads(socket.recv(timeout=30))
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        client = DerenderClient(base, "websocket", api_key="sesame")
        stream = client.stream("keyed", chat_request=CHAT, prompt_token_ids=DEMO_PROMPT_IDS)
        assert len(_send_all(stream)) == len(CHUNKS)
        client.close()
        assert httpx.get(base + "/metrics", headers=headers).text.count('mode="socket"') >= 1
