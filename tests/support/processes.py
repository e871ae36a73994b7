"""Real processes for tests: server processes and private Redis servers, each on a
free loopback port."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import redis

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """A real server process with ``flags`` on a free loopback port (``env`` added to the
    environment); it can be stopped and started again on the same port, as a restarted
    replica behind a balancer is."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.flags = flags
        self.env = {**os.environ, **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "--port", str(self.port), "--log-level", "warning",
             *self.flags],
            cwd=ROOT,
            env=self.env,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        # One client for the polls: a bare ``httpx.get`` builds an SSL context each time
        # (about 25 ms of CPU), taken from the server starting beside it.
        with httpx.Client(timeout=1) as client:
            while True:
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                assert self.process.poll() is None, "server exited during start-up"
                assert time.monotonic() < deadline, "server did not start in time"
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@contextlib.contextmanager
def serving(*flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A real server process on a free port, with ``flags`` (and ``env`` added to the
    environment); yields its base URL."""
    server = ServerProcess(*flags, env=env)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


class RedisServer:
    """A private redis-server on a free loopback port, nothing kept on disk; it can be
    stopped and started again on the same port (the Redis tier's fault tests do)."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is missing: scripts/install installs it")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--enable-debug-command", "local"],
            stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        with self.client() as client:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
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


def run_cli(*flags: str) -> subprocess.CompletedProcess[str]:
    """The server's command line run to its end (a refused start-up), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "app", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
