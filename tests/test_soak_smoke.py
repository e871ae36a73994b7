"""The soak script runs (a few seconds, a few streams) and meets its own acceptance."""

from __future__ import annotations

import re

import pytest

from bench import soak


def test_soak_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--duration", "3", "--warmup", "1", "--streams", "12", "--ttl", "1", "--bad", "0.1"]
    assert soak.main([*flags, "--check"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| live sessions after TTL +\| 0 \|$", out, re.MULTILINE)
    assert re.search(r"^\| 5xx +\| 0 \|$", out, re.MULTILINE)
    assert re.search(r"^\| bad requests sent +\| [1-9]", out, re.MULTILINE)
