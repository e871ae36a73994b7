"""Percentiles by output position, the shape every bench reports latency in.

A chunk's cost is summarised at checkpoints (powers of two up to the stream's end)
over the chunks that end in the last eighth before the checkpoint: wide enough for a
p99 at token 4,096 to rest on 512 one-token chunks, narrow enough to say "at ~4,000".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import msgspec


class AtPosition(msgspec.Struct):
    position: int
    p50_ms: float
    p99_ms: float
    chunks: int


def checkpoints(tokens: int, first: int = 16) -> list[int]:
    """Powers of two from ``first`` below ``tokens``, then ``tokens`` itself."""
    points = []
    point = first
    while point < tokens:
        points.append(point)
        point *= 2
    return [*points, tokens]


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (inclusive method; the value itself for one sample)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def window(positions: Sequence[int], values: Sequence[float], at: int) -> list[float]:
    """The values of the chunks that end in ``(at - at/8, at]``."""
    low = at - max(at // 8, 1)
    return [v for p, v in zip(positions, values, strict=True) if low < p <= at]


class MeanAt(msgspec.Struct):
    position: int
    mean: float
    chunks: int


def means_by_position(positions: Sequence[int], values: Sequence[float]) -> list[MeanAt]:
    """The mean per checkpoint, over the same windows as the percentiles."""
    rows = []
    for at in checkpoints(max(positions)):
        window_values = window(positions, values, at)
        if window_values:
            rows.append(MeanAt(at, statistics.fmean(window_values), len(window_values)))
    return rows


def by_position(positions: Sequence[int], latencies: Sequence[float]) -> list[AtPosition]:
    """p50 and p99 per checkpoint, in milliseconds, from per-chunk latencies in seconds."""
    rows = []
    for at in checkpoints(max(positions)):
        values = window(positions, latencies, at)
        if values:
            p50, p99 = percentile(values, 50), percentile(values, 99)
            rows.append(AtPosition(at, 1e3 * p50, 1e3 * p99, len(values)))
    return rows
