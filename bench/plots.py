"""PNG figures: one panel per chunk size (or path), one line per mode (or parser)."""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen first

__all__ = ["Floor", "Series", "Style", "lines", "plt", "rolling_median"]

Series = tuple[Sequence[float], Sequence[float]]


@dataclass(frozen=True, slots=True)
class Style:
    """How one series is drawn: a mode keeps its colour across panels and figures."""

    colour: str
    linestyle: str = "-"


@dataclass(frozen=True, slots=True)
class Floor:
    """Values below ``value`` cannot be measured (``why``): drawn on it, marked, noted."""

    value: float
    unit: str
    why: str


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
    styles: Mapping[str, Style] | None = None,
    floor: Floor | None = None,
) -> None:
    """Write a row of panels, each with one labelled line per series; every series is
    drawn (values under ``floor`` on it, as open triangles) so none silently vanishes."""
    figure, axes = plt.subplots(
        1, len(panels), figsize=(6 * len(panels), 4.8), squeeze=False, sharey=True
    )
    clipped = False
    for ax, (panel, series) in zip(axes[0], panels.items(), strict=True):
        for order, (label, (xs, ys)) in enumerate(series.items()):
            style = styles[label] if styles is not None else None
            kwargs = {"color": style.colour, "linestyle": style.linestyle} if style else {}
            shown = [max(y, floor.value) for y in ys] if floor else list(ys)
            (line,) = ax.plot(
                xs, shown, marker="o" if len(xs) <= 16 else None, markersize=3, label=label,
                **kwargs,
            )  # fmt: skip
            if floor is not None:
                under = [x for x, y in zip(xs, ys, strict=True) if y < floor.value]
                clipped = clipped or bool(under)
                # nested sizes, so series that all sit on the floor stay visible
                ax.plot(
                    under, [floor.value] * len(under), linestyle="none", marker="v",
                    markersize=12 - 2 * (order % 5), markerfacecolor="none",
                    color=line.get_color(),
                )  # fmt: skip
        ax.set_title(panel)
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        if loglog:
            ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        if series:
            ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    # wrapped to the figure's width (about ten characters an inch), never cut off
    figure.suptitle(textwrap.fill(title, width=10 * 6 * len(panels)))
    bottom = 0.0
    if floor is not None and clipped:
        note = f"\u25bd: below {floor.value:g} {floor.unit} ({floor.why}), drawn at that floor"
        figure.text(0.5, 0.01, note, ha="center", fontsize=9)
        bottom = 0.05
    figure.tight_layout(rect=(0, bottom, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
