"""The real CLI in a real uvicorn process: start-up checks and the README's example."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tool-call-parser", "nope"], "unknown --tool-call-parser 'nope'"),
        (["--reasoning-parser", "nope"], "unknown --reasoning-parser 'nope'"),
        (["--tool-call-parser", "llama3_json"], "<|python_tag|>"),
        (["--model", "/nonexistent/model"], "never downloads"),
        (["--default-chat-template-kwargs", "[1]"], "must be a JSON object"),
    ],
)
def test_bad_start_up_flags_fail_clearly(flags: list[str], message: str) -> None:
    result = run_cli(*flags)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "server exited during start-up"
            assert time.monotonic() < deadline, "server did not start in time"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


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
