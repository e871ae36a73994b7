"""What we accept but suspect is answered as vLLM answers it, with an x-derender-warning
header and a counter (app/wire/advisories.py): a state that is not the stream's, an empty
state, a whole reply sent as the state, fields the protocol does not have."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from app.wire.advisories import WARNING_HEADER
from tests.support.apps import AppFactory

CHAT = "/v1/chat/completions/derender"
COMPLETIONS = "/v1/completions/derender"
PARSED = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"]
PARSED += ["--enable-auto-tool-choice"]
PROMPT = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
CHAT_REQUEST = {"messages": [{"role": "user", "content": "Hi"}]}
THINKING = [151667, 198, 785, 1196, 17064, 911]  # <think>\nThe user asks about
ANSWER = [9707, 0, 2585, 646, 358, 1492, 498, 3351, 30]  # Hello! How can I help you today?


def chunk(request_id: str, ids: list[int], state: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "stream": True,
        "generate_chunk": {"request_id": request_id, "choices": [{"index": 0, "token_ids": ids}]},
        "prompt_token_ids": PROMPT,
        "chat_request": CHAT_REQUEST,
        **extra,
    }
    if state is not None:
        body["stream_state"] = state
    return body


def post(client: TestClient, body: dict[str, Any], path: str = CHAT) -> Any:
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def comparable(reply: Any) -> dict[str, Any]:
    body: dict[str, Any] = reply.json()
    body["chunk"]["created"] = 0
    return body


def warned(client: TestClient, kind: str) -> float:
    counter = client.app.service.metrics.advisories  # type: ignore[attr-defined]
    return sum(
        sample.value
        for metric in counter.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["kind"] == kind
    )


@pytest.fixture
def clients(make_app: AppFactory) -> Iterator[tuple[TestClient, TestClient]]:
    """A server that keeps sessions, and one that keeps nothing (vLLM's answers)."""
    with (
        TestClient(make_app(PARSED)) as kept,
        TestClient(make_app([*PARSED, "--stream-cache-size", "0"])) as fresh,
    ):
        yield kept, fresh


def test_another_streams_state_is_answered_with_a_warning(
    clients: tuple[TestClient, TestClient],
) -> None:
    kept, fresh = clients
    a = post(kept, chunk("a", THINKING[:3])).json()["stream_state"]
    post(kept, chunk("b", ANSWER[:3]))
    # Stream b's next chunk, sent with stream a's state.
    crossed = post(kept, chunk("b", ANSWER[3:], a))
    assert crossed.status_code == 200
    assert crossed.headers[WARNING_HEADER].startswith("diverged_state: ")
    assert warned(kept, "diverged_state") == 1
    assert comparable(crossed) == comparable(post(fresh, chunk("b", ANSWER[3:], a)))
    # A retry of an earlier chunk, or a stream continued elsewhere, is not warned of.
    first = post(kept, chunk("c", THINKING[:2])).json()["stream_state"]
    second = post(kept, chunk("c", THINKING[2:4], first)).json()["stream_state"]
    retried = post(kept, chunk("c", THINKING[2:4], first))
    assert retried.status_code == 200 and WARNING_HEADER not in retried.headers
    elsewhere = post(fresh, chunk("c", THINKING[4:], second)).json()["stream_state"]
    later = post(kept, chunk("c", [9707], elsewhere))
    assert later.status_code == 200 and WARNING_HEADER not in later.headers
    assert warned(kept, "diverged_state") == 1


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_an_empty_state_or_a_whole_reply_as_the_state_is_warned_of(
    clients: tuple[TestClient, TestClient], path: str
) -> None:
    kept, fresh = clients
    body = chunk("d", ANSWER[:3])
    if path == COMPLETIONS:
        del body["chat_request"]
    reply = post(kept, body, path).json()
    for state, kind in (({}, "empty_state"), (reply, "foreign_state")):
        sent = {**body, "generate_chunk": chunk("d", ANSWER[3:])["generate_chunk"]}
        sent["stream_state"] = state
        answered = post(kept, sent, path)
        assert answered.status_code == 200, answered.text
        assert answered.headers[WARNING_HEADER].startswith(f"{kind}: ")
        assert warned(kept, kind) == 1
        assert comparable(answered) == comparable(post(fresh, sent, path))
    assert "chunk" in answered.headers[WARNING_HEADER]  # names the reply's own fields
    # The state a reply carried, sent back unchanged: no warning.
    proper = {**body, "generate_chunk": chunk("e", ANSWER[3:])["generate_chunk"]}
    proper["stream_state"] = reply["stream_state"]
    assert WARNING_HEADER not in post(kept, proper, path).headers


def test_a_field_the_protocol_does_not_have_is_named(
    clients: tuple[TestClient, TestClient],
) -> None:
    kept, fresh = clients
    misspelled = chunk("f", ANSWER[:3])
    misspelled["prompt_ids"] = misspelled.pop("prompt_token_ids")
    refused = post(kept, misspelled)
    assert refused.status_code == 400  # as vLLM refuses it: the parsers need the prompt
    warning = refused.headers[WARNING_HEADER]
    assert warning.startswith("unknown_fields: ") and "prompt_ids" in warning
    assert "prompt_token_ids" in warning  # the fields it could have meant
    extra = chunk("f", ANSWER[:3], priority=1)
    answered = post(kept, extra)
    assert answered.status_code == 200, answered.text
    assert "priority" in answered.headers[WARNING_HEADER]
    assert warned(kept, "unknown_fields") == 2
    assert comparable(answered) == comparable(post(fresh, extra))
    # One-shot bodies too; a body of the protocol's fields alone is not warned of.
    one_shot = {"generate_response": {"request_id": "g", "choices": [
        {"index": 0, "token_ids": ANSWER, "finish_reason": "stop"}]}, "extra": 1}  # fmt: skip
    assert "extra" in post(kept, one_shot).headers[WARNING_HEADER]
    del one_shot["extra"]
    assert WARNING_HEADER not in post(kept, one_shot).headers
    assert WARNING_HEADER not in post(kept, chunk("h", ANSWER[:3])).headers


def test_a_field_name_that_is_not_utf8_is_ignored_as_before(
    clients: tuple[TestClient, TestClient],
) -> None:
    """The strict view refuses the key; the lenient one skips it, as it always did (a
    fuzz find: it was answered 500)."""
    kept, _ = clients
    body = json.dumps(chunk("i", ANSWER[:3])).encode().replace(b'"stream"', b'"\xedx": 1, "stream"')
    answered = kept.post(CHAT, content=body, headers={"content-type": "application/json"})
    assert answered.status_code == 200, answered.text
