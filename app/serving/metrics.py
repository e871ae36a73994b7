"""Prometheus metrics, on a registry per app so several apps can share a process."""

from __future__ import annotations

import platform
import tracemalloc
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._exposed = _WithoutCreated(self.registry)
        self._observed: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        Info("derender_build", "The server's version and Python.", registry=self.registry).info(
            {"version": _version(), "python": platform.python_version()}
        )
        # process_resident_memory_bytes and friends: what the byte bounds are about.
        ProcessCollector(registry=self.registry)
        if tracemalloc.is_tracing():  # PYTHONTRACEMALLOC=1: what Python objects hold
            traced = Gauge(
                "derender_python_traced_bytes",
                "Bytes of Python objects alive, as tracemalloc counts them.",
                registry=self.registry,
            )
            traced.set_function(lambda: tracemalloc.get_traced_memory()[0])
        self.requests = Counter(
            "derender_requests",
            "Requests answered, by endpoint, mode and HTTP status.",
            ["endpoint", "mode", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "derender_request_seconds",
            "Time from a full request body to its encoded response, by endpoint and mode.",
            ["endpoint", "mode"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.render_latency = Histogram(
            "derender_render_seconds",
            "Time to render one request (template, tokenization, sampling), by endpoint.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.render_tokens = Counter(
            "derender_render_prompt_tokens",
            "Prompt tokens rendered, by endpoint; over derender_render_seconds_sum, the "
            "tokens per second.",
            ["endpoint"],
            registry=self.registry,
        )
        self.internal_errors = Counter(
            "derender_internal_errors",
            "Requests that failed inside the server (answered 500, logged with a traceback).",
            ["endpoint"],
            registry=self.registry,
        )
        self.cpu_budget_exceeded = Counter(
            "derender_cpu_budget_exceeded",
            "Requests stopped for spending more than --max-request-cpu-seconds.",
            ["endpoint"],
            registry=self.registry,
        )

        self.cache_hits = Counter(
            "derender_cache_hits", "Parsed chunks served by a kept session.", registry=self.registry
        )
        self.cache_misses = Counter(
            "derender_cache_misses",
            "Parsed chunks that found no usable kept session, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.cache_evictions = Counter(
            "derender_cache_evictions",
            "Kept sessions dropped, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.request_id_collisions = Counter(
            "derender_cache_request_id_collisions",
            "Sessions kept next to another stream's under the same request id and choice "
            "index (different chat_request or prompt); each keeps its own.",
            registry=self.registry,
        )
        self.stream_restarts = Counter(
            "derender_stream_restarts",
            "Chunks without stream_state that found a live stream of the same request_id, "
            "choice index, chat_request and prompt: answered as a first chunk (as vLLM "
            "does), with an x-derender-warning header.",
            registry=self.registry,
        )
        self.advisories = Counter(
            "derender_warnings",
            "Requests answered as vLLM would with an x-derender-warning header, by what looked "
            "wrong: unknown_fields (top-level fields the protocol does not have), empty_state "
            "or foreign_state (a stream_state that is empty or has fields a state does not), "
            "diverged_state (a history that is not the stream's as this replica knows it).",
            ["kind"],
            registry=self.registry,
        )
        self.replays = Counter(
            "derender_replays", "Sessions rebuilt by replaying history.", registry=self.registry
        )
        self.replayed_tokens = Counter(
            "derender_replayed_tokens", "History tokens replayed.", registry=self.registry
        )
        self.cache_sessions = Gauge(
            "derender_cache_sessions", "Sessions kept between chunks.", registry=self.registry
        )
        self.cache_bytes = Gauge(
            "derender_cache_bytes",
            "Bytes the kept sessions keep alive (each measured when it is kept).",
            registry=self.registry,
        )
        self.cache_max_bytes = Gauge(
            "derender_cache_max_bytes",
            "The bound on derender_cache_bytes (--stream-cache-max-bytes).",
            registry=self.registry,
        )

        self.ws_connections = Gauge(
            "derender_ws_connections",
            "Open WebSocket connections (their cap is --ws-max-connections).",
            registry=self.registry,
        )
        self.ws_refused = Counter(
            "derender_ws_connections_refused",
            "WebSocket handshakes answered 503: --ws-max-connections were open.",
            registry=self.registry,
        )
        self.ws_closed = Counter(
            "derender_ws_closed",
            "WebSocket connections the server closed for what the client sent, by reason: "
            "ping_flood, fragment_flood, message_timeout (1008); invalid_utf8 (1007), "
            "message_too_big (1009), protocol_error (1002).",
            ["reason"],
            registry=self.registry,
        )
        self.ws_backpressure = Counter(
            "derender_ws_backpressure",
            "Reads a WebSocket connection sent faster than it was served: what was left "
            "unparsed waited in the socket, its reading paused.",
            registry=self.registry,
        )

        self.redis_hits = Counter(
            "derender_redis_hits",
            "Parsed chunks whose session was restored from a Redis snapshot.",
            registry=self.registry,
        )
        self.redis_misses = Counter(
            "derender_redis_misses",
            "Redis lookups that restored nothing, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.redis_rejected = Counter(
            "derender_redis_rejected",
            "Redis values refused as untrustworthy, by reason: forged (MAC fails: written "
            "without the secret, moved or damaged), oversized, corrupt, out_of_range.",
            ["reason"],
            registry=self.registry,
        )
        self.redis_writes = Counter(
            "derender_redis_writes",
            "Snapshot writes and deletes, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.redis_errors = Counter(
            "derender_redis_errors",
            "Redis calls that failed or timed out (each one a miss or a skipped write).",
            registry=self.registry,
        )
        self.redis_breaker_open = Gauge(
            "derender_redis_breaker_open",
            "1 while the circuit breaker keeps requests away from Redis.",
            registry=self.registry,
        )
        self.redis_snapshot_bytes = Histogram(
            "derender_redis_snapshot_bytes",
            "Size of the session snapshots offered to Redis.",
            buckets=(256, 1024, 4096, 16384, 65536, 262144, 1048576),
            registry=self.registry,
        )

    def observe(self, endpoint: str, mode: str, status: int, seconds: float) -> None:
        """Count and time one request. Its labelled series are looked up once per label
        set: ``labels`` cost more than a chunk's bookkeeping (profiled, bench/README.md)."""
        series = self._series(endpoint, mode, status)
        series[0].inc()
        series[1].observe(seconds)

    def _series(self, endpoint: str, mode: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter and latency histogram of a label set, looked up once."""
        series = self._observed.get((endpoint, mode, status))
        if series is None:
            requests = self.requests.labels(endpoint, mode, str(status))
            latency = self.latency.labels(endpoint, mode)
            series = self._observed[endpoint, mode, status] = (requests, latency)
        return series

    def observe_frame(self, endpoint: str, statuses: dict[int, int], seconds: float) -> None:
        """Count a batch frame's entries by status, one increment per status, and time
        the frame once: its entries are requests of mode ``batch``, its latency the
        frame's (an entry's own share is not worth two clock reads and a histogram lock
        per entry, profiled in bench/README.md)."""
        series = None
        for status, entries in statuses.items():
            series = self._series(endpoint, "batch", status)
            series[0].inc(entries)
        if series is not None:
            series[1].observe(seconds)

    def observe_render(self, endpoint: str, seconds: float, tokens: int) -> None:
        """Time one successful render and count its prompt tokens."""
        self.render_latency.labels(endpoint).observe(seconds)
        self.render_tokens.labels(endpoint).inc(tokens)

    def render(self) -> bytes:
        return generate_latest(self._exposed)


class _WithoutCreated(Collector):
    """A registry's series without the ``*_created`` ones: each counter and histogram
    child would add a creation timestamp that no dashboard or rule reads, doubling the
    series a replica exports (prometheus_client turns them off only process-wide)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            created = family.name + "_created"
            family.samples = [s for s in family.samples if s.name != created]
            yield family


def _version() -> str:
    try:
        return version("derender-server")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
