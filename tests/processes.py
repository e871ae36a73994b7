"""Real server processes for tests, each on a free port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def serving(*flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A real server process on a free port, with ``flags`` (and ``env`` added to the
    environment); yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--log-level", "warning", *flags],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "server exited during start-up"
            assert time.monotonic() < deadline, "server did not start in time"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
