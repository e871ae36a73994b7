"""``POST /v1/chat/completions/derender/batch`` and ``/v1/completions/derender/batch``:
a batch frame (app/batch.py) over HTTP, for a router that cannot hold a WebSocket.

Each entry is a chunk body of its route, answered as that route answers a POST with
``X-Derender-State: compact``: a parsed chat stream's first entry carries its context,
the next ones only their chunk and the previous reply's compact state; an entry no live
session continues gets its own ``stream_state_required`` error, and the client
re-sends that chunk in full. Each entry's reply names its stream, as on a WebSocket.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable

import msgspec
from msgspec import Raw, Struct
from starlette.responses import Response

from app.batch import answered, frame_entries
from app.body import Received, received, too_large
from app.errors import BadRequest
from app.failures import failure
from app.protocol import ErrorBody, encoder
from app.service import DerenderService
from app.socket_streams import SocketReply
from app.websocket import SocketError, named_stream

# An endpoint of a route: a request as received, to a response (app/endpoints.py).
Handler = Callable[[Received], Awaitable[Response]]

NOT_A_FRAME = (
    'a batch body is a JSON object {"batch": [chunk, ...]}, each chunk a streamed chunk '
    "body of the route (docs/transports.md)"
)


class _Answered(Struct):
    """A chunk's reply as its route encoded it, its parts kept as they are."""

    chunk: Raw
    stream_state: Raw


_answered = msgspec.json.Decoder(_Answered)
_error = msgspec.json.Decoder(ErrorBody)


class BatchEndpoint:
    """A route's batch POST: each entry through the route's own handler, in order."""

    def __init__(self, service: DerenderService, endpoint: str, handle: Handler) -> None:
        self.service = service
        self.endpoint = endpoint
        self.handle = handle

    async def __call__(self, body: bytes) -> Response:
        entries = frame_entries(body, self.service.settings)
        if entries is None:
            raise BadRequest(NOT_A_FRAME, "batch")
        return Response(await answered(entries, self._entry), media_type="application/json")

    async def _entry(self, body: bytes) -> bytes:
        """One entry's reply, counted and timed as a request of mode ``batch``."""
        started = time.perf_counter()
        try:
            limit = self.service.settings.max_request_bytes
            if len(body) > limit:
                raise too_large(limit)
            request = received(body, self.endpoint, None, compact=True)
            if not request.view.stream:  # an entry is a streamed chunk, said or not
                view = msgspec.structs.replace(request.view, stream=True)
                request = dataclasses.replace(request, view=view)
            response = await self.handle(request)
            status, content = response.status_code, bytes(response.body)
        except Exception as exc:
            error = failure(exc, self.service.metrics, self.endpoint, body)
            status, content = error.status, encoder.encode(error.body())
        # A chunk without a request_id (the server picks the reply's id) names none.
        request_id, index = named_stream(body) or (None, None)
        if status == 200:
            parts = _answered.decode(content)
            reply = encoder.encode(SocketReply(request_id, index, parts.chunk, parts.stream_state))
        else:
            error_info = _error.decode(content).error
            reply = encoder.encode(SocketError(request_id, index, error_info))
        elapsed = time.perf_counter() - started
        self.service.metrics.observe(self.endpoint, "batch", status, elapsed)
        return reply
