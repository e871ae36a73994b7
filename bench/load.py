"""``python -m bench load``: many concurrent streams, mode by mode, in one run.

``--streams`` qwen3 + hermes streams of ``--tokens`` tokens share one server set-up,
each on its own keep-alive connection. By default every stream sends its next chunk
as soon as the last one is answered (throughput); ``--rate`` paces each stream like a
decoding engine and ``--ramp`` spreads their starts. The batched modes drive the
streams as one engine does: each step is one batch frame carrying the next chunk of
every stream, on one connection (paced by ``--rate``, all streams from the first step).
Reported: chunks per second, p50 and p99 of a chunk's round trip (a frame's, in the
batched modes), server CPU per chunk and per generated token, chunks per second per
server core (chunks over server CPU seconds), the cache hit ratio (from
``x-derender-cache``) and the servers' peak resident memory. ``--py-spy PATH`` also
samples each mode's servers while they are measured (bench/profile.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from bench import plots
from bench.client import BATCHED, StreamRecord, http_client, run_engine, run_stream, warm_up
from bench.modes import BASELINE, Mode, Setup, by_name, started, style
from bench.profile import sampled
from bench.report import machine, progress, table, write
from bench.servers import Target, cpu_seconds, peak_rss_mb
from bench.stats import AtPosition, by_position, percentile
from bench.stream import MEASURABLE_CPU_S
from bench.workload import chat_output, prompt_ids, qwen3

PROGRESS_EVERY_S = 10.0


class LoadRun(msgspec.Struct):
    mode: str
    streams: int
    tokens: int
    chunk_size: int
    prompt_tokens: int
    rate: float
    wall_s: float
    chunks: int
    chunks_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_s: float
    cpu_per_token_ms: float
    cpu_per_chunk_us: float
    chunks_per_core_s: float  # chunks over the servers' CPU seconds
    hit_ratio: float | None
    peak_rss_mb: float
    latency: list[AtPosition]


async def drive(
    mode: Mode, target: Target, output: list[int], prompt: list[int], args: argparse.Namespace
) -> list[StreamRecord]:
    """Run every stream to its end, with a progress line every few seconds."""
    done = 0

    def count(position: int, record: StreamRecord) -> None:
        nonlocal done
        done += 1

    async def one(index: int) -> StreamRecord:
        await asyncio.sleep(index * args.ramp / args.streams)
        run_id = f"load-{mode.name}-{len(prompt)}-{index}"
        interval = args.chunk_size / args.rate if args.rate else 0.0
        return await run_stream(
            client, target, run_id, output, prompt, args.chunk_size,
            wire=mode.wire, interval_s=interval, on_chunk=count,
        )  # fmt: skip

    async def report() -> None:
        total = args.streams * -(-len(output) // args.chunk_size)
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            progress(f"  {mode.label}: {done}/{total} chunks")

    async with http_client(args.streams) as client:
        reporter = asyncio.create_task(report())
        try:
            return await asyncio.gather(*(one(index) for index in range(args.streams)))
        finally:
            reporter.cancel()


async def drive_engine(
    mode: Mode, target: Target, output: list[int], prompt: list[int], args: argparse.Namespace
) -> tuple[list[StreamRecord], list[float]]:
    """Every stream to its end in the engine's frames, with a progress line every few
    seconds; each stream's record and each frame's latency."""
    done = 0

    def count(answered: int) -> None:
        nonlocal done
        done = answered

    async def report() -> None:
        total = args.streams * -(-len(output) // args.chunk_size)
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            progress(f"  {mode.label}: {done}/{total} chunks")

    async with http_client(1) as client:
        reporter = asyncio.create_task(report())
        try:
            return await run_engine(
                client, target, f"load-{mode.name}-{len(prompt)}", args.streams, output, prompt,
                args.chunk_size, wire=mode.wire,
                interval_s=args.chunk_size / args.rate if args.rate else 0.0, on_step=count,
            )  # fmt: skip
        finally:
            reporter.cancel()


def measure(
    mode: Mode, target: Target, output: list[int], prompt: list[int], args: argparse.Namespace
) -> LoadRun:
    cpu_before = cpu_seconds(target)
    started = time.perf_counter()
    with sampled(args.py_spy, target.pids, args.out, f"{mode.name}-{len(prompt)}"):
        if mode.wire in BATCHED:
            records, latencies = asyncio.run(drive_engine(mode, target, output, prompt, args))
        else:
            records = asyncio.run(drive(mode, target, output, prompt, args))
            latencies = [latency for record in records for latency in record.latencies]
    wall = time.perf_counter() - started
    cpu = cpu_seconds(target) - cpu_before
    positions = [p for record in records for p in record.positions]
    chunks = sum(len(record.positions) for record in records)
    hits = sum(record.hits for record in records)
    answered = hits + sum(record.misses for record in records)
    return LoadRun(
        mode=mode.name,
        streams=args.streams,
        tokens=len(output),
        chunk_size=args.chunk_size,
        prompt_tokens=len(prompt),
        rate=args.rate,
        wall_s=wall,
        chunks=chunks,
        chunks_per_s=chunks / wall,
        p50_ms=1e3 * percentile(latencies, 50),
        p99_ms=1e3 * percentile(latencies, 99),
        cpu_s=cpu,
        cpu_per_token_ms=1e3 * cpu / (args.streams * len(output)),
        cpu_per_chunk_us=1e6 * cpu / chunks,
        chunks_per_core_s=chunks / cpu if cpu else 0.0,
        hit_ratio=hits / answered if answered else None,
        peak_rss_mb=peak_rss_mb(target),
        latency=by_position(positions, [t for r in records for t in r.latencies]),
    )


def run(modes: Sequence[Mode], setup: Setup, args: argparse.Namespace) -> list[LoadRun]:
    tokenizer = qwen3()
    output = chat_output(tokenizer, args.tokens)
    runs = []
    for mode in modes:
        progress(f"{mode.label}: starting")
        with started(mode, setup) as target:
            asyncio.run(warm_up(target, output, prompt_ids(tokenizer, 100), mode.wire))
            for length in args.prompt_tokens:
                runs.append(measure(mode, target, output, prompt_ids(tokenizer, length), args))
    return runs


def render(runs: Sequence[LoadRun]) -> str:
    first = runs[0]
    pacing = f"{first.rate:g} tokens/s per stream" if first.rate else "unpaced"
    where = machine()
    title = (
        f"{first.streams} concurrent {first.tokens}-token qwen3 + hermes streams, chunk size "
        f"{first.chunk_size}, {pacing}; rates and times are this machine's "
        f"({where['cpu']}, {where['cores']} cores, shared by client and server). "
        "p50/p99: a chunk's round trip, a frame's in the batch modes"
    )
    columns = [
        "mode",
        "prompt",
        "chunks/s",
        "p50 ms",
        "p99 ms",
        "server CPU s",
        "CPU µs/chunk",
        "chunks/s per server core",
        "CPU ms/token",
        "hits",
        "peak RSS MiB",
    ]
    rows = [
        [
            by_name(r.mode).label,
            str(r.prompt_tokens),
            f"{r.chunks_per_s:.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            f"{r.cpu_s:.2f}",
            f"{r.cpu_per_chunk_us:.0f}",
            f"{r.chunks_per_core_s:.0f}",
            f"{r.cpu_per_token_ms:.3f}",
            "-" if r.hit_ratio is None else f"{r.hit_ratio:.3f}",
            f"{r.peak_rss_mb:.0f}",
        ]
        for r in runs
    ]
    lines = ["", f"same-run ratios against {BASELINE.label}:"]
    for r in runs:
        base = next(
            (b for b in runs if b.mode == BASELINE.name and b.prompt_tokens == r.prompt_tokens),
            None,
        )
        if base is not None and base is not r:
            # a CPU total under the clock's resolution makes no ratio
            cpu = (
                f"CPU not compared (a total under {MEASURABLE_CPU_S:g} s)"
                if min(r.cpu_s, base.cpu_s) < MEASURABLE_CPU_S
                else f"CPU/token x{r.cpu_s / base.cpu_s:.3g}"
            )
            lines.append(
                f"  {by_name(r.mode).label}, prompt {r.prompt_tokens}: {cpu}, "
                f"chunks/s x{r.chunks_per_s / base.chunks_per_s:.3g}, "
                f"p99 x{r.p99_ms / base.p99_ms:.3g}"
            )
    lines += _batched_ratios(runs)
    return "\n".join([title, "", table(columns, rows), *(lines if len(lines) > 2 else [])])


def _batched_ratios(runs: Sequence[LoadRun]) -> list[str]:
    """How much less server CPU a chunk costs in the batch modes than in the per-chunk
    modes they replace, in the same run."""
    lines = []
    for batched in (r for r in runs if by_name(r.mode).wire in BATCHED):
        for other in ("cache-on", "websocket"):
            base = next(
                (b for b in runs if b.mode == other and b.prompt_tokens == batched.prompt_tokens),
                None,
            )
            if base is None or min(base.cpu_s, batched.cpu_s) < MEASURABLE_CPU_S:
                continue
            lines.append(
                f"  {by_name(batched.mode).label}, prompt {batched.prompt_tokens}: server CPU "
                f"per chunk {base.cpu_per_chunk_us / batched.cpu_per_chunk_us:.3g}x less than "
                f"{by_name(other).label}"
            )
    return lines


def draw(runs: Sequence[LoadRun], out: Path) -> list[Path]:
    """p50 and p99 by output position: a mode's colour and line style, a marker per
    prompt length."""
    panels: dict[str, dict[str, plots.Series]] = {"p50": {}, "p99": {}}
    styles: dict[str, plots.Style] = {}
    prompts = sorted({r.prompt_tokens for r in runs})
    for r in runs:
        label = by_name(r.mode).label
        if len(prompts) > 1:
            label += f", prompt {r.prompt_tokens}"
        marker = ("o", "s", "^", "D")[prompts.index(r.prompt_tokens) % 4]
        styles[label] = dataclasses.replace(style(r.mode), marker=marker)
        xs = [point.position for point in r.latency]
        panels["p50"][label] = (xs, [point.p50_ms for point in r.latency])
        panels["p99"][label] = (xs, [point.p99_ms for point in r.latency])
    title = (
        f"{runs[0].streams} concurrent streams, each mode on its own fresh processes: "
        "per-chunk latency by output position"
    )
    path = out / "load-latency.png"
    plots.lines(path, title, panels, loglog=True, styles=styles)
    return [path]


def main(args: argparse.Namespace, modes: Sequence[Mode], setup: Setup) -> int:
    runs = run(modes, setup, args)
    figures = draw(runs, args.out)
    write(args.out, "load", {"machine": machine(), "runs": runs}, render(runs), figures)
    return 0
