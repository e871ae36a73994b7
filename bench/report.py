"""Progress lines while a bench runs, then its table and JSON under the output folder.

Tables are Markdown with padded columns: readable in a terminal and pasted into
bench/README.md as they are.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """Where the figures came from: absolute times only hold for this machine."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, first column left-aligned and the rest right-aligned."""
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * widths[0], *("-" * (width - 1) + ":" for width in widths[1:])]
    return "\n".join([line(columns), line(rule), *(line(row) for row in rows)])


def write(out: Path, name: str, result: Any, text: str, figures: Sequence[Path] = ()) -> None:
    """Print ``text`` and save it beside the JSON of ``result`` as NAME.md and NAME.json;
    the closing ``written:`` line also names the ``figures`` already saved."""
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(text + "\n")
    (out / f"{name}.json").write_bytes(msgspec.json.format(msgspec.json.encode(result)))
    written = [out / f"{name}.md", out / f"{name}.json", *figures]
    progress(f"written: {', '.join(str(path) for path in written)}")
