"""Replays vLLM 0.33.0's recorded transcripts through the app (tests/golden.py)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.conftest import AppFactory
from tests.golden import flags_of, fold_reply, load_cases, replay, stream_body

pytestmark = pytest.mark.usefixtures("no_internal_errors")
CONFIGS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")


# Configurations whose tool parser streams in this build.
STREAMING = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")


def _in_scope(case: dict[str, Any]) -> bool:
    return case["config"] in STREAMING or case["kind"] != "chat_stream"


CASES = [case for config in CONFIGS for case in load_cases(config) if _in_scope(case)]


@functools.cache
def _client(flags: tuple[str, ...], factory_id: int) -> TestClient:
    return TestClient(_factories[factory_id](flags))


_factories: dict[int, AppFactory] = {}


PARSED_STREAMS = [c for c in CASES if c["kind"] == "chat_stream" and c["config"] != "C7"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_golden_case(case: dict[str, Any], make_app: AppFactory) -> None:
    _check_case(case, flags_of(case), make_app)


@pytest.mark.parametrize("case", PARSED_STREAMS, ids=[c["id"] for c in PARSED_STREAMS])
def test_golden_stream_without_session_cache(case: dict[str, Any], make_app: AppFactory) -> None:
    """Pure replay (no kept sessions) gives the same replies."""
    _check_case(case, (*flags_of(case), "--stream-cache-size", "0"), make_app)


def _check_case(case: dict[str, Any], flags: tuple[str, ...], make_app: AppFactory) -> None:
    _factories[id(make_app)] = make_app
    client = _client(flags, id(make_app))

    def post(path: str, body: bytes, content_type: str) -> tuple[int, Any]:
        response = client.post(path, content=body, headers={"content-type": content_type})
        return response.status_code, json.loads(response.content)

    problems = replay(case, post)
    assert not problems, "\n".join(problems[:8])


SCENARIOS = sorted({c["scenario"] for c in CASES if c["kind"] == "chat_stream"})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_chunking_assembles_the_same_message(scenario: str, make_app: AppFactory) -> None:
    config = scenario.split(".")[0]
    cases = [c for c in load_cases(config) if c["scenario"] == scenario and "chunks" in c]
    folds = {case["chunking"]: _fold(case, make_app) for case in cases}
    assert len(set(folds.values())) == 1, folds


def _fold(case: dict[str, Any], make_app: AppFactory) -> str:
    """The messages a client assembles from our replies, per choice index."""
    _factories[id(make_app)] = make_app
    client = _client(flags_of(case), id(make_app))
    states: dict[int, Any] = {}
    messages: dict[int, dict[str, Any]] = {}
    for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
        body = stream_body(case, chunk, states.get(lane))
        reply = client.post(case["endpoint"], json=body).json()
        states[lane] = reply["stream_state"]
        fold_reply(messages, reply)
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)
