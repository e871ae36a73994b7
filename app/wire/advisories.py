"""What we accept but suspect (../shared/DESIGN.md, invariant 4): answered as vLLM would
answer it, with an ``x-derender-warning`` header saying what looks wrong and a counter
by kind, so a client's mistake is never silent and never changes the reply.

Each check runs only where the chunk costs as much anyway: the fields a body has
beyond the protocol's are named only when its strict view fails, and a carried state
is inspected only off the echoed lane (a chunk that continues its kept session byte for
byte is what the stream last sent).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum

import msgspec
from starlette.responses import Response

from app.serving.metrics import Metrics
from app.wire.protocol import StreamState

WARNING_HEADER = "x-derender-warning"

_STATE_FIELDS = frozenset(field.encode_name for field in msgspec.structs.fields(StreamState))
_fields_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])


class Advisory(StrEnum):
    """What a warning is about (a metric label)."""

    UNKNOWN_FIELDS = "unknown_fields"
    EMPTY_STATE = "empty_state"
    FOREIGN_STATE = "foreign_state"
    DIVERGED_STATE = "diverged_state"


def advise(response: Response, metrics: Metrics, advisory: Advisory, message: str) -> None:
    """Add one warning to ``response`` and count it."""
    response.headers.append(WARNING_HEADER, f"{advisory}: {message}")
    metrics.advisories.labels(advisory).inc()


def advise_on_state(response: Response, metrics: Metrics, raw: bytes) -> Response:
    """``response`` with a warning if the carried state ``raw`` cannot be a reply's."""
    if raw != b"null":
        found = state_advisory(raw)
        if found is not None:
            advise(response, metrics, *found)
    return response


def named(fields: Sequence[str]) -> str:
    """Field names as a header can carry them: the first few, each a JSON string in ASCII
    (a client's names are any text), cut to a sane length."""
    shown = ", ".join(json.dumps(name[:64]) for name in fields[:8])
    return shown + (", ..." if len(fields) > 8 else "")


def unknown_fields(body: bytes, known: frozenset[str]) -> list[str]:
    """The top-level fields of a JSON object ``body`` that are not in ``known``, in the
    order sent (none for a body that is not an object)."""
    try:
        fields = _fields_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return []
    return [name for name in fields if name not in known]


def state_advisory(raw: bytes) -> tuple[Advisory, str] | None:
    """Why a carried ``stream_state`` cannot be a state a reply carried, if it cannot:
    an empty object (read as no history: the stream starts over) or one with fields a
    state does not have (a whole reply sent as the state, or a misspelled field)."""
    try:
        fields = _fields_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None  # not an object: the decode of the request says what is wrong
    if not fields:
        return Advisory.EMPTY_STATE, (
            "stream_state is empty, so the stream starts over; send the stream_state of "
            "the previous reply, or leave it out on a stream's first chunk."
        )
    foreign = [name for name in fields if name not in _STATE_FIELDS]
    if not foreign:
        return None
    return Advisory.FOREIGN_STATE, (
        f"stream_state has fields a stream state does not ({named(foreign)}), which "
        "were ignored; send the stream_state field of the previous reply, not the reply."
    )


def diverges(known: Sequence[int], carried: Sequence[int]) -> bool:
    """Whether a carried history can continue neither way from the one this replica
    knows of the stream: not a retry of an earlier chunk (a prefix of it) and not the
    stream moved on elsewhere (an extension of it)."""
    shorter = min(len(known), len(carried))
    return known[:shorter] != carried[:shorter]


DIVERGED_WARNING = (
    "stream_state's history is not this stream's as this replica last answered it (neither "
    "an earlier nor a later point of it): the reply continues the history sent. Check that "
    "each stream is sent its own previous reply's stream_state."
)
