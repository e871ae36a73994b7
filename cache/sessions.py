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

A holder that keeps a session itself between chunks (a WebSocket connection) counts it
here as ``Held``: its size and last use, in the same LRU and byte count as the kept
entries, so one bound covers every session alive. Evicted, the holder is told to let
the session go; it never costs a lookup.
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


@dataclass(slots=True, eq=False)
class Held:
    """A session its holder keeps (see the module's docstring): what it costs, when it
    was last used, and how its holder lets it go when it is evicted. ``counted`` is
    False once it has left the cache (evicted, or let go by the holder)."""

    size: int
    used: float
    let_go: Callable[[], None]
    counted: bool = True


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
        self._held: OrderedDict[Held, None] = OrderedDict()  # least recently used first
        self.bytes = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries) + len(self._held)

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

    def checkout_state(self, key: Hashable, state: bytes) -> tuple[S, object] | None:
        """``fingerprint_of`` and ``checkout`` in one lookup, with the fingerprint found;
        None (no such session, or it expired or is out) leaves everything as it was."""
        for slot in self._slots.get(key, ()):
            entry = self._entries[slot]
            if entry.state != state:
                continue
            fingerprint = entry.fingerprint
            if fingerprint in self._out.get(key, ()) or self._clock() - entry.used > self.ttl:
                return None
            self._remove(slot)
            self._out.setdefault(key, []).append(fingerprint)
            return entry.session, fingerprint
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
        self._bound()

    def hold(self, size: int, let_go: Callable[[], None]) -> Held | None:
        """Count a session its holder keeps, of ``size`` bytes, as the most recently
        used, then enforce the bounds (older sessions may go). None when it cannot be
        kept: caching is off, or it alone is over the byte bound."""
        if not self.enabled or size > self.max_bytes:
            return None
        held = Held(size, self._clock(), let_go)
        self._held[held] = None
        self.bytes += size
        self._bound()
        return held

    def touch(self, held: Held, size: int) -> bool:
        """The holder used its session again, which now costs ``size``: it becomes the
        most recently used, then the bounds are enforced. False when it is no longer
        counted (evicted meanwhile, or now alone over the byte bound: evicted here)."""
        if not held.counted:
            return False
        held.used = self._clock()
        self._held.move_to_end(held)
        if size != held.size:  # most uses do not change what the holder measures
            if size > self.max_bytes:
                self._evict_held(held, Eviction.BYTES)
                return False
            self.bytes += size - held.size
            held.size = size
            self._bound()
        return True

    def unhold(self, held: Held) -> None:
        """The holder let its session go (the stream finished or failed, or the holder
        closed): it stops counting, and ``let_go`` is not called."""
        if held.counted:
            del self._held[held]
            self.bytes -= held.size
            held.counted = False

    def _bound(self) -> None:
        while len(self) > self.max_entries:
            self._evict_oldest(Eviction.CAPACITY)
        while self.bytes > self.max_bytes:
            self._evict_oldest(Eviction.BYTES)

    def sweep(self) -> int:
        """Drop sessions idle for longer than the TTL; returns how many.

        Entries are kept in order of last use, so the sweep stops at the first fresh one.
        """
        now = self._clock()
        dropped = 0
        while (used := self._oldest_use()) is not None and now - used > self.ttl:
            self._evict_oldest(Eviction.TTL)
            dropped += 1
        return dropped

    def clear(self) -> None:
        """Forget every session: kept ones are dropped, held ones let go by their holders."""
        self._entries.clear()
        self._slots.clear()
        for held in list(self._held):
            self.unhold(held)
            held.let_go()
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

    def _oldest_use(self) -> float | None:
        """When the least recently used session, kept or held, was last used."""
        uses = [
            next(iter(self._entries.values())).used if self._entries else None,
            next(iter(self._held)).used if self._held else None,
        ]
        return min((used for used in uses if used is not None), default=None)

    def _evict_oldest(self, reason: Eviction) -> None:
        """Evict the least recently used session, kept or held (each LRU is in order of
        use, so it is the older of their heads)."""
        held = next(iter(self._held), None)
        if self._entries:
            entry = next(iter(self._entries.items()))
            if held is None or entry[1].used < held.used:
                self._remove(entry[0])
                self._on_evict(reason)
                return
        assert held is not None  # only called while a session is over a bound
        self._evict_held(held, reason)

    def _evict_held(self, held: Held, reason: Eviction) -> None:
        self.unhold(held)
        held.let_go()
        self._on_evict(reason)
