"""A WebSocket client that floods: ``python -m tests.support.ws_flood URL KIND MESSAGE``
writes
one kind of abuse on a raw socket as fast as the server reads it (reading the replies
to messages as fast as they come) and, whenever the server closes the connection,
opens another after a pause, until it is stopped. A process of its own, so the flood
never shares a GIL with the client that measures the server; it imports nothing but the
standard library, so that it starts at once.

Kinds: ``messages`` (pipelined copies of MESSAGE, a valid one, between bursts of tiny
invalid messages), ``pings`` (PING frames), ``fragments`` (a text message that never
ends: empty continuation frames, then one byte each).
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import struct
import sys
import threading
import time
from urllib.parse import urlsplit

TEXT, CONTINUATION, PING = 0x1, 0x0, 0x9
# Between a connection the server closed and the next: a flood, not a connection storm.
RECONNECT_PAUSE = 0.05


def frame(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    """One client frame (masked, as RFC 6455 requires of a client)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def payloads(kind: str, message: bytes) -> tuple[bytes, bytes]:
    """What a connection sends first, then over and over."""
    if kind == "messages":
        valid = frame(TEXT, message)
        invalid = frame(TEXT, b"{")
        return b"", (valid + invalid * 20) * 50
    if kind == "pings":
        return b"", frame(PING) * 4096
    if kind == "fragments":
        begun = frame(TEXT, b"{", fin=False)
        empty, one_byte = frame(CONTINUATION, fin=False), frame(CONTINUATION, b" ", fin=False)
        return begun, empty * 1024 + one_byte * 1024
    raise SystemExit(f"unknown flood kind {kind!r}")


def handshake(host: str, port: int, path: str) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        received = sock.recv(4096)
        if not received:
            raise ConnectionError("closed during the handshake")
        answer += received
    if not answer.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(answer.split(b"\r\n", 1)[0].decode())
    return sock


def drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while sock.recv(1 << 16):
            pass


def main() -> None:
    url, kind, message = sys.argv[1:4]
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    first, again = payloads(kind, message.encode())
    while True:
        try:
            sock = handshake(parts.hostname, parts.port, parts.path)
        except OSError:
            time.sleep(RECONNECT_PAUSE)
            continue
        if kind == "messages":
            threading.Thread(target=drain, args=(sock,), daemon=True).start()
        with contextlib.suppress(OSError):
            sock.sendall(first)
            while True:
                sock.sendall(again)
        sock.close()
        time.sleep(RECONNECT_PAUSE)


if __name__ == "__main__":
    main()
