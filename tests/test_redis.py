"""The Redis tier against real redis-server processes: restores, misses, faults.

Every test runs its own private Redis (nothing kept on disk), so faults can stop,
pause or starve it without touching anything else on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.streams.session import SessionSnapshot, StreamSession
from app.tokens.tokenizer import Tokenizer
from cache.redis_tier import (
    KEY_PREFIX,
    MAC_BYTES,
    SCHEMA_VERSION,
    CircuitBreaker,
    Envelope,
    Outcome,
    RedisTier,
    envelope_mac,
)
from parsers.families.hermes import HermesState
from parsers.stream import ChatStreamState
from tests.support.apps import AppFactory, build_app
from tests.support.golden import load_cases, stream_body, tokenizer_of
from tests.support.processes import RedisServer, redis_server, serving
from tests.support.streams import factory_for, options, stream

TIMEOUT_MS = 200  # well under the 2 s faults, well over a loaded machine's Redis round trip
# Replicas that share a Redis share the key of its snapshots' MAC.
SECRET = "test-redis-secret"
CONFIGS = ("C1", "C2", "C3", "C4", "C5", "C6")
ALL_STREAMS = [
    c
    for config in CONFIGS
    for c in load_cases(config)
    if c["kind"] == "chat_stream" and c["chunking"] == "r16"
]
SINGLE_LANE = [c for c in ALL_STREAMS if set(c["lanes"]) == {0}]


@pytest.fixture(scope="module")
def shared_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def _comparable(reply: httpx.Response) -> str:
    body = reply.json()
    if "chunk" in body:
        body["chunk"]["created"] = 0
    return json.dumps([reply.status_code, body])


def _metric(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


# ----------------------------------------------------------------------------- the tier itself


def test_a_snapshot_is_taken_once_and_only_by_the_state_it_continues(
    shared_redis: RedisServer,
) -> None:
    async def scenario() -> list[Any]:
        tier = RedisTier(
            shared_redis.url, secret=SECRET.encode(), ttl=60, timeout=1.0, max_snapshot_bytes=64
        )
        stream = ("tier-test", 0)
        seen: list[Any] = []
        try:
            seen.append(await tier.put(stream, b"fp", b"state", 3, b"snap"))
            seen.append(await tier.take(stream, b"other", b"state", 3))  # another key
            seen.append(await tier.take(stream, b"fp", b"state", 3))
            seen.append(await tier.take(stream, b"fp", b"state", 3))  # taken already
            await tier.put(stream, b"fp", b"state", 3, b"snap")
            seen.append(await tier.take(stream, b"fp", b"other state", 3))
            await tier.put(stream, b"fp", b"state", 3, b"snap")
            seen.append(await tier.take(stream, b"fp", b"state", 4))
            seen.append(await tier.put(stream, b"fp", b"state", 3, b"x" * 65))
            seen.append(await tier.take(stream, b"fp", b"state", 3))
        finally:
            await tier.close()
        return seen

    assert asyncio.run(scenario()) == [
        Outcome.WRITTEN,
        (None, Outcome.ABSENT),
        (b"snap", "hit"),
        (None, Outcome.ABSENT),
        (None, Outcome.HISTORY),
        (None, Outcome.HISTORY),
        Outcome.TOO_LARGE,
        (None, Outcome.ABSENT),
    ]


def test_a_snapshot_damaged_in_place_is_refused(
    shared_redis: RedisServer,
) -> None:
    client = shared_redis.client()

    async def scenario() -> list[Any]:
        tier = RedisTier(
            shared_redis.url,
            secret=SECRET.encode(),
            ttl=60,
            timeout=1.0,
            max_snapshot_bytes=1 << 20,
        )
        stream = ("damaged", 0)
        seen: list[Any] = []
        try:
            for offset in (0, -3):  # the envelope's header, the snapshot's last bytes
                await tier.put(stream, b"fp", b"state", 1, b"a snapshot of some length")
                (key,) = client.keys(KEY_PREFIX + "*")
                length = client.strlen(key)
                client.setrange(key, offset % length, b"\xff\xfe")
                seen.append(await tier.take(stream, b"fp", b"state", 1))
        finally:
            await tier.close()
            client.flushdb()
        return seen

    assert asyncio.run(scenario()) == [(None, Outcome.FORGED), (None, Outcome.FORGED)]


def test_the_breaker_stops_asking_a_dead_redis_and_tries_again_after_the_cooldown() -> None:
    now = [0.0]
    server = RedisServer()  # not started yet: its port refuses connections

    async def scenario() -> list[Any]:
        breaker = CircuitBreaker(threshold=2, cooldown=5.0, clock=lambda: now[0])
        tier = RedisTier(
            server.url,
            secret=SECRET.encode(),
            ttl=60,
            timeout=TIMEOUT_MS / 1000,
            max_snapshot_bytes=1024,
            breaker=breaker,
        )
        stream = ("breaker", 0)
        seen: list[Any] = []
        try:
            seen.append(await tier.take(stream, b"fp", b"s", 1))
            seen.append(await tier.put(stream, b"fp", b"s", 1, b"snap"))
            seen.append((await tier.take(stream, b"fp", b"s", 1), breaker.open))
            server.start()
            seen.append(await tier.take(stream, b"fp", b"s", 1))  # still cooling down
            now[0] = 6.0
            seen.append((await tier.put(stream, b"fp", b"s", 1, b"snap"), breaker.open))
            seen.append(await tier.take(stream, b"fp", b"s", 1))
        finally:
            await tier.close()
            server.stop()
        return seen

    assert asyncio.run(scenario()) == [
        (None, Outcome.ERROR),
        Outcome.ERROR,
        ((None, Outcome.BREAKER_OPEN), True),
        (None, Outcome.BREAKER_OPEN),
        (Outcome.WRITTEN, False),
        (b"snap", "hit"),
    ]


# ----------------------------------------------------------------------------- replicas


@contextlib.contextmanager
def replicas(make_app: AppFactory, flags: list[str], url: str) -> Iterator[list[TestClient]]:
    """Two in-process replicas sharing ``url`` and a cache-off server, all with ``flags``."""
    with contextlib.ExitStack() as stack:
        clients = [
            stack.enter_context(
                TestClient(
                    make_app(
                        [
                            *flags,
                            "--redis-url",
                            url,
                            "--redis-secret",
                            SECRET,
                            "--redis-timeout-ms",
                            "1000",
                        ]
                    )
                )
            )
            for _ in range(2)
        ]
        clients.append(
            stack.enter_context(TestClient(make_app([*flags, "--stream-cache-size", "0"])))
        )
        yield clients


def alternate(
    clients: list[TestClient], case: dict[str, Any], chunks: list[dict[str, Any]]
) -> list[tuple[int, str]]:
    """Send a stream's chunks to the two replicas in turn; each reply must equal the
    cache-off server's. Returns each parsed chunk's lane and x-derender-cache header."""
    *pair, plain = clients
    turn = itertools.cycle(pair)
    states: dict[int, Any] = {}
    sources = []
    lanes = case["lanes"] if len(case["lanes"]) == len(chunks) else [0] * len(chunks)
    for chunk, lane in zip(chunks, lanes, strict=True):
        body = stream_body(case, chunk, states.get(lane))
        reply = next(turn).post(case["endpoint"], json=body)
        assert _comparable(reply) == _comparable(plain.post(case["endpoint"], json=body))
        states[lane] = reply.json()["stream_state"]
        if chunk["choices"]:
            sources.append((lane, reply.headers["x-derender-cache"]))
    return sources


# The DeepSeek and gpt-oss families' parsed configurations (every other stream: the
# parsers, not the scenarios, are what differs from the Qwen ones above).
OTHER_FAMILY_STREAMS = [
    c
    for config in ("D1", "D2", "D3", "D4", "D5", "G1")
    for c in load_cases(config)[::2]
    if c["kind"] == "chat_stream" and c["chunking"] == "r16"
]


def test_round_robin_replicas_restore_from_redis_on_every_configuration(
    shared_redis: RedisServer,
) -> None:
    restored = after_first = 0
    for config in (*CONFIGS, "D1", "D2", "D3", "D4", "D5", "G1"):
        cases = [c for c in (*ALL_STREAMS, *OTHER_FAMILY_STREAMS) if c["config"] == config]
        make_app = functools.partial(build_app, tokenizer_of(cases[0]))
        with replicas(make_app, list(cases[0]["server_flags"]), shared_redis.url) as clients:
            for case in cases:
                lanes_seen: set[int] = set()
                for lane, source in alternate(clients, case, case["chunks"]):
                    if lane in lanes_seen:
                        after_first += 1
                        restored += source == "redis"
                    lanes_seen.add(lane)
    assert after_first > 1000
    assert restored / after_first >= 0.9, (restored, after_first)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=st.sampled_from(SINGLE_LANE), cuts=st.lists(st.integers(0, 400), max_size=40))
def test_any_chunking_through_round_robin_replicas_is_byte_identical(
    make_app: AppFactory, shared_redis: RedisServer, case: dict[str, Any], cuts: list[int]
) -> None:
    ids = [t for chunk in case["chunks"] for c in chunk["choices"] for t in c["token_ids"] or ()]
    last = next(c["choices"][0] for c in reversed(case["chunks"]) if c["choices"])
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    chunks = [
        {
            "request_id": case["chunks"][0]["request_id"] + f"-{len(bounds)}",
            "choices": [{"index": 0, "token_ids": ids[a:b], "finish_reason": None}],
        }
        for a, b in itertools.pairwise(bounds)
        if b > a
    ]
    chunks[-1]["choices"][0].update(
        finish_reason=last["finish_reason"], stop_reason=last.get("stop_reason")
    )
    with replicas(make_app, list(case["server_flags"]), shared_redis.url) as clients:
        sources = [source for _, source in alternate(clients, case, chunks)]
    assert sources[1:] == ["redis"] * (len(sources) - 1)


def test_two_processes_behind_round_robin_restore_from_redis(shared_redis: RedisServer) -> None:
    # Every third C1 stream: real processes and sockets are what this adds to the
    # in-process test over every configuration above.
    cases = [c for c in ALL_STREAMS if c["config"] == "C1"][::3]
    flags = list(cases[0]["server_flags"])
    with (
        serving(*flags, "--redis-url", shared_redis.url, "--redis-secret", SECRET) as first,
        serving(*flags, "--redis-url", shared_redis.url, "--redis-secret", SECRET) as second,
        serving(*flags, "--stream-cache-size", "0") as plain,
        httpx.Client(timeout=60) as client,
    ):
        chunks_after_first = 0
        for case in cases:
            turn = itertools.cycle((first, second))
            states: dict[int, Any] = {}
            for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
                body = stream_body(case, chunk, states.get(lane))
                reply = client.post(next(turn) + case["endpoint"], json=body)
                expected = client.post(plain + case["endpoint"], json=body)
                assert _comparable(reply) == _comparable(expected)
                chunks_after_first += lane in states
                states[lane] = reply.json()["stream_state"]
        restored = sum(
            _metric(client.get(base + "/metrics").text, "derender_redis_hits_total")
            for base in (first, second)
        )
    assert restored / chunks_after_first >= 0.9, (restored, chunks_after_first)


# ----------------------------------------------------------------------------- faults

FAULT_CASE = max(SINGLE_LANE, key=lambda c: len(c["chunks"]))
# A chunk may wait on two Redis calls (take, then put), each bounded by the timeout;
# the margin is for the replay and the test client. Faults last far longer.
CHUNK_BOUND = 2 * TIMEOUT_MS / 1000 + 0.5
FAULT_SECONDS = 2.0
COOLDOWN_SECONDS = 2.1  # the server's breaker cool-down is 2 s


def _fault_stream(
    make_app: AppFactory, server: RedisServer, faults: dict[int, Callable[[RedisServer], None]]
) -> tuple[list[str], list[float], str]:
    """Stream FAULT_CASE through two replicas, calling ``faults[i](server)`` before
    chunk i; every reply must equal the cache-off server's and none may be a 5xx."""
    case = FAULT_CASE
    flags = [
        *case["server_flags"],
        "--redis-url",
        server.url,
        "--redis-secret",
        SECRET,
        "--redis-timeout-ms",
        str(TIMEOUT_MS),
    ]
    with contextlib.ExitStack() as stack:
        pair = [stack.enter_context(TestClient(make_app(flags))) for _ in range(2)]
        plain = stack.enter_context(
            TestClient(make_app([*case["server_flags"], "--stream-cache-size", "0"]))
        )
        state = None
        sources, seconds = [], []
        for i, chunk in enumerate(case["chunks"]):
            if i in faults:
                faults[i](server)
            body = stream_body(case, chunk, state)
            started = time.monotonic()
            reply = pair[i % 2].post(case["endpoint"], json=body)
            seconds.append(time.monotonic() - started)
            assert reply.status_code < 500
            assert _comparable(reply) == _comparable(plain.post(case["endpoint"], json=body))
            state = reply.json()["stream_state"]
            sources.append(reply.headers["x-derender-cache"])
        metrics = "\n".join(client.get("/metrics").text for client in pair)
    return sources, seconds, metrics


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def test_redis_stopped_and_restarted_mid_stream(
    make_app: AppFactory, private_redis: RedisServer
) -> None:
    def restart(server: RedisServer) -> None:
        server.start()
        time.sleep(COOLDOWN_SECONDS)  # the breaker lets a trial call through

    stop = RedisServer.stop
    sources, seconds, metrics = _fault_stream(make_app, private_redis, {4: stop, 10: restart})
    assert sources[4:10] == ["miss"] * 6 and _metric(metrics, "derender_redis_errors_total") >= 1
    assert sources[11:] == ["redis"] * len(sources[11:])  # chunk 10 replays, then restores
    assert max(seconds[4:10]) < CHUNK_BOUND


def _client_pause(server: RedisServer) -> None:
    server.client().execute_command("CLIENT", "PAUSE", int(FAULT_SECONDS * 1000), "ALL")


def _debug_sleep(server: RedisServer) -> None:
    command = ("DEBUG", "SLEEP", FAULT_SECONDS)
    threading.Thread(target=server.client().execute_command, args=command).start()
    time.sleep(0.1)  # the sleep has begun


@pytest.mark.parametrize("block", [_client_pause, _debug_sleep], ids=["pause", "sleep"])
def test_redis_blocked_longer_than_the_timeout(
    make_app: AppFactory, private_redis: RedisServer, block: Callable[[RedisServer], None]
) -> None:
    sources, seconds, metrics = _fault_stream(make_app, private_redis, {4: block})
    assert sources[4] == "miss" and _metric(metrics, "derender_redis_errors_total") >= 1
    assert max(seconds[4:]) < CHUNK_BOUND


def test_a_tiny_maxmemory_that_evicts_every_snapshot(
    make_app: AppFactory, private_redis: RedisServer
) -> None:
    def starve(server: RedisServer) -> None:
        client = server.client()
        client.config_set("maxmemory-policy", "allkeys-lru")
        client.config_set("maxmemory", 1)

    sources, _, _ = _fault_stream(make_app, private_redis, {4: starve})
    assert sources[4:] and "redis" not in sources[5:]


def test_a_snapshot_corrupted_in_place(make_app: AppFactory, private_redis: RedisServer) -> None:
    def corrupt(server: RedisServer) -> None:
        client = server.client()
        (key,) = client.keys(KEY_PREFIX + "*")
        client.setrange(key, client.strlen(key) - 4, b"\x00\x01")

    sources, _, metrics = _fault_stream(make_app, private_redis, {4: corrupt})
    assert sources[4] == "miss" and sources[5] == "redis"
    assert 'derender_redis_misses_total{reason="forged"} 1.0' in metrics
    assert 'derender_redis_rejected_total{reason="forged"} 1.0' in metrics


# ----------------------------------------------------------------------------- snapshot size

# A hermes turn of many calls: the parser keeps each call it is done with, which a
# snapshot leaves out (only their count is read again).
HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>\n'
)
HERMES_TURN = "<think>\nA short thought.\n</think>\n\n" + HERMES_CALL * 300


def test_a_snapshot_does_not_grow_with_the_stream_and_restores_identically(
    tokenizer: Tokenizer,
) -> None:
    factory = factory_for(tokenizer, "hermes", "qwen3")
    ids = tokenizer.encode(HERMES_TURN)
    assert len(ids) > 4000
    chunks = [ids[i : i + 4] for i in range(0, len(ids), 4)]
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    sizes = []
    for i, chunk in enumerate(chunks):
        session.feed(chunk, chunk, None)
        if i + 1 in (250, len(chunks) - 1):
            sizes.append(len(session.snapshot()))
    assert sizes[1] <= 1.5 * sizes[0], sizes
    # Restored in between and at the end, the stream goes on as if it had never been
    # snapshotted (the calls' indices and ids included).
    expected = stream(tokenizer, factory, options(), chunks)
    for at in (len(chunks) // 3, len(chunks) - 1):
        assert stream(tokenizer, factory, options(), chunks, restore_at=at) == expected


def test_a_snapshot_whose_counts_do_not_fit_the_history_is_refused(
    tokenizer: Tokenizer,
) -> None:
    factory = factory_for(tokenizer, "hermes", "qwen3")
    ids = tokenizer.encode(HERMES_TURN)[:200]
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    session.feed(ids, ids, None)
    live = session.parser.state.tools
    assert isinstance(live, HermesState) and live.done_regions > 0
    saved = StreamSession.load_snapshot(session.snapshot())
    assert saved is not None and isinstance(saved.parser.tools, HermesState)
    assert len(saved.parser.tools.regions) == len(live.regions) - live.done_regions  # left out
    assert not msgspec.structs.replace(saved.parser.tools, done_regions=201).restored(200)
    assert saved.parser.restored(200)
    assert len(saved.parser.tools.regions) == len(live.regions)


# ----------------------------------------------------------------------------- carried states


def _one_id_changed(state: dict[str, Any]) -> dict[str, Any]:
    ids = state["output_token_ids"]
    return {**state, "output_token_ids": [ids[0] ^ 1, *ids[1:]]}


def _chunks_joined(state: dict[str, Any]) -> dict[str, Any]:
    lens = state["output_chunk_lens"]
    assert len(lens) > 1
    return {**state, "output_chunk_lens": [sum(lens)]}


CARRIED = {
    # As we encoded it, but not the history the snapshot continues: it must not be used.
    "a token id changed": (_one_id_changed, "miss"),
    "the chunk boundaries moved": (_chunks_joined, "miss"),
    # Every body re-encoded (a json.dumps client): the states are the snapshots' still.
    "re-encoded by json.dumps": (None, "redis"),
}


@pytest.mark.parametrize("carried", list(CARRIED))
def test_a_carried_state_restores_only_the_snapshot_of_that_exact_history(
    make_app: AppFactory, shared_redis: RedisServer, carried: str
) -> None:
    """Chunk 4 carries a changed history to the replica that did not answer chunk 3:
    a history the snapshot does not know misses and replays; every reply equals the
    cache-off server's; the stream restores again. A client that re-encodes every body
    restores throughout (through the full decode)."""
    change, expected = CARRIED[carried]
    case = FAULT_CASE
    with replicas(make_app, list(case["server_flags"]), shared_redis.url) as clients:
        *pair, plain = clients
        state: dict[str, Any] | None = None
        sources = []
        for i, chunk in enumerate(case["chunks"]):
            if i == 4 and change is not None:
                assert state is not None
                state = change(state)
            body = stream_body(case, chunk, state)
            content = json.dumps(body) if change is None else None
            reply = pair[i % 2].post(
                case["endpoint"],
                json=None if content else body,
                content=content,
                headers={"content-type": "application/json"},
            )
            assert _comparable(reply) == _comparable(plain.post(case["endpoint"], json=body))
            state = reply.json()["stream_state"]
            sources.append(reply.headers["x-derender-cache"])
        metrics = "\n".join(client.get("/metrics").text for client in pair)
    assert sources[4] == expected and sources[5:] == ["redis"] * len(sources[5:])
    line = r'^derender_redis_misses_total\{reason="history"\} (\S+)$'
    history_misses = sum(float(v) for v in re.findall(line, metrics, re.M))
    assert history_misses == (1 if expected == "miss" else 0)


# ----------------------------------------------------------------------------- forgeries


def _forge(
    change: Callable[[SessionSnapshot], SessionSnapshot] | None = None,
    *,
    key_of_mac: bytes = b"a guessed secret",
    raw: bytes | None = None,
    unkeyed: bool = False,
) -> Callable[[RedisServer], None]:
    """A fault that rewrites the stream's stored value as a Redis writer could: its
    snapshot changed by ``change`` and signed with ``key_of_mac`` (or an unkeyed digest),
    or replaced by ``raw``."""

    def fault(server: RedisServer) -> None:
        client = server.client()
        (key,) = client.keys(KEY_PREFIX + "*")
        value = raw
        if value is None:
            stored = client.get(key)
            envelope = msgspec.msgpack.decode(stored[MAC_BYTES:], type=Envelope)
            if change is not None:
                saved = msgspec.msgpack.decode(envelope.snapshot, type=SessionSnapshot)
                snapshot = msgspec.msgpack.encode(change(saved))
                envelope = msgspec.structs.replace(envelope, snapshot=snapshot)
            body = msgspec.msgpack.encode(envelope)
            mac = (
                hashlib.sha256(body).digest()
                if unkeyed
                else envelope_mac(key_of_mac, key.decode(), body)
            )
            value = mac + body
        client.set(key, value)

    return fault


def _injected(saved: SessionSnapshot) -> SessionSnapshot:
    pieces = [*saved.prev_tokens, "ĠINJECTED"]
    return msgspec.structs.replace(
        saved, prev_tokens=pieces, prefix_offset=len(pieces) - 1, read_offset=len(pieces) - 1
    )


def _out_of_range(saved: SessionSnapshot) -> SessionSnapshot:
    return msgspec.structs.replace(saved, prefix_offset=10**6, read_offset=10**6)


def _reset(saved: SessionSnapshot) -> SessionSnapshot:
    return msgspec.structs.replace(saved, parser=ChatStreamState())


def _done_calls_beyond_the_history(saved: SessionSnapshot) -> SessionSnapshot:
    tools = saved.parser.tools
    assert isinstance(tools, HermesState)
    tools = msgspec.structs.replace(tools, done_regions=10**9)
    return msgspec.structs.replace(saved, parser=msgspec.structs.replace(saved.parser, tools=tools))


FORGERIES = {
    # Without the secret: the MAC fails, whatever the forger recomputes.
    "recomputed unkeyed digest": (_forge(_injected, unkeyed=True), "forged"),
    "injected text": (_forge(_injected), "forged"),
    "out-of-range offsets": (_forge(_out_of_range), "forged"),
    "reset parser state": (_forge(_reset), "forged"),
    "the value unchanged, signed with another secret": (_forge(), "forged"),
    "garbage": (_forge(raw=b"\x00" * 100), "forged"),
    "oversized value": (_forge(raw=b"x" * (2 << 20)), "oversized"),
    # With the secret (leaked, or a bug of ours): the range checks still refuse.
    "injected text, signed": (_forge(_injected, key_of_mac=SECRET.encode()), "out_of_range"),
    "out-of-range offsets, signed": (
        _forge(_out_of_range, key_of_mac=SECRET.encode()),
        "out_of_range",
    ),
    "reset parser state, signed": (_forge(_reset, key_of_mac=SECRET.encode()), "out_of_range"),
    "more done calls than the history has tokens, signed": (
        _forge(_done_calls_beyond_the_history, key_of_mac=SECRET.encode()),
        "out_of_range",
    ),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_snapshot_is_a_counted_miss_never_a_different_reply(
    make_app: AppFactory, private_redis: RedisServer, forgery: str
) -> None:
    """A Redis writer rewrites the snapshot between two chunks; the chunk replays (every
    reply equals the cache-off server's) and the refusal is counted by reason."""
    fault, reason = FORGERIES[forgery]
    sources, _, metrics = _fault_stream(make_app, private_redis, {4: fault})
    assert sources[4] == "miss" and sources[5] == "redis"
    assert f'derender_redis_rejected_total{{reason="{reason}"}} 1.0' in metrics
    assert f'derender_redis_misses_total{{reason="{reason}"}} 1.0' in metrics


def _previous_version(server: RedisServer) -> None:
    """Rewrite the stream's snapshot as a replica of the previous release writes it (the
    format's previous version, signed with the shared secret), as in a rolling upgrade."""
    client = server.client()
    (key,) = client.keys(KEY_PREFIX + "*")
    envelope = msgspec.msgpack.decode(client.get(key)[MAC_BYTES:], type=Envelope)
    envelope = msgspec.structs.replace(envelope, version=SCHEMA_VERSION - 1)
    body = msgspec.msgpack.encode(envelope)
    client.set(key, envelope_mac(SECRET.encode(), key.decode(), body) + body)


def test_a_snapshot_of_the_previous_version_is_a_clean_miss(
    make_app: AppFactory, private_redis: RedisServer
) -> None:
    sources, _, metrics = _fault_stream(make_app, private_redis, {4: _previous_version})
    assert sources[4] == "miss" and sources[5:] == ["redis"] * len(sources[5:])
    assert 'derender_redis_misses_total{reason="version"} 1.0' in metrics
    assert _metric(metrics, "derender_redis_rejected_total") == 0  # not taken for an attack


def test_replicas_with_different_secrets_never_use_each_others_snapshots(
    make_app: AppFactory, shared_redis: RedisServer
) -> None:
    case = FAULT_CASE
    flags = [*case["server_flags"], "--redis-url", shared_redis.url, "--redis-timeout-ms", "1000"]
    with contextlib.ExitStack() as stack:
        pair = [
            stack.enter_context(TestClient(make_app([*flags, "--redis-secret", secret])))
            for secret in ("one secret", "another secret")
        ]
        state = None
        sources = []
        for i, chunk in enumerate(case["chunks"]):
            reply = pair[i % 2].post(case["endpoint"], json=stream_body(case, chunk, state))
            assert reply.status_code == 200
            sources.append(reply.headers["x-derender-cache"])
            state = reply.json()["stream_state"]
        forged = sum(
            _metric(client.get("/metrics").text, "derender_redis_rejected_total") for client in pair
        )
    assert "redis" not in sources
    assert forged == len(case["chunks"]) - 1  # every take: each chunk but the first
