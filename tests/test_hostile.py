"""Model output is hostile input: every parser finishes, our failures are honest 500s.

Outputs are built from the pieces parsers react to (markers, brackets, quotes,
backslashes, openings that never close), tokenized with the bundled Qwen3 tokenizer
and sent through the HTTP app for every parser configuration: one-shot, streamed in
a random chunking with the session kept and with every chunk replayed (byte-identical
replies), and streamed one token per chunk (the same assembled message). A watchdog
thread kills the run with a traceback if one request takes 20 s: a hang detector,
never a speed claim (``python -m bench hostile`` measures speed).
"""

from __future__ import annotations

import faulthandler
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import parsers.families.hermes
from app.serving.server import DerenderApp
from app.tokens.tokenizer import Tokenizer
from tests.support.apps import AppFactory, internal_errors
from tests.support.golden import fold_reply
from tests.support.parity import chunking_invariant
from tests.support.processes import serving

CHAT = "/v1/chat/completions/derender"
HANG_SECONDS = 20
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": properties},
        },
    }
    for name, properties in (
        ("get_weather", {"city": {"type": "string"}}),
        ("count", {"n": {"type": "integer"}}),
        ("noop", {}),
    )
]
NAMED = {"type": "function", "function": {"name": "get_weather"}}

TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser")
# configuration -> (server flags, the chat request's tool_choice)
CONFIGS: dict[str, tuple[tuple[str, ...], Any]] = {
    "qwen3": (("--reasoning-parser", "qwen3"), "auto"),
    "deepseek_r1": (("--reasoning-parser", "deepseek_r1"), "auto"),
    "hermes": ((*TOOL_FLAGS, "hermes"), "auto"),
    "qwen3+hermes": (("--reasoning-parser", "qwen3", *TOOL_FLAGS, "hermes"), "auto"),
    "deepseek_r1+hermes": (("--reasoning-parser", "deepseek_r1", *TOOL_FLAGS, "hermes"), "auto"),
    "qwen3_coder": ((*TOOL_FLAGS, "qwen3_coder"), "auto"),
    "qwen3+qwen3_coder": (("--reasoning-parser", "qwen3", *TOOL_FLAGS, "qwen3_coder"), "auto"),
    "xlam": ((*TOOL_FLAGS, "xlam"), "auto"),
    "xlam, required": ((*TOOL_FLAGS, "xlam"), "required"),
    "pythonic": ((*TOOL_FLAGS, "pythonic"), "auto"),
    "pythonic, named": ((*TOOL_FLAGS, "pythonic"), NAMED),
    "minimax_m2+minimax_m2": (
        ("--reasoning-parser", "minimax_m2", *TOOL_FLAGS, "minimax_m2"),
        "auto",
    ),
    "minimax_m2_append_think+minimax_m2": (
        ("--reasoning-parser", "minimax_m2_append_think", *TOOL_FLAGS, "minimax_m2"),
        "auto",
    ),
    "llama4_pythonic": ((*TOOL_FLAGS, "llama4_pythonic"), "auto"),
    # Kimi K2's and GLM's markers are text with Qwen3's vocabulary (lexed, not by id).
    "kimi_k2+kimi_k2": (("--reasoning-parser", "kimi_k2", *TOOL_FLAGS, "kimi_k2"), "auto"),
    "glm45+glm47": (("--reasoning-parser", "glm45", *TOOL_FLAGS, "glm47"), "auto"),
    "inkling+inkling": (("--reasoning-parser", "inkling", *TOOL_FLAGS, "inkling"), "auto"),
}
# Their engine drops whitespace-only content per delta once a call exists, so text
# after a call depends on the chunking as in vLLM (docs/parity.md): no invariance claim.
# Inkling's too, and it holds back a thinking block's trailing whitespace likewise.
CHUNKING_DEPENDENT = frozenset(
    {"minimax_m2+minimax_m2", "minimax_m2_append_think+minimax_m2", "inkling+inkling"}
)

# What parsers react to, and what makes them work hardest when repeated.
PIECES = [
    "<tool_call>", "</tool_call>", "<think>", "</think>", "<", ">", "</", "<parameter=",
    "</parameter>", "<function=", "</function>", "[", "]", "(", ")", "{", "}", '"', "'",
    "\\", "\\\\", '\\"', ":", ",", "=", ";", " ", "\n", "```", "```json\n", "[TOOL_CALLS]",
    '{"name": "get_weather", "arguments": ', '"name"', '"arguments"', "get_weather(",
    "city=", "[a(b=", '{"a":', "True", "None", "null", "1e5", "-", "東京", "👍🏽", "Paris",
    "<|im_end|>", "<|python_tag|>", "<|python_start|>", "<|python_end|>",
    '<invoke name="', "<invoke name=", "</invoke>", '<parameter name="', "<parameter name=",
    '">', "'>", "<minimax:tool_call>", "</minimax:tool_call>",
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
    "<|tool_call_end|>", "functions.get_weather:0",
    "<|message_model|>", "<|content_text|>", "<|content_thinking|>", "<|end_message|>",
    "<|content_invoke_tool_json|>", '{"name": "get_weather", "args": ',
]  # fmt: skip
OPENINGS = [
    "",
    "</think>\n\n",
    "[",
    "[get_weather(city=",
    "<|python_start|>[get_weather(city=",
    '[{"name": "get_weather", "arguments": {"city": ',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": ',
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n",
    "```json\n[",
    '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">',
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": ',
    '<|content_invoke_tool_json|>{"name": "get_weather", "args": {"city": ',
]
MAX_TOKENS = 80

PROPS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def hostile_outputs(draw: st.DrawFn) -> str:
    opening = draw(st.sampled_from(OPENINGS))
    body = draw(st.lists(st.sampled_from(PIECES), max_size=30))
    # A piece repeated: the runs that made parsers super-linear.
    run = draw(st.sampled_from(PIECES)) * draw(st.integers(0, 24))
    cut = draw(st.integers(0, len(body)))
    return opening + "".join(body[:cut]) + run + "".join(body[cut:])


@pytest.fixture(scope="module")
def clients(make_app: AppFactory) -> Iterator[dict[str, tuple[TestClient, TestClient]]]:
    """Per configuration: a server that keeps sessions and one that replays every chunk."""
    built = {}
    for name, (flags, _) in CONFIGS.items():
        common = ("--max-model-len", "4096", *flags)
        kept = TestClient(make_app(common), raise_server_exceptions=False)
        replay = TestClient(
            make_app((*common, "--stream-cache-size", "0")), raise_server_exceptions=False
        )
        built[name] = (kept, replay)
    yield built
    for name, (kept, replay) in built.items():
        for client in (kept, replay):
            app = client.app
            assert isinstance(app, DerenderApp)
            assert internal_errors(app) == 0, name


def post(client: TestClient, body: dict[str, Any]) -> httpx.Response:
    """One request under the hang detector."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        return client.post(CHAT, json=body)
    finally:
        faulthandler.cancel_dump_traceback_later()


def chat_request(tool_choice: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "tool_choice": tool_choice,
    }


def stream(
    client: TestClient,
    request_id: str,
    chunks: list[list[int]],
    finish: str,
    context: dict[str, Any],
) -> list[dict[str, Any]]:
    """Every reply of one stream, each chunk sent with the previous reply's state."""
    replies = []
    state = None
    for i, chunk in enumerate(chunks):
        choice = {"index": 0, "token_ids": chunk, "finish_reason": None}
        if i == len(chunks) - 1:
            choice["finish_reason"] = finish
        body = {
            **context,
            "stream": True,
            "generate_chunk": {"request_id": request_id, "choices": [choice]},
            "stream_state": state,
        }
        response = post(client, body)
        assert response.status_code == 200, response.text
        reply = response.json()
        reply["chunk"].pop("created")
        replies.append(reply)
        state = reply["stream_state"]
    return replies


def assembled(replies: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The message a client folds a stream's deltas into."""
    messages: dict[int, dict[str, Any]] = {}
    for reply in replies:
        fold_reply(messages, reply)
    return messages


@pytest.mark.parametrize("config", list(CONFIGS))
@PROPS
@given(output=hostile_outputs(), data=st.data())
def test_hostile_outputs_finish_and_keep_the_stream_invariants(
    config: str,
    output: str,
    data: st.DataObject,
    tokenizer: Tokenizer,
    clients: dict[str, tuple[TestClient, TestClient]],
) -> None:
    kept, replay = clients[config]
    ids = tokenizer.encode(output)[:MAX_TOKENS] or [tokenizer.encode(" ")[0]]
    finish = data.draw(st.sampled_from(["stop", "length"]))
    context = {
        "chat_request": chat_request(CONFIGS[config][1]),
        "prompt_token_ids": tokenizer.encode(PROMPT),
    }
    one_shot = {
        **context,
        "generate_response": {
            "request_id": "hostile",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}],
        },
    }
    response = post(kept, one_shot)
    assert response.status_code == 200, response.text

    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(ids)), max_size=20))) - {len(ids)})
    chunks = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True)]
    with_session = stream(kept, "hostile-a", chunks, finish, context)
    replayed = stream(replay, "hostile-a", chunks, finish, context)
    assert with_session == replayed
    one_token = stream(kept, "hostile-b", [[t] for t in ids], finish, context)
    flags = CONFIGS[config][0]
    named = "--reasoning-parser" in flags
    reasoning = flags[flags.index("--reasoning-parser") + 1] if named else None
    if config not in CHUNKING_DEPENDENT and chunking_invariant(reasoning, tokenizer.decode(ids)):
        assert assembled(one_token) == assembled(with_session), (output, chunks)


# ---------------------------------------------------------------------------- honest failures

HERMES = ("--tool-call-parser", "hermes", "--enable-auto-tool-choice")


class ParserBug(RuntimeError):
    pass


def _explode(*args: Any, **kwargs: Any) -> Any:
    raise ParserBug("a bug inside a parser")


def _stream_body(request_id: str, state: Any = None) -> dict[str, Any]:
    return {
        "stream": True,
        "chat_request": chat_request("auto"),
        "prompt_token_ids": [151644, 872, 198],
        "generate_chunk": {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": [9707]}],
        },
        "stream_state": state,
    }


def _one_shot_body(request_id: str) -> dict[str, Any]:
    return {
        "chat_request": chat_request("auto"),
        "generate_response": {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": [9707, 0], "finish_reason": "stop"}],
        },
    }


@pytest.mark.parametrize(
    ("target", "body"),
    [
        (parsers.families.hermes.HermesStream, _stream_body),
        (parsers.families.hermes.HermesTools, _one_shot_body),
    ],
    ids=["stream", "one-shot"],
)
def test_a_failure_inside_a_parser_is_a_logged_counted_500(
    target: type,
    body: Any,
    make_app: AppFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app(HERMES)
    monkeypatch.setattr(
        target, "stream" if target is parsers.families.hermes.HermesStream else "extract", _explode
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        with caplog.at_level(logging.ERROR, logger="derender_server"):
            response = client.post(CHAT, json=body("req-injected-7"))
        assert response.status_code == 500
        assert response.json() == {
            "error": {
                "message": "internal error while derendering",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
        }
        assert "ParserBug" not in response.text and "Traceback" not in response.text
        records = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(records) == 1
        assert "req-injected-7" in records[0].getMessage()
        assert records[0].exc_info is not None and records[0].exc_info[0] is ParserBug
        assert internal_errors(app) == 1
        metrics = client.get("/metrics").text
        assert 'derender_internal_errors_total{endpoint="chat"} 1.0' in metrics


def test_a_malformed_stream_state_is_still_the_clients_400(make_app: AppFactory) -> None:
    app = make_app(HERMES)
    with TestClient(app) as client:
        first = client.post(CHAT, json=_stream_body("req-bad-state")).json()
        state = first["stream_state"]
        state["output_chunk_lens"] = [5]
        response = client.post(CHAT, json=_stream_body("req-bad-state", state))
        assert response.status_code == 400
        assert "output_chunk_lens must sum" in response.json()["error"]["message"]
        state = first["stream_state"] | {"output_chunk_lens": [1], "read_offset": 99}
        response = client.post(CHAT, json=_stream_body("req-bad-state", state))
        assert response.status_code == 400
        assert "read_offset" in response.json()["error"]["message"]
    assert internal_errors(app) == 0


# ---------------------------------------------------------------------------- CPU budget


def test_a_request_over_its_cpu_budget_is_stopped_and_the_replica_serves_on(
    tokenizer: Tokenizer, make_app: AppFactory
) -> None:
    app = make_app((*HERMES, "--max-request-cpu-seconds", "0.002"))
    history = tokenizer.encode("Paris is lovely in spring. " * 400)[:3000]
    state = {
        "prev_tokens": [],
        "output_token_ids": history,
        "output_chunk_lens": [1] * len(history),
    }
    with TestClient(app) as client:
        response = client.post(CHAT, json=_stream_body("req-expensive", state))
        assert response.status_code == 422
        error = response.json()["error"]
        assert error["type"] == "UnprocessableEntityError"
        assert "--max-request-cpu-seconds" in error["message"]
        small = client.post(CHAT, json=_stream_body("req-cheap"))
        assert small.status_code == 200
        metrics = client.get("/metrics").text
        assert 'derender_cpu_budget_exceeded_total{endpoint="chat"} 1.0' in metrics
    assert internal_errors(app) == 0


# ---------------------------------------------------------------------------- a replica stays live


def test_health_answers_while_a_hostile_replay_runs(tokenizer: Tokenizer, tmp_path: Path) -> None:
    """A real uvicorn process replays a long adversarial history on its worker pool;
    /health on the same process keeps answering (1 s deadline: a stall detector).

    The replay request comes from another process, so the probes' timing is the
    server's alone (a sender thread here would share this process's GIL).
    """
    unit = tokenizer.encode('get_weather(city="x", n=[1, {"k": True}], m=None), ')
    history = (tokenizer.encode("[") + unit * 2000)[:15000]
    body = {
        "stream": True,
        "chat_request": chat_request("auto"),
        "prompt_token_ids": tokenizer.encode(PROMPT),
        "generate_chunk": {"request_id": "slow", "choices": [{"index": 0, "token_ids": [60]}]},
        "stream_state": {
            "prev_tokens": [],
            "output_token_ids": history,
            "output_chunk_lens": [1] * len(history),
        },
    }
    (tmp_path / "body.json").write_text(json.dumps(body))
    flags = (*TOOL_FLAGS, "pythonic", "--max-model-len", "20000", "--max-request-cpu-seconds", "60")
    with serving(*flags) as base, httpx.Client(base_url=base, timeout=1.0) as probe:
        probe.get("/health")  # connected before the replay starts
        sender = subprocess.Popen(
            [sys.executable, "-c", _SEND, base + CHAT, str(tmp_path / "body.json")],
            stdout=subprocess.PIPE,
            text=True,
        )
        latencies = []
        while sender.poll() is None:
            started = time.monotonic()
            assert probe.get("/health").status_code == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.01)
        status, seconds = sender.communicate(timeout=HANG_SECONDS)[0].split()
    assert status == "200"
    # The replay overlapped the probes (else this proved nothing).
    assert len(latencies) >= 3, seconds
    worst = 1e3 * max(latencies)
    print(f"replay {float(seconds):.2f} s; /health max {worst:.1f} ms over {len(latencies)} probes")


# Posts a JSON file and prints the status and the seconds it took.
_SEND = """
import sys, time, urllib.request
url, path = sys.argv[1], sys.argv[2]
request = urllib.request.Request(url, open(path, "rb").read(), {"content-type": "application/json"})
started = time.monotonic()
with urllib.request.urlopen(request, timeout=60) as reply:
    print(reply.status, time.monotonic() - started)
"""
