"""Memory bounds in real bytes: a kept session's accounted size is what it costs, and
the cache's byte cap bounds the process's RSS against padded, adversarial bodies."""

from __future__ import annotations

import gc
import json
import re
import tracemalloc
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from websockets.sync.client import connect

from app.streams.state_json import HASH_STATE_BYTES
from tests.support.apps import AppFactory
from tests.support.asgi import InProcessClient
from tests.support.golden import load_cases, stream_body
from tests.support.processes import serving

MiB = 1024 * 1024
FLAGS = [
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "hermes",
    "--enable-auto-tool-choice",
    "--max-model-len",
    "40960",
]
CASE = next(c for c in load_cases("C1") if c["id"] == "C1.tool_single/chat_stream#t3")
JSON = {"content-type": "application/json"}


def _variant(
    prompt: int = 100, tools: int = 0, message: int = 100, padding: int = 0
) -> dict[str, Any]:
    """The golden stream with a prompt of ``prompt`` ids, ``tools`` tools, a user message
    of ``message`` characters and an ignored top-level field of ``padding`` characters."""
    chat_request = dict(CASE["chat_request"], messages=[{"role": "user", "content": "x" * message}])
    declared = CASE["chat_request"]["tools"]
    chat_request["tools"] = [declared[i % len(declared)] for i in range(tools)] or None
    ids = CASE["prompt_token_ids"] * (prompt // len(CASE["prompt_token_ids"]) + 1)
    return dict(CASE, chat_request=chat_request, prompt_token_ids=ids[:prompt], padding=padding)


def _first_chunk_body(variant: dict[str, Any], request_id: str, chunk: int = 0) -> dict[str, Any]:
    source = CASE["chunks"][chunk % len(CASE["chunks"])]
    choice = dict(source["choices"][0], finish_reason=None)
    body = stream_body(variant, dict(source, request_id=request_id, choices=[choice]), None)
    if variant["padding"]:
        body["padding"] = "p" * variant["padding"]
    return body


SHAPES = {
    "small": _variant(prompt=20, message=50),
    "long prompt": _variant(prompt=8000),
    "128 tools": _variant(tools=128),
    "2 MB of messages": _variant(message=2 * MiB),
    "4 MB ignored field": _variant(padding=4 * MiB),
}


# Every shape on its first chunk; the small-bodied ones also after a long history (the
# large-body shapes' cost is their first chunk's, and 30 chunks of them would take minutes).
MEASURED = [(shape, 1) for shape in SHAPES] + [
    (shape, 30) for shape in ("small", "long prompt", "128 tools")
]


@pytest.mark.parametrize(
    ("shape", "chunks"), MEASURED, ids=[f"{s}-{n} chunk(s)" for s, n in MEASURED]
)
def test_a_sessions_accounted_size_is_what_it_costs(
    make_app: AppFactory, shape: str, chunks: int
) -> None:
    """tracemalloc counts what dropping the kept sessions frees; the cache's byte count
    must be within 25% of it (a session that pinned its request body would be far off)."""
    app = make_app(FLAGS)
    client = InProcessClient(app)  # no portal thread allocating beside the measurement
    streams = 4
    tracemalloc.start()
    try:
        for stream in range(streams):
            state = None
            for chunk in range(chunks):
                body = _first_chunk_body(SHAPES[shape], f"{shape}-{stream}", chunk)
                body["stream_state"] = state
                reply = client.post(CASE["endpoint"], json.dumps(body).encode())
                assert reply.status_code == 200, reply.content
                state = reply.json()["stream_state"]
        del body, reply, state
        gc.collect()
        accounted = app.service.store.cache.bytes
        held = tracemalloc.get_traced_memory()[0]
        app.service.store.cache.clear()
        gc.collect()
        measured = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    print(f"{shape}, {chunks} chunk(s): accounted {accounted / streams:.0f} B/session, "
          f"measured {measured / streams:.0f} B/session")  # fmt: skip
    assert measured > 0
    assert abs(accounted / measured - 1) <= 0.25


def _socket_message(body: dict[str, Any], opens: bool) -> str:
    """A chunk body as a WebSocket message: whole when it opens its stream, else its
    generate chunk alone."""
    return json.dumps(body if opens else {"generate_chunk": body["generate_chunk"]})


# A chat request padded with a field derender ignores: what a held session must not copy.
SHAPES_HELD = {
    **SHAPES,
    "4 MB ignored chat_request field": dict(
        _variant(), chat_request=dict(_variant()["chat_request"], padding="p" * 4 * MiB)
    ),
}
# (flags, shape, chunks): parsed sessions as over HTTP, and plain streams (no parser),
# which hold their last request.
HELD = [(FLAGS, shape, 1) for shape in SHAPES_HELD] + [
    (FLAGS, shape, 30) for shape in ("small", "long prompt", "128 tools")
]
HELD += [([], shape, 1) for shape in ("long prompt", "2 MB of messages", "4 MB ignored field")]


@pytest.mark.parametrize(
    ("flags", "shape", "chunks"),
    HELD,
    ids=[f"{'parsed' if f else 'plain'} {s}-{n} chunk(s)" for f, s, n in HELD],
)
def test_a_connections_streams_count_what_they_cost(
    make_app: AppFactory, flags: list[str], shape: str, chunks: int
) -> None:
    """As above for streams a WebSocket connection holds: the cache counts them, within
    25% of what evicting them frees, and none keeps its first message or a copy of its
    chat request's padding alive."""
    app = make_app(flags)
    cache = app.service.store.cache
    streams = 16  # a held stream is a few KiB: more of them average the heap's noise out
    with TestClient(app) as client, client.websocket_connect(CASE["endpoint"] + "/ws") as socket:
        tracemalloc.start()
        try:
            for stream in range(streams):
                for chunk in range(chunks):
                    body = _first_chunk_body(SHAPES_HELD[shape], f"{shape}-{stream}", chunk)
                    socket.send_text(_socket_message(body, chunk == 0))
                    assert "chunk" in json.loads(socket.receive_text())
            del body
            gc.collect()
            accounted = cache.bytes
            held = tracemalloc.get_traced_memory()[0]
            cache.clear()
            gc.collect()
            # A stream's history keeps two running SHA-256s whose state OpenSSL holds
            # outside the memory tracemalloc sees.
            untraced = streams * 2 * HASH_STATE_BYTES
            measured = held - tracemalloc.get_traced_memory()[0] + untraced
        finally:
            tracemalloc.stop()
    print(f"{shape}, {chunks} chunk(s): accounted {accounted / streams:.0f} B/stream, "
          f"measured {measured / streams:.0f} B/stream")  # fmt: skip
    assert measured > 0 and len(cache) == 0
    assert abs(accounted / measured - 1) <= 0.25


def _metric(base: str, name: str) -> float:
    text = httpx.get(f"{base}/metrics").text
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


PADDED = 20  # 160 MiB of bodies whose padding must not stay


def test_rss_stays_within_the_cache_cap_under_padded_bodies() -> None:
    """A real server, cache capped at 256 MiB, fed 8 MiB first chunks that never finish:
    messages cost what is accounted, an ignored field costs nothing once answered, and
    past the cap sessions are evicted, so RSS grows by at most cap + 150 MiB."""
    cap = 256 * MiB
    with (
        serving(
            *FLAGS, "--stream-cache-max-bytes", str(cap), env={"PYTHONTRACEMALLOC": "1"}
        ) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):

        def send(variant: dict[str, Any], request_id: str) -> None:
            body = json.dumps(_first_chunk_body(variant, request_id)).encode()
            reply = client.post(CASE["endpoint"], content=body, headers=JSON)
            assert reply.status_code == 200, reply.text

        rss = lambda: _metric(base, "process_resident_memory_bytes")  # noqa: E731
        cached = lambda: _metric(base, "derender_cache_bytes")  # noqa: E731
        # RSS does not show what a session holds while the heap has room left over from
        # start-up; the Python objects alive, as tracemalloc counts them, do.
        traced = lambda: _metric(base, "derender_python_traced_bytes")  # noqa: E731
        send(_variant(), "warm-up")
        start, start_traced = rss(), traced()
        heavy = _variant(message=8 * MiB - 8192)
        for i in range(24):  # about 192 MiB: under the cap, nothing evicted
            send(heavy, f"heavy-{i}")
        measured, accounted = traced() - start_traced, cached()
        grown = rss() - start
        print(f"24 sessions of 8 MiB messages: {measured / MiB:.0f} MiB more traced "
              f"(RSS +{grown / MiB:.0f} MiB), accounted {accounted / MiB:.0f} MiB")  # fmt: skip
        assert abs(accounted / measured - 1) <= 0.25

        before_padding = cached()
        for i in range(PADDED):
            send(_variant(padding=8 * MiB), f"padded-{i}")
        print(f"{PADDED} sessions from 8 MiB bodies, ignored field: "
              f"RSS +{(rss() - start) / MiB:.0f} MiB, "
              f"accounted +{(cached() - before_padding) / MiB:.1f} MiB")  # fmt: skip
        assert cached() - before_padding < PADDED * 16384  # the 8 MiB are not kept

        for i in range(24, 48):  # 128 MiB past the cap: the oldest go
            send(heavy, f"heavy-{i}")
        peak = rss()
        print(f"24 more sessions of 8 MiB messages: RSS +{(peak - start) / MiB:.0f} MiB over "
              f"the start, accounted {cached() / MiB:.0f} MiB (cap {cap / MiB:.0f})")  # fmt: skip
        assert cached() <= cap
        assert _metric(base, "derender_cache_evictions_total") > 0
        assert peak - start < cap + 150 * MiB


def test_rss_stays_within_the_cache_cap_over_websocket() -> None:
    """The same bound for streams WebSocket connections hold: first messages padded with
    8 MiB, chat requests padded to near their limit, and plain (completion) streams of
    12 MiB first messages cost what they keep, a few KiB; long-prompt streams past the
    cap are evicted (the first one's next message gets stream_state_required), so RSS
    grows by at most cap + 150 MiB and the cache's gauge counts held streams."""
    cap = 256 * MiB
    flags = ["--stream-cache-max-bytes", str(cap), "--ws-max-streams", "1000"]
    # Without tracemalloc: its record of each of a long prompt's int objects would cost
    # more than the int. A pinned body would show in RSS (large buffers are mapped apart).
    with serving(*FLAGS, *flags) as base:
        socket_url = "ws" + base.removeprefix("http") + CASE["endpoint"] + "/ws"
        completions_url = socket_url.replace("/chat/completions/", "/completions/")
        with connect(socket_url) as chat, connect(completions_url) as plain:

            def send(socket: Any, body: dict[str, Any], opens: bool = True) -> dict[str, Any]:
                socket.send(_socket_message(body, opens))
                reply: dict[str, Any] = json.loads(socket.recv(timeout=60))
                return reply

            rss = lambda: _metric(base, "process_resident_memory_bytes")  # noqa: E731
            cached = lambda: _metric(base, "derender_cache_bytes")  # noqa: E731
            assert "chunk" in send(chat, _first_chunk_body(_variant(), "warm-up"))
            start = rss()

            padded = dict(_variant(padding=8 * MiB), chat_request=dict(
                _variant()["chat_request"], padding="p" * (8 * MiB - 16384)))  # fmt: skip
            for i in range(PADDED):
                assert "chunk" in send(chat, _first_chunk_body(padded, f"padded-{i}"))
            for i in range(PADDED):
                body = _first_chunk_body(_variant(), f"plain-{i}")
                del body["chat_request"]
                body["completion_request"] = {"prompt": "x" * 12 * MiB}
                assert "chunk" in send(plain, body)
            # A connection's loop holds its last message until the next one: a small one.
            assert "chunk" in send(chat, _first_chunk_body(_variant(), "small"))
            small = _first_chunk_body(_variant(), "small")
            del small["chat_request"]
            assert "chunk" in send(plain, dict(small, completion_request={"prompt": "x"}))
            kept, grown = cached(), rss() - start
            print(f"{PADDED} parsed streams from 16 MiB messages, {PADDED} plain ones from "
                  f"12 MiB: RSS +{grown / MiB:.0f} MiB, counted {kept / MiB:.1f} MiB")  # fmt: skip
            assert 0 < kept < 2 * PADDED * 65536  # counted, and none of the padding
            assert grown < 64 * MiB  # they pinned 560 MiB of messages before

            long = _variant(prompt=32000)  # about 1.2 MiB a session
            for i in range(300):  # about 360 MiB: past the cap, the oldest go
                assert "chunk" in send(chat, _first_chunk_body(long, f"long-{i}"))
            peak = rss()
            print(f"300 long-prompt streams: RSS +{(peak - start) / MiB:.0f} MiB over the "
                  f"start, accounted {cached() / MiB:.0f} MiB (cap {cap / MiB:.0f})")  # fmt: skip
            assert cap / 2 < cached() <= cap
            assert _metric(base, "derender_cache_evictions_total") > 0
            assert peak - start < cap + 150 * MiB
            evicted = send(chat, _first_chunk_body(long, "padded-0", 1), opens=False)
            assert evicted["error"]["code"] == "stream_state_required"
            assert "chunk" in send(chat, _first_chunk_body(long, "long-299", 1), opens=False)
