"""Server processes under test, and what they cost as the kernel counts it.

CPU time and peak memory are read from /proc for the server processes and their
children, never from the client, so the client's own work (which shares this
machine) is not billed to the server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
TICK_S = 1 / CLOCK_TICK  # the resolution of /proc CPU times (10 ms)


@dataclass(frozen=True, slots=True)
class Command:
    """One process to start; ``--port PORT`` is appended to ``argv``."""

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    startup_s: float = 120.0


@dataclass(frozen=True, slots=True)
class Target:
    """Running replicas: a stream's chunks go round-robin over ``bases``."""

    bases: Sequence[str]
    pids: Sequence[int]
    redis_url: str | None = None  # the Redis the replicas share, if any


def redis_bytes_in(target: Target) -> int | None:
    """Bytes the replicas have written to their Redis so far (its network input: the
    snapshots, and the few bytes of each take); None without a Redis."""
    if target.redis_url is None:
        return None
    with redis.Redis.from_url(target.redis_url, socket_timeout=5) as client:
        return int(client.info("stats")["total_net_input_bytes"])


def family(pid: int) -> list[int]:
    """``pid`` and its live descendants (a server may fork workers)."""
    pids = [pid]
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split():
                pids += family(int(child))
    return pids


def proc_files(target: Target, name: str) -> list[str]:
    """/proc/PID/NAME of every server process and descendant still there to read."""
    texts = []
    for root in target.pids:
        for pid in family(root):
            with contextlib.suppress(FileNotFoundError):  # a child that just exited
                texts.append(Path(f"/proc/{pid}/{name}").read_text())
    return texts


def cpu_seconds(target: Target) -> float:
    """User plus system CPU of every server process, reaped children included."""
    ticks = 0
    for stat in proc_files(target, "stat"):
        fields = stat.rsplit(")", 1)[1].split()
        ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / CLOCK_TICK


def peak_rss_mb(target: Target) -> float:
    """Peak resident memory (VmHWM) summed over the server processes, in MiB."""
    lines = [line for status in proc_files(target, "status") for line in status.splitlines()]
    return sum(int(line.split()[1]) for line in lines if line.startswith("VmHWM:")) / 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(base: str, process: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before /health")
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError),
            urllib.request.urlopen(f"{base}/health", timeout=1) as reply,
        ):
            if reply.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server at {base} not healthy after {deadline_s:.0f} s")


@contextlib.contextmanager
def running(commands: Sequence[Command]) -> Iterator[Target]:
    """Start every command on a free port, wait for /health, stop them all after."""
    processes: list[subprocess.Popen[bytes]] = []
    bases: list[str] = []
    try:
        for command in commands:
            port = free_port()
            processes.append(
                subprocess.Popen(
                    [*command.argv, "--port", str(port)],
                    cwd=ROOT,
                    env={**os.environ, **command.env},
                    stdin=subprocess.DEVNULL,
                )
            )
            bases.append(f"http://127.0.0.1:{port}")
            wait_healthy(bases[-1], processes[-1], command.startup_s)
        yield Target(bases, [process.pid for process in processes])
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
