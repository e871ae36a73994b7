"""Replays vLLM 0.33.0's recorded transcripts through the app (tests/golden.py)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.conftest import AppFactory
from tests.golden import flags_of, load_cases, replay

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


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_golden_case(case: dict[str, Any], make_app: AppFactory) -> None:
    _factories[id(make_app)] = make_app
    client = _client(flags_of(case), id(make_app))

    def post(path: str, body: bytes, content_type: str) -> tuple[int, Any]:
        response = client.post(path, content=body, headers={"content-type": content_type})
        return response.status_code, json.loads(response.content)

    problems = replay(case, post)
    assert not problems, "\n".join(problems[:8])
