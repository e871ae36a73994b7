"""Shared fixtures: the bundled tokenizer is loaded once per test session; helpers
live in tests/support."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from app.tokens.tokenizer import Tokenizer
from tests.support.apps import AppFactory, build_app, built_apps, internal_errors
from tests.support.golden import SHARED_FOLDER
from tests.support.replies import fuzz_counts
from tests.support.tokenizers import bundled_tokenizer

# The suite claims no speed: a property's examples have no deadline unless a test sets
# one as a hang detector (hypothesis's default 200 ms fails on a loaded machine). Its
# examples are drawn from a seed fixed per test, so a run is repeatable: new examples are
# searched for on purpose (``--hypothesis-profile search``), not met by chance in CI.
# Loaded before the test modules build their settings, which take it as their default.
settings.register_profile("suite", deadline=None, derandomize=True)
settings.register_profile("search", deadline=None)
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    """The run's shared folder, made by the process that starts the run (a pytest-xdist
    worker inherits it) and removed when that process ends."""
    if hasattr(config, "workerinput"):
        return
    folder = tempfile.mkdtemp(prefix="derender-tests-")
    os.environ[SHARED_FOLDER] = folder
    config.add_cleanup(functools.partial(shutil.rmtree, folder, ignore_errors=True))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if fuzz_counts:
        tried = ", ".join(f"{count} {source}" for source, count in fuzz_counts.items())
        terminalreporter.write_line(f"fuzz: {sum(fuzz_counts.values())} bad inputs tried ({tried})")


@pytest.fixture
def no_internal_errors() -> Iterator[None]:
    """During the test, no app failed inside (a bug answered as a 500). Counted per app
    against the start, so an app another test made fail on purpose does not count."""
    before = {id(app): internal_errors(app) for app in built_apps}
    yield
    failed = [app for app in built_apps if internal_errors(app) > before.get(id(app), 0)]
    assert not failed, f"{len(failed)} app(s) answered internal errors; see the ERROR log"


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return bundled_tokenizer("qwen3")


@pytest.fixture(scope="session")
def make_app() -> AppFactory:
    """Build an app from command-line flags around the bundled Qwen3 tokenizer."""
    return functools.partial(build_app, "qwen3")
