"""``bench load --py-spy PATH``: where the server's time goes under load, per mode.

py-spy (the bench extra's, ``.venv/bin/py-spy``) samples each server process of a mode
while its streams are measured, without pausing it (``--nonblocking``), and writes the
folded stacks beside the load report (``load-profile-MODE.txt``);
``load-profile-MODE.md`` sums them per function: a function's own share of the samples
(msgspec's native decode and encode, and a system call, show as their caller's own time)
and its share with what it calls. py-spy samples a running thread by wall time: a
process that waits on a lock or was preempted right after a system call that woke the
client (a loopback write) is counted there too, so compare shares between runs of one
box, not with the CPU the kernel counts.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.report import progress, table
from bench.servers import ROOT

# Functions listed in each summary, by their own share and by their share with callees.
TOP = 40


@contextlib.contextmanager
def sampled(py_spy: Path | None, pids: Sequence[int], out: Path, mode: str) -> Iterator[None]:
    """Sample ``pids`` with ``py_spy`` (if given) while the body runs; then write the
    folded stacks and their summary as ``load-profile-MODE.txt`` and ``.md``."""
    if py_spy is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    folded = out / f"load-profile-{mode}.txt"
    argv = [str(py_spy), "record", "--nonblocking", "--rate", "200", "--format", "raw"]
    recorders = [
        subprocess.Popen(
            [*argv, "--pid", str(pid), "--output", f"{folded}.{pid}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)  # py-spy writes what it has, then exits
        for recorder in recorders:
            recorder.wait(timeout=60)
    parts = [folded.with_name(f"{folded.name}.{pid}") for pid in pids]
    folded.write_text("".join(part.read_text() for part in parts if part.exists()))
    for part in parts:
        part.unlink(missing_ok=True)
    summary = folded.with_suffix(".md")
    summary.write_text(summarized(folded.read_text(), mode) + "\n")
    progress(f"profile: {folded}, {summary}")


def summarized(folded: str, mode: str) -> str:
    """Each function's own and inclusive share of the samples of folded stacks (a line
    ``frame;frame;... COUNT``, the innermost frame last)."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [_function(frame) for frame in stack.split(";")]
        own[frames[-1]] += samples
        for function in set(frames):
            inclusive[function] += samples
    if not total:
        return f"{mode}: no samples (is py-spy allowed to attach: ptrace_scope, root?)"

    def rows(counts: collections.Counter[str]) -> list[list[str]]:
        return [[f"{100 * n / total:.1f}%", name] for name, n in counts.most_common(TOP)]

    head = f"{mode}: {total} samples of the server while its streams were measured"
    return "\n\n".join(
        [
            head,
            table(["own", "function"], rows(own)),
            table(["with callees", "function"], rows(inclusive)),
        ]
    )


def _function(frame: str) -> str:
    """``name (path:line)`` as ``name (path)``, the path from the repository or the
    installed package on."""
    name, _, where = frame.partition(" (")
    if not where:
        return name
    path = where.rsplit(":", 1)[0].removeprefix(f"{ROOT}/").rpartition("site-packages/")[2]
    return f"{name} ({path})"
