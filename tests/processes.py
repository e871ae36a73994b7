"""Real processes for tests: server replicas and private Redis servers on free ports."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import redis

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(*flags: str) -> Iterator[str]:
    """A real server process on a free port, with ``flags``; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--log-level", "warning", *flags],
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


class RedisServer:
    """A private ``redis-server`` (nothing kept on disk) that a test may stop and restart."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is missing: scripts/install installs it"
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--protected-mode", "no", "--enable-debug-command", "local"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
