"""The benchmarks run (tiny sizes, no timing asserted), so they cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cache_bench, parsers_bench


def test_parsers_bench_smoke(tmp_path: Path) -> None:
    assert (
        parsers_bench.main(
            ["--early", "40", "--late", "120", "--window", "8", "--out", str(tmp_path)]
        )
        == 0
    )
    result = json.loads((tmp_path / "parsers_bench.json").read_text())
    assert [row["parser"] for row in result["rows"]] == list(parsers_bench.CONFIGS)
    assert all(row["early_us"] > 0 and row["late_us"] > 0 for row in result["rows"])


def test_cache_bench_smoke(tmp_path: Path) -> None:
    assert cache_bench.main(["--tokens", "40", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cache_bench.json").read_text())
    assert all(result[mode]["cpu_s"] >= 0 for mode in ("cache on", "cache off", "HTTP floor"))
