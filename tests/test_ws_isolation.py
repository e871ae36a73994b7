"""WebSocket connections against a real server, over real sockets: one connection's
flood (pipelined messages, pings, a message that never ends) leaves /health and another
client's HTTP chunks answered in time, floods and late messages close their connection
(docs/transports.md), and idle WebSocket connections at their cap take nothing of
HTTP's."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from app.transports.client import DEMO_OUTPUT_IDS, DEMO_PROMPT_IDS
from tests.support.processes import ROOT, serving
from tests.support.ws_flood import CONTINUATION, PING, TEXT, frame, handshake

PARSED = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSED += ["--enable-auto-tool-choice"]
CHAT_PATH = "/v1/chat/completions/derender"
JSON = {"content-type": "application/json"}
FLOOD_SECONDS = 2.5
IDLE_SECONDS = 1.5
HEALTH_P99 = 0.1  # the acceptance bound: /health answers within it, floods or not
# ... or, on a machine so loaded that /health is slow without a flood too, within this
# many times its p99 measured then: a flood that starved it would cost seconds.
LOADED_HEALTH_FACTOR = 3
POLICY_VIOLATION = 1008
INVALID_DATA = 1007
REFUSED = "derender_ws_connections_refused_total"


def _address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _socket_url(base: str) -> str:
    return "ws" + base.removeprefix("http") + CHAT_PATH + "/ws"


def _chunk_message(request_id: str) -> bytes:
    """A message that is a whole stream: its context and its one chunk, finished."""
    choice = {"index": 0, "token_ids": list(DEMO_OUTPUT_IDS[:4]), "finish_reason": "stop"}
    return json.dumps(
        {
            "generate_chunk": {"request_id": request_id, "choices": [choice]},
            "chat_request": {"messages": [{"role": "user", "content": "Hi"}]},
            "prompt_token_ids": list(DEMO_PROMPT_IDS),
        }
    ).encode()


def _chunk_body(request_id: str) -> bytes:
    """The same over HTTP."""
    body = json.loads(_chunk_message(request_id))
    return json.dumps(body | {"stream": True}).encode()


def _measure(base: str, seconds: float) -> tuple[list[float], list[float]]:
    """Latencies of /health (a new connection each, as a balancer probes) and of HTTP
    chunks (one kept-alive connection, as a router sends them), taken in turn."""
    address = _address(base)
    chunks = http.client.HTTPConnection(*address, timeout=10)
    health: list[float] = []
    chunk: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        probe = http.client.HTTPConnection(*address, timeout=10)
        probe.request("GET", "/health")
        assert probe.getresponse().status == 200
        health.append(time.perf_counter() - started)
        probe.close()
        body = _chunk_body(f"probe-{len(chunk)}")
        started = time.perf_counter()
        chunks.request("POST", CHAT_PATH, body, JSON)
        reply = chunks.getresponse()
        assert reply.status == 200, reply.read()
        reply.read()
        chunk.append(time.perf_counter() - started)
    chunks.close()
    return health, chunk


def _idle(base: str) -> tuple[float, float]:
    """/health's p99 and the chunks' median with no flood."""
    health, chunks = _measure(base, IDLE_SECONDS)
    return _p99(health), statistics.median(chunks)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


@contextlib.contextmanager
def _flooding(base: str, kind: str) -> Iterator[None]:
    """A process flooding the WebSocket endpoint with ``kind`` (tests/support/ws_flood.py)."""
    message = _chunk_message("flood").decode()
    flood = subprocess.Popen(
        [sys.executable, "-m", "tests.support.ws_flood", _socket_url(base), kind, message],
        cwd=ROOT,
    )
    try:
        time.sleep(0.5)  # connected and flooding
        assert flood.poll() is None, "the flood client exited"
        yield
    finally:
        flood.terminate()
        flood.wait(timeout=30)


def _metric(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{name}(?:\{{{labels}\}})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_flooding_connection_leaves_health_and_other_clients_served() -> None:
    """Each flood runs while a client probes /health and sends its own chunks over HTTP;
    the idle figures are taken before and after each flood, so that what else loads the
    machine meanwhile weighs on both sides."""
    with serving(*PARSED) as base:
        _measure(base, 0.5)  # warm: the first requests of a process build its caches
        before = _idle(base)
        for kind in ("messages", "pings", "fragments"):
            with _flooding(base, kind):
                health, chunks = _measure(base, FLOOD_SECONDS)
            after = _idle(base)
            idle_health, idle_chunk = max(before[0], after[0]), max(before[1], after[1])
            bound = max(HEALTH_P99, LOADED_HEALTH_FACTOR * idle_health)
            assert _p99(health) < bound, (kind, _p99(health), idle_health)
            chunk = statistics.median(chunks)
            assert chunk < 2 * idle_chunk, (kind, chunk, idle_chunk)
            before = after
        metrics = httpx.get(base + "/metrics").text
    # Each flood reached the server: its messages were answered, its floods closed.
    socket_errors = 'endpoint="chat",mode="socket",status="400"'
    assert _metric(metrics, "derender_requests_total", socket_errors) > 100
    assert _metric(metrics, "derender_ws_closed_total", 'reason="ping_flood"') >= 1
    assert _metric(metrics, "derender_ws_closed_total", 'reason="fragment_flood"') >= 1
    assert _metric(metrics, "derender_ws_backpressure_total") >= 1


def _close_code(sock: socket.socket) -> int:
    """The code of the close frame the server ends with (read to the end of the stream:
    pongs may come before it)."""
    sock.settimeout(10)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while part := sock.recv(65536):
            received += part
    at = 0
    while at < len(received):  # server frames: unmasked, small
        opcode, size = received[at] & 0x0F, received[at + 1] & 0x7F
        if opcode == 0x8:
            code: int = struct.unpack("!H", received[at + 2 : at + 4])[0]
            return code
        at += 2 + size
    raise AssertionError(f"no close frame in {received!r}")


@pytest.fixture(scope="module")
def bounded() -> Iterator[str]:
    """A server with small bounds: 1 s to finish a message (and a body), 4 HTTP and 4
    WebSocket connections."""
    flags = ("--body-timeout", "1", "--max-connections", "4", "--ws-max-connections", "4")
    with serving(*PARSED, *flags) as base:
        yield base


def _websockets_open(base: str) -> float:
    return _metric(httpx.get(base + "/metrics").text, "derender_ws_connections")


def _until_no_websockets(base: str) -> None:
    """Wait for the server to have seen every closed WebSocket connection go."""
    deadline = time.monotonic() + 10
    while _websockets_open(base) > 0:
        assert time.monotonic() < deadline, "closed connections still counted"
        time.sleep(0.05)


def test_floods_and_unfinished_messages_close_their_connection(bounded: str) -> None:
    """RFC 6455 lets a server close on what breaks its policy (1008) and on text that is
    not UTF-8 (1007); each is counted, and a well-behaved connection beside them stays."""
    host, port = _address(bounded)
    floods = {
        "ping_flood": frame(PING) * 1000,
        "fragment_flood": frame(TEXT, b"{", fin=False) + frame(CONTINUATION, fin=False) * 2000,
        "message_timeout": frame(TEXT, b"{", fin=False),  # and nothing more
        "invalid_utf8": frame(TEXT, b'"\xff"'),
    }
    codes = {}
    with connect(_socket_url(bounded)) as bystander:
        for reason, flood in floods.items():
            with handshake(host, port, CHAT_PATH + "/ws") as sock:
                started = time.monotonic()
                sock.sendall(flood)
                codes[reason] = _close_code(sock)
                assert time.monotonic() - started < 10, reason
        bystander.send(_chunk_message("bystander").decode())
        assert "chunk" in json.loads(bystander.recv(timeout=10))
    assert codes == {
        "ping_flood": POLICY_VIOLATION,
        "fragment_flood": POLICY_VIOLATION,
        "message_timeout": POLICY_VIOLATION,
        "invalid_utf8": INVALID_DATA,
    }
    metrics = httpx.get(bounded + "/metrics").text
    for reason in codes:
        assert _metric(metrics, "derender_ws_closed_total", f'reason="{reason}"') == 1, reason


def test_idle_websockets_at_their_cap_take_nothing_of_http(bounded: str) -> None:
    url = _socket_url(bounded)
    _until_no_websockets(bounded)
    refused_before = _metric(httpx.get(bounded + "/metrics").text, REFUSED)
    with contextlib.ExitStack() as idle:
        for _ in range(4):
            idle.enter_context(connect(url))
        with pytest.raises(InvalidStatus) as refused:
            connect(url).close()
        assert refused.value.response.status_code == 503
        assert b"--ws-max-connections" in refused.value.response.body
        # HTTP keeps all of its own connections: four at once, each answered.
        clients = [http.client.HTTPConnection(*_address(bounded), timeout=10) for _ in range(4)]
        for number, client in enumerate(clients):
            client.request("GET", "/health")
            health = client.getresponse()
            health.read()
            assert health.status == 200
            client.request("POST", CHAT_PATH, _chunk_body(f"http-{number}"), JSON)
            reply = client.getresponse()
            assert reply.status == 200, reply.read()
            assert "chunk" in json.loads(reply.read())
        clients[0].request("GET", "/metrics")
        metrics = clients[0].getresponse().read().decode()
        for client in clients:
            client.close()
        assert _metric(metrics, "derender_ws_connections") == 4
        assert _metric(metrics, REFUSED) == refused_before + 1
    # Once they are gone, the server takes WebSocket connections again.
    _until_no_websockets(bounded)
    with connect(url) as again:
        again.send(_chunk_message("again").decode())
        assert "chunk" in json.loads(again.recv(timeout=10))
