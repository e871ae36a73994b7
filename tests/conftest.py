"""Shared fixtures: the bundled tokenizer is loaded once per test session."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from starlette.applications import Starlette

from app.cli import parse_options
from app.server import create_app
from app.tokenizer import Tokenizer, load_tokenizer

AppFactory = Callable[[Sequence[str]], Starlette]


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def make_app(tokenizer: Tokenizer) -> AppFactory:
    """Build an app from command-line flags around the session's tokenizer."""

    def build(flags: Sequence[str]) -> Starlette:
        return create_app(parse_options(list(flags)).settings, tokenizer)

    return build
