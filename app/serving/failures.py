"""What an exception raised while answering a request becomes, on any transport.

The client's mistake is its own error (a 4xx that says what to fix); a request over
its CPU budget is logged and counted as such; anything else is ours: logged with its
traceback, counted, and answered as a plain 500, never disguised as the client's.
"""

from __future__ import annotations

import logging

from app.serving.budget import CpuBudgetExceeded
from app.serving.metrics import Metrics
from app.wire.body import request_id_of
from app.wire.errors import BadRequest, DerenderError, InternalError
from parsers.types import OutputRefused

logger = logging.getLogger("derender_server")


def failure(exc: Exception, metrics: Metrics, endpoint: str, body: bytes) -> DerenderError:
    """The error to answer for ``exc``, raised on ``endpoint`` while answering ``body``."""
    if isinstance(exc, CpuBudgetExceeded):
        metrics.cpu_budget_exceeded.labels(endpoint).inc()
        logger.warning("request %s on %s: %s", request_id_of(body), endpoint, exc.message)
        return exc
    if isinstance(exc, DerenderError):
        return exc
    if isinstance(exc, OutputRefused):
        return BadRequest(str(exc))
    metrics.internal_errors.labels(endpoint).inc()
    logger.error("internal error on %s, request %s", endpoint, request_id_of(body), exc_info=exc)
    return InternalError("internal error while derendering")
