"""/render golden transcripts (tests/golden/render/README.md) replayed through the HTTP app.

Every recorded request gets vLLM 0.33.0's status and body (exactly: key order, ints
against floats, nulls), but for vLLM's request-schema refusals, whose pydantic error
lists ours does not copy (status and type must match).
The round trips then feed our rendered ids to our derender as prompt_token_ids and
must parse the output as vLLM's render and derender did together.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from app.serving.server import create_app
from app.serving.settings import Settings
from tests.support.golden import differences
from tests.support.tokenizers import bundled_tokenizer

GOLDEN = Path(__file__).parent / "golden" / "render"

# The model and server flags each configuration was recorded with.
CONFIGS: dict[str, dict[str, Any]] = {
    "R1": {
        "model": "qwen3",
        "reasoning_parser": "qwen3",
        "tool_call_parser": "hermes",
        "enable_auto_tool_choice": True,
        "max_model_len": 40000,
    },
    "R2": {"model": "qwen3", "max_model_len": 4096},
    "R3": {
        "model": "qwen3",
        "reasoning_parser": "qwen3",
        "tool_call_parser": "hermes",
        "enable_auto_tool_choice": True,
        "max_model_len": 40000,
        "default_chat_template_kwargs": {"enable_thinking": False, "custom": 1},
    },
    "G1": {
        "model": "gpt-oss",
        "reasoning_parser": "openai_gptoss",
        "tool_call_parser": "openai",
        "enable_auto_tool_choice": True,
        "system_start_date": "2026-01-01",
    },
    "D1": {
        "model": "deepseek",
        "reasoning_parser": "deepseek_v4",
        "tool_call_parser": "deepseek_v4",
        "enable_auto_tool_choice": True,
        "max_model_len": 40000,
    },
    "D2": {
        "model": "deepseek",
        "max_model_len": 4096,
        "default_chat_template_kwargs": {"thinking": False, "drop_thinking": False},
    },
}


def _records(config: str) -> list[dict[str, Any]]:
    with gzip.open(GOLDEN / f"render-{config}.jsonl.gz", "rt") as lines:
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def replay(request: pytest.FixtureRequest) -> Iterator[tuple[str, TestClient]]:
    config = request.param
    settings = Settings(**CONFIGS[config])
    with TestClient(create_app(settings, bundled_tokenizer(settings.model))) as client:
        yield config, client


def test_render_goldens(replay: tuple[str, TestClient]) -> None:
    config, client = replay
    checked = 0
    for record in _records(config):
        reply = client.post(record["path"], json=record["request"], headers=record["headers"])
        assert reply.status_code == record["status"], (record["name"], reply.text)
        expected = record["response"]
        if _schema_error(expected):  # pydantic's words: the type must match
            assert reply.json()["error"]["type"] == "Bad Request", record["name"]
            continue
        found = list(differences(expected, reply.json()))
        assert not found, (record["name"], found[:5])
        checked += 1
    assert checked >= {"R3": 5, "G1": 15, "D2": 12}.get(config, 50)


def _schema_error(body: Any) -> bool:
    """vLLM's request-schema refusals: pydantic's error list, which ours does not copy."""
    return isinstance(body, dict) and body.get("error", {}).get("type") == "Bad Request"


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    """A derender reply without what differs per run: ``created`` and tool-call ids."""
    body = json.loads(json.dumps(body))
    body["created"] = 0
    for choice in body["choices"]:
        for call in choice["message"].get("tool_calls") or ():
            call["id"] = "<id>"
    return body


def test_render_then_derender(replay: tuple[str, TestClient]) -> None:
    """Our render's ids, as derender's prompt_token_ids, parse as vLLM's pair parsed."""
    config, client = replay
    trips = [record for record in _records(config) if "derender" in record]
    for record in trips:
        rendered = client.post(record["path"], json=record["request"]).json()
        expected = record["derender"]
        request = dict(expected["request"], prompt_token_ids=rendered["token_ids"])
        reply = client.post("/v1/chat/completions/derender", json=request)
        assert reply.status_code == expected["status"], record["name"]
        found = list(differences(_comparable(expected["response"]), _comparable(reply.json())))
        assert not found, (record["name"], found[:5])
    assert len(trips) >= {"R1": 6, "R3": 2, "G1": 2, "D1": 7}.get(config, 0)
