"""The soak script runs (a few seconds, a few streams) and the server holds up under it."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.processes import ROOT


def test_soak_smoke() -> None:
    flags = ["--duration", "3", "--warmup", "1", "--streams", "12", "--ttl", "1", "--bad", "0.1"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", *flags, "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^\| live sessions after TTL +\| 0 \|$", out, re.MULTILINE)
    assert re.search(r"^\| 5xx +\| 0 \|$", out, re.MULTILINE)
    assert re.search(r"^\| bad requests sent +\| [1-9]", out, re.MULTILINE)
