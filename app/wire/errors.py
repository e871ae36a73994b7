"""OpenAI-style errors, with the ``type`` strings vLLM uses.

Every failure a client can cause becomes one of these before any response is
written, so no traceback, repr or file path can reach the wire.

``type`` says who refused the request, as in vLLM 0.33.0 (whose golden transcripts
pin it): the HTTP layer, before any derender check ran, answers with the status's
reason phrase (``Bad Request`` for a body that does not fit the endpoint's schema: not
JSON, wrong types, or failing vLLM's field bounds and validators; ``Request Entity Too
Large``; ``Method Not Allowed``; ``Not Found`` for a path); a check on a decoded
request answers with the OpenAI SDK's exception name for the status
(``BadRequestError``, ``AuthenticationError``, ``NotFoundError``,
``UnprocessableEntityError``, ``InternalServerError``).
"""

from __future__ import annotations

from http import HTTPStatus

from starlette.responses import Response

from app.wire.protocol import ErrorBody, ErrorInfo, encoder


class DerenderError(Exception):
    """An error answered as ``{"error": {...}}`` with its own status."""

    status = 400
    type = "BadRequestError"
    code: int | str | None = None  # a stable name for the client to act on; else the status

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def response(self) -> Response:
        return Response(encoder.encode(self.body()), self.status, media_type="application/json")

    def body(self) -> ErrorBody:
        return ErrorBody(ErrorInfo(self.message, self.type, self.param, self.code or self.status))


class BadRequest(DerenderError):
    """A request that is well formed but asks for something invalid (vLLM's handler 400)."""


class InvalidParameter(BadRequest):
    """vLLM's VLLMValidationError, for the original request's fields: its text ends by
    naming the parameter and the value it refuses, e.g. ``... (parameter=tool_choice)``."""

    def __init__(self, message: str, param: str | None = None, value: object = None) -> None:
        named = [f"parameter={param}"] if param is not None else []
        if value is not None:
            named.append(f"value={value}")
        super().__init__(f"{message} ({', '.join(named)})" if named else message, param)


class InvalidBody(DerenderError):
    """A body that fails decoding or type validation (vLLM's request-validation 400)."""

    type = "Bad Request"


class BodyTooLarge(DerenderError):
    status = 413
    type = "Request Entity Too Large"


class RoutingError(DerenderError):
    """A request no route takes (unknown path, wrong method), typed like vLLM's
    HTTPException handler types it: by the status's reason phrase."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = HTTPStatus(status).phrase


class NotFound(DerenderError):
    status = 404
    type = "NotFoundError"


class InternalError(DerenderError):
    status = 500
    type = "InternalServerError"


class Unauthorized(DerenderError):
    status = 401
    type = "AuthenticationError"


class StateRequired(DerenderError):
    """A compact chunk no live session continues: the client re-sends it in full."""

    status = 409
    type = "Conflict"
    code = "stream_state_required"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"{reason}: re-send this chunk with its full stream_state, prompt_token_ids and "
            "chat_request (docs/transports.md).",
            "stream_state",
        )
