"""The routing convention: a header that names the stream a chunk belongs to.

A load balancer cannot hash on a JSON body, so clients repeat the stream's
``request_id`` in ``X-Derender-Stream-Id`` and the balancer hashes on that header to
keep a stream's chunks on the process that holds its session. A header that names
another stream than the body would route the chunk by the wrong key, so it is refused.
"""

from __future__ import annotations

from app.wire.errors import BadRequest

STREAM_ID_HEADER = "X-Derender-Stream-Id"


def check_stream_id(header: str | None, request_id: str) -> None:
    """The header, when sent, must equal the chunk's ``request_id``."""
    if header is not None and header != request_id:
        raise BadRequest(
            f"{STREAM_ID_HEADER} ({header!r}) does not match generate_chunk.request_id "
            f"({request_id!r}); send the stream's request_id in both.",
            "generate_chunk.request_id",
        )
