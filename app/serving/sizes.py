"""Byte sizes as people write them: ``256MiB`` or ``16M`` on the command line, ``256 MiB``
in help and logs, raw bytes still accepted.

``K``, ``M``, ``G`` are binary, as ``KiB``, ``MiB``, ``GiB``; ``KB``, ``MB``, ``GB`` are
decimal, as coreutils reads them. Case does not matter, and a space may come before
the unit.
"""

from __future__ import annotations

_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}
_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "bytes": 1,
    **{p: 2 ** (10 * n) for p, n in _POWERS.items()},
    **{p + "ib": 2 ** (10 * n) for p, n in _POWERS.items()},
    **{p + "b": 10 ** (3 * n) for p, n in _POWERS.items()},
}
_NAMES = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def parse_size(text: str) -> int:
    """``text`` in bytes: a whole number, or a number and a unit (a fraction when the
    bytes come out whole: ``1.5GiB``). Raises ValueError saying what it accepts."""
    stripped = text.strip()
    digits = len(stripped) - len(stripped.lstrip("0123456789."))
    number, unit = stripped[:digits], stripped[digits:].strip()
    multiplier = _UNITS.get(unit.lower())
    if number.strip(".") == "" or number.count(".") > 1 or multiplier is None:
        raise ValueError(
            f"{text!r} is not a size: write bytes (1048576) or a number and a unit "
            "(256MiB, 16M, 1.5GiB; KB/MB/GB are powers of 1000)"
        )
    whole, _, fraction = number.partition(".")
    # exact arithmetic: 1.1MiB is 1153433.6 bytes, not a size
    scale: int = 10 ** len(fraction)
    numerator = int(whole or "0") * scale + int(fraction or "0")
    size, remainder = divmod(numerator * multiplier, scale)
    if remainder:
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return size


def human_size(size: int) -> str:
    """``size`` in the largest binary unit that holds it exactly (``256 MiB``), else
    in bytes: what is shown can be passed back as it is."""
    for name, unit in _NAMES:
        if size and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"
