"""Replays vLLM 0.33.0's recorded transcripts through the app (tests/golden.py)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.conftest import build_app
from tests.golden import flags_of, fold_reply, load_cases, replay, stream_body, tokenizer_of

pytestmark = pytest.mark.usefixtures("no_internal_errors")
# Qwen3 (C), DeepSeek (D), gpt-oss (G), and the synthetic-tokenizer Kimi K2 (K) and
# GLM (Z) configurations; see tests/golden/README.md.
CONFIGS = (
    *("C1", "C2", "C3", "C4", "C5", "C6", "C7"),
    *("D1", "D2", "D3", "D4", "D5", "D6", "D7"),
    "G1",
    "K1",
    "Z1",
)
WITHOUT_PARSERS = ("C7", "D7")

CASES = [case for config in CONFIGS for case in load_cases(config)]


@functools.cache
def _client(model: str, flags: tuple[str, ...]) -> TestClient:
    return TestClient(build_app(model, flags))


PARSED_STREAMS = [
    c for c in CASES if c["kind"] == "chat_stream" and c["config"] not in WITHOUT_PARSERS
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_golden_case(case: dict[str, Any]) -> None:
    _check_case(case, flags_of(case))


@pytest.mark.parametrize("case", PARSED_STREAMS, ids=[c["id"] for c in PARSED_STREAMS])
def test_golden_stream_without_session_cache(case: dict[str, Any]) -> None:
    """Pure replay (no kept sessions) gives the same replies."""
    _check_case(case, (*flags_of(case), "--stream-cache-size", "0"))


def _check_case(case: dict[str, Any], flags: tuple[str, ...]) -> None:
    client = _client(tokenizer_of(case), flags)

    def post(path: str, body: bytes, content_type: str) -> tuple[int, Any]:
        response = client.post(path, content=body, headers={"content-type": content_type})
        return response.status_code, json.loads(response.content)

    problems = replay(case, post)
    assert not problems, "\n".join(problems[:8])


SCENARIOS = sorted({c["scenario"] for c in CASES if c["kind"] == "chat_stream"})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_chunking_assembles_the_same_message(scenario: str) -> None:
    config = scenario.split(".")[0]
    cases = [c for c in load_cases(config) if c["scenario"] == scenario and "chunks" in c]
    folds = {case["chunking"]: _fold(case) for case in cases}
    assert len(set(folds.values())) == 1, folds


def _fold(case: dict[str, Any]) -> str:
    """The messages a client assembles from our replies, per choice index."""
    client = _client(tokenizer_of(case), flags_of(case))
    states: dict[int, Any] = {}
    messages: dict[int, dict[str, Any]] = {}
    for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
        body = stream_body(case, chunk, states.get(lane))
        reply = client.post(case["endpoint"], json=body).json()
        states[lane] = reply["stream_state"]
        fold_reply(messages, reply)
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)
