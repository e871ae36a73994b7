"""uvicorn's WebSocket connections (websockets' sans-I/O protocol), fair and bounded.

uvicorn parses all that one read brought before the app sees its first message: a read
of tiny frames is thousands of messages queued, pings answered or fragments kept in one
go, while ``/health`` and every other connection wait; a message left unfinished is
kept forever, a fragment at a time. Here a connection parses what it was sent a slice
at a time, a bounded amount per turn of the event loop, and only while the app has no
message of it waiting; the rest stays in the socket (reading is paused), so a client
that sends faster than it is served is slowed down, not buffered. The app gets one
message per turn of the loop. Control frames and fragments are bounded as RFC 6455
allows: past a bound the connection is closed with 1008 (policy violation).

WebSocket connections have a cap of their own, apart from HTTP's: idle sockets can
never take the connections ``/health`` and HTTP chunks need.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn._types import ASGIReceiveEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import CloseCode, Frame
from websockets.http11 import Request

from app.serving.metrics import Metrics

# Bytes parsed at once: at most 42 frames (a client's frame is 6 bytes at least). A slice
# that ends no frame (a large one arriving) doubles the next, up to what the turn has
# left, so a batch frame of 100 KiB is a dozen slices, not 400 of a microsecond or two
# each; the first slice after a frame ends is small again.
SLICE_BYTES = 256
# What one connection may parse in a turn of the event loop, unless a message is done
# first (the app then takes it, and the connection parses on when the app asks again):
# about what answering a chunk costs (a frame costs websockets some 6 us to parse).
TURN_BYTES = 64 * 1024
TURN_FRAMES = 16
# Frames of one message: 32 MiB in 32 KiB fragments; empty fragments are a flood.
MAX_FRAGMENTS = 1024
# PING and PONG frames: a burst, then so many a second (a keepalive is one in 20 s).
CONTROL_BURST = 32
CONTROL_RATE = 8.0

# Why the server closed a connection, by the close code websockets sent.
_FAILURES: dict[int, str] = {
    CloseCode.PROTOCOL_ERROR: "protocol_error",
    CloseCode.INVALID_DATA: "invalid_utf8",
    CloseCode.MESSAGE_TOO_BIG: "message_too_big",
}


class FairWebSocket(WebSocketsSansIOProtocol):
    """A WebSocket connection that parses at most a turn's worth at a time, answers
    pings at a bounded rate and bounds the fragments and time of a message."""

    max_connections: int
    message_timeout: float
    metrics: Metrics
    opened: ClassVar[set[FairWebSocket]]

    _unread = b""  # what the socket brought and the parser has not seen yet
    _read_to = 0
    _parsing: asyncio.Handle | None = None  # the rest of the parse, next turn
    _deadline: asyncio.TimerHandle | None = None  # for the message begun
    _fragments = 0
    _controls = float(CONTROL_BURST)
    _controls_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.opened.add(self)
        self.metrics.ws_connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self.opened.discard(self)
        self.metrics.ws_connections.dec()
        self._unread = b""
        for handle in (self._parsing, self._deadline):
            if handle is not None:
                handle.cancel()
        super().connection_lost(exc)

    def handle_connect(self, event: Request) -> None:
        if len(self.opened) <= self.max_connections:
            super().handle_connect(event)
            return
        self.metrics.ws_refused.inc()
        message = (
            f"over the server's {self.max_connections} WebSocket connections "
            "(--ws-max-connections); retry later"
        )
        self.handshake_initiated = self.handshake_complete = self.close_sent = True
        self.conn.send_response(self.conn.reject(HTTPStatus.SERVICE_UNAVAILABLE, message))
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.transport.close()

    # Reading: a slice at a time, a turn's worth at most, while the app waits.

    def data_received(self, data: bytes) -> None:
        # Reading pauses while bytes are unread: this joins one read to what is left of
        # the one before at most.
        self._unread = self._unread[self._read_to :] + data if self._unread else data
        self._read_to = 0
        if self._parsing is None:
            self._parse()
        elif not self.read_paused:  # resumed as the app closed: the parse due pauses it
            self._pause_reading()
        if self._unread and self.queue.qsize():
            self.metrics.ws_backpressure.inc()

    async def receive(self) -> ASGIReceiveEvent:
        if self.queue.qsize():  # the app takes a waiting message after a turn of the loop
            await asyncio.sleep(0)
        message = await self.queue.get()
        if self.queue.empty() and self._parsing is None:
            self._parse()
        return message

    def _parse(self) -> None:
        """Parse what is unread until the app has a message, or a turn's worth; pause
        reading while bytes are left, resume it once all is parsed and taken."""
        self._parsing = None
        parsed = frames = 0
        slice_bytes = SLICE_BYTES
        while self._unread and self.queue.empty():
            if parsed >= TURN_BYTES or frames >= TURN_FRAMES:
                self._parsing = self.loop.call_soon(self._parse)
                break
            piece = self._unread[self._read_to : self._read_to + slice_bytes]
            self._read_to += len(piece)
            if self._read_to == len(self._unread):
                self._unread, self._read_to = b"", 0
            parsed += len(piece)
            self.conn.receive_data(piece)
            if self.conn.parser_exc is not None:
                self._unread = b""
                self.handle_parser_exception()
                return
            ended = len(self.conn.events)
            frames += ended
            slice_bytes = SLICE_BYTES if ended else min(2 * slice_bytes, TURN_BYTES - parsed)
            self.handle_events()
        self._watch_message()
        if self._unread:
            if not self.read_paused:
                self._pause_reading()
        elif self.read_paused and self.queue.empty() and not self.transport.is_closing():
            self.read_paused = False
            self.transport.resume_reading()

    def _pause_reading(self) -> None:
        self.read_paused = True
        self.transport.pause_reading()

    # Bounds: control frames, fragments, time to finish a message.

    def handle_ping(self) -> None:
        if self._control_frame_allowed():
            super().handle_ping()

    def handle_pong(self, event: Frame) -> None:
        if self._control_frame_allowed():
            super().handle_pong(event)

    def handle_text(self, event: Frame) -> None:
        self._fragments = 1
        super().handle_text(event)

    def handle_bytes(self, event: Frame) -> None:
        self._fragments = 1
        super().handle_bytes(event)

    def handle_cont(self, event: Frame) -> None:
        self._fragments += 1
        if self._fragments > MAX_FRAGMENTS:
            self._close_for("fragment_flood", f"a message in more than {MAX_FRAGMENTS} frames")
            return
        super().handle_cont(event)

    def handle_parser_exception(self) -> None:
        close = self.conn.close_sent
        reason = _FAILURES.get(close.code, "other") if close is not None else "other"
        self.metrics.ws_closed.labels(reason).inc()
        super().handle_parser_exception()

    def _control_frame_allowed(self) -> bool:
        now = self.loop.time()
        self._controls = min(
            CONTROL_BURST, self._controls + (now - self._controls_at) * CONTROL_RATE
        )
        self._controls_at = now
        if self._controls >= 1:
            self._controls -= 1
            return True
        self._close_for("ping_flood", f"more than {CONTROL_RATE:g} pings or pongs a second")
        return False

    def _watch_message(self) -> None:
        """A message begun (a frame in part, or fragments without the last) must be
        finished within ``message_timeout``."""
        begun = self.conn.current_size is not None or bool(self.conn.reader.buffer)
        if begun and self._deadline is None:
            self._deadline = self.loop.call_later(self.message_timeout, self._message_late)
        elif not begun and self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _message_late(self) -> None:
        self._deadline = None
        if self.read_paused:  # the server is behind, not the client: wait on
            self._watch_message()
        else:
            late = f"a message not finished within {self.message_timeout:g} s"
            self._close_for("message_timeout", late)

    def _close_for(self, reason: str, why: str) -> None:
        """Close the connection with 1008 (policy violation) and count it."""
        if self.transport.is_closing() or self.conn.close_sent is not None:
            return
        self.metrics.ws_closed.labels(reason).inc()
        self.conn.fail(CloseCode.POLICY_VIOLATION, why)
        self._unread = b""
        super().handle_parser_exception()


def fair_websockets(
    max_connections: int, message_timeout: float, metrics: Metrics
) -> type[FairWebSocket]:
    """uvicorn's ``ws`` protocol class: these bounds, at most ``max_connections`` open
    (one more is answered 503), counted in ``metrics``."""
    attributes: dict[str, Any] = {
        "max_connections": max_connections,
        "message_timeout": message_timeout,
        "metrics": metrics,
        "opened": set(),
    }
    return type("FairWebSocket", (FairWebSocket,), attributes)
