"""PNG figures read at a glance: one panel per chunk size (or path), one line per mode
(or parser), each series in its own colour and line style, one legend outside the
panels, and the cost axis saying which way is better."""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen first
from matplotlib.lines import Line2D

__all__ = ["LOWER_IS_BETTER", "Floor", "Series", "Style", "lines", "plt", "rolling_median"]

Series = tuple[Sequence[float], Sequence[float]]

# Said on every cost axis: a reader should not have to guess which way is good.
LOWER_IS_BETTER = "lower is better"


@dataclass(frozen=True, slots=True)
class Style:
    """How one series is drawn: a mode keeps its colour and line style across panels
    and figures; ``marker`` tells apart series of one mode (a prompt length)."""

    colour: str
    linestyle: str = "-"
    marker: str = "o"


@dataclass(frozen=True, slots=True)
class Floor:
    """Values below ``value`` cannot be measured (``why``): drawn on it, marked, noted."""

    value: float
    unit: str
    why: str


def rolling_median(xs: Sequence[float], ys: Sequence[float], points: int = 256) -> Series:
    """The median of a window of about 1/32 of the series (9 values at least), centred
    on each of about ``points`` positions: one chunk's latency is noise, a window's
    median is not."""
    half = max(4, len(ys) // 64)
    step = max(1, len(ys) // points)
    centres = range(0, len(ys), step)
    return (
        [xs[i] for i in centres],
        [statistics.median(ys[max(0, i - half) : i + half + 1]) for i in centres],
    )


def lines(
    path: Path,
    title: str,
    panels: Mapping[str, Mapping[str, Series]],
    xlabel: str = "output position (tokens)",
    ylabel: str = "latency (ms)",
    loglog: bool = False,
    styles: Mapping[str, Style] | None = None,
    floor: Floor | None = None,
    raw: Mapping[str, Mapping[str, Series]] | None = None,
) -> None:
    """Write a row of panels, each with one line per series and, from ``raw``, the
    points it was smoothed from (faint); every series is drawn (values under ``floor``
    on it, as open triangles) so none silently vanishes. ``ylabel`` is a cost: the
    axis says lower is better."""
    figure, axes = plt.subplots(
        1, len(panels), figsize=(6 * len(panels), 4.8), squeeze=False, sharey=True
    )
    clipped = False
    legend: dict[str, Line2D] = {}
    for ax, (panel, series) in zip(axes[0], panels.items(), strict=True):
        for order, (label, (xs, ys)) in enumerate(series.items()):
            style = styles[label] if styles is not None else Style(f"C{order % 10}")
            if raw is not None and label in raw.get(panel, {}):
                raw_xs, raw_ys = raw[panel][label]
                ax.scatter(raw_xs, raw_ys, s=3, color=style.colour, alpha=0.2, linewidths=0)
            shown = [max(y, floor.value) for y in ys] if floor else list(ys)
            (line,) = ax.plot(
                xs, shown, color=style.colour, linestyle=style.linestyle, linewidth=1.6,
                marker=style.marker if len(xs) <= 16 else None, markersize=3.5, label=label,
            )  # fmt: skip
            legend.setdefault(label, line)
            if floor is not None:
                under = [x for x, y in zip(xs, ys, strict=True) if y < floor.value]
                clipped = clipped or bool(under)
                # nested sizes, so series that all sit on the floor stay visible
                ax.plot(
                    under, [floor.value] * len(under), linestyle="none", marker="v",
                    markersize=12 - 2 * (order % 5), markerfacecolor="none",
                    color=style.colour,
                )  # fmt: skip
        ax.set_title(panel)
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        if loglog:
            ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(f"{ylabel}, {LOWER_IS_BETTER}")
    # one legend for every panel (a series keeps its style across them), outside them
    figure.legend(
        list(legend.values()), list(legend), loc="center left", bbox_to_anchor=(1.0, 0.5),
        fontsize=9, frameon=False,
    )  # fmt: skip
    # wrapped to the figure's width (about ten characters an inch), never cut off
    figure.suptitle(textwrap.fill(title, width=10 * 6 * len(panels)))
    bottom = 0.0
    if floor is not None and clipped:
        note = f"\u25bd: below {floor.value:g} {floor.unit} ({floor.why}), drawn at that floor"
        figure.text(0.5, 0.01, note, ha="center", fontsize=9)
        bottom = 0.05
    figure.tight_layout(rect=(0, bottom, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
