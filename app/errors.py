"""OpenAI-style errors, with the ``type`` strings vLLM uses.

Every failure a client can cause becomes one of these before any response is
written, so no traceback, repr or file path can reach the wire.
"""

from __future__ import annotations

import re

from starlette.responses import Response

from app.protocol import ErrorBody, ErrorInfo, encoder


class DerenderError(Exception):
    """An error answered as ``{"error": {...}}`` with its own status."""

    status = 400
    type = "BadRequestError"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def response(self) -> Response:
        body = ErrorBody(ErrorInfo(self.message, self.type, self.param, self.status))
        return Response(encoder.encode(body), self.status, media_type="application/json")


class BadRequest(DerenderError):
    """A request that is well formed but asks for something invalid (vLLM's handler 400)."""


class InvalidBody(DerenderError):
    """A body that fails decoding or type validation (vLLM's request-validation 400)."""

    type = "Bad Request"

    @classmethod
    def from_validation(cls, detail: str) -> InvalidBody:
        """Wrap a msgspec message; its ``$.a[0].b`` path becomes ``body.a.0.b``."""
        match = re.search(r" - at `\$(.*)`$", detail)
        param = None
        if match:
            path = re.sub(r"\[(\d+)\]", r".\1", match.group(1))
            param = "body" + path
        return cls(f"1 validation error:\n  {detail}", param)


class BodyTooLarge(DerenderError):
    status = 413
    type = "RequestEntityTooLarge"


class NotFound(DerenderError):
    status = 404
    type = "NotFoundError"


class InternalError(DerenderError):
    status = 500
    type = "InternalServerError"


class Unauthorized(DerenderError):
    status = 401
    type = "AuthenticationError"
