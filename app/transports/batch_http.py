"""``POST /v1/chat/completions/derender/batch`` and ``/v1/completions/derender/batch``:
a batch frame (app/transports/batch.py) over HTTP, for a router that cannot hold a WebSocket.

Each entry is a chunk body of its route, answered as that route answers a POST with
``X-Derender-State: compact``: a parsed chat stream's first entry carries its context,
the next ones only their chunk and the previous reply's compact state; an entry no live
session continues gets its own ``stream_state_required`` error, and the client
re-sends that chunk in full. Each entry's reply names its stream, as on a WebSocket.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable

import msgspec
from msgspec import Raw, Struct
from starlette.responses import Response

from app.serving.failures import failure
from app.serving.service import DerenderService
from app.streams.compact import is_compact
from app.streams.compact_path import CompactChunks, CompactReply
from app.transports.batch import Answer, answered, frame_entries
from app.transports.socket_streams import SocketReply
from app.transports.websocket import SocketError, named_stream
from app.wire.body import Received, received, too_large
from app.wire.errors import BadRequest
from app.wire.protocol import ErrorBody

# An endpoint of a route: a request as received, to a response (app/transports/endpoints.py).
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


@dataclasses.dataclass(slots=True)
class _Hits:
    """The kept sessions a frame's entries continued, counted once the frame is done."""

    count: int = 0


def _entry_reply(replied: CompactReply) -> SocketReply:
    """A compact entry's reply, from its parts (never a response read back)."""
    key, state = replied.key, Raw(replied.stream_state)
    return SocketReply(*key, replied.chunk, state)


class BatchEndpoint:
    """A route's batch POST: each entry through the route's own handler, in order; with
    ``compact`` (a parsed chat route), an entry carrying a compact state is answered by
    it directly, its reply never a response to read back."""

    def __init__(
        self,
        service: DerenderService,
        endpoint: str,
        handle: Handler,
        compact: CompactChunks | None = None,
    ) -> None:
        self.service = service
        self.endpoint = endpoint
        self.handle = handle
        self.compact = compact

    async def __call__(self, body: bytes) -> Response:
        entries = frame_entries(body, self.service.settings)
        if entries is None:
            raise BadRequest(NOT_A_FRAME, "batch")
        hits = _Hits()
        metrics = self.service.metrics
        entry = functools.partial(self._entry, hits)
        reply = await answered(entries, entry, metrics, self.endpoint)
        if hits.count:  # one increment a frame, not a locked one an entry
            metrics.cache_hits.inc(hits.count)
        return Response(reply, media_type="application/json")

    def _entry(self, hits: _Hits, entry: Raw) -> Answer | Awaitable[Answer]:
        """One entry's reply and status, as a compact POST of its route answers it; a
        kept session's hit counted in ``hits``. The common entry (a compact chunk that
        continues its live session) is answered at once, in one decode and one lookup;
        any other is awaited. The entry is copied out of its frame only when it is read
        whole."""
        if self.compact is not None and len(entry) <= self.service.settings.max_request_bytes:
            try:
                replied = self.compact.continued(entry)
            except Exception as exc:
                return self._failed(entry, exc)
            if isinstance(replied, CompactReply):
                hits.count += 1
                return _entry_reply(replied), 200
            if replied is not None:
                return self._continued_later(hits, entry, replied)
        return self._answered(entry)

    async def _continued_later(
        self, hits: _Hits, entry: Raw, replied: Awaitable[CompactReply]
    ) -> Answer:
        """The common entry's reply when its chunk is derendered off the event loop (or
        its session goes to Redis too)."""
        try:
            reply = _entry_reply(await replied)
        except Exception as exc:
            return self._failed(entry, exc)
        hits.count += 1
        return reply, 200

    async def _answered(self, entry: Raw) -> Answer:
        """Any other entry's reply, as its route answers it."""
        try:
            limit = self.service.settings.max_request_bytes
            if len(entry) > limit:
                raise too_large(limit)
            body = bytes(entry)
            request = received(body, self.endpoint, None, compact=True)
            if self.compact is not None and is_compact(request.view.stream_state):
                return _entry_reply(await self.compact.replied(request)), 200
            if not request.view.stream:  # an entry is a streamed chunk, said or not
                view = msgspec.structs.replace(request.view, stream=True)
                request = dataclasses.replace(request, view=view)
            response = await self.handle(request)
        except Exception as exc:
            return self._failed(entry, exc)
        status, content = response.status_code, bytes(response.body)
        # A chunk without a request_id (the server picks the reply's id) names none.
        request_id, index = named_stream(body) or (None, None)
        if status == 200:
            parts = _answered.decode(content)
            return SocketReply(request_id, index, parts.chunk, parts.stream_state), status
        return SocketError(request_id, index, _error.decode(content).error), status

    def _failed(self, entry: Raw, exc: Exception) -> Answer:
        """The error reply of an entry refused or failed."""
        body = bytes(entry)
        error = failure(exc, self.service.metrics, self.endpoint, body)
        request_id, index = named_stream(body) or (None, None)
        return SocketError(request_id, index, error.body().error), error.status
