"""A parsed stream's reply chunk written as JSON at once (app/streams/reply.py) is the
bytes msgspec writes for the chunk struct, whatever the stream's id, model and delta."""

from __future__ import annotations

import re
import time

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Raw

from app.streams.derender import chat_chunk
from app.streams.reply import encoded_chunk, reply_json
from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatRequest,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    GenerateChunk,
    GenerateStreamChoice,
    encoder,
)
from tests.support.streams import PROPS, factory_for, options

_CREATED = re.compile(rb'"created":\d+')


def _request(request_id: str, index: int) -> ChatStreamDerenderRequest:
    choice = GenerateStreamChoice(index=index, token_ids=[1])
    chunk = GenerateChunk(choices=[choice], request_id=request_id)
    return ChatStreamDerenderRequest(chunk, chat_request=ChatRequest(messages=Raw(b"[]")))


def _session(tokenizer: Tokenizer) -> StreamSession:
    factory = factory_for(tokenizer, "hermes", "qwen3")
    return StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])


def _same(written: object, struct: object) -> bool:
    """The two encodings agree but for ``created`` (the clock may tick between them)."""
    assert isinstance(written, Raw)
    return _CREATED.sub(b"", bytes(written)) == _CREATED.sub(b"", encoder.encode(struct))


deltas = st.builds(
    DeltaMessage,
    role=st.sampled_from([None, "assistant"]),
    content=st.none() | st.text(),
    reasoning=st.none() | st.text(),
    tool_calls=st.lists(
        st.builds(
            DeltaToolCall,
            index=st.integers(0, 3),
            id=st.none() | st.text(max_size=8),
            function=st.builds(DeltaFunctionCall, name=st.text(max_size=8)),
        ),
        max_size=2,
    ),
)


@PROPS
@given(
    request_id=st.text(),
    index=st.integers(0, 2**31),
    model=st.text(),
    delta=deltas,
    again=st.text(),
)
def test_a_common_chunk_is_written_as_msgspec_encodes_it(
    tokenizer: Tokenizer, request_id: str, index: int, model: str, delta: DeltaMessage, again: str
) -> None:
    session = _session(tokenizer)
    request = _request(request_id, index)
    choice = ChatStreamChoice(index, delta, None, None, None, None)
    struct = chat_chunk(request, model, [choice], False)
    assert _same(encoded_chunk(request, model, choice, False, session), struct)
    # The stream's frame is kept; another stream or model writes its own.
    assert _same(encoded_chunk(request, model, choice, False, session), struct)
    other = _request(again, index)
    assert _same(
        encoded_chunk(other, again, choice, False, session),
        chat_chunk(other, again, [choice], False),
    )


def test_any_other_chunk_is_the_struct(tokenizer: Tokenizer) -> None:
    session = _session(tokenizer)
    request = _request("r", 0)
    delta = DeltaMessage(role=None, content="x", reasoning=None)
    for choice in (
        ChatStreamChoice(0, delta, None, "stop", None, None),
        ChatStreamChoice(0, delta, None, None, 7, None),
        ChatStreamChoice(0, delta, None, None, None, [1]),
    ):
        reply = encoded_chunk(request, "m", choice, True, session)
        assert reply == chat_chunk(request, "m", [choice], True)


def test_created_is_the_clocks_second_even_after_the_clock_went_back(
    tokenizer: Tokenizer,
) -> None:
    session = _session(tokenizer)
    request = _request("r", 0)
    choice = ChatStreamChoice(
        0, DeltaMessage(role=None, content="x", reasoning=None), None, None, None, None
    )
    for ahead in (0, 3600, -3600):  # as written last: now, or a second the clock left
        now = time.time()
        if session.reply_head is not None:
            session.reply_head.moved_to(now + ahead)
        written = encoded_chunk(request, "m", choice, False, session)
        assert isinstance(written, Raw)
        created = msgspec.json.decode(bytes(written))["created"]
        assert int(now) <= created <= int(time.time())


@PROPS
@given(delta=deltas, state=st.dictionaries(st.text(), st.integers() | st.text()), raw=st.booleans())
def test_an_http_reply_is_written_as_msgspec_encodes_it(
    tokenizer: Tokenizer, delta: DeltaMessage, state: dict[str, object], raw: bool
) -> None:
    session = _session(tokenizer)
    request = _request("r", 0)
    choice = ChatStreamChoice(0, delta, None, None, None, None if raw else [1])
    chunk = encoded_chunk(request, "m", choice, not raw, session)
    assert isinstance(chunk, Raw) is raw  # the common chunk's JSON, or any other's struct
    carried = encoder.encode(state)
    assert reply_json(chunk, carried) == encoder.encode(ChatStreamReply(chunk, Raw(carried)))
