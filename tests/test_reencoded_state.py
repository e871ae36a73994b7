"""A client that re-encodes ``stream_state`` (``json.dumps`` defaults, as ``requests``,
``aiohttp`` and ``urllib`` users write) hits the kept session and gets the bytes a
client echoing the state verbatim gets, and a cache-off server gives; a tampered
re-encoded state misses and replays to the same bytes as without a cache."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.streams.state_json import (
    COMPACT,
    JSON_DUMPS,
    HistoryJson,
    LiftedHistory,
    canonical,
    compact_lifted,
    encoded_state,
    json_dumps_echo,
    lift_history,
    lifted_state,
    state_digest,
)
from app.tokens.tokenizer import Tokenizer
from app.wire.advisories import diverges
from app.wire.protocol import BodyView, StreamState
from tests.support.apps import AppFactory

FLAGS = [
    "--served-model-name", "qwen3", "--max-model-len", "4096", "--reasoning-parser", "qwen3",
    "--tool-call-parser", "hermes", "--enable-auto-tool-choice",
]  # fmt: skip
PATH = "/v1/chat/completions/derender"
JSON = {"content-type": "application/json"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_hotel",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CHAT_REQUEST = {
    "model": "qwen3",
    "messages": [{"role": "user", "content": "Réserve un hôtel à 東京, s'il te plaît 🌸"}],
    "tools": TOOLS,
}
OUTPUT = (
    "<think>L'utilisateur veut 東京 — vérifions les prix 🌸.</think>"
    "Voilà : je réserve à 東京.\n"
    '<tool_call>\n{"name": "book_hotel", "arguments": {"city": "東京 (Tōkyō)"}}\n</tool_call>'
)
# A first state carrying a non-ASCII decode window: it travels in every later state,
# where json.dumps escapes it.
FIRST_STATE = {"prev_tokens": ["Ġ東", "京é"], "prefix_offset": 0, "read_offset": 2}

Encode = Callable[[dict[str, Any]], bytes]


def as_sent(body: dict[str, Any]) -> bytes:
    """A client that passes the reply's state through as its bytes."""
    return msgspec.json.encode(body)


def json_dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


class _Reply(msgspec.Struct):
    stream_state: msgspec.Raw


def stream(
    client: TestClient,
    request_id: str,
    ids: list[int],
    size: int,
    encode: Encode,
    *,
    tamper_at: int | None = None,
    finish: bool = True,
) -> tuple[list[bytes], list[str], Any]:
    """Stream ``ids`` ``size`` tokens per chunk, each body encoded with ``encode``: the
    carried state as the reply's bytes for ``as_sent``, else as json.loads gave it.

    Returns the reply bodies (``created`` zeroed), each reply's cache header, and the
    last state. At chunk ``tamper_at`` the carried history's first id is changed;
    without ``finish`` the last chunk does not end the stream.
    """
    replies, sources = [], []
    carried = msgspec.json.encode(FIRST_STATE)
    starts = range(0, len(ids), size)
    for index, start in enumerate(starts):
        choice = {
            "index": 0,
            "token_ids": ids[start : start + size],
            "finish_reason": "stop" if finish and index == len(starts) - 1 else None,
        }
        state = msgspec.Raw(carried) if encode is as_sent else json.loads(carried)
        if index == tamper_at:
            state["output_token_ids"][0] += 1
        body = {
            "stream": True,
            "generate_chunk": {"request_id": request_id, "choices": [choice]},
            "prompt_token_ids": [151644, 872, 198],
            "chat_request": CHAT_REQUEST,
            "stream_state": state,
        }
        response = client.post(PATH, content=encode(body), headers=JSON)
        assert response.status_code == 200, response.text
        replies.append(re.sub(rb'"created":\d+', b'"created":0', response.content, count=1))
        sources.append(response.headers["x-derender-cache"])
        carried = bytes(msgspec.json.decode(response.content, type=_Reply).stream_state)
    return replies, sources, json.loads(carried)


def counter(client: TestClient, line: str) -> float:
    """A sample's value from /metrics (0 when absent)."""
    for sample in client.get("/metrics").text.splitlines():
        if sample.startswith(line + " "):
            return float(sample.split()[-1])
    return 0.0


@pytest.fixture(scope="module")
def ids(tokenizer: Tokenizer) -> list[int]:
    return list(tokenizer.encode(OUTPUT))


@pytest.mark.parametrize("size", [1, 3])
def test_a_json_dumps_client_hits_and_gets_the_same_bytes(
    make_app: AppFactory, ids: list[int], size: int
) -> None:
    verbatim = TestClient(make_app(FLAGS))
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    expected, _, _ = stream(verbatim, "req", ids, size, as_sent)
    replies, sources, final = stream(cached, "req", ids, size, json_dumps)
    assert replies == expected
    assert replies == stream(plain, "req", ids, size, json_dumps)[0]
    assert sources == ["miss"] + ["hit"] * (len(sources) - 1)
    assert counter(cached, "derender_cache_hits_total") == len(sources) - 1
    # what the re-encoded states carried: non-ASCII text (escaped) and a tool call id
    assert final["prev_tokens"] == FIRST_STATE["prev_tokens"] and final["tools_streamed"]
    assert final["last_tool_call_ids"] and "\\u" in json.dumps(final)
    deltas = [json.loads(r)["chunk"]["choices"][0]["delta"] for r in replies]
    assert any(delta.get("tool_calls") for delta in deltas)
    assert "東京" in "".join(delta.get("content") or "" for delta in deltas)


def test_a_tampered_json_dumps_state_misses_and_replays(
    make_app: AppFactory, ids: list[int]
) -> None:
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    at = len(ids) // 2
    replies, sources, _ = stream(cached, "tampered", ids, 1, json_dumps, tamper_at=at)
    uncached, _, _ = stream(plain, "tampered", ids, 1, json_dumps, tamper_at=at)
    assert replies == uncached
    assert sources[at] == "miss" and sources.count("miss") == 2
    assert counter(cached, 'derender_cache_misses_total{reason="history"}') == 1


@pytest.mark.parametrize(
    "encode",
    [
        lambda body: json.dumps(body, separators=(",", ":")).encode(),
        lambda body: json.dumps(body, sort_keys=True).encode(),
        lambda body: json.dumps(body, indent=2, ensure_ascii=False).encode(),
    ],
    ids=["compact-ascii", "sorted-keys", "indented"],
)
def test_other_re_encodings_still_hit_with_the_same_bytes(
    make_app: AppFactory, ids: list[int], encode: Encode
) -> None:
    """Encodings the session does not keep are decoded and compared on the full path."""
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    replies, sources, _ = stream(cached, "other", ids, 2, encode)
    uncached, _, _ = stream(plain, "other", ids, 2, encode)
    assert replies == uncached
    assert sources == ["miss"] + ["hit"] * (len(sources) - 1)


def test_a_live_sessions_json_dumps_echo_is_json_dumps_of_the_state_it_sent(
    make_app: AppFactory, ids: list[int]
) -> None:
    cached = TestClient(make_app(FLAGS))
    stream(cached, "live", ids, 2, json_dumps, finish=False)
    [entry] = cached.app.service.store.cache.entries()  # type: ignore[attr-defined]
    assert entry.session.json_dumps_echo() == json.dumps(json.loads(entry.state)).encode()
    # Both kept encodings continue the session with the history lifted out of the body.
    for encode in (as_sent, json_dumps):
        state = msgspec.Raw(entry.state) if encode is as_sent else json.loads(entry.state)
        lifted = lift_history(encode({"stream": True, "stream_state": state}))
        assert lifted is not None
        view = msgspec.json.decode(lifted[0], type=BodyView)
        assert entry.session.continues(bytes(view.stream_state), lifted[1], entry.state)
        history = LiftedHistory(lifted[1].token_ids.replace(b"]", b",1]"), lifted[1].chunk_lens)
        assert not entry.session.continues(bytes(view.stream_state), history, entry.state)


# ----------------------------------------------------------------------------- the byte forms

pieces = st.text(st.characters(codec="utf-8"), max_size=6)
states = st.builds(
    StreamState,
    prev_tokens=st.lists(pieces, max_size=4),
    prefix_offset=st.integers(0, 9),
    read_offset=st.integers(0, 9),
    role_sent=st.booleans(),
    logprob_context_token_ids=st.lists(st.integers(0, 151_000), max_size=4),
    logprob_text_offset=st.integers(0, 10**6),
    tools_streamed=st.booleans(),
    last_tool_call_ids=st.lists(pieces, max_size=3),
)
chunks = st.lists(st.lists(st.integers(0, 151_000), min_size=1, max_size=5), max_size=12)


@settings(max_examples=200, deadline=None)
@given(state=states, history=chunks, built_at=st.integers(0, 12))
def test_the_kept_encodings_are_msgspecs_and_json_dumps(
    state: StreamState, history: list[list[int]], built_at: int
) -> None:
    """Grown chunk by chunk (the json.dumps one from any point on), the history and
    state bytes equal what msgspec and json.dumps write for the whole state."""
    compact = HistoryJson(COMPACT)
    dumps: HistoryJson | None = None
    ids: list[int] = []
    for index, chunk in enumerate(history):
        if index == built_at:
            dumps = HistoryJson(JSON_DUMPS, ids, [len(c) for c in history[:index]])
        compact.extend(chunk)
        if dumps is not None:
            dumps.extend(chunk)
        ids += chunk
    if dumps is None:
        dumps = HistoryJson(JSON_DUMPS, ids, [len(c) for c in history])
    whole = msgspec.structs.replace(
        state, output_token_ids=ids, output_chunk_lens=[len(c) for c in history]
    )
    assert compact.arrays() == (
        msgspec.json.encode(whole.output_token_ids),
        msgspec.json.encode(whole.output_chunk_lens),
    )
    assert (
        json_dumps_echo(whole, *dumps.arrays())
        == json.dumps(json.loads(msgspec.json.encode(whole))).encode()
    )


# ----------------------------------------------------------------------------- lifted history

# The history's key names inside the user's text (escaped there, so never a key), or
# as a key of another object.
decoys = st.sampled_from(
    [
        {"content": '"output_token_ids": [1, 2], "output_chunk_lens":[3]'},
        {"content": "plain"},
        {"content": "x", "output_token_ids": [1]},
        {"content": "x", "output_chunk_lens": [1]},
    ]
)
spacing = st.sampled_from(["", " ", "\n  "])


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    """Chunk bodies as any client may write them: any key order and spacing, the
    history's key names inside other fields' text or as another object's keys, either
    array missing."""
    history = draw(chunks)
    state: dict[str, Any] = {
        "prev_tokens": draw(st.lists(pieces, max_size=2)),
        "output_token_ids": [t for chunk in history for t in chunk],
        "output_chunk_lens": [len(chunk) for chunk in history],
        "role_sent": True,
    }
    for key in draw(st.lists(st.sampled_from(sorted(state)), unique=True, max_size=2)):
        del state[key]
    body = {
        "stream": True,
        "chat_request": {"messages": [{"role": "user", **draw(decoys)}]},
        "stream_state": dict(draw(st.permutations(list(state.items())))),
    }
    items = draw(st.permutations(list(body.items())))
    separators = (draw(spacing) + "," + draw(spacing), draw(spacing) + ":" + draw(spacing))
    encoded = json.dumps(dict(items), separators=separators, ensure_ascii=draw(st.booleans()))
    return encoded.encode(), body


def _set_aside(value: Any, found: dict[str, list[Any]]) -> Any:
    """``value`` with every history key's value replaced by 0, the values in ``found``."""
    if isinstance(value, list):
        return [_set_aside(item, found) for item in value]
    if not isinstance(value, dict):
        return value
    result = {}
    for key, item in value.items():
        if key in found:
            found[key].append(item)
            item = 0
        result[key] = _set_aside(item, found)
    return result


@settings(max_examples=300, deadline=None)
@given(case=bodies())
def test_a_lifted_body_is_the_body_with_its_history_set_aside(
    case: tuple[bytes, dict[str, Any]],
) -> None:
    """A body with each history key once is lifted: it decodes to itself with the two
    arrays as placeholders, and the arrays are set aside as sent; any other is not."""
    body, decoded = case
    found: dict[str, list[Any]] = {"output_token_ids": [], "output_chunk_lens": []}
    expected = _set_aside(decoded, found)
    lifted = lift_history(body)
    if any(len(values) != 1 for values in found.values()):
        assert lifted is None
        return
    assert lifted is not None
    rest, history = lifted
    assert json.loads(rest) == expected
    assert json.loads(history.token_ids) == found["output_token_ids"][0]
    assert json.loads(history.chunk_lens) == found["output_chunk_lens"][0]


def _misleading(body: dict[str, Any]) -> bytes:
    """The history's key names and a look-alike array in the user's message."""
    text = '"output_token_ids": [1, 2], "output_chunk_lens": [2]'
    messages = [{"role": "user", "content": text}]
    return json.dumps(
        {**body, "chat_request": {**body["chat_request"], "messages": messages}}
    ).encode()


def _spaced_array(body: dict[str, Any]) -> bytes:
    """Equal values, other bytes: a space inside each history array."""
    return (
        json.dumps(body)
        .replace('_ids": [', '_ids": [ ')
        .replace('_lens": [', '_lens": [ ')
        .encode()
    )


@pytest.mark.parametrize("encode", [_misleading, _spaced_array], ids=["misleading", "spaced"])
def test_bodies_the_lift_cannot_prove_take_the_full_path_to_the_same_bytes(
    make_app: AppFactory, ids: list[int], encode: Encode
) -> None:
    cached = TestClient(make_app(FLAGS))
    plain = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))
    replies, sources, _ = stream(cached, "lift", ids, 2, encode)
    assert replies == stream(plain, "lift", ids, 2, encode)[0]
    # still hits: the full path decodes the state and finds it equal
    assert sources == ["miss"] + ["hit"] * (len(sources) - 1)


# ----------------------------------------------------------------------------- Redis digests


@settings(max_examples=150, deadline=None)
@given(
    state=states,
    history=chunks,
    adopted_at=st.integers(0, 12),
    other=st.lists(st.integers(0, 151_000), max_size=40),
)
def test_a_history_adopted_as_sent_names_and_reads_as_the_ints_do(
    state: StreamState,
    history: list[list[int]],
    adopted_at: int,
    other: list[int],
) -> None:
    """A history taken as its body sent it (a Redis restore), then grown, has the
    digest, ids and divergence of the one kept from ints, and its state is named in a
    snapshot's envelope as the decoded state is."""
    cut = min(adopted_at, len(history))
    ids = [t for chunk in history[:cut] for t in chunk]
    early = msgspec.structs.replace(
        state, output_token_ids=ids, output_chunk_lens=[len(c) for c in history[:cut]]
    )
    lifted = lift_history(as_sent({"stream": True, "stream_state": early}))
    assert lifted is not None and canonical(lifted[1])
    sent = bytes(msgspec.json.decode(lifted[0], type=BodyView).stream_state)
    assert lifted_state(sent) == msgspec.structs.replace(
        state, output_token_ids=[], output_chunk_lens=[]
    )
    adopted = HistoryJson.adopted(lifted[1])
    kept = HistoryJson(COMPACT, ids, early.output_chunk_lens)
    for chunk in history[cut:]:
        adopted.extend(chunk)
        kept.extend(chunk)
        ids += chunk
    whole = msgspec.structs.replace(
        state, output_token_ids=ids, output_chunk_lens=[len(c) for c in history]
    )
    encoded, digest = encoded_state(whole)
    assert adopted.arrays() == kept.arrays() and encoded == msgspec.json.encode(whole)
    assert digest() == state_digest(compact_lifted(whole), adopted.digest())
    assert adopted.digest() == kept.digest()
    assert adopted.decoded() == (ids, whole.output_chunk_lens)
    assert all(adopted.tail(n) == ids[max(0, len(ids) - n) :] for n in range(len(ids) + 2))
    assert adopted.diverges(HistoryJson(COMPACT, other)) == diverges(ids, other)
    # A state with another field, or another history, is named otherwise.
    flipped = msgspec.structs.replace(whole, role_sent=not whole.role_sent)
    assert encoded_state(flipped)[1]() != digest()
    if ids:
        changed = [*ids[:-1], ids[-1] + 1]
        assert (
            encoded_state(msgspec.structs.replace(whole, output_token_ids=changed))[1]() != digest()
        )


def test_only_our_encoding_of_a_state_is_read_lifted() -> None:
    state = StreamState(prev_tokens=["a"], output_token_ids=[1, 2], output_chunk_lens=[2])
    lifted = lift_history(as_sent({"stream": True, "stream_state": state}))
    assert lifted is not None
    sent = bytes(msgspec.json.decode(lifted[0], type=BodyView).stream_state)
    assert lifted_state(sent) is not None
    assert lifted_state(sent.replace(b'"role_sent"', b' "role_sent"')) is None
    assert lifted_state(sent.replace(b'"output_chunk_lens":0', b'"output_chunk_lens":1')) is None
    assert lifted_state(sent[:-1] + b',"extra":1}') is None
    assert not canonical(LiftedHistory(b"[1, 2]", b"[2]"))
    assert not canonical(LiftedHistory(b"[1,-0]", b"[2]"))
