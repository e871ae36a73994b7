"""Every 4xx a new user meets on the two derender endpoints: its status, its ``type``
(vLLM's scheme, errors.py), and a message that names the field and says what to send.

Where vLLM 0.33.0's golden transcripts carry a message of its own handlers, ours is
that message byte for byte; a chunk sent without ``stream_state`` into a live stream
starts it over, as in vLLM, and says so.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis
from starlette.testclient import TestClient

from app.streams.chunk_path import RESTART_WARNING, WARNING_HEADER
from tests.support.apps import AppFactory, internal_errors
from tests.support.golden import load_cases
from tests.support.processes import serving

CHAT = "/v1/chat/completions/derender"
COMPLETIONS = "/v1/completions/derender"
FLAGS = ["--served-model-name", "qwen3", "--max-model-len", "4096"]
PARSED = [*FLAGS, "--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSED += ["--enable-auto-tool-choice"]
HELLO = [9707, 0, 2585, 646, 358, 1492, 498, 3351, 30]  # "Hello! How can I help you today?"
PROMPT = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
CHAT_REQUEST = {"messages": [{"role": "user", "content": "Hi"}]}
REPLY = {"request_id": "r1", "choices": [{"index": 0, "token_ids": HELLO}]}
CHUNK = {"request_id": "r1", "choices": [{"index": 0, "token_ids": HELLO[:2]}]}
STATE_FIX = "Send the `stream_state` the previous chunk's reply returned, unchanged"
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def plain(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(FLAGS)) as client:
        yield client


@pytest.fixture(scope="module")
def parsed(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(PARSED)) as client:
        yield client


@pytest.fixture(scope="module")
def small(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app([*FLAGS, "--max-request-bytes", "200"])) as client:
        yield client


@dataclass
class Case:
    """A request that must fail: what it gets, what its message must say."""

    name: str
    body: Any
    status: int
    type: str
    field: str  # the message names what is wrong ...
    fix: str  # ... and what to send instead
    path: str = CHAT
    server: str = "plain"
    content_type: str | None = "application/json"
    param: str | None = None


def streamed(**fields: Any) -> dict[str, Any]:
    return {"stream": True, "generate_chunk": CHUNK, **fields}


ENGINE_REPLY = "the body looks like an engine reply itself"
BAD_HISTORY = {"output_token_ids": [1, 2], "output_chunk_lens": [1]}
NAMED_TOOL_NOT_IN_TOOLS = {
    **CHAT_REQUEST,
    "tools": [{"type": "function", "function": {"name": "f"}}],
    "tool_choice": {"type": "function", "function": {"name": "g"}},
}
TOP_LOGPROBS_BELOW = {**CHAT_REQUEST, "logprobs": True, "top_logprobs": -2}
# fmt: off
CASES = [
    # ---------------------------------------------------------------- not JSON at all
    Case(
        "empty body", b"", 400, "Bad Request", "request body is empty",
        '"stream": true` with one `generate_chunk`',
    ),
    Case(
        "empty body, completions", b"", 400, "Bad Request", "request body is empty",
        "`generate_responses`", COMPLETIONS,
    ),
    Case(
        "not JSON", b"hello", 400, "Bad Request", "JSON is malformed",
        "Send a JSON object with `generate_response`",
    ),
    Case(
        "JSON cut short", b'{"generate_response": {', 400, "Bad Request",
        "ends inside its JSON (after 23 bytes)", "Send the whole JSON object",
    ),
    Case(
        "not UTF-8", b'{"model": "\xff"}', 400, "Bad Request", "Invalid UTF-8",
        "Send the body as UTF-8 text",
    ),
    Case(
        "nested past the decoder", b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400,
        "Bad Request", "nests too deeply", "--max-json-depth",
    ),
    # ---------------------------------------------------------------- the wrong body
    Case(
        "JSON array", [1, 2, 3], 400, "Bad Request", "got `array`",
        "must be a JSON object with `generate_response`",
    ),
    Case(
        "empty object", {}, 400, "Bad Request", "`generate_response` is required",
        '`"stream": true` with one `generate_chunk`', param="body.generate_response",
    ),
    Case(
        "empty object, completions", {}, 400, "Bad Request", "`generate_responses` is required",
        "the engine's replies, one per prompt", COMPLETIONS, param="body.generate_responses",
    ),
    Case(
        "generate_chunk without stream", {"generate_chunk": CHUNK}, 400, "Bad Request",
        '`generate_chunk` is sent with `"stream": true`', 'add `"stream": true`',
        param="body.stream",
    ),
    Case(
        "generate_chunk without stream, completions", {"generate_chunk": CHUNK}, 400,
        "Bad Request", '`generate_chunk` is sent with `"stream": true`',
        "whole reply as `generate_responses`", COMPLETIONS, param="body.stream",
    ),
    Case(
        "stream with generate_response", {"stream": True, "generate_response": REPLY}, 400,
        "Bad Request", "not `generate_response`",
        "send the chunk as `generate_chunk`, or leave `stream` out", param="body.generate_chunk",
    ),
    Case(
        "stream without a chunk", {"stream": True}, 400, "Bad Request",
        "`generate_chunk` is required", "send one chunk of the engine's streamed reply",
        COMPLETIONS, param="body.generate_chunk",
    ),
    Case(
        "completions field on chat", {"generate_responses": [REPLY]}, 400, "Bad Request",
        "`generate_responses` is a field of /v1/completions/derender",
        "this endpoint takes `generate_response`", param="body.generate_responses",
    ),
    Case(
        "chat field on completions", {"generate_response": REPLY}, 400, "Bad Request",
        "`generate_response` is a field of /v1/chat/completions/derender",
        "this endpoint takes `generate_responses`", COMPLETIONS, param="body.generate_response",
    ),
    Case(
        "engine reply unwrapped", REPLY, 400, "Bad Request", ENGINE_REPLY,
        '{"generate_response": <reply>}',
    ),
    Case(
        "engine reply unwrapped, completions", REPLY, 400, "Bad Request", ENGINE_REPLY,
        '{"generate_responses": [<reply>]}', COMPLETIONS,
    ),
    # ---------------------------------------------------------------- wrong fields
    Case(
        "stream not a boolean", {"stream": "yes", "generate_chunk": CHUNK}, 400, "Bad Request",
        "`$.stream`", "Send true with one `generate_chunk`, or false", param="body.stream",
    ),
    Case(
        "token_ids a string",
        {"generate_response": {"choices": [{"index": 0, "token_ids": "9707"}]}}, 400,
        "Bad Request", "`$.generate_response.choices[0].token_ids`", "a list of integers >= 0",
        param="body.generate_response.choices.0.token_ids",
    ),
    Case(
        "a negative id", {"generate_response": {"choices": [{"index": 0, "token_ids": [-1]}]}},
        400, "Bad Request", "token_ids[0]", "a list of integers >= 0",
    ),
    Case(
        "choice instead of choices",
        {"generate_response": {"choice": [{"index": 0, "token_ids": HELLO}]}}, 400, "Bad Request",
        "required field `choices`", "a list of objects with `index` and `token_ids`",
        param="body.generate_response",
    ),
    Case(
        "choices an object", {"generate_response": {"choices": {"index": 0, "token_ids": HELLO}}},
        400, "Bad Request", "`$.generate_response.choices`",
        "a list of objects with `index` and `token_ids`",
    ),
    Case(
        "choice without index", {"generate_response": {"choices": [{"token_ids": HELLO}]}}, 400,
        "Bad Request", "required field `index`", "an integer (0 for the first choice)",
    ),
    Case(
        "output_mode text", {"generate_response": {**REPLY, "output_mode": "text"}}, 400,
        "Bad Request", "output_mode", 'Send "tokens" or leave it out',
    ),
    Case(
        "prompt_tokens a string", {"generate_response": REPLY, "prompt_tokens": "9"}, 400,
        "Bad Request", "`$.prompt_tokens`", "an integer",
    ),
    Case(
        "chat_request without messages", {"generate_response": REPLY, "chat_request": {}}, 400,
        "Bad Request", "required field `messages`",
        "the chat request that was sent to /render, unchanged",
    ),
    Case(
        "chat_request.stream a string",
        {"generate_response": REPLY, "chat_request": {**CHAT_REQUEST, "stream": "yes"}}, 400,
        "Bad Request", "`$.chat_request.stream`",
        "the chat request that was sent to /render, unchanged",
    ),
    Case(
        "prompt_tokens per response", {"generate_responses": [REPLY], "prompt_tokens": [1, 2]},
        400, "Bad Request", "prompt_tokens length (2) must equal generate_responses length (1)",
        "send one count per generate response", COMPLETIONS,
    ),
    Case(
        "named tool matching no tool",
        {"generate_response": REPLY, "chat_request": NAMED_TOOL_NOT_IN_TOOLS},
        400, "BadRequestError", "(parameter=tool_choice)", "the specified `tools`",
        param="tool_choice",
    ),
    Case(
        "top_logprobs below -1",
        {"generate_response": REPLY, "chat_request": TOP_LOGPROBS_BELOW},
        400, "BadRequestError", "(parameter=top_logprobs, value=-2)",
        "must be a positive value or -1",
    ),
    # ---------------------------------------------------------------- token ids
    Case(
        "an id past the vocabulary",
        {"generate_response": {"choices": [{"index": 0, "token_ids": [151_669]}]}}, 400,
        "BadRequestError", "generate_response choice 0 token_ids",
        "Send ids of the served model's tokenizer",
    ),
    Case(
        "a chunk id past the vocabulary",
        streamed(generate_chunk={"choices": [{"index": 0, "token_ids": [999_999]}]}), 400,
        "BadRequestError", "generate_chunk choice 0 token_ids",
        "Send ids of the served model's tokenizer",
    ),
    Case(
        "empty token_ids", {"generate_response": {"choices": [{"index": 0, "token_ids": []}]}},
        400, "BadRequestError", "choice 0 has empty or null token_ids", "token_ids",
    ),
    # ---------------------------------------------------------------- stream_state
    Case(
        "stream_state a string", streamed(stream_state="abc"), 400, "Bad Request",
        "`$.stream_state`", STATE_FIX, param="body.stream_state",
    ),
    Case(
        "stream_state history inconsistent",
        streamed(stream_state=BAD_HISTORY), 400,
        "Bad Request", "output_chunk_lens must sum to len(output_token_ids)", STATE_FIX,
        param="body.stream_state",
    ),
    Case(
        "stream_state chunk length 0", streamed(stream_state={"output_chunk_lens": [0]}), 400,
        "Bad Request", "`$.stream_state.output_chunk_lens[0]`", STATE_FIX,
    ),
    Case(
        "stream_state offsets outside the window", streamed(stream_state={"prefix_offset": 3}),
        400, "BadRequestError", "invalid stream_state: expected prefix_offset <= read_offset",
        STATE_FIX, param="stream_state",
    ),
    Case(
        "stream_state history past the vocabulary",
        streamed(stream_state={"output_token_ids": [200_000], "output_chunk_lens": [1]}), 400,
        "BadRequestError", "stream_state.output_token_ids",
        "Send ids of the served model's tokenizer",
    ),
    Case(
        "parsed stream_state inconsistent",
        streamed(stream_state=BAD_HISTORY, prompt_token_ids=PROMPT, chat_request=CHAT_REQUEST),
        400, "Bad Request", "output_chunk_lens must sum", STATE_FIX, server="parsed",
    ),
    # ---------------------------------------------------------------- transport
    Case(
        "Content-Type text/plain", {"generate_response": REPLY}, 400, "Bad Request",
        "Unsupported Media Type", "Only 'application/json' is allowed", content_type="text/plain",
    ),
    Case(
        "no Content-Type", {"generate_response": REPLY}, 400, "Bad Request",
        "Unsupported Media Type", "Only 'application/json' is allowed", content_type=None,
    ),
    Case(
        "body over the limit",
        {"generate_response": {"choices": [{"index": 0, "token_ids": HELLO * 10}]}}, 413,
        "Request Entity Too Large", "server limit of 200 bytes (--max-request-bytes)",
        "Send fewer choices, tokens or logprobs", server="small",
    ),
    Case(
        "unknown model", {"model": "gpt-4o", "generate_response": REPLY}, 404, "NotFoundError",
        "The model `gpt-4o` does not exist", "Valid aliases: qwen3", param="model",
    ),
]
# fmt: on


@pytest.mark.usefixtures("no_internal_errors")
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_error(case: Case, request: pytest.FixtureRequest) -> None:
    client: TestClient = request.getfixturevalue(case.server)
    content = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    headers = {} if case.content_type is None else {"content-type": case.content_type}
    reply = client.post(case.path, content=content, headers=headers)
    assert reply.status_code == case.status, reply.text
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == (case.type, case.status)
    assert case.field in error["message"], error["message"]
    assert case.fix in error["message"], error["message"]
    if case.param is not None:
        assert error["param"] == case.param
    assert not re.search(r"Traceback|File \"|0x[0-9a-f]{6,}|<[a-z_.]+ object", error["message"])


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_derender_path_takes_only_post(plain: TestClient, path: str, method: str) -> None:
    reply = plain.request(method, path)
    assert reply.status_code == 405
    assert reply.headers["allow"] == "POST"
    assert reply.json()["error"] == {
        "message": f"{method} is not allowed on {path}: send a POST with a JSON body.",
        "type": "Method Not Allowed",
        "param": None,
        "code": 405,
    }


def test_an_unknown_path_names_the_endpoints(plain: TestClient) -> None:
    reply = plain.post("/v1/chat/completion/derender", json={})
    assert reply.status_code == 404
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == ("Not Found", 404)
    assert "/v1/chat/completion/derender" in error["message"]
    assert f"POST {CHAT} and POST {COMPLETIONS}" in error["message"]


# ------------------------------------------------------------------ vLLM's own words


def _pinned() -> list[dict[str, Any]]:
    """The golden error cases whose message is vLLM's own text (not a dump of pydantic's
    validation errors, which no other decoder reproduces)."""
    cases = [c for config in ("C1", "C7") for c in load_cases(config) if c["kind"] == "error"]
    return [c for c in cases if "{'type': " not in c["expected"]["body"]["error"]["message"]]


PINNED = _pinned()
_golden_clients: dict[tuple[str, ...], TestClient] = {}


def _golden_client(flags: tuple[str, ...], make_app: AppFactory) -> TestClient:
    if flags not in _golden_clients:
        _golden_clients[flags] = TestClient(make_app(flags))
    return _golden_clients[flags]


@pytest.mark.parametrize("case", PINNED, ids=[c["id"] for c in PINNED])
def test_vllm_messages_are_kept_byte_for_byte(case: dict[str, Any], make_app: AppFactory) -> None:
    client = _golden_client(tuple(case["server_flags"]), make_app)
    raw = case.get("raw_body")
    body = raw.encode() if raw is not None else json.dumps(case["request"]).encode()
    headers = {"content-type": case.get("content_type", "application/json")}
    reply = client.post(case["endpoint"], content=body, headers=headers)
    expected = case["expected"]["body"]["error"]
    assert reply.status_code == case["expected"]["status"]
    assert reply.json()["error"] == expected


def test_every_pinned_kind_is_checked() -> None:
    """The pinned set covers the handler errors the golden corpus records."""
    assert len(PINNED) >= 12
    assert {c["expected"]["body"]["error"]["type"] for c in PINNED} == {
        "BadRequestError",
        "NotFoundError",
        "Bad Request",
    }


# ------------------------------------------------------------------ a chunk without stream_state


def stream_chunk(request_id: str, ids: list[int], state: Any = None, **choice: Any) -> bytes:
    body: dict[str, Any] = {
        "stream": True,
        "generate_chunk": {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": ids, **choice}],
        },
        "prompt_token_ids": PROMPT,
        "chat_request": CHAT_REQUEST,
    }
    if state is not None:
        body["stream_state"] = state
    return json.dumps(body).encode()


def send(client: TestClient, body: bytes) -> Any:
    return client.post(CHAT, content=body, headers={"content-type": "application/json"})


def comparable(reply: Any) -> dict[str, Any]:
    body: dict[str, Any] = reply.json()
    body["chunk"]["created"] = 0
    return body


def restarts(client: TestClient) -> float:
    counter = client.app.service.metrics.stream_restarts  # type: ignore[attr-defined]
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))


THINKING = [151667, 198, 785, 1196, 17064, 911]  # <think>\nThe user asks about


def test_a_chunk_without_state_into_a_live_stream_starts_it_over(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM answers it as a first chunk, so we do (a restart under the same id is
    legitimate); the reply says so in a header, the log (at INFO: any client can cause
    it) names the request id."""
    caplog.set_level(logging.INFO, logger="derender_server")
    with (
        TestClient(make_app(PARSED)) as client,
        TestClient(make_app([*PARSED, "--stream-cache-size", "0"])) as fresh,
    ):
        first = send(client, stream_chunk("again", THINKING[:3]))
        assert first.status_code == 200 and WARNING_HEADER not in first.headers
        # The second chunk, sent without the state the first reply returned.
        forgot = send(client, stream_chunk("again", THINKING[3:]))
        assert forgot.status_code == 200
        assert forgot.headers[WARNING_HEADER] == RESTART_WARNING
        assert "send the stream_state of its previous reply" in RESTART_WARNING
        assert restarts(client) == 1
        assert "'again' choice 0: a chunk without stream_state started a live stream over" in (
            caplog.text
        )
        # The same bytes as a first chunk to a server that keeps nothing.
        assert comparable(forgot) == comparable(send(fresh, stream_chunk("again", THINKING[3:])))
        assert forgot.json()["chunk"]["choices"][0]["delta"]["role"] == "assistant"
        # The stream's own state still continues it, by replay; the live stream is now the
        # restarted one, which that state cannot continue, so the reply says so.
        resumed = send(client, stream_chunk("again", THINKING[3:], first.json()["stream_state"]))
        assert resumed.status_code == 200
        assert resumed.headers[WARNING_HEADER].startswith("diverged_state: ")
        reference = send(fresh, stream_chunk("again", THINKING[3:], first.json()["stream_state"]))
        assert comparable(resumed) == comparable(reference)
        assert resumed.json()["chunk"]["choices"][0]["delta"]["reasoning"] == " user asks about"
        # A new request id, a retried id after its stream finished: first chunks, no warning.
        assert WARNING_HEADER not in send(client, stream_chunk("new", THINKING[:3])).headers
        done = send(client, stream_chunk("done", [9707], finish_reason="stop"))
        assert WARNING_HEADER not in done.headers
        assert WARNING_HEADER not in send(client, stream_chunk("done", [9707])).headers
        # Another chat_request under a live id is another stream, not a restart.
        other = json.loads(stream_chunk("new", THINKING[:3]))
        other["chat_request"] = {"messages": [{"role": "user", "content": "Hello"}]}
        assert WARNING_HEADER not in send(client, json.dumps(other).encode()).headers
        assert restarts(client) == 1
        assert internal_errors(client.app) == 0  # type: ignore[arg-type]


@contextlib.contextmanager
def _redis_replicas(make_app: AppFactory) -> Iterator[tuple[TestClient, TestClient]]:
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
    except redis.RedisError as exc:
        pytest.skip(f"needs a Redis at {REDIS_URL}: {exc}")
    flags = [*PARSED, "--redis-url", REDIS_URL, "--redis-secret", "test-errors-secret"]
    with TestClient(make_app(flags)) as first, TestClient(make_app(flags)) as second:
        yield first, second


def test_a_restart_replaces_the_streams_redis_snapshot(make_app: AppFactory) -> None:
    """After a restart on one replica, the restarted stream continues from Redis on
    another; the abandoned stream's state still gets its own reply (by replay)."""
    request_id = f"restart-{uuid.uuid4().hex}"
    with (
        _redis_replicas(make_app) as (first, second),
        TestClient(make_app([*PARSED, "--stream-cache-size", "0"])) as fresh,
    ):
        old = send(first, stream_chunk(request_id, THINKING[:2]))
        assert old.status_code == 200
        restarted = send(first, stream_chunk(request_id, THINKING[:3]))
        assert restarted.headers[WARNING_HEADER] == RESTART_WARNING
        state = restarted.json()["stream_state"]
        continued = send(second, stream_chunk(request_id, THINKING[3:], state))
        assert continued.headers["x-derender-cache"] == "redis"
        reference = send(fresh, stream_chunk(request_id, THINKING[3:], state))
        assert comparable(continued) == comparable(reference)
        # The stream's one snapshot is the restarted one; the abandoned state replays.
        stale = old.json()["stream_state"]
        abandoned = send(second, stream_chunk(request_id, THINKING[2:], stale))
        assert abandoned.headers["x-derender-cache"] == "miss"
        reference = send(fresh, stream_chunk(request_id, THINKING[2:], stale))
        assert comparable(abandoned) == comparable(reference)


def test_a_real_server_says_so_too() -> None:
    """Through uvicorn: the warning header, its counter, an empty body, a GET."""
    with serving(*PARSED) as base, httpx.Client(base_url=base, timeout=30) as http:
        headers = {"content-type": "application/json"}
        first = http.post(CHAT, content=stream_chunk("real", THINKING[:3]), headers=headers)
        forgot = http.post(CHAT, content=stream_chunk("real", THINKING[3:]), headers=headers)
        assert (first.status_code, forgot.status_code) == (200, 200)
        assert WARNING_HEADER not in first.headers
        assert forgot.headers[WARNING_HEADER] == RESTART_WARNING
        metrics = http.get("/metrics").text
        assert re.search(r"^derender_stream_restarts_total 1\.0$", metrics, re.M)
        empty = http.post(COMPLETIONS, content=b"", headers=headers)
        assert empty.status_code == 400
        assert "request body is empty" in empty.json()["error"]["message"]
        get = http.get(CHAT)
        assert get.status_code == 405
        assert get.json()["error"]["type"] == "Method Not Allowed"
