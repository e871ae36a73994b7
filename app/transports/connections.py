"""uvicorn's HTTP connections, with slow-client limits and one send per response.

uvicorn bounds only the idle time between requests on a kept-alive connection: a
client that sends its headers or body a byte at a time holds its socket (and a
request's buffers) for as long as it likes, and any number of them can be open. The
protocol here gives every request a deadline for its headers and one for its body,
and refuses connections over a cap, so slow clients cost bounded sockets and time.

uvicorn also writes a response's head and its body with two sends: two system calls
and two TCP segments for every chunk's small reply. Here the head waits for the body
and they leave together (bench/README.md: about 5% of a chunk's server CPU).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _plain_response(status: bytes, message: str) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(message)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + message.encode()
    )


_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _OneSendResponse(asyncio.Transport):
    """What a request's response is written through: its head is held and goes out
    with the first body write, or when the response is abandoned (the connection
    closes). Only a HEAD response writes no body, so a HEAD request's is not held."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._started and data != _CONTINUE:
            self._started = True  # the first write past a 100 Continue: the head
            self._head = bytes(data)
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def close(self) -> None:
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


class _LimitedHttp(HttpToolsProtocol):
    """HTTP/1.1 (httptools) with header and body deadlines, a connection cap and one
    send per response."""

    header_timeout: float
    body_timeout: float
    max_connections: int
    websockets: Sized  # the open connections that are WebSockets: they have their own cap
    _deadline: asyncio.TimerHandle | None = None
    _headers_done = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) - len(self.websockets) > self.max_connections:
            message = f"over the server's {self.max_connections} connections; retry later"
            transport.write(_plain_response(b"503 Service Unavailable", message))
            transport.close()
            return
        self._arm(self.header_timeout)  # a connection that sends nothing is a slow header

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers_done = False
        self._arm(self.header_timeout)

    def on_headers_complete(self) -> None:
        earlier = self.cycle
        super().on_headers_complete()
        self._headers_done = True
        self._arm(self.body_timeout)
        cycle = self.cycle  # a new one, unless the request was an upgrade
        if cycle is not None and cycle is not earlier and self.scope["method"] != "HEAD":
            cycle.transport = _OneSendResponse(self.transport)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        """Headers late: a 408 and close. Body late: close; the request, waiting on its
        body, sees the client gone and answers nothing."""
        self._deadline = None
        if self.transport.is_closing():
            return
        if not self._headers_done:
            message = f"request headers not received within {self.header_timeout:g} s"
            self.transport.write(_plain_response(b"408 Request Timeout", message))
        self.transport.close()


def limited_http(
    header_timeout: float, body_timeout: float, max_connections: int, websockets: Sized
) -> type[HttpToolsProtocol]:
    """uvicorn's ``http`` protocol class with these limits; ``max_connections`` counts
    the open connections but ``websockets``."""
    return type(
        "LimitedHttp",
        (_LimitedHttp,),
        {
            "header_timeout": header_timeout,
            "body_timeout": body_timeout,
            "max_connections": max_connections,
            "websockets": websockets,
        },
    )
