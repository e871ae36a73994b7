"""A parsed stream's reply chunk as JSON, written at once where it is the common one.

Most chunks of a stream are one choice with a delta and nothing else: no logprobs, no
finish or stop reason, no token ids, usage or metrics. Their reply is then a fixed
frame around five values (id, created, model, index, delta), taken from msgspec's own
encoding of a chunk with markers in their places, so the bytes are the ones encoding the
chunk struct gives (tests/test_reply.py), at a fraction of the cost: a chunk struct is
two dozen fields to build and to encode, on every chunk of every stream. The id and
model are the stream's, encoded once per session. Any other chunk is the struct,
encoded.
"""

from __future__ import annotations

import time
from typing import get_args

import msgspec
from msgspec import Raw

from app.streams.derender import chat_chunk
from app.streams.session import StreamSession
from app.wire.frames import cut
from app.wire.protocol import (
    ChatCompletionChunk,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    DeltaMessage,
    encoder,
)
from parsers.stream import Section

# Markers that each encode as one string or integer nothing else in a chunk writes.
_ID, _MODEL = "\x01id", "\x01model"
_CREATED, _INDEX = 8_000_000_001, 8_000_000_002
_DELTA = DeltaMessage(role=None, content="\x01content", reasoning=None)


def _frame() -> list[bytes]:
    """The bytes of a common chunk around its values (id, created, model, index, delta:
    six pieces)."""
    choice = ChatStreamChoice(_INDEX, _DELTA, None, None, None, None)
    chunk = ChatCompletionChunk(
        _ID, "chat.completion.chunk", _CREATED, _MODEL, [choice], None, None, None, None, None
    )
    return cut(chunk, [encoder.encode(value) for value in (_ID, _CREATED, _MODEL, _INDEX, _DELTA)])


_BEFORE_ID, _BEFORE_CREATED, _BEFORE_MODEL, _BEFORE_INDEX, _BEFORE_DELTA, _AFTER = _frame()


def _plain_delta(section: Section) -> tuple[bytes, bytes]:
    """The bytes of a delta that is a text alone in ``section``, before and after the
    text's JSON (the chunk's end after it)."""
    marker = "\x01text"
    delta = DeltaMessage(role=None, content=None, reasoning=None)
    before, after = cut(
        msgspec.structs.replace(delta, **{section: marker}), [encoder.encode(marker)]
    )
    return before, after + _AFTER


_PLAIN = {section: _plain_delta(section) for section in get_args(Section)}


# A chunk's reply (``ChatStreamReply``) around its chunk's and state's JSON.
_REPLY = cut(ChatStreamReply(Raw(b"\x01chunk"), Raw(b"\x01state")), [b"\x01chunk", b"\x01state"])


def reply_json(chunk: ChatCompletionChunk | Raw, state: bytes) -> bytes:
    """``ChatStreamReply(chunk, Raw(state))`` as ``encoder.encode`` writes it: joined
    around the two when the chunk is JSON already (a common one), not encoded."""
    if type(chunk) is Raw:
        return b"".join((_REPLY[0], chunk, _REPLY[1], state, _REPLY[2]))
    return encoder.encode(ChatStreamReply(chunk, Raw(state)))


def encoded_chunk(
    request: ChatStreamDerenderRequest,
    model: str,
    choice: ChatStreamChoice,
    return_token_ids: bool,
    session: StreamSession,
) -> ChatCompletionChunk | Raw:
    """The reply chunk of ``choice``, ``session``'s, as ``chat_chunk`` makes it: encoded
    here when it is a common one, else the struct."""
    chunk = request.generate_chunk
    if (
        choice.logprobs is not None
        or choice.finish_reason is not None
        or choice.stop_reason is not None
        or choice.token_ids is not None
        or chunk.usage is not None
        or chunk.metrics is not None
        or (return_token_ids and chunk.prompt_token_ids is not None)
    ):
        return chat_chunk(request, model, [choice], return_token_ids)
    delta = encoder.encode(choice.delta)
    return _written(session, chunk.request_id, choice.index, model, b"", delta, _AFTER)


def plain_chunk(
    session: StreamSession, request_id: str, index: int, model: str, section: Section, text: str
) -> Raw:
    """The reply chunk of a plain chunk (``ChatStream.plain``): one choice whose delta
    is ``text`` alone, in ``section``, and nothing else; as ``encoded_chunk`` writes it."""
    before, after = _PLAIN[section]
    return _written(session, request_id, index, model, before, encoder.encode(text), after)


def _written(
    session: StreamSession,
    request_id: str,
    index: int,
    model: str,
    before: bytes,
    delta: bytes,
    after: bytes,
) -> Raw:
    """A common chunk of ``session``'s stream: its frame around ``delta`` (the delta's
    JSON, or a value of it between ``before`` and ``after``, the frame's end included)."""
    head = session.reply_head
    if head is None or head.model != model or head.request_id != request_id or head.index != index:
        head = session.reply_head = ReplyHead(request_id, index, model)
    now = time.time()
    if not head.start <= now < head.end:
        head.moved_to(now)
    prefix = head.prefixes.get(before)
    if prefix is None:
        prefix = head.prefixes[before] = b"".join((head.head, head.created, head.middle, before))
    return Raw(b"".join((prefix, delta, after)))


class ReplyHead:
    """A stream's chunks' bytes before their delta (or the delta's value, after
    ``before``) in the second they are created in (``created`` is whole seconds, as
    ``chat_chunk`` has it): joined once per second and delta shape, so a chunk joins
    three pieces and formats nothing. The stream's (and model's) own: a chunk of
    another is written under a new one."""

    __slots__ = (
        "created",
        "end",
        "head",
        "index",
        "middle",
        "model",
        "prefixes",
        "request_id",
        "start",
    )

    def __init__(self, request_id: str, index: int, model: str) -> None:
        self.request_id, self.index, self.model = request_id, index, model
        self.head = b"".join((_BEFORE_ID, encoder.encode(request_id), _BEFORE_CREATED))
        self.middle = b"".join(
            (_BEFORE_MODEL, encoder.encode(model), _BEFORE_INDEX, b"%d" % index, _BEFORE_DELTA)
        )
        self.start = self.end = 0
        self.created = b"0"
        # Per ``before`` (one per delta shape: three at most), the frame up to its end.
        self.prefixes: dict[bytes, bytes] = {}

    def moved_to(self, now: float) -> None:
        """Chunks are created in ``now``'s second from now on."""
        second = int(now)
        self.start, self.end = second, second + 1
        self.created = b"%d" % second
        self.prefixes = {}
