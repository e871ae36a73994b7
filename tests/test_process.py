"""The real CLI in a real uvicorn process: start-up checks and the README's example."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.processes import ROOT, run_cli, serving

HANG_SECONDS = 5.0  # detects a stalled event loop on a loaded machine, not speed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tool-call-parser", "nope"], "unknown --tool-call-parser 'nope'"),
        (["--reasoning-parser", "nope"], "unknown --reasoning-parser 'nope'"),
        (["--tool-call-parser", "llama3_json", "--enable-auto-tool-choice"], "<|python_tag|>"),
        (["--model", "/nonexistent/model"], "never downloads"),
        (["--default-chat-template-kwargs", "[1]"], "must be a JSON object"),
    ],
)
def test_bad_start_up_flags_fail_clearly(flags: list[str], message: str) -> None:
    result = run_cli(*flags)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving() as base:
        yield base


def readme_curl_bodies() -> list[tuple[str, dict[str, object]]]:
    """The (path, body) of every curl example in the README."""
    text = (ROOT / "README.md").read_text()
    examples = re.findall(r"curl -s http://127\.0\.0\.1:8000(\S+) .*?-d '(.*?)'", text, re.S)
    return [(path, json.loads(body)) for path, body in examples]


def test_readme_examples_work_against_a_served_process(server: str) -> None:
    examples = readme_curl_bodies()
    assert len(examples) == 2
    (chat_path, chat_body), (stream_path, stream_body) = examples
    reply = httpx.post(f"{server}{chat_path}", json=chat_body).json()
    assert reply["choices"][0]["message"]["content"] == "Hello! How can I help you today?"
    assert reply["model"] == "qwen3"
    chunk = httpx.post(f"{server}{stream_path}", json=stream_body).json()
    assert chunk["chunk"]["choices"][0]["text"] == "Hello!"
    assert chunk["stream_state"]["prev_tokens"] == ["!"]


@pytest.fixture(scope="module")
def parser_server() -> Iterator[str]:
    flags = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
    flags += ["--enable-auto-tool-choice", "--max-model-len", "20000", "--replay-workers", "2"]
    with serving(*flags) as base:
        yield base


def test_health_answers_while_long_histories_replay(parser_server: str, tokenizer: Any) -> None:
    """Replays of 8,000-token histories run off the event loop."""
    history = tokenizer.encode("<think>\n" + "thinking it through step by step. " * 1400)[:8000]
    body = {
        "stream": True,
        "generate_chunk": {"request_id": "long", "choices": [{"index": 0, "token_ids": [13]}]},
        "stream_state": {"output_token_ids": history, "output_chunk_lens": [1] * len(history)},
        "prompt_token_ids": [151644, 77091, 198],
        "chat_request": {"messages": []},
    }
    done = threading.Event()
    replies: list[int] = []

    def replay() -> None:
        with httpx.Client(timeout=120) as client:
            while not done.is_set():
                replies.append(
                    client.post(
                        f"{parser_server}/v1/chat/completions/derender", json=body
                    ).status_code
                )

    workers = [threading.Thread(target=replay) for _ in range(3)]
    for worker in workers:
        worker.start()
    latencies = []
    try:
        with httpx.Client(timeout=10) as client:
            time.sleep(0.3)
            for _ in range(40):
                started = time.perf_counter()
                assert client.get(f"{parser_server}/health").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.05)
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert replies and set(replies) == {200}
    latencies.sort()
    median, worst = latencies[len(latencies) // 2], latencies[-1]
    print(f"health under replay load: p50 {median * 1000:.1f} ms, max {worst * 1000:.1f} ms")
    assert worst < HANG_SECONDS
