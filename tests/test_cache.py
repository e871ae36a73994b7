"""The session cache: exact-match hits, check-out, bounds, expiry, and its effect on replies."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from cache.sessions import Eviction, Miss, SessionCache
from tests.support.apps import AppFactory
from tests.support.golden import load_cases, stream_body


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_cache(**kwargs: Any) -> tuple[SessionCache[str], list[str], Clock]:
    evicted: list[str] = []
    clock = Clock()
    options = {"max_entries": 3, "max_bytes": 1000, "ttl": 10.0, "variants": 4, **kwargs}
    cache: SessionCache[str] = SessionCache(
        options["max_entries"], options["max_bytes"], options["ttl"],
        variants=options["variants"], on_evict=evicted.append, clock=clock,
    )  # fmt: skip
    return cache, evicted, clock


def test_hit_needs_the_same_fingerprint_and_state() -> None:
    cache, _, _ = make_cache()
    cache.checkin("k", "session", b"fp", b'{"ids":[1,2]}', 10)
    assert cache.checkout("k", b"other", b'{"ids":[1,2]}') == (None, Miss.FINGERPRINT)
    cache.checkin("k", "session", b"fp", b'{"ids":[1,2]}', 10)
    assert cache.checkout("k", b"fp", b'{"ids":[1,3]}') == (None, Miss.HISTORY)
    cache.checkin("k", "session", b"fp", b'{"ids":[1,2]}', 10)
    assert cache.checkout("k", b"fp", b'{"ids":[1,2]}') == ("session", None)
    assert cache.checkout("absent", b"fp", b"null") == (None, Miss.ABSENT)


def test_peek_finds_what_checkout_would_and_leaves_it() -> None:
    cache, _, clock = make_cache()
    cache.checkin("k", "session", b"fp", b"s", 10)
    assert cache.peek("k", b"other") is None
    assert cache.peek("k", b"fp") == ("session", b"s")
    assert len(cache) == 1
    clock.now = 11
    assert cache.peek("k", b"fp") is None
    assert cache.checkout("k", b"fp", b"s") == (None, Miss.EXPIRED)


def test_a_checked_out_session_is_not_shared() -> None:
    cache, _, _ = make_cache()
    cache.checkin("k", "session", b"fp", b"s", 10)
    assert cache.checkout("k", b"fp", b"s") == ("session", None)
    assert cache.checkout("k", b"fp", b"s") == (None, Miss.CHECKED_OUT)
    cache.release("k", b"fp")
    assert cache.checkout("k", b"fp", b"s") == (None, Miss.ABSENT)


def test_bounds_evict_least_recently_used() -> None:
    cache, evicted, _ = make_cache()
    for key in "abcd":
        cache.checkin(key, key, b"fp", b"s", 100)
    assert len(cache) == 3 and evicted == [Eviction.CAPACITY]
    assert cache.checkout("a", b"fp", b"s") == (None, Miss.ABSENT)
    cache.checkin("big", "big", b"fp", b"s", 900)
    assert cache.bytes <= 1000 and Eviction.BYTES in evicted
    cache.checkin("huge", "huge", b"fp", b"s", 5000)
    assert cache.checkout("huge", b"fp", b"s") == (None, Miss.ABSENT)


def test_idle_sessions_expire() -> None:
    cache, evicted, clock = make_cache()
    cache.checkin("a", "a", b"fp", b"s", 10)
    cache.checkin("b", "b", b"fp", b"s", 10)
    clock.now = 5
    cache.checkin("c", "c", b"fp", b"s", 10)
    clock.now = 11
    assert cache.checkout("a", b"fp", b"s") == (None, Miss.EXPIRED)
    assert cache.sweep() == 1  # b; c is still fresh
    assert len(cache) == 1 and cache.bytes == 10
    clock.now = 16
    assert cache.sweep() == 1 and len(cache) == 0 and cache.bytes == 0
    assert evicted.count(Eviction.TTL) == 3


def test_held_sessions_share_the_lru_and_the_bounds_with_kept_ones() -> None:
    """A holder's session (a WebSocket stream) counts like a kept one: the least
    recently used of either kind goes first, and its holder is told to let it go."""
    cache, evicted, clock = make_cache()
    gone: list[str] = []
    first = cache.hold(100, lambda: gone.append("first"))
    clock.now = 1
    cache.checkin("kept", "kept", b"fp", b"s", 100)
    clock.now = 2
    second = cache.hold(100, lambda: gone.append("second"))
    assert first is not None and second is not None
    assert (len(cache), cache.bytes) == (3, 300)
    clock.now = 3
    assert cache.touch(first, 150)  # now the most recently used
    assert cache.bytes == 350
    cache.checkin("new", "new", b"fp", b"s", 100)  # one over the count: "kept" goes
    assert cache.checkout("kept", b"fp", b"s") == (None, Miss.ABSENT)
    assert gone == [] and evicted == [Eviction.CAPACITY]
    assert cache.touch(first, 850)  # over the bytes: the oldest, "second", goes
    assert gone == ["second"] and not second.counted and not cache.touch(second, 10)
    assert cache.bytes == 950 and evicted[-1] == Eviction.BYTES
    assert not cache.touch(first, 5000)  # alone over the bound: evicted itself
    assert gone == ["second", "first"] and cache.bytes == 100 and len(cache) == 1


def test_a_let_go_or_idle_held_session_stops_counting() -> None:
    cache, evicted, clock = make_cache()
    gone: list[str] = []
    held = cache.hold(100, lambda: gone.append("held"))
    idle = cache.hold(100, lambda: gone.append("idle"))
    assert held is not None and idle is not None
    cache.unhold(held)
    assert (len(cache), cache.bytes, gone) == (1, 100, [])
    assert not cache.touch(held, 100)
    clock.now = 11
    assert cache.sweep() == 1 and gone == ["idle"] and evicted == [Eviction.TTL]
    assert (len(cache), cache.bytes) == (0, 0)
    assert cache.hold(5000, lambda: None) is None  # alone over the bound
    assert make_cache(max_entries=0)[0].hold(10, lambda: None) is None


def test_disabled_cache_keeps_nothing() -> None:
    cache, _, _ = make_cache(max_entries=0)
    cache.checkin("k", "session", b"fp", b"s", 10)
    assert not cache.enabled and len(cache) == 0


# ----------------------------------------------------------------------------- through HTTP

FLAGS = [
    "--served-model-name", "qwen3", "--max-model-len", "4096", "--reasoning-parser", "qwen3",
    "--tool-call-parser", "hermes", "--enable-auto-tool-choice",
]  # fmt: skip
STREAMS = [
    c for c in load_cases("C1") if c["kind"] == "chat_stream" and c["chunking"] in ("t3", "r16")
]
# One stream of every scenario of every parser configuration, for the fault test.
ALL_STREAMS = [
    c
    for config in ("C1", "C2", "C3", "C4", "C5", "C6")
    for c in load_cases(config)
    if c["kind"] == "chat_stream" and c["chunking"] == "r16"
]


JSON = {"content-type": "application/json"}


def _without_created(reply: dict[str, Any]) -> str:
    reply["chunk"]["created"] = 0
    return json.dumps(reply)


@pytest.mark.parametrize("indent", [None, 1], ids=["as-sent", "re-encoded"])
def test_second_chunk_hits_and_metrics_count_it(make_app: AppFactory, indent: int | None) -> None:
    """The kept state is compared as bytes first; a client that re-encodes the JSON
    (indent=1) still hits, through its decoded state re-encoded."""
    client = TestClient(make_app(FLAGS))
    case = next(c for c in STREAMS if c["id"] == "C1.tool_single/chat_stream#t3")
    state = None
    headers = []
    for chunk in case["chunks"]:
        body = stream_body(case, chunk, state)
        content = (
            json.dumps(body, indent=indent) if indent else json.dumps(body, separators=(",", ":"))
        )
        response = client.post(case["endpoint"], content=content.encode(), headers=JSON)
        headers.append(response.headers["x-derender-cache"])
        state = response.json()["stream_state"]
    assert headers == ["miss"] + ["hit"] * (len(headers) - 1)
    metrics = client.get("/metrics").text
    assert f"derender_cache_hits_total {len(headers) - 1}.0" in metrics
    assert 'derender_cache_evictions_total{reason="finished"} 1.0' in metrics
    assert "derender_cache_sessions 0.0" in metrics


def test_a_bad_chunk_on_a_kept_session_gets_the_full_paths_error(make_app: AppFactory) -> None:
    """Errors are the cache-off server's, and they leave the kept session in place."""
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    case = next(c for c in STREAMS if c["id"] == "C1.tool_single/chat_stream#t3")
    first, second = case["chunks"][:2]
    state = cached.post(case["endpoint"], json=stream_body(case, first, None)).json()
    body = stream_body(case, second, state["stream_state"])
    two_choices = dict(second, choices=[*second["choices"], dict(second["choices"][0], index=1)])
    bad = [
        dict(body, model="no-such-model"),
        dict(body, generate_chunk=two_choices),
        dict(body, generate_chunk=dict(second, choices="none")),
        dict(body, prompt_tokens="many"),
        dict(body, prompt_token_ids=[0] * 5000),
    ]
    for request in bad:
        expected = plain.post(case["endpoint"], json=request)
        answered = cached.post(case["endpoint"], json=request)
        assert expected.status_code >= 400
        assert (answered.status_code, answered.json()) == (expected.status_code, expected.json())
    assert cached.post(case["endpoint"], json=body).headers["x-derender-cache"] == "hit"


def test_streams_sharing_a_request_id_never_share_a_session(make_app: AppFactory) -> None:
    """RL rollouts resend one id: the same tokens under another chat_request or prompt
    must give that request's replies, never the other stream's session; and each keeps
    its own session (none evicts the others), counted as request-id collisions."""
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    case = next(c for c in STREAMS if c["id"] == "C1.tool_single/chat_stream#t3")
    no_thinking = dict(case["chat_request"], chat_template_kwargs={"enable_thinking": False})
    variants = [
        case,
        dict(case, chat_request=no_thinking),
        dict(case, prompt_token_ids=case["prompt_token_ids"][:-1]),
    ]
    states: list[Any] = [None] * len(variants)
    sources: list[list[str]] = [[] for _ in variants]
    for chunk in case["chunks"]:
        for i, variant in enumerate(variants):
            body = stream_body(variant, chunk, states[i])
            reply = cached.post(case["endpoint"], json=body)
            assert _without_created(reply.json()) == _without_created(
                plain.post(case["endpoint"], json=body).json()
            )
            states[i] = reply.json()["stream_state"]
            sources[i].append(reply.headers["x-derender-cache"])
    assert all(s == ["miss"] + ["hit"] * (len(s) - 1) for s in sources), sources
    metrics = cached.get("/metrics").text
    assert "derender_cache_request_id_collisions_total 2.0" in metrics


def test_a_request_id_keeps_a_few_variants_at_most() -> None:
    cache, evicted, _ = make_cache(max_entries=10, variants=2)
    for fingerprint in (b"one", b"two", b"three"):
        cache.checkin("k", fingerprint.decode(), fingerprint, b"s", 10)
    assert len(cache) == 2 and evicted == [Eviction.CAPACITY]
    assert cache.checkout("k", b"one", b"s") == (None, Miss.FINGERPRINT)
    assert cache.checkout("k", b"two", b"s") == ("two", None)
    assert cache.checkout("k", b"three", b"s") == ("three", None)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(ALL_STREAMS),
    faults=st.lists(
        st.sampled_from(["none", "clear", "expire", "resend", "tamper", "concurrent", "re-encode"]),
        max_size=40,
    ),
)
def test_cache_faults_never_change_a_byte(
    make_app: AppFactory, case: dict[str, Any], faults: list[str]
) -> None:
    """Whatever happens to the cache between chunks, replies equal a cache-off server's."""
    flags = list(case["server_flags"])
    cached = TestClient(make_app(flags))
    plain = TestClient(make_app([*flags, "--stream-cache-size", "0"]))
    sessions = cached.app.service.store.cache  # type: ignore[attr-defined]
    states: dict[int, Any] = {}
    sent: list[dict[str, Any]] = []

    def same(body: dict[str, Any], reply: dict[str, Any]) -> None:
        expected = plain.post(case["endpoint"], json=body).json()
        assert _without_created(dict(reply)) == _without_created(expected)

    for i, (chunk, lane) in enumerate(zip(case["chunks"], case["lanes"], strict=True)):
        body = stream_body(case, chunk, states.get(lane))
        fault = faults[i] if i < len(faults) else "none"
        if fault == "clear":
            sessions.clear()
        elif fault == "expire":
            for entry in sessions.entries():
                entry.used = -1e9
        elif fault == "tamper":
            for entry in sessions.entries():
                entry.fingerprint = b"tampered"
        elif fault == "resend" and sent:
            same(sent[-1], cached.post(case["endpoint"], json=sent[-1]).json())
        if fault == "concurrent":
            with ThreadPoolExecutor(2) as pool:
                replies = list(
                    pool.map(lambda b: cached.post(case["endpoint"], json=b).json(), [body, body])
                )
            for reply in replies:
                same(body, reply)
            reply = replies[0]
        elif fault == "re-encode":
            content = json.dumps(body, indent=1).encode()
            reply = cached.post(case["endpoint"], content=content, headers=JSON).json()
            same(body, reply)
        else:
            reply = cached.post(case["endpoint"], json=body).json()
            same(body, reply)
        states[lane] = reply["stream_state"]
        sent.append(body)


def test_abandoned_streams_are_bounded_and_expire(make_app: AppFactory) -> None:
    flags = [*FLAGS, "--stream-cache-size", "5", "--stream-cache-ttl", "0.3"]
    case = next(c for c in STREAMS if c["id"] == "C1.tool_single/chat_stream#t3")
    with TestClient(make_app(flags)) as client:
        sessions = client.app.service.store.cache  # type: ignore[attr-defined]
        for n in range(20):
            chunk = dict(case["chunks"][0], request_id=f"abandoned-{n}")
            assert (
                client.post(case["endpoint"], json=stream_body(case, chunk, None)).status_code
                == 200
            )
            assert len(sessions) <= 5
        assert len(sessions) == 5 and sessions.bytes > 0
        deadline = time.monotonic() + 5
        while len(sessions) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sessions) == 0 and sessions.bytes == 0
        metrics = client.get("/metrics").text
        assert "derender_cache_sessions 0.0" in metrics
        assert 'derender_cache_evictions_total{reason="capacity"} 15.0' in metrics
