"""/openapi.json describes the server, and schemathesis finds no 5xx and no error body
that is not OpenAI-shaped, with examples valid and invalid for that document."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation.case import Case
from schemathesis.generation.modes import GenerationMode
from starlette.testclient import TestClient

from app.server import DerenderApp
from tests.conftest import AppFactory, fuzz_counts
from tests.test_fuzz import LEAKS


@pytest.fixture(scope="module")
def app(make_app: AppFactory) -> DerenderApp:
    return make_app(["--served-model-name", "qwen3", "--max-model-len", "4096"])


@pytest.fixture(scope="module")
def cases(app: DerenderApp) -> st.SearchStrategy[Case]:
    """Every operation's requests, both fitting the document and not."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    return st.one_of(
        operation.as_strategy(generation_mode=mode)
        for operation in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    )


def test_document_lists_every_route(app: DerenderApp) -> None:
    with TestClient(app) as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {
        "/v1/chat/completions/derender",
        "/v1/completions/derender",
        "/health",
        "/v1/models",
        "/metrics",
        "/openapi.json",
    }
    schemas = document["components"]["schemas"]
    assert schemas["StreamState"]["properties"]["prev_tokens"]["maxItems"] == 1024


def test_no_server_errors(cases: st.SearchStrategy[Case]) -> None:
    @given(case=cases)
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    def check(case: Case) -> None:
        fuzz_counts["schemathesis"] = fuzz_counts.get("schemathesis", 0) + 1
        _check_reply(case)

    check()


def _check_reply(case: Case) -> None:
    response = case.call()
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] == response.status_code
        assert isinstance(error["type"], str) and isinstance(error["message"], str)
        assert not LEAKS.search(error["message"]), error["message"]
