"""In-process apps built from command-line flags, and the check that none of them
failed inside."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.serving.cli import parse_options
from app.serving.server import DerenderApp, create_app
from tests.support.tokenizers import bundled_tokenizer

AppFactory = Callable[[Sequence[str]], DerenderApp]

# Every app build_app built, so a suite can check none of them failed internally.
built_apps: list[DerenderApp] = []


def build_app(model: str, flags: Sequence[str]) -> DerenderApp:
    """An app from command-line flags around a bundled tokenizer, checked after tests."""
    app = create_app(parse_options(list(flags)).settings, bundled_tokenizer(model))
    built_apps.append(app)
    return app


def internal_errors(app: DerenderApp) -> float:
    """How many requests this app answered with a 500 of its own."""
    counter = app.service.metrics.internal_errors
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))
