"""Shared fixtures: the bundled tokenizer is loaded once per test session."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from app.cli import parse_options
from app.server import DerenderApp, create_app
from app.tokenizer import Tokenizer, load_tokenizer

AppFactory = Callable[[Sequence[str]], DerenderApp]

# Bad inputs tried by the fuzz tests, by source; reported at the end of the run.
fuzz_counts: dict[str, int] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if fuzz_counts:
        tried = ", ".join(f"{count} {source}" for source, count in fuzz_counts.items())
        terminalreporter.write_line(f"fuzz: {sum(fuzz_counts.values())} bad inputs tried ({tried})")


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def make_app(tokenizer: Tokenizer) -> AppFactory:
    """Build an app from command-line flags around the session's tokenizer."""

    def build(flags: Sequence[str]) -> DerenderApp:
        return create_app(parse_options(list(flags)).settings, tokenizer)

    return build
