"""``python -m bench health``: /health latency under slow clients and an amplifying request.

A load balancer's liveness probe must keep getting a quick answer whatever else the
server is doing, or a busy replica is taken for a dead one. Each scenario runs for
``--seconds`` against a fresh server while a prober opens a new connection for every
``GET /health`` (as a balancer's probe does), one every ``--interval`` seconds:

- **idle**: nothing else;
- **slowloris**: ``--slow-sockets`` sockets that send a request's headers a byte at a
  time, each re-opened once the server answers it 408 (``--header-timeout 2``), so
  that many are always pending;
- **amplifying**: one-shot chat requests of ``--choices`` choices x ``--tokens`` token
  ids with logprobs and token ids asked back (a 10 MB request, a 24 MB response at the
  defaults), one after another.

Reported per scenario: /health p50, p99 and max, and what the load achieved. The
prober shares this machine with the server and the load, so its latencies include its
own scheduling delays: they are an upper bound on what the server adds.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from bench import plots
from bench.report import machine, progress, table, write
from bench.servers import Command, running
from bench.stats import percentile

BUDGET_MS = 100.0  # the latency /health must stay under while the server is attacked
SLOW_HEADER = b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\nX-Slow: "
TRICKLE_S = 0.25  # how often each slow socket sends its next byte
HEADER_TIMEOUT_S = 2


class ScenarioRun(msgspec.Struct):
    scenario: str
    probes: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    load: str  # what the load achieved, in words
    at_s: list[float]  # when each probe started, from the scenario's start
    latencies_ms: list[float]


class HealthResult(msgspec.Struct):
    machine: dict[str, object]
    seconds: float
    interval_s: float
    runs: list[ScenarioRun]


def probe(host: str, port: int) -> float:
    """One /health on a new connection: seconds from connecting to the whole reply."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request("GET", "/health")
        reply = connection.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"/health answered {reply.status}")
    finally:
        connection.close()
    return time.perf_counter() - started


def amplifying_body(choices: int, tokens: int) -> bytes:
    """A one-shot chat request whose response is over twice its size: every position
    carries a logprob, and the token ids are asked back."""
    position = {"token_id": 9707, "logprob": -0.5}
    choice = {"finish_reason": "length", "token_ids": [9707] * tokens}
    generated = [{**choice, "index": i, "logprobs": {"content": [position] * tokens}}
                 for i in range(choices)]  # fmt: skip
    request = {
        "generate_response": {"request_id": "bench-health", "choices": generated},
        "chat_request": {"messages": [], "logprobs": True, "return_token_ids": True},
    }
    return json.dumps(request, separators=(",", ":")).encode()


class Load:
    """A background load: ``run`` loops until ``stop`` is set; ``summary`` says what it did."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self, host: str, port: int) -> None:
        raise NotImplementedError

    def summary(self) -> str:
        raise NotImplementedError

    def guarded(self, host: str, port: int) -> None:
        try:
            self.run(host, port)
        except BaseException as exc:  # reported by the prober's thread
            self.error = exc


class Idle(Load):
    def run(self, host: str, port: int) -> None:
        self.stop.wait()

    def summary(self) -> str:
        return "no other requests"


class Slowloris(Load):
    """``count`` sockets always part-way through their headers."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.timed_out = 0  # sockets answered 408, each replaced by a new one
        self.other: list[bytes] = []  # anything else the server answered

    def run(self, host: str, port: int) -> None:
        slow = [self._open(host, port) for _ in range(self.count)]
        try:
            while not self.stop.wait(TRICKLE_S):
                answered = set(select.select(slow, [], [], 0)[0])
                for i, sock in enumerate(slow):
                    if sock in answered:
                        self._read_answer(sock)
                        slow[i] = self._open(host, port)
                    else:
                        with contextlib.suppress(OSError):
                            sock.send(b"a")
        finally:
            for sock in slow:
                sock.close()

    def _open(self, host: str, port: int) -> socket.socket:
        sock = socket.create_connection((host, port))
        sock.sendall(SLOW_HEADER)
        return sock

    def _read_answer(self, sock: socket.socket) -> None:
        received = b""
        with contextlib.suppress(OSError):
            while part := sock.recv(65536):
                received += part
        sock.close()
        if received.startswith(b"HTTP/1.1 408 "):
            self.timed_out += 1
        else:
            self.other.append(received[:40])

    def summary(self) -> str:
        other = f", {len(self.other)} other answers" if self.other else ""
        return f"{self.count} slow sockets held; {self.timed_out} answered 408 and replaced{other}"


class Amplifying(Load):
    """One amplifying request after another, each answered before the next is sent."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body
        self.seconds: list[float] = []
        self.response_bytes = 0

    def run(self, host: str, port: int) -> None:
        headers = {"content-type": "application/json"}
        while not self.stop.is_set():
            started = time.perf_counter()
            connection = http.client.HTTPConnection(host, port, timeout=300)
            try:
                connection.request("POST", "/v1/chat/completions/derender", self.body, headers)
                reply = connection.getresponse()
                answer = reply.read()
            finally:
                connection.close()
            if reply.status != 200:
                raise RuntimeError(f"amplifying request answered {reply.status}: {answer[:200]!r}")
            self.seconds.append(time.perf_counter() - started)
            self.response_bytes = len(answer)

    def summary(self) -> str:
        each = ", ".join(f"{s:.1f}" for s in self.seconds)
        return (
            f"{len(self.seconds)} requests of {len(self.body) / 1e6:.1f} MB answered with "
            f"{self.response_bytes / 1e6:.1f} MB, in {each} s"
        )


def server_commands(args: argparse.Namespace) -> list[Command]:
    argv = [sys.executable, "-m", "app", "--log-level", "warning"]
    argv += ["--header-timeout", str(HEADER_TIMEOUT_S), *args.server_flags]
    return [Command(argv)]


def probe_under(load: Load, host: str, port: int, args: argparse.Namespace) -> ScenarioRun:
    """Probe /health every ``--interval`` s for ``--seconds`` while ``load`` runs; an
    amplifying load runs its last request to the end, still probed."""
    worker = threading.Thread(target=load.guarded, args=(host, port), daemon=True)
    started = time.perf_counter()
    worker.start()
    at: list[float] = []
    latencies: list[float] = []
    while True:
        elapsed = time.perf_counter() - started
        if elapsed >= args.seconds:
            load.stop.set()
            if not worker.is_alive():
                break
        at.append(elapsed)
        latencies.append(probe(host, port))
        time.sleep(max(0.0, args.interval - latencies[-1]))
    worker.join()
    if load.error is not None:
        raise load.error
    ms = [1e3 * latency for latency in latencies]
    return ScenarioRun(
        scenario="",
        probes=len(ms),
        p50_ms=percentile(ms, 50),
        p99_ms=percentile(ms, 99),
        max_ms=max(ms),
        load=load.summary(),
        at_s=at,
        latencies_ms=ms,
    )


def scenarios(args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], Load]]]:
    yield "idle", Idle
    yield f"slowloris ({args.slow_sockets} sockets)", lambda: Slowloris(args.slow_sockets)
    body = amplifying_body(args.choices, args.tokens)
    yield f"amplifying ({args.choices} x {args.tokens} ids)", lambda: Amplifying(body)


def run(args: argparse.Namespace) -> list[ScenarioRun]:
    runs = []
    for name, load in scenarios(args):
        if args.scenarios and name.split()[0] not in args.scenarios:
            continue
        progress(f"{name}: starting a server")
        with running(server_commands(args)) as target:
            host, port = target.bases[0].removeprefix("http://").split(":")
            probe(host, int(port))  # the first connection pays for imports
            progress(f"{name}: probing /health for {args.seconds:g} s")
            result = probe_under(load(), host, int(port), args)
        result.scenario = name
        runs.append(result)
        progress(f"{name}: max {result.max_ms:.1f} ms over {result.probes} probes; {result.load}")
    return runs


def render(result: HealthResult) -> str:
    rows = [
        [r.scenario, str(r.probes), f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}", f"{r.max_ms:.1f}",
         "yes" if r.max_ms < BUDGET_MS else "**no**", r.load]
        for r in result.runs
    ]  # fmt: skip
    columns = [
        "scenario",
        "probes",
        "p50 ms",
        "p99 ms",
        "max ms",
        f"max < {BUDGET_MS:g} ms",
        "load",
    ]
    lines = [
        f"# /health under load ({result.seconds:g} s a scenario, a probe every "
        f"{1e3 * result.interval_s:g} ms on a new connection)",
        "",
        f"machine: {result.machine}",
        "",
        table(columns, rows),
    ]
    return "\n".join(lines)


def plot(result: HealthResult, path: Path) -> None:
    panels = {
        r.scenario: {
            "/health": (r.at_s, r.latencies_ms),
            f"{BUDGET_MS:g} ms": ([0.0, max(r.at_s)], [BUDGET_MS, BUDGET_MS]),
        }
        for r in result.runs
    }
    styles = {"/health": plots.Style("C0"), f"{BUDGET_MS:g} ms": plots.Style("C3", "--")}
    plots.lines(
        path, "/health latency under load", panels,
        xlabel="time since the scenario started (s)", ylabel="/health latency (ms)",
        styles=styles,
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    runs = run(args)
    result = HealthResult(machine(), args.seconds, args.interval, runs)
    figure = args.out / "health.png"
    plot(result, figure)
    write(args.out, "health", result, render(result), [figure])
    return 0 if all(r.max_ms < BUDGET_MS for r in runs) or not args.check else 1
