"""The soak script runs (a few seconds, a few streams) and meets its own acceptance."""

from __future__ import annotations

import pytest

from bench import soak


def test_soak_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--duration", "3", "--warmup", "1", "--streams", "12", "--ttl", "1", "--bad", "0.1"]
    assert soak.main([*flags, "--check"]) == 0
    out = capsys.readouterr().out
    assert "| live sessions after TTL      | 0 |" in out
    assert "| 5xx                          | 0 |" in out
