"""Slow-client limits on uvicorn's HTTP connections.

uvicorn bounds only the idle time between requests on a kept-alive connection: a
client that sends its headers or body a byte at a time holds its socket (and a
request's buffers) for as long as it likes, and any number of them can be open. The
protocol here gives every request a deadline for its headers and one for its body,
and refuses connections over a cap, so slow clients cost bounded sockets and time.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _plain_response(status: bytes, message: str) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(message)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + message.encode()
    )


class _LimitedHttp(HttpToolsProtocol):
    """HTTP/1.1 (httptools) with header and body deadlines and a connection cap."""

    header_timeout: float
    body_timeout: float
    max_connections: int
    _deadline: asyncio.TimerHandle | None = None
    _headers_done = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
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
        super().on_headers_complete()
        self._headers_done = True
        self._arm(self.body_timeout)

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
    header_timeout: float, body_timeout: float, max_connections: int
) -> type[HttpToolsProtocol]:
    """uvicorn's ``http`` protocol class with these limits."""
    return type(
        "LimitedHttp",
        (_LimitedHttp,),
        {
            "header_timeout": header_timeout,
            "body_timeout": body_timeout,
            "max_connections": max_connections,
        },
    )
