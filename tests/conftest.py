"""Shared fixtures: the bundled tokenizer is loaded once per test session."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

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


# Every app make_app built, so a suite can check none of them failed internally.
built_apps: list[DerenderApp] = []


def internal_errors(app: DerenderApp) -> float:
    """How many requests this app answered with a 500 of its own."""
    counter = app.service.metrics.internal_errors
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))


@pytest.fixture
def no_internal_errors() -> Iterator[None]:
    """During the test, no app failed inside (a bug answered as a 500). Counted per app
    against the start, so an app another test made fail on purpose does not count."""
    before = {id(app): internal_errors(app) for app in built_apps}
    yield
    failed = [app for app in built_apps if internal_errors(app) > before.get(id(app), 0)]
    assert not failed, f"{len(failed)} app(s) answered internal errors; see the ERROR log"


@functools.cache
def bundled_tokenizer(name: str) -> Tokenizer:
    """A bundled tokenizer (``qwen3``, ``deepseek``), loaded once per test session."""
    return load_tokenizer(name)


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return bundled_tokenizer("qwen3")


def build_app(model: str, flags: Sequence[str]) -> DerenderApp:
    """An app from command-line flags around a bundled tokenizer, checked after tests."""
    app = create_app(parse_options(list(flags)).settings, bundled_tokenizer(model))
    built_apps.append(app)
    return app


@pytest.fixture(scope="session")
def make_app() -> AppFactory:
    """Build an app from command-line flags around the bundled Qwen3 tokenizer."""
    return functools.partial(build_app, "qwen3")
