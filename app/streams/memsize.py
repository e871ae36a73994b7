"""What a kept object really costs in memory, so the cache's byte bound is a bound on RSS.

``sys.getsizeof`` counts one object; this walks plain data (msgspec structs, slotted
dataclasses, containers, strings, bytes, ``Raw``) and adds what each object owns,
counting a shared object once. A list of ints is counted from its length (every id
above 256 is its own 28-byte object), so a long history costs O(1) to measure.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import msgspec

# A CPython int in 1..2**30 (a token id): 28 bytes; -5..256 are shared singletons.
INT_BYTES = sys.getsizeof(1 << 20)
_SHARED = (type(None), bool, type(msgspec.UNSET))


def int_list_bytes(values: Sequence[int]) -> int:
    """A list of token ids: the list and an int object per id (small ids are shared,
    and rare enough in a history to count as owned)."""
    return sys.getsizeof(values) + INT_BYTES * len(values)


def deep_size(root: object, seen: set[int] | None = None) -> int:
    """Bytes owned by ``root`` and everything it refers to, each object once.

    ``seen`` carries the ids already counted across calls, so parts that share an
    object (a request and the session it built) count it once.
    """
    seen = set() if seen is None else seen
    total = 0
    stack: list[Any] = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, _SHARED) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, msgspec.Raw):
            # A Raw copied out of a body owns a buffer of its length.
            total += sys.getsizeof(obj) + sys.getsizeof(b"") + len(obj)
            continue
        total += sys.getsizeof(obj)
        if isinstance(obj, (str, bytes, bytearray, int, float)):
            continue
        if isinstance(obj, list) and obj and type(obj[0]) is int:
            total += INT_BYTES * len(obj)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, msgspec.Struct):
            stack.extend(getattr(obj, name) for name in obj.__struct_fields__)
        else:
            stack.extend(getattr(obj, name, None) for name in getattr(obj, "__slots__", ()))
    return total
