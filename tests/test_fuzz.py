"""Hostile bodies never get a 5xx, never kill the app, never leak internals.

Sources of bad input: arbitrary JSON, arbitrary bytes, golden requests mutated as
JSON (keys dropped, values retyped, lists enlarged, free-form values nested deep, ids
made negative or out of vocabulary, stream_state corrupted) and as bytes (the request
decoder itself, and over HTTP), and corrupt chunks sent into a live parsed stream
whose session is kept. Every reply must be JSON; every error must be the OpenAI shape
with a message free of tracebacks, reprs and file paths; a live stream hit by bad
chunks goes on with exactly the bytes it would have had without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.wire.body import decode_body
from app.wire.errors import DerenderError
from app.wire.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
)
from tests.support.apps import AppFactory
from tests.support.golden import flags_of, load_cases, stream_body
from tests.support.replies import LEAKS, fuzz_counts

pytestmark = pytest.mark.usefixtures("no_internal_errors")
PATHS = ("/v1/chat/completions/derender", "/v1/completions/derender")
FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=30,
)
# Negative, out of vocabulary, ordinary, and partial UTF-8 byte tokens (which make the
# logprob resolver decode them behind their context).
hostile_ids = st.one_of(
    st.integers(-5, -1),
    st.integers(151_669, 2**63),
    st.integers(0, 151_668),
    st.sampled_from([11162, 98, 252, 94305, 234, 97, 9284, 103]),
)


def _golden_bodies() -> list[tuple[str, dict[str, Any]]]:
    bodies = []
    for config in ("C1", "C7"):
        for case in load_cases(config):
            if case["kind"] in ("chat", "completion"):
                bodies.append((case["endpoint"], case["request"]))
            elif case["kind"].endswith("_stream") and case["chunking"] == "t3":
                bodies.append((case["endpoint"], stream_body(case, case["chunks"][1], None)))
    return bodies


GOLDEN = _golden_bodies()


@pytest.fixture(scope="module")
def client(make_app: AppFactory) -> Iterator[TestClient]:
    app = make_app(["--served-model-name", "qwen3", "--max-model-len", "4096"])
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def check(client: TestClient, path: str, body: bytes, source: str) -> None:
    fuzz_counts[source] = fuzz_counts.get(source, 0) + 1
    reply = client.post(path, content=body, headers={"content-type": "application/json"})
    assert reply.status_code < 500, reply.text[:500]
    payload = reply.json()
    if reply.status_code != 200:
        error = payload["error"]
        assert error["code"] == reply.status_code
        assert isinstance(error["type"], str)
        assert not LEAKS.search(error["message"]), error["message"]


@FUZZ
@given(path=st.sampled_from(PATHS), value=json_values)
def test_arbitrary_json(client: TestClient, path: str, value: Any) -> None:
    check(client, path, json.dumps(value).encode(), "arbitrary JSON")


@FUZZ
@given(path=st.sampled_from(PATHS), raw=st.binary(max_size=200))
def test_arbitrary_bytes(client: TestClient, path: str, raw: bytes) -> None:
    check(client, path, raw, "arbitrary bytes")


DEEP = "\x00deep:"
_DEEP_MARKER = re.compile(r'"\\u0000deep:(\d+)(\[|\{\\"x\\":)"')


def encode(body: Any) -> bytes:
    """JSON for a mutated body, deep-nesting markers spelled out."""

    def nest(match: re.Match[str]) -> str:
        depth, opener = int(match.group(1)), match.group(2).replace("\\", "")
        closer = "]" if opener == "[" else "}"
        return opener * depth + "0" + closer * depth

    return _DEEP_MARKER.sub(nest, json.dumps(body)).encode()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from _paths(item, (*prefix, index))


def _mutate(body: Any, path: tuple[Any, ...], how: str, data: st.DataObject) -> Any:
    if not path:
        return data.draw(json_values)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    current = parent[key]
    if how == "drop" and isinstance(parent, dict):
        del parent[key]
    elif how == "enlarge" and isinstance(current, list) and current:
        # Huge but bounded: at most ~200k entries, whatever was enlarged before.
        factor = data.draw(st.sampled_from([50, 2000, 70_000]))
        parent[key] = current * max(1, min(factor, 200_000 // len(json.dumps(current))))
    elif how == "ids" and isinstance(current, list):
        parent[key] = data.draw(st.lists(hostile_ids, max_size=40))
    elif how == "int" and isinstance(current, int) and not isinstance(current, bool):
        parent[key] = data.draw(hostile_ids)
    elif how == "deepen":
        # A marker that encode() spells as nesting: Python's own json would recurse.
        opener = data.draw(st.sampled_from(["[", '{"x":']))
        parent[key] = f"{DEEP}{data.draw(st.sampled_from([63, 65, 900, 5000]))}{opener}"
    else:
        parent[key] = data.draw(json_values)
    return body


@FUZZ
@given(data=st.data())
def test_mutated_golden_requests(client: TestClient, data: st.DataObject) -> None:
    path, original = data.draw(st.sampled_from(GOLDEN))
    body = json.loads(json.dumps(original))
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(list(_paths(body))))
        how = data.draw(st.sampled_from(["drop", "retype", "enlarge", "ids", "int", "deepen"]))
        body = _mutate(body, target, how, data)
    check(client, path, encode(body), "mutated golden")


state_strategy = st.fixed_dictionaries(
    {},
    optional={
        "prev_tokens": st.lists(st.text(max_size=8), max_size=12),
        "prefix_offset": st.integers(0, 40),
        "read_offset": st.integers(0, 40),
        "role_sent": st.booleans(),
        "logprob_context_token_ids": st.lists(hostile_ids, max_size=4),
        "logprob_text_offset": st.integers(0, 2**40),
        "output_token_ids": st.lists(hostile_ids, max_size=8),
        "tools_streamed": st.booleans(),
        "last_tool_call_ids": st.lists(st.text(max_size=8), max_size=3),
    },
)


@FUZZ
@given(
    path=st.sampled_from(PATHS),
    state=state_strategy,
    ids=st.lists(hostile_ids, max_size=12),
    with_logprobs=st.booleans(),
)
def test_corrupt_stream_state(
    client: TestClient, path: str, state: dict[str, Any], ids: list[int], with_logprobs: bool
) -> None:
    if "output_token_ids" in state:
        state["output_chunk_lens"] = [1] * len(state["output_token_ids"])
    choice: dict[str, Any] = {"index": 0, "token_ids": ids}
    if with_logprobs:
        choice["logprobs"] = {
            "content": [{"token_id": i, "top_logprobs": [{"token_id": i}]} for i in ids]
        }
    body = {"stream": True, "generate_chunk": {"choices": [choice]}, "stream_state": state}
    check(client, path, json.dumps(body).encode(), "corrupt stream_state")


@FUZZ
@given(
    path=st.sampled_from(PATHS),
    entries=st.lists(st.tuples(hostile_ids, st.lists(hostile_ids, max_size=3)), max_size=10),
)
def test_hostile_logprob_ids(
    client: TestClient, path: str, entries: list[tuple[int, list[int]]]
) -> None:
    content = [
        {"token_id": token, "top_logprobs": [{"token_id": top} for top in tops]}
        for token, tops in entries
    ]
    choice = {"index": 0, "token_ids": [9707], "logprobs": {"content": content}}
    generate = {"request_id": "r", "choices": [choice]}
    key = "generate_response" if "chat" in path else "generate_responses"
    body = {key: generate if "chat" in path else [generate]}
    check(client, path, json.dumps(body).encode(), "hostile logprob ids")


# --------------------------------------------------------------------------- bytes

GOLDEN_BYTES = [(path, json.dumps(body).encode()) for path, body in GOLDEN]
JSON_BYTES = [*b'{}[]",:0-9.eE+ \\tnulrfas', 0x80, 0xC3, 0xFF, 0x00]


@st.composite
def mutated_bytes(draw: st.DrawFn) -> tuple[str, bytes]:
    """A golden body with a few byte-level edits: flips, cuts, insertions, repeats."""
    path, raw = draw(st.sampled_from(GOLDEN_BYTES))
    body = bytearray(raw)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        how = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]))
        if how == "flip" and at < len(body):
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "cut":
            del body[at : at + draw(st.integers(1, 16))]
        elif how == "insert":
            body[at:at] = bytes(draw(st.lists(st.sampled_from(JSON_BYTES), min_size=1, max_size=8)))
        elif how == "repeat":
            body[at:at] = body[at : at + draw(st.integers(1, 64))] * draw(st.integers(1, 50))
        else:
            del body[at:]
    return path, bytes(body)


REQUEST_KINDS = (
    BodyView,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
)


@settings(FUZZ, max_examples=600)
@given(case=mutated_bytes() | st.tuples(st.just(""), st.binary(max_size=400)))
def test_request_decoder_bytes(case: tuple[str, bytes]) -> None:
    """The decoder answers any bytes with a value or a client error, nothing else."""
    _, raw = case
    for kind in REQUEST_KINDS:
        fuzz_counts["decoder bytes"] = fuzz_counts.get("decoder bytes", 0) + 1
        try:
            decode_body(raw, kind)
        except DerenderError as exc:
            assert exc.status == 400
            assert not LEAKS.search(exc.message), exc.message


@FUZZ
@given(case=mutated_bytes())
def test_byte_mutated_golden_requests(client: TestClient, case: tuple[str, bytes]) -> None:
    path, raw = case
    check(client, path, raw, "byte-mutated golden")


# --------------------------------------------------------------------------- live streams

STREAMS = [
    case
    for case in load_cases("C1")
    if case["kind"] == "chat_stream" and case["chunking"] == "t3" and len(case["chunks"]) > 2
]


def _post(client: TestClient, body: Any) -> tuple[int, Any]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = client.post(PATHS[0], content=content, headers={"content-type": "application/json"})
    payload = reply.json()
    if isinstance(payload, dict) and isinstance(payload.get("chunk"), dict):
        payload["chunk"].pop("created", None)
    return reply.status_code, payload


@pytest.fixture(scope="module")
def parsed_clients(make_app: AppFactory) -> Iterator[tuple[TestClient, TestClient]]:
    """The parsed configuration, with kept sessions and without (pure replay)."""
    flags = flags_of(STREAMS[0])
    with (
        TestClient(make_app(flags), raise_server_exceptions=False) as kept,
        TestClient(make_app([*flags, "--stream-cache-size", "0"])) as replay,
    ):
        yield kept, replay


@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_corrupt_chunks_in_a_live_stream(
    parsed_clients: tuple[TestClient, TestClient], data: st.DataObject
) -> None:
    """Bad chunks between good ones get 4xx and leave the stream's next reply unchanged."""
    kept, replay = parsed_clients
    case = data.draw(st.sampled_from(STREAMS))
    stop = data.draw(st.integers(1, min(len(case["chunks"]) - 1, 8)))
    state = None
    for chunk in case["chunks"][:stop]:
        status, reply = _post(kept, stream_body(case, chunk, state))
        assert status == 200, reply
        state = reply["stream_state"]
    good = stream_body(case, case["chunks"][stop], state)
    for _ in range(data.draw(st.integers(1, 3))):
        bad = json.loads(json.dumps(good))
        target = data.draw(st.sampled_from(list(_paths(bad))[1:]))
        how = data.draw(st.sampled_from(["drop", "retype", "enlarge", "ids", "int", "deepen"]))
        check(kept, PATHS[0], encode(_mutate(bad, target, how, data)), "live stream")
    assert _post(kept, good) == _post(replay, good)
