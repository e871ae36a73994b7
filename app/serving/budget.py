"""A CPU budget per request, so no single request can hold a replica.

Parsers cost time linear in the text they read, but a request may still carry a lot of
it (a long one-shot output, a long history to replay, a chunk of many tokens). Work runs
in one thread per request, so the thread's own CPU clock measures exactly that request;
the long loops (replayed chunks, one-shot choices) check it between steps, and parsers
between slices of the tokens one step reads (parsers/budget.py), and stop the request
with a clear error once it is spent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from app.wire.errors import DerenderError
from parsers import budget as parser_budget

P = ParamSpec("P")
T = TypeVar("T")

_current = threading.local()


class CpuBudgetExceeded(DerenderError):
    """The request needed more CPU than ``--max-request-cpu-seconds`` allows."""

    status = 422
    type = "UnprocessableEntityError"

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"derendering this request needed more than {seconds:g} s of CPU, the server's "
            "--max-request-cpu-seconds; it was stopped and its stream session dropped. "
            "Send shorter outputs or histories, or raise the limit."
        )


def run_within(seconds: float, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``func`` in this thread with ``seconds`` of CPU to spend (see ``check``).

    The clock is read first at the first check, not here: most requests (a chunk of a
    few tokens) never reach one, and reading the thread's CPU clock is a system call.
    What runs before the first check is one slice of work, which the slices bound."""
    _current.budget = [None, seconds]
    try:
        return func(*args, **kwargs)
    finally:
        _current.budget = None


def check() -> None:
    """Raise CpuBudgetExceeded once the running request has spent its budget."""
    budget: list[float | None] | None = getattr(_current, "budget", None)
    if budget is None:
        return
    seconds = budget[1]
    assert seconds is not None
    deadline = budget[0]
    if deadline is None:
        budget[0] = time.thread_time() + seconds
    elif time.thread_time() > deadline:
        raise CpuBudgetExceeded(seconds)


parser_budget.install(check)
