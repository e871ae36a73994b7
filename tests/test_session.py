"""A stream session's history in its two forms: the ids and chunk lengths a compact
state is named from, and the JSON a full state carries, written only once asked for."""

from __future__ import annotations

import msgspec

from app.streams.compact import compact_of
from app.streams.session import StreamSession
from app.streams.state_json import COMPACT, HistoryJson
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import StreamState
from tests.support.streams import factory_for, options

TEXT = "<think>\nA short thought.\n</think>\n\nThe weather in Lisbon is mild today."
CONTEXT = bytes(range(16))


def _fed(tokenizer: Tokenizer, chunks: list[list[int]], full_from: int) -> StreamSession:
    """A session fed ``chunks``, replying with compact states before chunk ``full_from``
    and with full ones from it on (its history's JSON first asked there)."""
    factory = factory_for(tokenizer, "hermes", "qwen3")
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    for at, chunk in enumerate(chunks):
        session.feed(chunk, chunk, None)
        if at < full_from:
            session.compact_state(StreamState(), CONTEXT)
        else:
            session.history_json()
    return session


def test_the_history_json_written_late_is_the_one_kept_from_the_start(
    tokenizer: Tokenizer,
) -> None:
    ids = tokenizer.encode(TEXT)
    chunks = [ids[i : i + 2] for i in range(0, len(ids), 2)]
    assert len(chunks) > 6
    always = _fed(tokenizer, chunks, 0)
    late = _fed(tokenizer, chunks, len(chunks) // 2)
    never = _fed(tokenizer, chunks, len(chunks))
    state = StreamState(role_sent=True)
    expected = HistoryJson(COMPACT, ids, [len(chunk) for chunk in chunks]).arrays()
    for session in (always, late, never):
        assert tuple(bytes(part) for part in session.history_json()) == expected
        assert session.state_digest(state) == always.state_digest(state)
        assert session.compact_state(state, CONTEXT) == always.compact_state(state, CONTEXT)


def test_a_divergence_check_reads_a_history_whose_json_was_never_written(
    tokenizer: Tokenizer,
) -> None:
    ids = tokenizer.encode(TEXT)
    chunks = [ids[i : i + 3] for i in range(0, len(ids), 3)]
    for full_from in (0, len(chunks)):
        session = _fed(tokenizer, chunks, full_from)
        assert not session.history_diverges(HistoryJson(COMPACT, ids[:3], [3]))
        assert not session.history_diverges(HistoryJson(COMPACT, [*ids, 13], [len(ids) + 1]))
        assert session.history_diverges(HistoryJson(COMPACT, [ids[0] ^ 1, *ids[1:3]], [3]))
        # Asked again, and past it, it reads the same: nothing it wrote was kept half-made.
        assert not session.history_diverges(HistoryJson(COMPACT, ids, [len(ids)]))
        session.feed(ids[:1], ids[:1], None)
        lens = [*(len(chunk) for chunk in chunks), 1]
        grown = HistoryJson(COMPACT, [*ids, ids[0]], lens).arrays()
        assert tuple(bytes(part) for part in session.history_json()) == grown


def test_a_compact_state_named_chunk_by_chunk_is_the_one_named_from_the_whole_history(
    tokenizer: Tokenizer,
) -> None:
    ids = tokenizer.encode(TEXT)
    sizes = [1, 1, 3, 1, 2, 1, 1]
    chunks: list[list[int]] = []
    at = 0
    while at < len(ids):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append(ids[at : at + size])
        at += size
    factory = factory_for(tokenizer, "hermes", "qwen3")
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    lens: list[int] = []
    for at, chunk in enumerate(chunks):
        session.feed(chunk, chunk, None)
        lens.append(len(chunk))
        call_ids = [f"call_{n}" for n in range(at // 3)]  # pinned ids only grow
        state = StreamState(role_sent=True, last_tool_call_ids=call_ids)
        whole = StreamState(
            role_sent=True,
            output_token_ids=ids[: sum(lens)],
            output_chunk_lens=lens,
            last_tool_call_ids=call_ids,
        )
        # Asked live (one chunk folded in at a time) or of the state carrying the whole
        # history (a full re-send), the state names the same stream alike.
        assert session.compact_state(state, CONTEXT) == compact_of(whole, CONTEXT)
    other = compact_of(StreamState(output_token_ids=ids, output_chunk_lens=[len(ids)]), CONTEXT)
    named = session.compact_state(StreamState(), CONTEXT)
    assert other.output_tokens == named.output_tokens
    assert other.output_digest != named.output_digest  # another chunking: another history


def test_a_full_state_is_msgspecs_encoding_of_the_state_with_the_history(
    tokenizer: Tokenizer,
) -> None:
    ids = tokenizer.encode(TEXT)
    chunks = [ids[i : i + 3] for i in range(0, len(ids), 3)]
    session = _fed(tokenizer, chunks, len(chunks) // 2)
    history = {"output_token_ids": ids, "output_chunk_lens": [len(chunk) for chunk in chunks]}
    for state in (
        StreamState(role_sent=True),
        # Strings that spell the history's keys, escaped, before where it goes.
        StreamState(
            prev_tokens=['"output_token_ids":[],"output_chunk_lens":[]', "\\", '"'],
            read_offset=2,
            logprob_context_token_ids=[1, 2],
            tools_streamed=True,
            last_tool_call_ids=['"output_chunk_lens":[]'],
        ),
    ):
        whole = msgspec.structs.replace(state, **history)
        assert session.full_state(state) == msgspec.json.encode(whole)
