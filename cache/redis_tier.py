"""The optional second tier: session snapshots in Redis, shared by every replica.

A snapshot is opaque bytes here. It is stored in a versioned envelope that records
what it is valid for (the request fingerprint, the length and digest of the state
the client must send back, the digest taken by the caller), so a restore is checked
exactly as an in-process hit is.
Redis is not trusted: the envelope is authenticated with an HMAC-SHA256 keyed with
the replicas' shared secret and bound to its key, checked before anything in it is
decoded, so a value written by anyone without the secret (or moved from another
stream's key, or damaged in place) is never used. Values larger than a snapshot can
be are deleted unread. Snapshots are taken with ``GETDEL``: two replicas never
restore the same one.

Redis is best effort. Every call is bounded by one timeout, any error is a miss,
nothing is retried, and after consecutive errors a circuit breaker stops asking
for a cool-down, so a slow or absent Redis costs at most one timeout per chunk,
then nothing, and never a wrong byte.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

import msgspec
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

logger = logging.getLogger("derender_server.redis")

# Raised whenever what a snapshot holds changes meaning (a parser's state included), so a
# replica of another release never restores it: the chunk replays instead.
SCHEMA_VERSION = 13
KEY_PREFIX = "derender:session:"
MAC_BYTES = hashlib.sha256().digest_size
# Room for the envelope's own fields around a snapshot of the largest size written.
ENVELOPE_OVERHEAD = 256


class Outcome(StrEnum):
    """What a Redis call did (a metric label)."""

    HIT = "hit"
    # Misses of a take.
    ABSENT = "absent"
    FINGERPRINT = "fingerprint"
    HISTORY = "history"
    CORRUPT = "corrupt"
    # Written by a release whose snapshots mean something else (a rolling upgrade).
    VERSION = "version"
    FORGED = "forged"
    OVERSIZED = "oversized"
    # A snapshot its user found does not continue the request (reported by the user).
    OUT_OF_RANGE = "out_of_range"
    ERROR = "error"
    BREAKER_OPEN = "breaker_open"
    # Outcomes of a put or drop.
    WRITTEN = "written"
    DELETED = "deleted"
    TOO_LARGE = "too_large"

    @property
    def untrusted(self) -> bool:
        """A value refused as not ours, not whole, or not this stream's."""
        return self in (Outcome.FORGED, Outcome.OVERSIZED, Outcome.CORRUPT, Outcome.OUT_OF_RANGE)

    @property
    def write(self) -> bool:
        """A put's or drop's outcome that the writes metric counts."""
        return self in (Outcome.WRITTEN, Outcome.DELETED, Outcome.TOO_LARGE)


class Envelope(msgspec.Struct, array_like=True):
    """What a stored value holds after its MAC."""

    version: int
    fingerprint: bytes
    history_len: int
    state_digest: bytes
    snapshot: bytes


_envelope_decoder = msgspec.msgpack.Decoder(Envelope)

# GETDEL, unless the value is larger than any envelope written: then it is deleted
# unread (its length comes back instead), so a planted value costs no transfer.
_TAKE_SCRIPT = """
local size = redis.call('STRLEN', KEYS[1])
if size > tonumber(ARGV[1]) then
    redis.call('DEL', KEYS[1])
    return size
end
return redis.call('GETDEL', KEYS[1])
"""


def envelope_mac(secret: bytes, key: str, body: bytes) -> bytes:
    """HMAC-SHA256 of an envelope under the key it is stored at."""
    return hmac.new(secret, key.encode() + b"\x00" + body, hashlib.sha256).digest()


def redis_key(stream: tuple[str, int], fingerprint: bytes) -> str:
    """Streams that share a request id but not their settings get different keys."""
    request_id, index = stream
    digest = hashlib.blake2b(fingerprint, digest_size=16)
    digest.update(f"{index}:{request_id}".encode())
    return KEY_PREFIX + digest.hexdigest()


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; lets one call try after ``cooldown``."""

    def __init__(
        self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def open(self) -> bool:
        return self._opened_at is not None

    def allows(self) -> bool:
        """Closed, or open for longer than the cool-down (one trial call goes through)."""
        if self._opened_at is None:
            return True
        if self._clock() - self._opened_at < self.cooldown:
            return False
        self._opened_at = self._clock()  # the trial call; others wait another cool-down
        return True

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None

    def failure(self) -> None:
        self._failures += 1
        if self._failures >= self.threshold:
            self._opened_at = self._clock()


class RedisTier:
    """Session snapshots under ``redis_key``, each with a TTL, through a bounded pool."""

    def __init__(
        self,
        url: str,
        *,
        secret: bytes,
        ttl: int,
        timeout: float,
        max_snapshot_bytes: int,
        max_connections: int = 32,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.secret = secret
        self.ttl = ttl
        self.timeout = timeout
        self.max_snapshot_bytes = max_snapshot_bytes
        self.breaker = breaker or CircuitBreaker(threshold=3, cooldown=2.0)
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        self._redis = Redis(connection_pool=pool, retry=Retry(NoBackoff(), 0))
        self._take = self._redis.register_script(_TAKE_SCRIPT)

    async def take(
        self,
        stream: tuple[str, int],
        fingerprint: bytes,
        state_digest: bytes,
        history_len: int,
    ) -> tuple[bytes | None, Outcome]:
        """Check out the snapshot that continues the state named ``state_digest``, of
        ``history_len`` output tokens: (snapshot, "hit") or (None, why)."""
        if not self.breaker.allows():
            return None, Outcome.BREAKER_OPEN
        key = redis_key(stream, fingerprint)
        limit = MAC_BYTES + ENVELOPE_OVERHEAD + self.max_snapshot_bytes
        try:
            raw = await self._call(self._take(keys=[key], args=[limit]))
        except (RedisError, OSError, TimeoutError):
            return None, Outcome.ERROR
        if raw is None:
            return None, Outcome.ABSENT
        if isinstance(raw, int):
            return None, Outcome.OVERSIZED
        mac, body = raw[:MAC_BYTES], raw[MAC_BYTES:]
        if not hmac.compare_digest(mac, envelope_mac(self.secret, key, body)):
            return None, Outcome.FORGED
        try:
            envelope = _envelope_decoder.decode(body)
        except msgspec.DecodeError:
            return None, Outcome.CORRUPT
        if envelope.version != SCHEMA_VERSION:
            return None, Outcome.VERSION
        if envelope.fingerprint != fingerprint:
            return None, Outcome.FINGERPRINT
        if envelope.history_len != history_len or envelope.state_digest != state_digest:
            return None, Outcome.HISTORY
        return envelope.snapshot, Outcome.HIT

    async def put(
        self,
        stream: tuple[str, int],
        fingerprint: bytes,
        state_digest: bytes,
        history_len: int,
        snapshot: bytes,
    ) -> Outcome:
        """Keep ``snapshot`` until the client sends back the state named ``state_digest``;
        returns what happened."""
        if len(snapshot) > self.max_snapshot_bytes:
            return Outcome.TOO_LARGE
        if not self.breaker.allows():
            return Outcome.BREAKER_OPEN
        key = redis_key(stream, fingerprint)
        envelope = Envelope(SCHEMA_VERSION, fingerprint, history_len, state_digest, snapshot)
        body = msgspec.msgpack.encode(envelope)
        try:
            await self._call(
                self._redis.set(key, envelope_mac(self.secret, key, body) + body, ex=self.ttl)
            )
        except (RedisError, OSError, TimeoutError):
            return Outcome.ERROR
        return Outcome.WRITTEN

    async def drop(self, stream: tuple[str, int], fingerprint: bytes) -> Outcome:
        """The stream ended: its snapshot is of no further use."""
        if not self.breaker.allows():
            return Outcome.BREAKER_OPEN
        try:
            await self._call(self._redis.delete(redis_key(stream, fingerprint)))
        except (RedisError, OSError, TimeoutError):
            return Outcome.ERROR
        return Outcome.DELETED

    async def _call(self, command: Awaitable[Any]) -> Any:
        """Await one command under the timeout, feeding the breaker."""
        try:
            async with asyncio.timeout(self.timeout):
                result = await command
        except (RedisError, OSError, TimeoutError) as exc:
            self.breaker.failure()
            logger.debug("redis call failed: %r", exc)
            raise
        self.breaker.success()
        return result

    async def close(self) -> None:
        await self._redis.aclose()
