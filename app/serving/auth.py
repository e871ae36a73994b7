"""The optional API key: ``Authorization: Bearer <key>`` on every route but ``/health``.

Checked in front of everything, the direct derender lane included, so no route can
be reached without it. The comparison takes the same time whatever the key sent.
"""

from __future__ import annotations

import hmac

from starlette.types import Receive, Scope, Send

from app.wire.errors import Unauthorized

OPEN_PATHS = frozenset({"/health"})


class ApiKeyGuard:
    def __init__(self, key: str) -> None:
        self._expected = f"Bearer {key}".encode()

    def allows(self, scope: Scope) -> bool:
        if scope["path"] in OPEN_PATHS:
            return True
        sent = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        return hmac.compare_digest(sent, self._expected)

    async def refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = Unauthorized(
            "Missing or incorrect API key: send the server's key as 'Authorization: Bearer <key>'."
        ).response()
        response.headers["www-authenticate"] = "Bearer"
        await response(scope, receive, send)
