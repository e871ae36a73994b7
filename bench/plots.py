"""PNG figures: one panel per chunk size (or path), one line per mode (or parser)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen first

__all__ = ["Series", "lines", "plt", "rolling_median"]

Series = tuple[Sequence[float], Sequence[float]]


def rolling_median(xs: Sequence[float], ys: Sequence[float], points: int = 128) -> Series:
    """About ``points`` medians of consecutive runs: one chunk's latency is noise."""
    step = max(1, len(ys) // points)
    starts = range(0, len(ys) - step + 1, step)
    return [xs[i + step - 1] for i in starts], [statistics.median(ys[i : i + step]) for i in starts]


def lines(
    path: Path,
    title: str,
    panels: Mapping[str, Mapping[str, Series]],
    xlabel: str = "output position (tokens)",
    ylabel: str = "latency (ms)",
    loglog: bool = False,
) -> None:
    """Write a row of panels, each with one labelled line per series."""
    figure, axes = plt.subplots(
        1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False, sharey=True
    )
    for ax, (panel, series) in zip(axes[0], panels.items(), strict=True):
        for label, (xs, ys) in series.items():
            if not xs:  # nothing measurable (say, CPU below the clock tick)
                continue
            ax.plot(xs, ys, marker="o" if len(xs) <= 16 else None, markersize=3, label=label)
        ax.set_title(panel)
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        if loglog:
            ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
