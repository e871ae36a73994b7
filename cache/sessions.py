"""The in-process cache of live stream sessions, keyed by ``(request_id, choice_index)``.

A session is an opaque object here. An entry also records what makes it valid: a
fingerprint of the request settings it was built for (any value compared with ``==``)
and the exact bytes of the state the client must send back to continue it (the state
the last reply carried). A lookup hits only when both equal the request's; anything
else is a miss, and the caller rebuilds the session from the client's state. Entries
are checked out (removed) while a chunk is processed, so two concurrent calls never
share one; they are bounded by count, bytes and idle time, least recently used first.

Not ``cachetools``: its caches bound one measure (count or size), evict without
saying why, and know nothing of check-out or of several variants per key; the
ordered dict below is the whole LRU.

A key holds up to ``variants`` sessions of different fingerprints, so streams that
share a request id (by accident or on purpose) do not evict each other's sessions; a
lookup compares the request's fingerprint with at most that many.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

S = TypeVar("S")


class Miss(StrEnum):
    """Why a checkout found no session (a metric label)."""

    ABSENT = "absent"
    FINGERPRINT = "fingerprint"
    HISTORY = "history"
    EXPIRED = "expired"
    CHECKED_OUT = "checked_out"


class Eviction(StrEnum):
    """Why a session left the cache other than by checkout (a metric label)."""

    CAPACITY = "capacity"
    BYTES = "bytes"
    TTL = "ttl"
    FINISHED = "finished"
    ERROR = "error"


@dataclass(slots=True)
class Entry(Generic[S]):
    """A kept session, what it is valid for, its accounted size and when it was last used."""

    session: S
    fingerprint: object
    state: bytes
    size: int
    used: float


# An entry's place: the stream key and a serial number telling its variants apart.
_Slot = tuple[Hashable, int]


class SessionCache(Generic[S]):
    """LRU of checked-in sessions; ``max_entries`` 0 turns caching off."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        ttl: float,
        *,
        variants: int = 4,
        on_evict: Callable[[Eviction], None] = lambda reason: None,
        on_collision: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.variants = variants
        self._on_evict = on_evict
        self._on_collision = on_collision
        self._clock = clock
        self._entries: OrderedDict[_Slot, Entry[S]] = OrderedDict()
        self._slots: dict[Hashable, list[_Slot]] = {}  # a key's variants, oldest first
        self._out: dict[Hashable, list[object]] = {}  # fingerprints checked out, by key
        self._serials = itertools.count()
        self.bytes = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry[S]]:
        """The kept entries, least recently used first, for inspection (the live
        objects: changing one changes what a lookup finds)."""
        return list(self._entries.values())

    def _find(self, key: Hashable, fingerprint: object) -> _Slot | None:
        for slot in self._slots.get(key, ()):
            if self._entries[slot].fingerprint == fingerprint:
                return slot
        return None

    def peek(self, key: Hashable, fingerprint: object) -> tuple[S, bytes] | None:
        """The session ``checkout`` would find now with the state it continues, left
        where it is.

        Lets a caller check the request against the session (its state as these
        bytes, or as another encoding of them the session knows) before committing
        to it with ``checkout`` of these bytes.
        """
        slot = self._find(key, fingerprint)
        if slot is None:
            return None
        entry = self._entries[slot]
        if self._clock() - entry.used > self.ttl:
            return None
        return entry.session, entry.state

    def fingerprint_of(self, key: Hashable, state: bytes) -> object | None:
        """The fingerprint of the key's session that continues ``state``, if one does:
        for a caller that has the state but not the request settings (they are part of
        what the state's bytes name, so no two variants of a key share them)."""
        for slot in self._slots.get(key, ()):
            entry = self._entries[slot]
            if entry.state == state:
                return entry.fingerprint
        return None

    def checkout(
        self, key: Hashable, fingerprint: object, state: bytes
    ) -> tuple[S | None, Miss | None]:
        """Take the session for ``key`` and ``fingerprint`` if it continues ``state``.

        Returns the session (None on a miss) and the miss reason (None on a hit).
        The entry found is removed either way: a mismatched one is stale. Sessions of
        the key under other fingerprints stay.
        """
        if fingerprint in self._out.get(key, ()):
            return None, Miss.CHECKED_OUT
        slot = self._find(key, fingerprint)
        if slot is None:
            return None, (Miss.FINGERPRINT if key in self._slots else Miss.ABSENT)
        entry = self._remove(slot)
        if self._clock() - entry.used > self.ttl:
            self._on_evict(Eviction.TTL)
            return None, Miss.EXPIRED
        if entry.state != state:
            return None, Miss.HISTORY
        self._out.setdefault(key, []).append(fingerprint)
        return entry.session, None

    def release(self, key: Hashable, fingerprint: object) -> bool:
        """The caller is done with the checked-out session without checking it back in;
        False when none was checked out under ``key`` and ``fingerprint``."""
        out = self._out.get(key)
        if out is None or fingerprint not in out:
            return False
        out.remove(fingerprint)
        if not out:
            del self._out[key]
        return True

    def checkin(
        self,
        key: Hashable,
        session: S,
        fingerprint: object,
        state: bytes,
        size: int,
    ) -> None:
        """Keep ``session`` until the client sends ``state`` back, then enforce the bounds."""
        continued = fingerprint in self._out.get(key, ())
        self.release(key, fingerprint)
        if not self.enabled or size > self.max_bytes:
            return
        old = self._find(key, fingerprint)
        if old is not None:
            self._remove(old)
        slots = self._slots.setdefault(key, [])
        if slots and old is None:
            if not continued:
                self._on_collision()  # a new stream under this request id
            if len(slots) >= self.variants:
                self._remove(slots[0])
                self._on_evict(Eviction.CAPACITY)
                slots = self._slots.setdefault(key, [])
        slot = (key, next(self._serials))
        slots.append(slot)
        self._entries[slot] = Entry(session, fingerprint, state, size, self._clock())
        self.bytes += size
        while len(self._entries) > self.max_entries:
            self._evict_oldest(Eviction.CAPACITY)
        while self.bytes > self.max_bytes:
            self._evict_oldest(Eviction.BYTES)

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
            self._evict_oldest(Eviction.TTL)
            dropped += 1
        return dropped

    def clear(self) -> None:
        self._entries.clear()
        self._slots.clear()
        self.bytes = 0

    def _remove(self, slot: _Slot) -> Entry[S]:
        entry = self._entries.pop(slot)
        self.bytes -= entry.size
        key = slot[0]
        slots = self._slots[key]
        slots.remove(slot)
        if not slots:
            del self._slots[key]
        return entry

    def _evict_oldest(self, reason: Eviction) -> None:
        self._remove(next(iter(self._entries)))
        self._on_evict(reason)
