"""A plain chunk's carried state written in its frame (app/streams/state_frame.py) is
msgspec's encoding of that state, full and compact, whatever its other fields hold."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from app.streams.state_frame import StateFrame
from app.streams.state_json import COMPACT, HistoryJson
from app.wire.protocol import CompactStreamState, StreamState, encoder
from tests.support.streams import PROPS

_ids = st.lists(st.integers(0, 2**31), max_size=6)
# Pieces with what JSON escapes or a frame's cut could trip on: quotes, a key's text,
# brackets, ``%`` and characters past ASCII (no lone surrogate: no state holds one).
_text = st.text(
    alphabet=st.sampled_from('ab"\\%[]:,{}é🙂\n') | st.characters(codec="utf-8"),
    max_size=12,
)
_piece = _text | st.sampled_from(['"logprob_context_token_ids":[1]', '"output_tokens":3'])
_states = st.builds(
    StreamState,
    prev_tokens=st.lists(_piece, max_size=4),
    prefix_offset=st.integers(0, 5),
    read_offset=st.integers(0, 5),
    role_sent=st.booleans(),
    logprob_text_offset=st.integers(0, 9),
    tools_streamed=st.booleans(),
    last_tool_call_ids=st.lists(_piece, max_size=3),
)


@settings(PROPS, max_examples=300)
@given(
    state=_states,
    contexts=st.lists(_ids.filter(bool), min_size=1, max_size=3),
    history=st.lists(st.integers(0, 2**31), min_size=1, max_size=8),
    digest=st.text(alphabet="0123456789abcdef", min_size=1, max_size=32),
)
def test_a_frame_writes_what_msgspec_encodes(
    state: StreamState, contexts: list[list[int]], history: list[int], digest: str
) -> None:
    frame = StateFrame(state)
    lens = [1] * len(history)
    written = HistoryJson(COMPACT, history, lens)
    for context in contexts:  # one frame writes each chunk's state in turn
        frame.state = msgspec.structs.replace(frame.state, logprob_context_token_ids=context)
        whole = msgspec.structs.replace(
            frame.state, output_token_ids=history, output_chunk_lens=lens
        )
        assert written.state(frame.state, frame) == encoder.encode(whole)
        compact = CompactStreamState(
            state.prev_tokens,
            state.prefix_offset,
            state.read_offset,
            state.role_sent,
            context,
            state.logprob_text_offset,
            len(history),
            digest,
            state.tools_streamed,
            len(state.last_tool_call_ids),
        )
        assert frame.compact(len(history), digest.encode()) == encoder.encode(compact)
