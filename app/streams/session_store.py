"""Where a parsed stream's session waits between chunks: the in-process cache and Redis.

The chunk path asks the store for the session that continues what the client sent
and gets one, or None (then it replays); it never knows there are two tiers. The
store owns a session's whole life between chunks: it checks the session out for one
chunk, keeps it for the next one (its size measured, its snapshot offered to Redis),
or drops it when the stream finishes or the chunk fails, and it counts every hit,
miss, restore and eviction on the way.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import anyio

from app.serving.metrics import Metrics
from app.serving.settings import Settings
from app.streams.session import Fingerprint, StreamSession
from app.streams.state_json import LiftedHistory
from cache.redis_tier import Outcome, RedisTier
from cache.sessions import Eviction, Miss, SessionCache

logger = logging.getLogger("derender_server")

StreamKey = tuple[str, int]  # (request_id, choice index)
# Builds the session a Redis snapshot holds, or says why it cannot.
Restorer = Callable[[bytes], tuple[StreamSession | None, Outcome | None]]


class Source(StrEnum):
    """Where a chunk's session came from: the ``x-derender-cache`` header."""

    HIT = "hit"
    RESTORED = "redis"
    MISS = "miss"


@dataclass(frozen=True, slots=True)
class Carried:
    """The state a chunk carries as the store looks it up: its bytes as we encode
    them (what a kept session is compared with), the digest that names it in a
    snapshot's envelope (taken only if Redis is asked), and its history's length (a
    state without a history has no snapshot)."""

    state: bytes
    digest: Callable[[], bytes]
    history_len: int


@dataclass(frozen=True, slots=True)
class Acquired:
    """A session for one chunk (None: replay) and where it came from. ``miss`` says why
    the in-process cache had none (None on a hit, or with the cache off)."""

    session: StreamSession | None
    source: Source
    miss: Miss | None = None


def redis_secret(settings: Settings) -> bytes:
    """The key of the snapshots' MAC: the replicas' shared secret, or without one a
    random key of this process, so no snapshot another process wrote is ever used."""
    if settings.redis_secret:
        return settings.redis_secret.encode()
    if settings.redis_url:
        logger.warning(
            "--redis-url without --redis-secret: snapshots are signed with a random key "
            "of this process, so replicas cannot restore each other's. Give every "
            "replica the same secret ($DERENDER_REDIS_SECRET) to share them."
        )
    return secrets.token_bytes(32)


class SessionStore:
    """The two tiers behind one interface: ``acquire``, ``keep`` and ``drop``."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.metrics = metrics
        self.cache: SessionCache[StreamSession] = SessionCache(
            settings.stream_cache_size,
            settings.stream_cache_max_bytes,
            settings.stream_cache_ttl,
            on_evict=lambda reason: metrics.cache_evictions.labels(reason).inc(),
            on_collision=metrics.request_id_collisions.inc,
        )
        self.redis = (
            RedisTier(
                settings.redis_url,
                secret=redis_secret(settings),
                ttl=settings.redis_ttl,
                timeout=settings.redis_timeout_ms / 1000,
                max_snapshot_bytes=settings.redis_max_snapshot_bytes,
            )
            if settings.redis_url
            else None
        )
        self._sweep_interval = max(0.05, min(settings.stream_cache_ttl / 2, 30.0))
        # Gauges are read when /metrics is scraped, not kept up to date per chunk.
        metrics.cache_sessions.set_function(lambda: len(self.cache))
        metrics.cache_bytes.set_function(lambda: self.cache.bytes)
        if self.redis is not None:
            breaker = self.redis.breaker
            metrics.redis_breaker_open.set_function(lambda: int(breaker.open))

    @property
    def enabled(self) -> bool:
        """Whether any tier keeps sessions (else every chunk replays)."""
        return self.cache.enabled or self.redis is not None

    def acquire_echoed(
        self,
        key: StreamKey,
        fingerprint: Fingerprint,
        sent: bytes,
        history: LiftedHistory | None,
        accept: Callable[[StreamSession], bool],
    ) -> StreamSession | None:
        """The kept session, checked out, if ``sent`` (with ``history``, when the body's
        history arrays were lifted out of it) is the state its last reply carried, as
        sent or as ``json.dumps`` re-encodes it, and ``accept`` takes it; else None, and
        the session stays where it is. The direct lane's hit: the state is compared as
        bytes, never decoded."""
        found = self.cache.peek(key, fingerprint)
        if found is None:
            return None
        session, kept = found
        if session.answered is None or not session.continues(sent, history, kept):
            return None
        if not accept(session):
            return None
        self.cache.checkout(key, fingerprint, kept)
        self.metrics.cache_hits.inc()
        return session

    def acquire_compact(
        self, key: StreamKey, fingerprint: Fingerprint, sent: bytes
    ) -> StreamSession | None:
        """The kept session, checked out, if its last reply carried the compact state
        ``sent``; else None. Only the in-process tier can answer: a compact chunk has no
        history to check a Redis snapshot against (its full re-send can)."""
        found = self.cache.peek(key, fingerprint)
        miss = Miss.ABSENT if found is None else Miss.HISTORY
        if found is not None and found[1] == sent:  # a mismatch leaves the session kept
            session, checkout_miss = self.cache.checkout(key, fingerprint, sent)
            if session is not None:
                self.metrics.cache_hits.inc()
                return session
            miss = checkout_miss or Miss.CHECKED_OUT
        self.metrics.cache_misses.labels(miss).inc()
        return None

    def acquire_compact_state(
        self, key: StreamKey, sent: bytes
    ) -> tuple[StreamSession, Fingerprint] | None:
        """The kept session whose last reply carried the compact state ``sent``, checked
        out, with its fingerprint: a compact chunk without context, in one lookup. The
        caller counts the hit (a batch frame counts its hits at once); None counts
        nothing and leaves the store as it was: the caller asks ``acquire_compact``,
        which says why."""
        found = self.cache.checkout_state(key, sent)
        if found is None:
            return None
        session, fingerprint = found
        assert isinstance(fingerprint, Fingerprint)  # what ``keep`` checks in
        return session, fingerprint

    def release(self, key: StreamKey, fingerprint: Fingerprint) -> None:
        """The checked-out session left the store for good (a WebSocket connection
        holds it from now on)."""
        self.cache.release(key, fingerprint)

    async def acquire(
        self,
        key: StreamKey,
        fingerprint: Fingerprint,
        carried: Carried,
        restore: Restorer,
    ) -> Acquired:
        """The session that continues ``carried``: the kept one, else one restored from
        the stream's Redis snapshot, else none."""
        miss = None
        if self.cache.enabled:
            session, miss = self.cache.checkout(key, fingerprint, carried.state)
            if session is not None:
                self.metrics.cache_hits.inc()
                return Acquired(session, Source.HIT)
            self.metrics.cache_misses.labels(miss).inc()
        if self.redis is None or not carried.history_len:
            return Acquired(None, Source.MISS, miss)
        snapshot, outcome = await self.redis.take(
            key, fingerprint.digest, carried.digest(), carried.history_len
        )
        session = None
        if snapshot is not None:
            session, problem = restore(snapshot)
            outcome = problem or Outcome.HIT
        self._count(outcome)
        if session is None:
            self.metrics.redis_misses.labels(outcome).inc()
            if outcome.untrusted:
                self.metrics.redis_rejected.labels(outcome).inc()
            return Acquired(None, Source.MISS, miss)
        self.metrics.redis_hits.inc()
        return Acquired(session, Source.RESTORED, miss)

    async def keep(
        self,
        key: StreamKey,
        fingerprint: Fingerprint,
        session: StreamSession,
        carried: bytes,
        digest: Callable[[], bytes],
    ) -> None:
        """Keep ``session`` for the chunk that sends ``carried`` back, in both tiers
        (``digest`` names it in its Redis snapshot's envelope)."""
        kept = self.keep_here(key, fingerprint, session, carried)
        if self.redis is not None:
            snapshot = session.snapshot()
            self.metrics.redis_snapshot_bytes.observe(len(snapshot))
            history = session.output_tokens
            self._count(await self.redis.put(key, kept.digest, digest(), history, snapshot))

    def keep_here(
        self, key: StreamKey, fingerprint: Fingerprint, session: StreamSession, carried: bytes
    ) -> Fingerprint:
        """``keep``'s in-process tier (all of it without Redis); returns the fingerprint
        the session is kept under."""
        if session.fingerprint is None:  # a kept session holds an equal one
            session.fingerprint = fingerprint.detached()
        kept = session.fingerprint
        self.cache.checkin(key, session, kept, carried, session.size(carried))
        return kept

    async def drop(self, key: StreamKey, fingerprint: Fingerprint, reason: Eviction) -> None:
        """The stream is over (``FINISHED``: its snapshot goes too) or its chunk failed
        (``ERROR``: counted when the session came from the cache)."""
        self.drop_here(key, fingerprint, reason)
        if reason is Eviction.FINISHED and self.redis is not None:
            self._count(await self.redis.drop(key, fingerprint.digest))

    def drop_here(self, key: StreamKey, fingerprint: Fingerprint, reason: Eviction) -> None:
        """``drop``'s in-process tier (all of it without Redis)."""
        released = self.cache.release(key, fingerprint)
        if reason is Eviction.FINISHED or released:
            self.metrics.cache_evictions.labels(reason).inc()

    def _count(self, outcome: Outcome) -> None:
        """Count a Redis call's outcome: writes by outcome, errors on their own."""
        if outcome.write:
            self.metrics.redis_writes.labels(outcome).inc()
        if outcome is Outcome.ERROR:
            self.metrics.redis_errors.inc()

    async def sweep_forever(self) -> None:
        """Drop idle sessions now and then (lookups also expire them lazily)."""
        while True:
            await anyio.sleep(self._sweep_interval)
            self.cache.sweep()

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.close()
