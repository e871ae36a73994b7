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
from typing import TypeVar, TypeVarTuple

from app.wire.errors import DerenderError
from parsers import budget as parser_budget

T = TypeVar("T")
Args = TypeVarTuple("Args")


class _Budget:
    """The budget of the request running in one thread: ``seconds`` to spend (None: no
    request runs within one), and the CPU clock reading it runs out at, once read."""

    __slots__ = ("deadline", "seconds")

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.seconds: float | None = None


class _Local(threading.local):
    """Each thread's one ``_Budget``, made at its first request and reset by each: a
    chunk sets two slots instead of storing a new object in the thread's dict."""

    def __init__(self) -> None:
        self.budget = _Budget()


_current = _Local()


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


def run_within(seconds: float, func: Callable[[*Args], T], *args: *Args) -> T:
    """Run ``func`` in this thread with ``seconds`` of CPU to spend (see ``check``).

    The clock is read first at the first check, not here: most requests (a chunk of a
    few tokens) never reach one, and reading the thread's CPU clock is a system call.
    What runs before the first check is one slice of work, which the slices bound.
    Positional arguments only: every hit's chunk pays for this call, and packing
    keywords would cost it a third more."""
    budget = _current.budget
    budget.deadline, budget.seconds = None, seconds
    try:
        return func(*args)
    finally:
        budget.seconds = None


def check() -> None:
    """Raise CpuBudgetExceeded once the running request has spent its budget."""
    budget = _current.budget
    seconds = budget.seconds
    if seconds is None:
        return
    deadline = budget.deadline
    if deadline is None:
        budget.deadline = time.thread_time() + seconds
    elif time.thread_time() > deadline:
        raise CpuBudgetExceeded(seconds)


parser_budget.install(check)
