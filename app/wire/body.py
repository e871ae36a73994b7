"""A request body: read under the size limit, decoded once into msgspec structs.

Any failure to decode is the client's 400, whose message says what to send
(app/wire/body_errors.py words it).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from app.streams.state_json import LiftedHistory, lift_history
from app.wire import body_errors
from app.wire.advisories import unknown_fields
from app.wire.errors import BodyTooLarge, InvalidBody
from app.wire.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    CompactChatStreamRequest,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
)

T = TypeVar("T")

_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}

# The endpoint each request body belongs to, and whether it is the streamed one.
_BODY_KINDS: dict[type[Any], tuple[str, bool]] = {
    ChatDerenderRequest: (body_errors.CHAT, False),
    ChatStreamDerenderRequest: (body_errors.CHAT, True),
    CompactChatStreamRequest: (body_errors.CHAT, True),
    CompletionDerenderRequest: (body_errors.COMPLETIONS, False),
    CompletionStreamDerenderRequest: (body_errors.COMPLETIONS, True),
}


def too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"request body exceeds the server limit of {limit} bytes (--max-request-bytes). "
        "Send fewer choices, tokens or logprobs per request, or raise the limit."
    )


async def read_body(headers: dict[bytes, bytes], receive: Receive, limit: int) -> bytes:
    """The whole body of a JSON request, refused as soon as it passes ``limit`` bytes."""
    declared = headers.get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    content_type = headers.get(b"content-type", b"").decode("latin-1")
    if content_type.lower().split(";", 1)[0].strip() != "application/json":
        raise InvalidBody(
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
        )
    parts = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            raise too_large(limit)
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts)


def decode_body(body: bytes, kind: type[T], endpoint: str = body_errors.CHAT) -> T:
    """Decode and type-check a JSON body; any failure is the client's 400, whose message
    says what to send (``endpoint`` names the path for a ``BodyView``)."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        result: T = decoder.decode(body)
    except msgspec.ValidationError as exc:
        endpoint, streamed = _BODY_KINDS.get(kind, (endpoint, False))
        raise body_errors.invalid(body, str(exc), endpoint, streamed) from None
    except msgspec.DecodeError as exc:
        endpoint, _ = _BODY_KINDS.get(kind, (endpoint, False))
        raise body_errors.malformed(body, str(exc), endpoint) from None
    except RecursionError:
        raise body_errors.too_deep() from None
    return result


# Every top-level field a derender body may carry, on either endpoint.
PROTOCOL_FIELDS = frozenset(
    field.encode_name for kind in _BODY_KINDS for field in msgspec.structs.fields(kind)
)


class _ProtocolView(BodyView, forbid_unknown_fields=True):
    """A view of a body that has the protocol's fields only (the one-shot ones kept as
    raw bytes, as the view keeps the rest). A body with others fails to decode as this
    and is viewed again leniently, its unknown fields named: the common body pays for
    one decode, as before."""

    generate_response: msgspec.Raw = msgspec.Raw(b"null")
    generate_responses: msgspec.Raw = msgspec.Raw(b"null")


@dataclass(frozen=True, slots=True)
class Received:
    """A derender POST as its endpoint gets it: the body, one cheap view of its fields,
    the stream id header, whether the client asked for compact states
    (docs/transports.md), the history arrays when they were lifted out of the view's
    ``stream_state`` (app/streams/state_json.py), and the top-level fields the body has that the
    protocol does not (ignored, as vLLM ignores them, and warned of)."""

    body: bytes
    view: BodyView
    stream_id: str | None
    compact: bool = False
    history: LiftedHistory | None = None
    unknown_fields: tuple[str, ...] = ()


def received(body: bytes, endpoint: str, stream_id: str | None, compact: bool = False) -> Received:
    """The body viewed once. A streamed chunk's history is lifted out first, so the view
    costs no more for a long stream than for a short one; a body that does not decode
    lifted is viewed whole (and refused, if it is not JSON, as it is)."""
    lifted = lift_history(body)
    if lifted is not None:
        with contextlib.suppress(msgspec.DecodeError, RecursionError):
            view, unknown = _viewed(lifted[0])
            if view.stream:
                return Received(body, view, stream_id, compact, lifted[1], unknown)
    try:
        view, unknown = _viewed(body)
    except (msgspec.DecodeError, RecursionError):
        decode_body(body, BodyView, endpoint)  # raises with what to fix
        raise
    return Received(body, view, stream_id, compact, unknown_fields=unknown)


_protocol_view = msgspec.json.Decoder(_ProtocolView)
_view_decoder = msgspec.json.Decoder(BodyView)


def _viewed(body: bytes) -> tuple[BodyView, tuple[str, ...]]:
    """The body's view, and its top-level fields the protocol does not have."""
    try:
        return _protocol_view.decode(body), ()
    except msgspec.DecodeError:  # an unknown field, or one the strict view reads and fails
        view = _view_decoder.decode(body)  # raises if something else is wrong
        return view, tuple(unknown_fields(body, PROTOCOL_FIELDS))


class _Named(msgspec.Struct):
    request_id: str | None = None


class _RequestIds(msgspec.Struct):
    generate_chunk: _Named | None = None
    generate_response: _Named | None = None
    generate_responses: list[_Named] | None = None


_request_ids = msgspec.json.Decoder(_RequestIds)


def request_id_of(body: bytes) -> str:
    """The request id a body names, for a log line ("?" when it names none)."""
    try:
        ids = _request_ids.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return "?"
    named = ids.generate_chunk or ids.generate_response
    if named is None and ids.generate_responses:
        named = ids.generate_responses[0]
    return (named.request_id if named is not None else None) or "?"
