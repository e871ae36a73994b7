"""Batch frames (docs/transports.md): chunks of many streams in one message, answered in
one reply.

An engine emits one step for all its requests at once; a frame carries that step, one
entry per stream, to a WebSocket connection or a batch POST. A frame is a JSON object
``{"batch": [entry, ...]}`` whose entries are what the transport's single-chunk message
carries; its reply is ``{"batch": [reply, ...]}``, one reply per entry in the same
order, each the one a single-chunk message would have got (a chunk and its state, or
the entry's own error). Answering a frame is a loop over its entries through the
transport's single-chunk path: nothing of a chunk's answer depends on the frame it
came in, and an entry that fails answers for itself only.

A frame as a whole is bounded (``--batch-max-entries``, ``--batch-max-bytes``); one
over a bound, or whose ``batch`` is not a list, is refused whole, none of its entries
answered. A long frame yields the event loop between entries once a turn's worth of
work is done, so other connections and ``/health`` are served while it is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from msgspec import Raw, Struct

from app.serving.metrics import Metrics
from app.serving.settings import Settings
from app.wire.errors import BadRequest, BodyTooLarge
from app.wire.protocol import encoder

BATCH_SUFFIX = "/batch"
# Work a frame does in one turn of the event loop before it lets others run: about a
# dozen chunks (a chunk's answer costs tens of microseconds), a small share of the
# delay /health may see.
TURN_SECONDS = 0.001

# An entry's reply, as the frame's encode writes it (a struct, or ``Raw`` JSON), and its
# status (200, or its error's code).
Answer = tuple[Any, int]
E = TypeVar("E")
# The transport's single-chunk path for an entry (its JSON, as the frame holds it: never
# copied out unless it has to be read whole; or its message, read with the frame): its
# answer at once (a chunk that continues a held stream inline), or one to await.
EntryAnswer = Callable[[E], Answer | Awaitable[Answer]]

_NULL = Raw(b"null")
_OPEN, _SEPARATOR, _CLOSE = b'{"batch":[', b",", b"]}"


class _Frame(Struct):
    """A message as far as telling a frame from a chunk: its ``batch`` unread."""

    batch: Raw = _NULL


_frame = msgspec.json.Decoder(_Frame)
_entries = msgspec.json.Decoder(list[Raw])


def frame_too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"batch frame over the server limit of {limit} bytes (--batch-max-bytes): send its "
        "chunks in more frames."
    )


def frame_entries(body: bytes, settings: Settings) -> list[Raw] | None:
    """The entries of a frame, each its own JSON; None when ``body`` is not a frame (it
    has no ``batch``, or is not a JSON object: the single-chunk path says what is
    wrong). Raises the error that refuses the frame whole."""
    try:
        batch = _frame.decode(body).batch
    except (msgspec.DecodeError, RecursionError):
        return None
    if batch == _NULL:
        return None
    if len(body) > settings.batch_max_bytes:
        raise frame_too_large(settings.batch_max_bytes)
    try:
        entries = _entries.decode(batch)
    except (msgspec.DecodeError, RecursionError):
        raise BadRequest(
            'invalid batch frame: "batch" must be a list of chunk bodies', "batch"
        ) from None
    if len(entries) > settings.batch_max_entries:
        raise BadRequest(
            f"batch frame of {len(entries)} chunks, over the server limit of "
            f"{settings.batch_max_entries} (--batch-max-entries): send them in more frames.",
            "batch",
        )
    return entries


async def answered(
    entries: list[E], answer: EntryAnswer[E], metrics: Metrics, endpoint: str
) -> bytes:
    """A frame's reply: each entry answered in order by ``answer`` (the transport's
    single-chunk path, which answers a failure with the entry's error reply), at once
    or awaited, the event loop yielded between entries once a turn's worth of work is
    done. Each reply is encoded as it comes, onto the end of the frame's (no bytes of
    its own to join). Its entries are counted by status and the frame timed once
    (``endpoint``, mode ``batch``)."""
    frame = bytearray(_OPEN)
    failed: dict[int, int] = {}  # the entries answered 200 are the others
    started = turn = time.perf_counter()
    clock, encode = time.perf_counter, encoder.encode_into
    for entry in entries:
        given = answer(entry)
        reply, status = given if isinstance(given, tuple) else await given
        encode(reply, frame, -1)
        frame += _SEPARATOR
        if status != 200:
            failed[status] = failed.get(status, 0) + 1
        if clock() - turn >= TURN_SECONDS:
            await asyncio.sleep(0)  # anyio's costs a lookup of the running library
            turn = clock()
    if entries:
        del frame[-1]  # the last separator
    frame += _CLOSE
    succeeded = len(entries) - sum(failed.values())
    statuses = {200: succeeded, **failed} if succeeded else failed
    metrics.observe_frame(endpoint, statuses, time.perf_counter() - started)
    return bytes(frame)
