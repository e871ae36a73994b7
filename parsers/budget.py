"""Where the server's CPU budget reaches inside a parser step.

A chunk or a one-shot output can carry a whole output's tokens, so one parser step can
be long; the server's budget (app/serving/budget.py) must be able to stop it between tokens,
not only between steps. Parsers know nothing of the server: it installs its check
here, and a step reading many tokens iterates them through ``paced``, which asks the
check between slices. Without a server (a parser used alone) the check does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

# Tokens read between two checks: a check costs about a microsecond (the thread's CPU
# clock), a slice a few milliseconds at most.
SLICE = 1024


def _unbounded() -> None:
    """No server's budget: nothing to check."""


_check: Callable[[], None] = _unbounded


def install(check: Callable[[], None]) -> None:
    """Make ``check`` (raising once the running request's budget is spent) the one
    ``paced`` asks."""
    global _check
    _check = check


def paced(items: Sequence[T]) -> Iterator[T]:
    """``items`` one by one, the budget checked before each slice after the first."""
    for start in range(0, len(items), SLICE):
        if start:
            _check()
        yield from items[start : start + SLICE]
