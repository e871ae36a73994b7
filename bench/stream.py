"""``python -m bench stream``: one stream over HTTP, mode by mode, in one run.

For each mode its server processes are started, then one qwen3 + hermes stream of
``--tokens`` tokens (reasoning, an answer, tool calls) is sent chunk by chunk, for each
chunk size and prompt length, threading ``stream_state`` as vLLM's clients do. The
server's CPU is read from /proc at powers of two along the stream: CPU up to token k is
what a k-token stream costs, so one stream draws the whole cost-versus-length curve.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from bench import plots
from bench.client import BATCHED, StreamRecord, http_client, run_stream, warm_up
from bench.modes import BASELINE, Mode, Setup, by_name, started, style
from bench.report import machine, progress, table, write
from bench.servers import TICK_S, Target, cpu_seconds, redis_bytes_in
from bench.stats import AtPosition, MeanAt, by_position, checkpoints, means_by_position
from bench.workload import chat_output, prompt_ids, qwen3

# /proc counts CPU in clock ticks: below five of them a total is noise, not a figure.
MEASURABLE_CPU_S = 5 * TICK_S
CPU_FLOOR = plots.Floor(MEASURABLE_CPU_S, "s", "5 clock ticks, /proc's CPU resolution")


class AtLength(msgspec.Struct):
    """Totals for the stream's first ``tokens`` tokens: what a stream that long costs."""

    tokens: int
    cpu_s: float
    request_bytes: int
    prompt_share: float  # of request bytes: the re-sent prompt_token_ids
    history_share: float  # of request bytes: the echoed stream_state
    chunks: int = 0
    redis_bytes: int | None = None  # written to the mode's Redis (None: it has none)


class PerChunk(msgspec.Struct):
    """What one chunk costs between two checkpoints (``tokens`` the later one)."""

    tokens: int
    cpu_ms: float
    redis_bytes: float | None


def per_chunk(r: StreamRun) -> list[PerChunk]:
    """Server CPU and Redis bytes written per chunk, over the chunks between each
    checkpoint and the one before it: the cost of a chunk at that length."""
    rows = []
    for before, after in itertools.pairwise(r.by_length):
        chunks = after.chunks - before.chunks
        if chunks <= 0:
            continue
        written = None
        if after.redis_bytes is not None and before.redis_bytes is not None:
            written = (after.redis_bytes - before.redis_bytes) / chunks
        rows.append(PerChunk(after.tokens, 1e3 * (after.cpu_s - before.cpu_s) / chunks, written))
    return rows


class StreamRun(msgspec.Struct):
    mode: str
    chunk_size: int
    prompt_tokens: int
    tokens: int
    cpu_s: float
    bytes_sent: int
    bytes_received: int
    prompt_share: float
    history_share: float
    hit_ratio: float | None
    resends: int | None  # chunks re-sent in full after a 409 (compact and WebSocket)
    latency: list[AtPosition]
    bytes_per_chunk: list[MeanAt]  # request + reply bytes of a chunk, by position
    by_length: list[AtLength]
    positions: list[int]
    latencies_ms: list[float]
    chunk_bytes: list[int]


class Verdict(msgspec.Struct):
    """One target of the transports on one run: its ratio, bound and outcome
    (``holds`` is None when a CPU total is under the clock's resolution), and for a CPU
    claim the same ratio of its transport's echo floor when that ran: the least the
    ratio can be on this machine and HTTP server."""

    mode: str
    chunk_size: int
    prompt_tokens: int
    claim: str
    value: float | None
    bound: float
    holds: bool | None
    floor: float | None = None


def hit_ratio(record: StreamRecord) -> float | None:
    answered = record.hits + record.misses
    return record.hits / answered if answered else None


def measure(
    mode: Mode, target: Target, run_id: str, output: list[int], prompt: list[int], size: int
) -> StreamRun:
    """Stream ``output`` through ``target`` once, sampling server CPU at checkpoints."""
    marks = checkpoints(len(output))
    start = cpu_seconds(target)
    written = redis_bytes_in(target)
    lengths: list[AtLength] = []

    def written_since() -> int | None:
        now = redis_bytes_in(target)
        return None if now is None or written is None else now - written

    def sample(position: int, record: StreamRecord) -> None:
        """At the first chunk ending at or past the next checkpoint, counted as there."""
        if position >= marks[len(lengths)]:
            sent = max(record.bytes_sent, 1)
            lengths.append(
                AtLength(
                    marks[len(lengths)],
                    cpu_seconds(target) - start,
                    record.bytes_sent,
                    record.prompt_bytes / sent,
                    record.history_bytes / sent,
                    len(record.positions),
                    written_since(),
                )
            )
            progress(f"  {mode.label}, chunk {size}: token {position}/{len(output)}")

    async def go() -> StreamRecord:
        async with http_client(1) as client:
            return await run_stream(
                client,
                target,
                run_id,
                output,
                prompt,
                size,
                wire=mode.wire,
                on_chunk=sample,
            )

    record = asyncio.run(go())
    last = lengths[-1]
    return StreamRun(
        mode=mode.name,
        chunk_size=size,
        prompt_tokens=len(prompt),
        tokens=len(output),
        cpu_s=last.cpu_s,
        bytes_sent=record.bytes_sent,
        bytes_received=record.bytes_received,
        prompt_share=last.prompt_share,
        history_share=last.history_share,
        hit_ratio=hit_ratio(record),
        resends=record.resends if mode.wire in ("compact", "websocket", *BATCHED) else None,
        latency=by_position(record.positions, record.latencies),
        bytes_per_chunk=means_by_position(record.positions, record.chunk_bytes),
        by_length=lengths,
        positions=record.positions,
        latencies_ms=[1e3 * latency for latency in record.latencies],
        chunk_bytes=record.chunk_bytes,
    )


def run(
    modes: Sequence[Mode],
    setup: Setup,
    tokens: int,
    chunk_sizes: Sequence[int],
    prompt_tokens: Sequence[int],
) -> list[StreamRun]:
    tokenizer = qwen3()
    output = chat_output(tokenizer, tokens)
    prompts = [prompt_ids(tokenizer, length) for length in prompt_tokens]
    runs = []
    for mode in modes:
        progress(f"{mode.label}: starting")
        with started(mode, setup) as target:
            asyncio.run(warm_up(target, output, prompts[0], mode.wire))
            for prompt in prompts:
                for size in chunk_sizes:
                    run_id = f"bench-{mode.name}-{len(prompt)}-{size}"
                    runs.append(measure(mode, target, run_id, output, prompt, size))
    return runs


class _Positioned(Protocol):
    position: int


P = TypeVar("P", bound=_Positioned)


def nearest(points: Sequence[P], position: int) -> P:
    return min(points, key=lambda point: abs(point.position - position))


def early_late(tokens: int) -> tuple[int, int]:
    """The positions the transports' claims compare: ~token 250 and the stream's end."""
    return min(256, tokens), tokens


def row(r: StreamRun, shown: Sequence[int]) -> list[str]:
    early, late = early_late(r.tokens)
    return [
        by_name(r.mode).label,
        str(r.chunk_size),
        str(r.prompt_tokens),
        f"{r.cpu_s:.2f}",
        *(
            f"{point.p50_ms:.2f} / {point.p99_ms:.2f}"
            for point in (nearest(r.latency, at) for at in shown)
        ),
        " / ".join(f"{nearest(r.bytes_per_chunk, at).mean:,.0f}" for at in (early, late)),
        f"{r.bytes_sent / 1e6:.1f} / {r.bytes_received / 1e6:.1f}",
        f"{100 * r.prompt_share:.0f}% + {100 * r.history_share:.0f}%",
        "-" if r.hit_ratio is None else f"{r.hit_ratio:.3f}",
        "-" if r.resends is None else str(r.resends),
    ]


def render(runs: Sequence[StreamRun]) -> str:
    """The main table, the cost-by-length table and the same-run ratios."""
    tokens = runs[0].tokens
    shown = sorted({min(256, tokens), min(1024, tokens), tokens})
    columns = [
        "mode",
        "chunk",
        "prompt",
        "server CPU s",
        *(f"p50 / p99 ms @{at}" for at in shown),
        "bytes/chunk @{} / @{}".format(*early_late(tokens)),
        "MB sent / recv",
        "prompt + history",
        "hits",
        "re-sent",
    ]
    title = (
        f"{tokens}-token qwen3 + hermes stream (reasoning, answer, tool calls); "
        "CPU and times are this machine's"
    )
    lengths = [point.tokens for point in runs[0].by_length if point.tokens >= shown[0]]
    chunk_costs = table(
        ["mode", "chunk", "prompt", *(f"{n} tok" for n in lengths)],
        [
            [by_name(r.mode).label, str(r.chunk_size), str(r.prompt_tokens)]
            + [
                f"{p.cpu_ms:.2f}" + ("" if p.redis_bytes is None else f" / {p.redis_bytes:,.0f}")
                for p in per_chunk(r)
                if p.tokens in lengths
            ]
            for r in runs
        ],
    )
    by_length = table(
        ["mode", "chunk", "prompt", *(f"{n} tok" for n in lengths)],
        [
            [by_name(r.mode).label, str(r.chunk_size), str(r.prompt_tokens)]
            + [
                f"{p.cpu_s:.3f} ({100 * (p.prompt_share + p.history_share):.0f}%)"
                for p in r.by_length
                if p.tokens in lengths
            ]
            for r in runs
        ],
    )
    return "\n".join(
        [
            title,
            "",
            table(columns, [row(r, shown) for r in runs]),
            "",
            "server CPU s of a stream's first N tokens (share of request bytes that re-send "
            "the prompt and history)",
            "",
            by_length,
            "",
            "a chunk's server CPU ms (and, with Redis, bytes written to Redis) over the chunks "
            "since the previous column's length",
            "",
            chunk_costs,
            "",
            *ratios(runs),
        ]
    )


def baseline_of(r: StreamRun, runs: Sequence[StreamRun]) -> StreamRun | None:
    """The baseline's run of the same chunk size and prompt (None for the baseline's own)."""
    for b in runs:
        if b.mode == BASELINE.name and (b.chunk_size, b.prompt_tokens) == (
            r.chunk_size,
            r.prompt_tokens,
        ):
            return None if b is r else b
    return None


def ratios(runs: Sequence[StreamRun]) -> list[str]:
    """Every mode against the baseline, same chunk size and prompt, then (on runs long
    enough to judge them) how a chunk's cost grows and the targets the transports aim at.

    A CPU total under the clock's resolution makes no ratio, so none is printed for it.
    """
    lines = [
        f"same-run ratios against {BASELINE.label} "
        "(total server CPU; p99 and bytes per chunk at the last token):"
    ]
    for r in runs:
        base = baseline_of(r, runs)
        if base is None:
            continue
        cpu = cpu_ratio(r, base)
        cpu_text = (
            f"CPU not compared (a total under {MEASURABLE_CPU_S:g} s)"
            if cpu is None
            else f"CPU x{cpu:.3g}"
        )
        p99 = r.latency[-1].p99_ms / base.latency[-1].p99_ms
        lines.append(
            f"  {by_name(r.mode).label}, chunk {r.chunk_size}, prompt {r.prompt_tokens}: "
            f"{cpu_text}, p99 x{p99:.3g}, bytes/chunk x{late_bytes(r) / late_bytes(base):.3g}"
        )
    growth = [
        f"{by_name(r.mode).label} (chunk {r.chunk_size}, prompt {r.prompt_tokens}) x{value:.3g}"
        for r in runs
        if r.tokens >= JUDGED_FROM and (value := chunk_growth(r, "cpu_ms")) is not None
    ]
    if growth:
        lines += [
            "",
            "a chunk's server CPU at the end / at ~1k (a full-state wire grows with the history "
            "it carries): " + ", ".join(growth),
        ]
    verdicts = claims(runs)
    if verdicts:
        lines += [
            "",
            "what the transports aim at, on this run (judged only on streams of "
            f"{JUDGED_FROM:,} tokens or more):",
        ]
        lines += [f"  {describe(v)}" for v in verdicts]
    return lines if len(lines) > 1 else []


def cpu_ratio(r: StreamRun, base: StreamRun) -> float | None:
    if min(r.cpu_s, base.cpu_s) < MEASURABLE_CPU_S:
        return None
    return r.cpu_s / base.cpu_s


def late_bytes(r: StreamRun) -> float:
    return r.bytes_per_chunk[-1].mean


def chunk_growth(r: StreamRun, cost: str) -> float | None:
    """A chunk's ``cost`` (``cpu_ms`` or ``redis_bytes``) at the stream's end over the
    same at ~1,024 tokens (None when either is not measured)."""
    rows = per_chunk(r)
    if not rows:
        return None
    early: float | None = getattr(nearest_tokens(rows, 1024), cost)
    late: float | None = getattr(rows[-1], cost)
    return None if early is None or late is None or early <= 0 else late / early


def nearest_tokens(rows: Sequence[PerChunk], tokens: int) -> PerChunk:
    return min(rows, key=lambda row: abs(row.tokens - tokens))


def flatness(r: StreamRun, base: StreamRun) -> float:
    """p50 per chunk at the stream's end over p50 at ~token 250 (``base`` unused)."""
    return r.latency[-1].p50_ms / nearest(r.latency, early_late(r.tokens)[0]).p50_ms


@dataclass(frozen=True, slots=True)
class Claim:
    mode: str
    what: str
    bound: float
    ratio: Callable[[StreamRun, StreamRun], float | None]  # (run, baseline's run)
    floor: str | None = None  # the mode whose same ratio bounds this one from below
    alone: bool = False  # judged on its own run: no baseline run is needed beside it


CLAIMS = (
    Claim("compact", "bytes per chunk at the end / cache on's", 1 / 50,
          lambda r, b: late_bytes(r) / late_bytes(b)),
    Claim("compact", "server CPU / cache on's", 0.6, cpu_ratio, "compact-floor"),
    Claim("websocket", "server CPU / cache on's", 1 / 5, cpu_ratio, "websocket-floor"),
    Claim("compact", "p50 at the end / p50 at ~256", 1.2, flatness),
    Claim("websocket", "p50 at the end / p50 at ~256", 1.2, flatness),
    *(
        claim
        for mode in ("redis-replicas", "compact-redis")
        for claim in (
            Claim(mode, "server CPU per chunk at the end / at ~1k", 1.5,
                  lambda r, b: chunk_growth(r, "cpu_ms"), alone=True),
            Claim(mode, "Redis bytes written per chunk at the end / at ~1k", 1.5,
                  lambda r, b: chunk_growth(r, "redis_bytes"), alone=True),
        )
    ),
)  # fmt: skip


# A target is judged only on a stream this long: shorter ones are dominated by start-up
# and by the few chunks each checkpoint averages.
JUDGED_FROM = 4096


def claims(runs: Sequence[StreamRun]) -> list[Verdict]:
    """Each claim on each run of its mode that has a baseline run beside it (or needs
    none)."""
    verdicts = []
    for claim in CLAIMS:
        for r in runs:
            base = baseline_of(r, runs)
            if r.mode != claim.mode or (base is None and not claim.alone):
                continue
            if r.tokens < JUDGED_FROM:  # a short stream's ratios say little
                continue
            base = base or r  # a claim judged alone reads its own run only
            value = claim.ratio(r, base)
            holds = None if value is None else value <= claim.bound
            which = (r.mode, r.chunk_size, r.prompt_tokens)
            floor = next(
                (
                    claim.ratio(f, base)
                    for f in runs
                    if f.mode == claim.floor and (f.chunk_size, f.prompt_tokens) == which[1:]
                ),
                None,
            )
            verdicts.append(Verdict(*which, claim.what, value, claim.bound, holds, floor))
    return verdicts


def describe(v: Verdict) -> str:
    def fraction(x: float) -> str:
        return f"1/{1 / x:.3g}" if x < 0.1 else f"{x:.3g}"

    value = "not measurable" if v.value is None else fraction(v.value)
    outcome = {True: "met", False: "missed", None: "not judged"}[v.holds]
    return (
        f"{by_name(v.mode).label}, chunk {v.chunk_size}, prompt {v.prompt_tokens}: "
        f"{v.claim} = {value} (at most {fraction(v.bound)}): {outcome}"
        + ("" if v.floor is None else f"; its echo floor alone: {fraction(v.floor)}")
    )


def draw(runs: Sequence[StreamRun], out: Path) -> list[Path]:
    """Per-chunk latency (smoothed, over its faint raw points) and bytes against
    position, log-log CPU against length, per mode."""
    latency: dict[str, dict[str, plots.Series]] = {}
    raw: dict[str, dict[str, plots.Series]] = {}
    wire: dict[str, dict[str, plots.Series]] = {}
    cpu: dict[str, dict[str, plots.Series]] = {}
    styles: dict[str, plots.Style] = {}
    for r in runs:
        panel = f"chunk size {r.chunk_size}, prompt {r.prompt_tokens} tokens"
        label = by_name(r.mode).label
        styles[label] = style(r.mode)
        latency.setdefault(panel, {})[label] = plots.rolling_median(r.positions, r.latencies_ms)
        raw.setdefault(panel, {})[label] = (r.positions, r.latencies_ms)
        wire.setdefault(panel, {})[label] = (
            [p.position for p in r.bytes_per_chunk],
            [p.mean for p in r.bytes_per_chunk],
        )
        cpu.setdefault(panel, {})[label] = (
            [p.tokens for p in r.by_length],
            [p.cpu_s for p in r.by_length],
        )
    title = f"{runs[0].tokens}-token stream, each mode on its own fresh processes"
    paths = [out / "stream-latency.png", out / "stream-cpu.png", out / "stream-bytes.png"]
    plots.lines(
        paths[0],
        f"{title}: per-chunk latency (line: rolling median of 1/32 of the chunks; "
        "dots: every chunk)",
        latency,
        styles=styles,
        raw=raw,
    )
    plots.lines(
        paths[2],
        f"{runs[0].tokens}-token stream: bytes per chunk, request + reply",
        wire,
        ylabel="bytes per chunk",
        loglog=True,
        styles=styles,
    )
    plots.lines(
        paths[1],
        f"{title}: total server CPU of the first N tokens",
        cpu,
        xlabel="stream length (tokens)",
        ylabel="server CPU (s)",
        loglog=True,
        styles=styles,
        floor=CPU_FLOOR,
    )
    return paths


# What ``--quick`` runs, in under a minute: the session cache against pure replay and
# the HTTP floor, on a stream long enough for replay's cost to show. Flags given beside
# it win; without it, the full run's defaults.
@dataclass(frozen=True, slots=True)
class Preset:
    tokens: int
    chunk_sizes: list[int]
    modes: list[str] | None  # None: every mode


QUICK = Preset(1024, [1], ["cache-on", "cache-off", "http-floor"])
FULL = Preset(4096, [1, 4], None)


def preset(args: argparse.Namespace) -> None:
    """Fill the stream flags not given from ``--quick``'s run or the full one."""
    chosen = QUICK if args.quick else FULL
    for flag in ("tokens", "chunk_sizes", "modes"):
        if getattr(args, flag) is None:
            setattr(args, flag, getattr(chosen, flag))


def main(args: argparse.Namespace, modes: Sequence[Mode], setup: Setup) -> int:
    runs = run(modes, setup, args.tokens, args.chunk_sizes, args.prompt_tokens)
    result = {"machine": machine(), "tokens": args.tokens, "runs": runs, "claims": claims(runs)}
    figures = draw(runs, args.out)
    write(args.out, "stream", result, render(runs), figures)
    return 0
