"""Soak: hundreds of concurrent parsed streams against a real server, for a bounded time.

A server process (qwen3 reasoning + hermes tools, session cache on, a short
``--stream-cache-ttl``) is started on a free port. Each of ``--streams`` workers runs
golden C1 streams one after another, threading ``stream_state`` as a client does; a
third of the streams are abandoned half-way (their sessions must expire), and a share
of requests are bad on purpose (out-of-vocabulary ids, a corrupt history, malformed
JSON, a wrong content type, too many tools), each expecting its 4xx. After the load
the script waits past the TTL and reads the live sessions from ``/metrics``.

Reported: requests, statuses, p50/p99 latency, RSS after warm-up, peak and final RSS
(``/proc``), live sessions at the end, and whether the server held up: no 5xx, no
unexpected status, no live session left, final RSS within ``--rss-tolerance`` of the
RSS after warm-up (with ``--check``, the exit status says so too).

    python -m bench.soak                      # 5 minutes, 300 streams
    python -m bench.soak --duration 20 --streams 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.golden import load_cases, stream_body
from bench.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
CHAT = "/v1/chat/completions/derender"
JSON = {"content-type": "application/json"}


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    unexpected: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    streams_done: int = 0
    streams_abandoned: int = 0
    bad_sent: int = 0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())


def rss_kib(pid: int, key: str = "VmRSS") -> int:
    """A figure (KiB) from /proc/<pid>/status: VmRSS now, VmHWM the peak since start
    (which includes building the tokenizer)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def live_sessions(client: httpx.Client, base: str) -> int:
    text = client.get(f"{base}/metrics").text
    match = re.search(r"^derender_cache_sessions (\S+)$", text, re.MULTILINE)
    return int(float(match.group(1))) if match else -1


def bad_requests(stream: dict[str, Any]) -> list[tuple[bytes, dict[str, str]]]:
    """Requests that must each get a 4xx, built from a real stream's first chunk."""
    first = stream_body(stream, stream["chunks"][0], None)
    out_of_vocab = json.loads(json.dumps(first))
    out_of_vocab["generate_chunk"]["choices"][0]["token_ids"] = [10**9]
    corrupt = json.loads(json.dumps(first))
    corrupt["stream_state"] = {"output_token_ids": [1, 2, 3], "output_chunk_lens": [1]}
    tools = json.loads(json.dumps(first))
    tools["chat_request"]["tools"] = tools["chat_request"]["tools"] * 200
    return [
        (json.dumps(out_of_vocab).encode(), JSON),
        (json.dumps(corrupt).encode(), JSON),
        (json.dumps(tools).encode(), JSON),
        (b'{"stream": true, "generate_chunk": {', JSON),
        (json.dumps(first).encode(), {"content-type": "text/plain"}),
    ]


class Soak:
    def __init__(self, args: argparse.Namespace, base: str) -> None:
        self.args = args
        self.base = base
        self.tally = Tally()
        self.streams = [
            case
            for case in load_cases("C1")
            if case["kind"] == "chat_stream" and case["chunking"] in ("t1", "t3")
        ]
        self.bad = [bad for stream in self.streams[:3] for bad in bad_requests(stream)]
        self.stop_at = 0.0
        self.sequence = 0

    async def post(
        self, client: httpx.AsyncClient, body: bytes, headers: dict[str, str]
    ) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            reply = await client.post(CHAT, content=body, headers=headers)
        except httpx.HTTPError as exc:
            self.tally.unexpected[f"transport: {type(exc).__name__}"] += 1
            return None
        self.tally.latencies.append(time.perf_counter() - started)
        self.tally.statuses[reply.status_code] += 1
        return reply

    async def stream(self, client: httpx.AsyncClient, rng: random.Random) -> None:
        case = rng.choice(self.streams)
        self.sequence += 1
        request_id = f"soak-{self.sequence}"
        chunks = case["chunks"]
        abandon_at = max(1, len(chunks) // 2) if rng.random() < self.args.abandon else None
        state = None
        for position, chunk in enumerate(chunks):
            if time.monotonic() > self.stop_at:
                return
            if position == abandon_at:
                self.tally.streams_abandoned += 1
                return
            if rng.random() < self.args.bad:
                body, headers = rng.choice(self.bad)
                self.tally.bad_sent += 1
                reply = await self.post(client, body, headers)
                if reply is not None and not 400 <= reply.status_code < 500:
                    self.tally.unexpected[f"bad request got {reply.status_code}"] += 1
            chunk = {**chunk, "request_id": request_id}
            body = json.dumps(stream_body(case, chunk, state)).encode()
            reply = await self.post(client, body, JSON)
            if reply is None:
                return
            if reply.status_code != 200:
                self.tally.unexpected[f"stream chunk got {reply.status_code}"] += 1
                return
            state = reply.json()["stream_state"]
        self.tally.streams_done += 1

    async def worker(self, seed: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(seed)
        while time.monotonic() < self.stop_at:
            await self.stream(client, rng)

    async def load(self, duration: float) -> None:
        self.stop_at = time.monotonic() + duration
        # Idle connections are dropped before uvicorn's 5 s keep-alive ends, so a request
        # never races the server closing its connection.
        limits = httpx.Limits(max_connections=self.args.streams, keepalive_expiry=3)
        async with httpx.AsyncClient(base_url=self.base, limits=limits, timeout=60) as client:
            await asyncio.gather(*(self.worker(i, client) for i in range(self.args.streams)))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def start_server(port: int, ttl: float) -> subprocess.Popen[bytes]:
    flags = [
        "--served-model-name", "qwen3", "--max-model-len", "4096",
        "--reasoning-parser", "qwen3", "--tool-call-parser", "hermes",
        "--enable-auto-tool-choice", "--stream-cache-ttl", str(ttl),
    ]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--log-level", "warning", *flags],
        cwd=ROOT,
    )


def wait_healthy(client: httpx.Client, base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if client.get(f"{base}/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("soak: the server did not start")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, help="seconds (default: a tenth, at most 30)")
    parser.add_argument("--streams", type=int, default=300, help="concurrent streams")
    parser.add_argument("--abandon", type=float, default=1 / 3, help="share abandoned")
    parser.add_argument("--bad", type=float, default=0.02, help="bad requests per chunk")
    parser.add_argument("--ttl", type=float, default=5.0, help="the server's session TTL")
    parser.add_argument("--rss-tolerance", type=float, default=0.2)
    parser.add_argument("--check", action="store_true", help="exit 1 unless the server held up")
    args = parser.parse_args(argv)
    warmup = args.warmup if args.warmup is not None else min(args.duration / 10, 30.0)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(port, args.ttl)
    sync = httpx.Client(timeout=30)
    try:
        wait_healthy(sync, base, process)
        soak = Soak(args, base)
        result = asyncio.run(run(soak, sync, process.pid, warmup))
    finally:
        process.terminate()
        process.wait(timeout=30)
        sync.close()
    return report(soak.tally, result, args)


async def run(soak: Soak, sync: httpx.Client, pid: int, warmup: float) -> dict[str, float]:
    args = soak.args
    started = time.monotonic()
    load = asyncio.create_task(soak.load(args.duration))
    result: dict[str, float] = {"warm_rss": 0.0, "peak_rss": 0.0}
    last = started
    while not load.done():
        await asyncio.sleep(0.5)
        now = time.monotonic()
        result["peak_rss"] = max(result["peak_rss"], rss_kib(pid))
        if not result["warm_rss"] and now - started >= warmup:
            result["warm_rss"] = rss_kib(pid)
        if now - last >= 5 or load.done():
            last = now
            tally = soak.tally
            sessions = await asyncio.to_thread(live_sessions, sync, soak.base)
            print(
                f"[{now - started:6.1f}s] requests {tally.requests:>8}  "
                f"rps {tally.requests / (now - started):7.1f}  "
                f"4xx {sum(n for s, n in tally.statuses.items() if 400 <= s < 500):>6}  "
                f"5xx {sum(n for s, n in tally.statuses.items() if s >= 500):>3}  "
                f"sessions {sessions:>5}  RSS {rss_kib(pid) / 1024:7.1f} MiB",
                flush=True,
            )
    await load
    result["start_peak_rss"] = rss_kib(pid, "VmHWM")
    result["end_sessions"] = live_sessions(sync, soak.base)
    # Past the TTL and two sweeps: every abandoned session must be gone.
    wait = args.ttl + 2 * max(0.05, min(args.ttl / 2, 30.0)) + 1
    print(f"load done; waiting {wait:.1f}s past the session TTL", flush=True)
    await asyncio.sleep(wait)
    result["final_sessions"] = live_sessions(sync, soak.base)
    result["final_rss"] = rss_kib(pid)
    result["warm_rss"] = result["warm_rss"] or result["final_rss"]
    result["load_s"] = args.duration
    return result


def report(tally: Tally, result: dict[str, float], args: argparse.Namespace) -> int:
    server_errors = sum(n for status, n in tally.statuses.items() if status >= 500)
    growth = result["final_rss"] / result["warm_rss"] - 1
    rows = [
        ("duration of load", f"{result['load_s']:.0f} s"),
        ("concurrent streams", f"{args.streams}"),
        ("requests", f"{tally.requests}"),
        ("requests/s", f"{tally.requests / result['load_s']:.0f}"),
        ("streams finished / abandoned", f"{tally.streams_done} / {tally.streams_abandoned}"),
        ("bad requests sent", f"{tally.bad_sent}"),
        ("statuses", ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items()))),
        ("5xx", f"{server_errors}"),
        ("unexpected", ", ".join(f"{k}: {n}" for k, n in tally.unexpected.items()) or "none"),
        ("latency p50 / p99", f"{percentile(tally.latencies, 0.5) * 1000:.1f} ms / "
         f"{percentile(tally.latencies, 0.99) * 1000:.1f} ms"),
        ("RSS after warm-up", f"{result['warm_rss'] / 1024:.1f} MiB"),
        ("RSS peak under load (0.5 s samples)", f"{result['peak_rss'] / 1024:.1f} MiB"),
        ("RSS peak since start (VmHWM)", f"{result['start_peak_rss'] / 1024:.1f} MiB"),
        ("RSS final", f"{result['final_rss'] / 1024:.1f} MiB ({growth:+.1%} vs warm-up)"),
        ("live sessions at end of load", f"{result['end_sessions']:.0f}"),
        ("live sessions after TTL", f"{result['final_sessions']:.0f}"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print()
    print(f"| {'soak':<{width}} | result |")
    print(f"|{'-' * (width + 2)}|--------|")
    for name, value in rows:
        print(f"| {name:<{width}} | {value} |")
    met = (
        server_errors == 0
        and not tally.unexpected
        and result["final_sessions"] == 0
        and growth <= args.rss_tolerance
    )
    verdict = "held up" if met else "did not hold up"
    print(
        f"\nthe server {verdict} (checked: no 5xx, every status as expected, no session "
        f"left after the TTL, final RSS within {args.rss_tolerance:.0%} of warm-up)"
    )
    return 0 if met or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
