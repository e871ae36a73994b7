"""The in-process cache of live stream sessions, keyed by ``(request_id, choice_index)``.

A session is an opaque object here. An entry also records what makes it valid: a
fingerprint of the request settings it was built for (any value compared with ``==``)
and the exact bytes of the state the client must send back to continue it (the state
the last reply carried). A lookup hits only when both equal the request's; anything
else is a miss, and the caller rebuilds the session from the client's state. Entries
are checked out (removed) while a chunk is processed, so two concurrent calls never
share one; they are bounded by count, bytes and idle time, least recently used first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")

# Miss reasons.
ABSENT = "absent"
FINGERPRINT = "fingerprint"
HISTORY = "history"
EXPIRED = "expired"
CHECKED_OUT = "checked_out"

# Eviction reasons.
CAPACITY = "capacity"
BYTES = "bytes"
TTL = "ttl"
FINISHED = "finished"
ERROR = "error"


@dataclass(slots=True)
class _Entry(Generic[S]):
    session: S
    fingerprint: object
    state: bytes
    size: int
    used: float


class SessionCache(Generic[S]):
    """LRU of checked-in sessions; ``max_entries`` 0 turns caching off."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl: float,
        *,
        on_evict: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl
        self._on_evict = on_evict
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry[S]] = OrderedDict()
        self._out: set[Hashable] = set()
        self.bytes = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, key: Hashable, fingerprint: object, state: bytes) -> S | None:
        """The session ``checkout`` would return now, left where it is.

        Lets a caller check the request against the session before committing to it.
        """
        entry = self._entries.get(key)
        if (
            entry is None
            or self._clock() - entry.used > self.ttl
            or entry.fingerprint != fingerprint
            or entry.state != state
        ):
            return None
        return entry.session

    def checkout(
        self, key: Hashable, fingerprint: object, state: bytes
    ) -> tuple[S | None, str | None]:
        """Take the session for ``key`` if it is exactly the one the request needs.

        Returns the session (None on a miss) and the miss reason (None on a hit).
        Any entry found is removed either way: a mismatched one is stale.
        """
        if key in self._out:
            return None, CHECKED_OUT
        entry = self._entries.pop(key, None)
        if entry is None:
            return None, ABSENT
        self.bytes -= entry.size
        if self._clock() - entry.used > self.ttl:
            self._on_evict(TTL)
            return None, EXPIRED
        if entry.fingerprint != fingerprint:
            return None, FINGERPRINT
        if entry.state != state:
            return None, HISTORY
        self._out.add(key)
        return entry.session, None

    def release(self, key: Hashable) -> None:
        """The caller is done with ``key``'s session without checking it back in."""
        self._out.discard(key)

    def checkin(
        self,
        key: Hashable,
        session: S,
        fingerprint: object,
        state: bytes,
        size: int,
    ) -> None:
        """Keep ``session`` until the client sends ``state`` back, then enforce the bounds."""
        self._out.discard(key)
        if not self.enabled or size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[key] = _Entry(session, fingerprint, state, size, self._clock())
        self.bytes += size
        while len(self._entries) > self.max_entries:
            self._evict_oldest(CAPACITY)
        while self.bytes > self.max_bytes:
            self._evict_oldest(BYTES)

    def sweep(self) -> int:
        """Drop sessions idle for longer than the TTL; returns how many.

        Entries are kept in order of last use, so the sweep stops at the first fresh one.
        """
        now = self._clock()
        dropped = 0
        while self._entries:
            entry = next(iter(self._entries.values()))
            if now - entry.used <= self.ttl:
                break
            self._evict_oldest(TTL)
            dropped += 1
        return dropped

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def _evict_oldest(self, reason: str) -> None:
        _, entry = self._entries.popitem(last=False)
        self.bytes -= entry.size
        self._on_evict(reason)
