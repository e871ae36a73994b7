"""Slow clients and amplifying requests against a real server, over real sockets:
bounded sockets and time, and /health answered meanwhile."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx

from tests.support.processes import serving

HEALTH_DEADLINE = 1.0  # detects a stalled event loop, not speed


def _address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _health_seconds(base: str) -> float:
    """One /health on a new connection, as a balancer probes. Not httpx.get: the client
    it builds per call (an SSL context, the CA bundle) costs ~80 ms on a loaded box."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection(*_address(base), timeout=10)
    try:
        connection.request("GET", "/health")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    return time.perf_counter() - started


@contextlib.contextmanager
def _sockets(base: str, count: int) -> Iterator[list[socket.socket]]:
    opened = [socket.create_connection(_address(base)) for _ in range(count)]
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def _answer_of(sock: socket.socket) -> bytes | None:
    """What the server sent before closing, or None while the socket is still open."""
    if not select.select([sock], [], [], 0)[0]:
        return None
    received = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(4096):
            received += chunk
    return received


def test_slowloris_sockets_get_a_408_after_the_header_timeout() -> None:
    """200 sockets that send their headers a byte at a time are answered 408 and closed
    after --header-timeout, while /health stays quick."""
    with serving("--header-timeout", "2") as base, _sockets(base, 200) as slow:
        for sock in slow:
            sock.sendall(b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answers: dict[int, bytes] = {}
        latencies = []
        deadline = time.monotonic() + 2 + 20
        while len(answers) < len(slow) and time.monotonic() < deadline:
            for i, sock in enumerate(slow):
                if i in answers:
                    continue
                answer = _answer_of(sock)
                if answer is None:
                    with contextlib.suppress(OSError):
                        sock.send(b"a")
                else:
                    answers[i] = answer
            latencies.append(_health_seconds(base))
            time.sleep(0.25)
        print(f"/health during 200 slow sockets: max {max(latencies) * 1000:.1f} ms, "
              f"median {sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms")  # fmt: skip
    assert len(answers) == 200
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers.values())
    assert max(latencies) < HEALTH_DEADLINE


def test_a_slow_body_is_cut_off_after_the_body_timeout() -> None:
    with serving("--body-timeout", "1") as base, _sockets(base, 1) as (sock,):
        sock.sendall(
            b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        deadline = time.monotonic() + 20
        while (answer := _answer_of(sock)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert answer == b""  # closed without a reply: the request never arrived whole
        assert _health_seconds(base) < HEALTH_DEADLINE


def test_connections_over_the_cap_are_refused_with_a_503() -> None:
    with serving("--max-connections", "20") as base:
        with _sockets(base, 25) as idle:
            time.sleep(0.5)
            refused = [a for a in map(_answer_of, idle) if a is not None]
            assert len(refused) == 5
            assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused)
        # Once they are gone, the server takes connections again.
        time.sleep(0.5)
        assert _health_seconds(base) < HEALTH_DEADLINE


def _amplifying_body() -> bytes:
    """16 choices of 16,384 one-token ids with their logprobs, token ids asked back:
    a 12 MB request whose response is three times larger."""
    entries = [{"token_id": 9707, "logprob": -0.5}] * 16384
    choices = [
        {
            "index": i,
            "finish_reason": "length",
            "token_ids": [9707] * 16384,
            "logprobs": {"content": entries},
        }
        for i in range(16)
    ]
    chat_request = {"messages": [], "logprobs": True, "return_token_ids": True}
    request = {
        "generate_response": {"request_id": "amp", "choices": choices},
        "chat_request": chat_request,
    }
    return json.dumps(request, separators=(",", ":")).encode()


def test_an_amplifying_one_shot_request_is_bounded_and_encoded_off_the_loop() -> None:
    body = _amplifying_body()
    headers = {"content-type": "application/json"}
    path = "/v1/chat/completions/derender"
    with serving("--max-response-bytes", str(64 << 20)) as roomy:
        replies: list[httpx.Response] = []
        sender = threading.Thread(
            target=lambda: replies.append(
                httpx.post(roomy + path, content=body, headers=headers, timeout=120)
            )
        )
        sender.start()
        latencies = []
        while sender.is_alive():
            latencies.append(_health_seconds(roomy))
            time.sleep(0.05)
        sender.join()
        (reply,) = replies
        size = len(reply.content) / 1e6
        print(f"{len(body) / 1e6:.1f} MB request, {size:.1f} MB response; /health "
              f"meanwhile: max {max(latencies) * 1000:.1f} ms over {len(latencies)}")  # fmt: skip
        assert reply.status_code == 200 and len(reply.json()["choices"]) == 16
        assert max(latencies) < HEALTH_DEADLINE
    with serving("--max-response-bytes", str(16 << 20)) as tight:
        reply = httpx.post(tight + path, content=body, headers=headers, timeout=120)
        assert reply.status_code == 400
        message = reply.json()["error"]["message"]
        assert "over the server limit of 16777216 bytes (--max-response-bytes)" in message


def _response(sock: socket.socket) -> tuple[bytes, bytes, bytes]:
    """One response read as a client reads it: what its first read gave (the head,
    and as much of the body as arrived with it), and the whole body."""
    first = sock.recv(1 << 16)
    head, _, body = first.partition(b"\r\n\r\n")
    length = re.search(rb"content-length: (\d+)", head)
    assert length is not None, first
    whole = body
    while len(whole) < int(length.group(1)):
        whole += sock.recv(1 << 16)
    return head, body, whole


def test_a_response_leaves_in_one_send() -> None:
    """uvicorn writes a response's head and its body with two sends; here they leave
    together, so a client's first read has the whole response (two sends often wake it
    with the head alone). A HEAD response, and one after a 100 Continue, still come."""
    chunk = {"request_id": "one-send", "choices": [{"index": 0, "token_ids": [9707]}]}
    body = json.dumps({"stream": True, "generate_chunk": chunk}).encode()
    post = (
        b"POST /v1/completions/derender HTTP/1.1\r\nHost: x\r\ncontent-type: application/json"
        b"\r\ncontent-length: %d\r\n" % len(body)
    )
    with serving() as base, _sockets(base, 1) as (sock,):
        for _ in range(200):
            sock.sendall(post + b"\r\n" + body)
            head, arrived, whole = _response(sock)
            assert head.startswith(b"HTTP/1.1 200 ") and arrived == whole
            assert json.loads(whole)["chunk"]["choices"][0]["text"] == "Hello"
        sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 200 ")
        sock.sendall(post + b"expect: 100-continue\r\n\r\n")
        assert sock.recv(1 << 16) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        head, arrived, whole = _response(sock)
        assert head.startswith(b"HTTP/1.1 200 ") and arrived == whole
