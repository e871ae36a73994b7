"""HTTP behaviour of the plain endpoints, after vLLM's own derender tests."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.apps import AppFactory

FLAGS = ["--served-model-name", "qwen3", "--max-model-len", "4096"]
HELLO = [9707, 0, 2585, 646, 358, 1492, 498, 3351, 30]  # "Hello! How can I help you today?"
IM_END = 151645


@pytest.fixture(scope="module")
def client(make_app: AppFactory) -> TestClient:
    return TestClient(make_app(FLAGS))


@pytest.fixture(scope="module")
def parser_client(make_app: AppFactory) -> TestClient:
    return TestClient(make_app([*FLAGS, "--reasoning-parser", "qwen3"]))


def post(client: TestClient, path: str, body: Any) -> tuple[int, Any]:
    response = client.post(path, json=body)
    return response.status_code, response.json()


def chat(client: TestClient, body: dict[str, Any]) -> tuple[int, Any]:
    return post(client, "/v1/chat/completions/derender", body)


def completions(client: TestClient, body: dict[str, Any]) -> tuple[int, Any]:
    return post(client, "/v1/completions/derender", body)


def generate(token_ids: Any, **choice: Any) -> dict[str, Any]:
    return {"request_id": "r1", "choices": [{"index": 0, "token_ids": token_ids, **choice}]}


def assert_error(reply: tuple[int, Any], status: int, *fragments: str) -> None:
    code, body = reply
    assert code == status, body
    assert body["error"]["code"] == status
    for fragment in fragments:
        assert fragment in body["error"]["message"]


# ----------------------------------------------------------------------------- one-shot chat


def test_chat_round_trip_and_usage(client: TestClient) -> None:
    status, body = chat(
        client, {"generate_response": generate([*HELLO, IM_END]), "prompt_tokens": 10}
    )
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "qwen3"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello! How can I help you today?"
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {
        "prompt_tokens": 10,
        "total_tokens": 20,
        "completion_tokens": 10,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def test_chat_usage_defaults_to_zero_prompt_tokens(client: TestClient) -> None:
    _, body = chat(client, {"generate_response": generate(HELLO[:3])})
    assert body["usage"]["prompt_tokens"] == 0
    assert body["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("token_ids", [[], None])
def test_chat_empty_token_ids_rejected(client: TestClient, token_ids: Any) -> None:
    assert_error(chat(client, {"generate_response": generate(token_ids)}), 400, "token_ids")


def test_unknown_model_is_404(client: TestClient) -> None:
    reply = chat(client, {"model": "gpt-4o", "generate_response": generate(HELLO)})
    assert_error(reply, 404, "gpt-4o")
    assert reply[1]["error"]["param"] == "model"
    assert reply[1]["error"]["type"] == "NotFoundError"


def test_negative_token_ids_rejected(client: TestClient) -> None:
    reply = chat(client, {"generate_response": generate([-1, 42, 100])})
    assert_error(reply, 400)
    assert reply[1]["error"]["type"] == "Bad Request"
    assert reply[1]["error"]["param"] == "body.generate_response.choices.0.token_ids.0"


def test_oversized_payloads_rejected_before_decoding(client: TestClient) -> None:
    assert_error(
        chat(client, {"generate_response": generate([42] * 1_000_000)}), 400, "max_model_len"
    )
    assert_error(
        chat(client, {"generate_response": generate(HELLO), "prompt_token_ids": [1] * 4097}),
        400,
        "max_model_len",
    )
    many = {"request_id": "r", "choices": [{"index": i, "token_ids": [42]} for i in range(20000)]}
    assert_error(chat(client, {"generate_response": many}), 400, "choices count")


def test_placeholder_and_integer_logprobs_resolve(client: TestClient) -> None:
    integer = {"token_id": 9707, "logprob": -0.5, "top_logprobs": [{"token_id": 9707}]}
    placeholder = {"token": "token_id:0", "logprob": -1.0, "bytes": None, "top_logprobs": []}
    verbatim = {"token": "kept", "logprob": -2.0}
    logprobs = {"content": [integer, placeholder, verbatim]}
    _, body = chat(client, {"generate_response": generate(HELLO[:3], logprobs=logprobs)})
    content = body["choices"][0]["logprobs"]["content"]
    assert [e["token"] for e in content] == ["Hello", "!", "kept"]
    assert content[0]["bytes"] == list(b"Hello")
    assert content[0]["top_logprobs"] == [
        {"token": "Hello", "logprob": -9999.0, "bytes": [72, 101, 108, 108, 111]}
    ]
    assert content[2]["bytes"] is None


def test_top_logprobs_over_max_logprobs_rejected(client: TestClient) -> None:
    entry = {"token_id": 1, "logprob": -1.0, "top_logprobs": [{"token_id": i} for i in range(25)]}
    reply = chat(client, {"generate_response": generate([1], logprobs={"content": [entry]})})
    assert_error(reply, 400, "top_logprobs count", "max_logprobs")


def test_passthrough_fields(client: TestClient) -> None:
    gen = generate(HELLO)
    gen["prompt_logprobs"] = [None, {"872": {"logprob": -1.25, "rank": 1, "decoded_token": "user"}}]
    gen["kv_transfer_params"] = {"key": "value"}
    gen["metrics"] = {
        "speculative_decoding": {
            "mean_acceptance_length": 2.5,
            "draft_acceptance_rate": 0.5,
            "acceptance_histogram": [1],
            "num_spec_steps": 1,
            "num_accepted_draft_tokens": 1,
            "num_draft_tokens": 2,
            "num_spec_tokens": 2,
        }
    }
    _, body = chat(client, {"generate_response": gen})
    assert body["prompt_logprobs"] == gen["prompt_logprobs"]
    assert body["kv_transfer_params"] == {"key": "value"}
    assert list(body["metrics"]) == [
        "time_to_first_token_ms",
        "generation_time_ms",
        "queue_time_ms",
        "mean_itl_ms",
        "tokens_per_second",
        "speculative_decoding",
    ]
    spec = body["metrics"]["speculative_decoding"]
    assert spec == {
        **gen["metrics"]["speculative_decoding"],
        "per_step_accepted": None,
        "per_step_drafted": None,
    }


def test_large_output_decodes_off_the_event_loop(make_app: AppFactory, tokenizer: Any) -> None:
    """A one-shot request over 4 KiB is decoded, derendered and encoded on a worker
    thread: the event loop's thread spends a small share of the CPU the request costs
    (inline, it spends nearly all of it). CPU per thread, so a busy machine does not
    blur it the way wall-clock gaps would. The request is large (32 choices) because the
    test client's own traffic costs the loop a few milliseconds whatever its size."""
    ids = tokenizer.encode("streaming " * 1500)
    choices = [{"index": i, "token_ids": ids} for i in range(32)]
    body = {"generate_response": {"request_id": "r1", "choices": choices}}

    async def loop_thread_cpu() -> float:
        return time.thread_time()

    with TestClient(make_app(FLAGS)) as client:
        chat(client, body)  # warm: the first request builds what later ones reuse
        loop_before, process_before = client.portal.call(loop_thread_cpu), time.process_time()
        status, reply = chat(client, body)
        on_loop = client.portal.call(loop_thread_cpu) - loop_before
        in_all = time.process_time() - process_before
    assert status == 200
    assert [c["message"]["content"] for c in reply["choices"]] == ["streaming " * 1500] * 32
    assert on_loop < in_all / 3, f"{on_loop * 1000:.1f} ms of {in_all * 1000:.1f} ms on the loop"


def test_chat_request_validators(client: TestClient) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    base = {"generate_response": generate(HELLO)}
    bad = [
        {"messages": [], "tools": []},
        {
            "messages": [],
            "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "g"}},
        },
        {"messages": [], "tool_choice": "auto"},
        {"messages": [], "tools": tools, "tool_choice": "sometimes"},
        {"messages": [], "top_logprobs": 2},
        {"messages": [], "logprobs": True, "top_logprobs": -2},
        {"messages": [], "stream_options": {"include_usage": True}},
        {"messages": [], "continue_final_message": True, "add_generation_prompt": True},
    ]
    for chat_request in bad:
        reply = chat(client, {**base, "chat_request": chat_request})
        assert_error(reply, 400)
        assert reply[1]["error"]["type"] == "BadRequestError", chat_request
    ok = {"messages": [], "tools": tools, "continue_final_message": True}
    assert chat(client, {**base, "chat_request": ok})[0] == 200


# ----------------------------------------------------------------------------- completions


def test_completion_round_trip_and_usage(client: TestClient) -> None:
    body = {
        "generate_responses": [generate(HELLO[:3]), generate(HELLO[3:7])],
        "prompt_tokens": [5, 10],
    }
    status, reply = completions(client, body)
    assert status == 200
    assert reply["object"] == "text_completion"
    assert [c["index"] for c in reply["choices"]] == [0, 1]
    assert [c["text"] for c in reply["choices"]] == ["Hello! How", " can I help you"]
    assert reply["usage"]["prompt_tokens"] == 15
    assert reply["usage"]["completion_tokens"] == 7
    assert reply["usage"]["total_tokens"] == 22


def test_completion_logprobs_offsets(client: TestClient) -> None:
    logprobs = {"content": [{"token_id": t, "logprob": -1.0} for t in HELLO[:3]]}
    _, reply = completions(client, {"generate_responses": [generate(HELLO[:3], logprobs=logprobs)]})
    result = reply["choices"][0]["logprobs"]
    assert result["tokens"] == ["Hello", "!", " How"]
    assert result["text_offset"] == [0, 5, 6]
    assert result["top_logprobs"] == [None, None, None]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"generate_responses": []}, "must not be empty"),
        ({"generate_responses": [generate(HELLO)], "prompt_tokens": [5, 10]}, "prompt_tokens"),
        (
            {"generate_responses": [generate(HELLO)], "prompt_token_ids": [[1], [2]]},
            "prompt_token_ids",
        ),
        (
            {"generate_responses": [generate(HELLO)], "completion_request": {"model": "qwen3"}},
            "prompt",
        ),
        (
            {"generate_responses": [generate(HELLO)], "prompt_token_ids": [[1] * 5000]},
            "max_model_len",
        ),
        ({"generate_responses": [generate([1])] * 20000}, "generate_responses count"),
    ],
)
def test_completion_rejections(client: TestClient, body: dict[str, Any], fragment: str) -> None:
    assert_error(completions(client, body), 400, fragment)


# ----------------------------------------------------------------------------- streaming


def stream_call(
    client: TestClient, path: str, token_ids: Any, state: Any = None, **extra: Any
) -> tuple[int, Any]:
    body: dict[str, Any] = {"stream": True, "generate_chunk": generate(token_ids)}
    if state is not None:
        body["stream_state"] = state
    body.update(extra)
    response = client.post(path, json=body)
    return response.status_code, response.json()


def test_chat_stream_role_on_first_chunk_only(client: TestClient) -> None:
    path = "/v1/chat/completions/derender"
    _, first = stream_call(client, path, HELLO[:2])
    _, second = stream_call(client, path, HELLO[2:], first["stream_state"])
    assert list(first) == ["chunk", "stream_state"]
    assert first["chunk"]["choices"][0]["delta"]["role"] == "assistant"
    assert second["chunk"]["choices"][0]["delta"]["role"] is None
    text = "".join(r["chunk"]["choices"][0]["delta"]["content"] for r in (first, second))
    assert text == "Hello! How can I help you today?"


def test_usage_only_chunk(client: TestClient) -> None:
    body = {
        "stream": True,
        "generate_chunk": {
            "request_id": "r",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 10},
        },
        "prompt_tokens": 7,
    }
    for path in ("/v1/chat/completions/derender", "/v1/completions/derender"):
        reply = client.post(path, json=body).json()
        assert reply["chunk"]["choices"] == []
        assert reply["chunk"]["usage"]["prompt_tokens"] == 7
        assert reply["chunk"]["usage"]["completion_tokens"] == 10


def test_completion_stream_text_offsets_are_absolute(client: TestClient) -> None:
    path = "/v1/completions/derender"
    lp = {"content": [{"token_id": t, "logprob": -1.0} for t in HELLO[:2]]}
    chunk = generate(HELLO[:2], logprobs=lp)
    first = client.post(path, json={"stream": True, "generate_chunk": chunk}).json()
    lp2 = {"content": [{"token_id": HELLO[2], "logprob": -1.0}]}
    second = client.post(
        path,
        json={
            "stream": True,
            "generate_chunk": generate(HELLO[2:3], logprobs=lp2),
            "stream_state": first["stream_state"],
        },
    ).json()
    assert first["chunk"]["choices"][0]["logprobs"]["text_offset"] == [0, 5]
    assert second["chunk"]["choices"][0]["logprobs"]["text_offset"] == [6]
    assert second["stream_state"]["logprob_context_token_ids"] == HELLO[:3]


@pytest.mark.parametrize(
    "state",
    [
        {"prefix_offset": -1},
        {"read_offset": -1},
        {"prev_tokens": ["a"] * 1025},
        {"output_token_ids": [1, 2, 3], "output_chunk_lens": [1, 1]},
        {"output_token_ids": [1, 2], "output_chunk_lens": [0, 2]},
        {"logprob_context_token_ids": [1, 2, 3, 4, 5]},
    ],
)
def test_invalid_stream_state_rejected(client: TestClient, state: dict[str, Any]) -> None:
    for path in ("/v1/chat/completions/derender", "/v1/completions/derender"):
        assert_error(stream_call(client, path, [1], state), 400)


def test_valid_edge_stream_states_accepted(client: TestClient) -> None:
    for state in (
        {"prev_tokens": ["a"] * 1024},
        {"output_token_ids": [1, 2, 3], "output_chunk_lens": [1, 2]},
    ):
        assert stream_call(client, "/v1/chat/completions/derender", [1], state)[0] == 200


def test_stream_rejections(client: TestClient) -> None:
    path = "/v1/chat/completions/derender"
    assert_error(post(client, path, {"stream": True}), 400)
    assert_error(post(client, path, [1, 2, 3]), 400)
    assert_error(post(client, path, {"stream": "yes"}), 400)
    two = {
        "request_id": "r",
        "choices": [{"index": 0, "token_ids": [1]}, {"index": 1, "token_ids": [1]}],
    }
    reply = client.post(path, json={"stream": True, "generate_chunk": two})
    assert_error((reply.status_code, reply.json()), 400, "at most one choice")
    state = {"output_token_ids": [1, 2], "output_chunk_lens": [2]}
    assert_error(
        stream_call(client, path, [1] * 4094, state, prompt_token_ids=[1]), 400, "max_model_len"
    )
    stop = {"messages": [], "stop": ["\n"], "stream": True}
    assert_error(stream_call(client, path, [1], chat_request=stop), 400, "stop strings")


# ----------------------------------------------------------------------------- transport


def test_content_type_must_be_json(client: TestClient) -> None:
    body = json.dumps({"generate_response": generate(HELLO)})
    for content_type in ("text/plain", ""):
        reply = client.post(
            "/v1/chat/completions/derender", content=body, headers={"content-type": content_type}
        )
        assert reply.status_code == 400
        assert reply.json()["error"]["type"] == "Bad Request"
    reply = client.post(
        "/v1/chat/completions/derender",
        content=body,
        headers={"content-type": "Application/JSON; charset=utf-8"},
    )
    assert reply.status_code == 200


def test_the_derender_paths_take_only_post(client: TestClient) -> None:
    for path in ("/v1/chat/completions/derender", "/v1/completions/derender"):
        assert client.get(path).status_code == 405
        assert client.put(path, json={}).status_code == 405


def test_malformed_json(client: TestClient) -> None:
    reply = client.post(
        "/v1/chat/completions/derender",
        content=b'{"generate_response": ',
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "Bad Request"


def test_body_limit(make_app: AppFactory) -> None:
    small = TestClient(make_app([*FLAGS, "--max-request-bytes", "1000"]))
    reply = small.post(
        "/v1/chat/completions/derender", json={"generate_response": generate([1] * 500)}
    )
    assert reply.status_code == 413
    assert "1000 bytes" in reply.json()["error"]["message"]


def test_parser_server_paths(parser_client: TestClient) -> None:
    base = {"generate_response": generate(HELLO)}
    assert_error(chat(parser_client, base), 400, "chat_request")
    status, reply = chat(parser_client, {**base, "chat_request": {"messages": []}})
    assert status == 200
    assert reply["choices"][0]["message"]["reasoning"] == "Hello! How can I help you today?"
    path = "/v1/chat/completions/derender"
    with_request = {"chat_request": {"messages": []}}
    assert_error(stream_call(parser_client, path, HELLO, **with_request), 400, "prompt_token_ids")
    status, reply = stream_call(parser_client, path, HELLO, prompt_token_ids=[1], **with_request)
    assert status == 200
    assert reply["chunk"]["choices"][0]["delta"]["reasoning"] == "Hello! How can I help you today?"
    assert reply["stream_state"]["output_chunk_lens"] == [len(HELLO)]
    assert completions(parser_client, {"generate_responses": [generate(HELLO)]})[0] == 200


def test_health_models_metrics(client: TestClient) -> None:
    assert client.get("/health").status_code == 200
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["qwen3"]
    assert models["data"][0]["max_model_len"] == 4096
    chat(client, {"generate_response": generate(HELLO)})
    text = client.get("/metrics").text
    assert 'derender_requests_total{endpoint="chat",mode="oneshot",status="200"}' in text
    assert "derender_request_seconds_bucket" in text
