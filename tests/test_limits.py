"""Every limit answers a 4xx whose message says what to fix, on the kept-session path
and the full path alike; --api-key guards every route but /health."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.apps import AppFactory

CHAT = "/v1/chat/completions/derender"
COMPLETIONS = "/v1/completions/derender"
PARSED = [
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "hermes",
    "--enable-auto-tool-choice",
]
HELLO = [9707, 0, 2585, 646, 358, 1492, 498, 3351, 30]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
CHAT_REQUEST = {"messages": [{"role": "user", "content": "Hi"}], "tools": [TOOL]}
PROMPT = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]


@pytest.fixture(scope="module")
def plain(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(["--max-model-len", "4096"])) as client:
        yield client


@pytest.fixture(scope="module")
def parsed(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app(["--max-model-len", "4096", *PARSED])) as client:
        yield client


def post(client: TestClient, path: str, body: Any) -> tuple[int, Any]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = client.post(path, content=content, headers={"content-type": "application/json"})
    return reply.status_code, reply.json()


def error(client: TestClient, path: str, body: Any, status: int = 400) -> str:
    code, payload = post(client, path, body)
    assert code == status, payload
    assert payload["error"]["code"] == status
    message: str = payload["error"]["message"]
    return message


def one_shot(token_ids: list[int], **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "token_ids": token_ids, "finish_reason": "stop"}
    return {"generate_response": {"request_id": "r", "choices": [choice]}, **extra}


def chunk(request_id: str, token_ids: list[int], state: Any = None, **extra: Any) -> Any:
    body = {
        "stream": True,
        "generate_chunk": {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": token_ids}],
        },
        "stream_state": state,
        "prompt_token_ids": PROMPT,
        "chat_request": CHAT_REQUEST,
        **extra,
    }
    return body


def test_out_of_vocabulary_ids(plain: TestClient, make_app: AppFactory) -> None:
    message = error(plain, CHAT, one_shot([*HELLO, 151669]))
    assert message.startswith("Token id 151669 is out of vocabulary")
    assert "generate_response choice 0 token_ids" in message
    assert "0 to 151668" in message
    body = {
        "generate_responses": [one_shot(HELLO)["generate_response"]],
        "prompt_token_ids": [[7, 10**12]],
    }
    assert "Token id 1000000000000" in error(plain, COMPLETIONS, body)
    logprobs = {"content": [{"token_id": 9707, "top_logprobs": [{"token_id": 200_000}]}]}
    stream = {
        "stream": True,
        "generate_chunk": {"choices": [{"index": 0, "token_ids": [9707], "logprobs": logprobs}]},
    }
    assert "Token id 200000" in error(plain, COMPLETIONS, stream)
    del stream["generate_chunk"]["choices"][0]["logprobs"]
    state = {"output_token_ids": [-3], "output_chunk_lens": [1]}
    assert "Token id -3" in error(plain, CHAT, {**stream, "stream_state": state})
    with TestClient(make_app(["--allow-out-of-vocab"])) as lenient:
        status, reply = post(lenient, CHAT, one_shot([*HELLO, 151669]))
    assert status == 200
    assert reply["choices"][0]["message"]["content"] == "Hello! How can I help you today?"


def test_kept_session_gives_the_full_paths_errors(parsed: TestClient, make_app: AppFactory) -> None:
    """A bad chunk after a kept session fails exactly as it does with no session kept."""
    with TestClient(
        make_app(["--max-model-len", "4096", *PARSED, "--stream-cache-size", "0"])
    ) as cold:
        replies = []
        for client in (parsed, cold):
            status, first = post(client, CHAT, chunk("keep", HELLO[:3]))
            assert status == 200
            bad_chunks = [
                chunk("keep", [151_700], first["stream_state"]),
                chunk("keep", [9707], first["stream_state"]),
            ]
            logprobs = {"content": [{"token_id": 9707, "top_logprobs": [{"token_id": 1}] * 21}]}
            bad_chunks[1]["generate_chunk"]["choices"][0]["logprobs"] = logprobs
            replies.append([post(client, CHAT, body) for body in bad_chunks])
    assert replies[0] == replies[1]
    (status, vocab), (_, top) = replies[0]
    assert status == 400 and "Token id 151700 is out of vocabulary" in vocab["error"]["message"]
    assert (
        "top_logprobs count (21) in choice 0 exceeds max_logprobs (20)" in top["error"]["message"]
    )


def test_tool_count_and_chat_request_size(make_app: AppFactory) -> None:
    flags = ["--max-tools", "3", "--max-chat-request-bytes", "2000", *PARSED]
    with TestClient(make_app(flags)) as client:
        many = {**CHAT_REQUEST, "tools": [TOOL] * 4}
        message = error(client, CHAT, chunk("t", HELLO, chat_request=many))
        assert message == (
            "Invalid 'tools': array too long. Expected an array with maximum length 3, "
            "but got an array with length 4 instead."
        )
        large = {**CHAT_REQUEST, "messages": [{"role": "user", "content": "x" * 2000}]}
        message = error(client, CHAT, one_shot(HELLO, chat_request=large))
        assert "over the server limit of 2000 bytes (--max-chat-request-bytes)" in message
        assert post(client, CHAT, chunk("t", HELLO))[0] == 200


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"properties": value}
    return value


def test_json_depth(parsed: TestClient) -> None:
    deep_tool = {"type": "function", "function": {"name": "f", "parameters": nested(65)}}
    request = {**CHAT_REQUEST, "tools": [deep_tool]}
    message = error(parsed, CHAT, chunk("d", HELLO, chat_request=request))
    assert message == (
        "chat_request.tools.0.function.parameters nests deeper than the server limit of "
        "64 levels (--max-json-depth)."
    )
    request["tools"] = [{**deep_tool, "function": {"name": "f", "parameters": nested(64)}}]
    assert post(parsed, CHAT, chunk("d", HELLO, chat_request=request))[0] == 200
    kv = one_shot(HELLO)
    kv["generate_response"]["kv_transfer_params"] = nested(100)
    kv["chat_request"] = CHAT_REQUEST
    kv["prompt_token_ids"] = PROMPT
    assert "generate_response.kv_transfer_params nests deeper" in error(parsed, CHAT, kv)
    # Deeper than the decoder goes: a 400, where it was an internal error.
    for path in (CHAT, COMPLETIONS):
        body = b'{"stream": true, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert "nests too deeply to decode" in error(parsed, path, body)


def test_stream_state_bounds(plain: TestClient) -> None:
    base = {"stream": True, "generate_chunk": {"choices": [{"index": 0, "token_ids": [9707]}]}}
    offsets = {"prev_tokens": ["a", "b"], "prefix_offset": 2, "read_offset": 1}
    message = error(plain, COMPLETIONS, {**base, "stream_state": offsets})
    assert message.startswith("invalid stream_state: expected prefix_offset <= read_offset")
    piece = {"prev_tokens": ["x" * 1025]}
    assert "Expected `str` of length <= 1024" in error(plain, CHAT, {**base, "stream_state": piece})
    ids = {"last_tool_call_ids": ["call"] * 4097}
    assert "Expected `array` of length <= 4096" in error(plain, CHAT, {**base, "stream_state": ids})
    history = {"output_token_ids": [9707] * 4097, "output_chunk_lens": [4097]}
    assert "output_token_ids length (4097) exceeds max_model_len (4096)" in error(
        plain, COMPLETIONS, {**base, "stream_state": history}
    )
    placeholder = {"content": [{"token": "token_id:" + "9" * 5000}]}
    base["generate_chunk"]["choices"][0]["logprobs"] = placeholder
    assert post(plain, COMPLETIONS, base)[0] == 200


ROUTES = [
    ("POST", CHAT),
    ("POST", COMPLETIONS),
    ("GET", CHAT),
    ("GET", "/v1/models"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/no/such/route"),
]


def test_api_key(make_app: AppFactory) -> None:
    with TestClient(make_app(["--api-key", "s3cret"])) as client:
        assert client.get("/health").status_code == 200
        body = json.dumps(one_shot(HELLO)).encode()
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret"}):
            for method, path in ROUTES:
                reply = client.request(method, path, content=body, headers=headers)
                assert reply.status_code == 401, (method, path, headers)
                assert reply.headers["www-authenticate"] == "Bearer"
                assert reply.json()["error"]["type"] == "AuthenticationError"
                assert reply.json()["error"]["code"] == 401
        good = {"authorization": "Bearer s3cret", "content-type": "application/json"}
        assert client.post(CHAT, content=body, headers=good).status_code == 200
        assert client.post(COMPLETIONS, content=b"{}", headers=good).status_code == 400
        for path in ("/v1/models", "/metrics", "/openapi.json"):
            assert client.get(path, headers=good).status_code == 200
        assert client.get("/no/such/route", headers=good).status_code == 404


@pytest.mark.parametrize("stream", [False, True], ids=["one-shot", "streamed"])
def test_invalid_utf8_in_chat_request_messages(parsed: TestClient, stream: bool) -> None:
    """``messages`` is kept as raw JSON; invalid UTF-8 in it is refused like anywhere else."""
    body = chunk("u", HELLO) if stream else one_shot(HELLO, chat_request=CHAT_REQUEST)
    content = json.dumps(body).encode().replace(b'"Hi"', b'"H\xffi"')
    assert b"\xff" in content
    message = error(parsed, CHAT, content)
    assert message == (
        "1 validation error:\n  JSON decode error: Invalid UTF-8 encoded string. Send the body "
        "as UTF-8 text."
    )
    elsewhere = json.dumps(body).encode().replace(b'"r"', b'"\xff"').replace(b'"u"', b'"\xff"')
    assert error(parsed, CHAT, elsewhere) == message
