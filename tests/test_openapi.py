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

from app.serving.server import DerenderApp
from app.wire.wire_docs import DESCRIPTIONS, SCHEMA_DESCRIPTIONS
from tests.support.apps import AppFactory
from tests.support.replies import LEAKS, fuzz_counts


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
        "/v1/chat/completions/derender/batch",
        "/v1/completions/derender/batch",
        "/v1/chat/completions/render",
        "/v1/completions/render",
        "/health",
        "/v1/models",
        "/metrics",
        "/openapi.json",
        "/docs",
    }
    schemas = document["components"]["schemas"]
    assert schemas["StreamState"]["properties"]["prev_tokens"]["maxItems"] == 1024


def test_every_derender_field_is_described(app: DerenderApp) -> None:
    """A field added to a derender request, generate input, state or reply needs a line."""
    with TestClient(app) as client:
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in DESCRIPTIONS:
        undescribed = [
            field
            for field, prop in schemas[name]["properties"].items()
            if not prop.get("description")
        ]
        assert undescribed == [], name
    for name in SCHEMA_DESCRIPTIONS:
        assert schemas[name]["description"] == SCHEMA_DESCRIPTIONS[name]
    stream_state = schemas["ChatStreamDerenderRequest"]["properties"]["stream_state"]
    assert "previous reply, unchanged" in stream_state["description"]


def test_docs_page_lists_every_operation_and_schema(app: DerenderApp) -> None:
    with TestClient(app) as client:
        document = client.get("/openapi.json").json()
        reply = client.get("/docs")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/html")
    page = reply.text
    for path in document["paths"]:
        assert f"<code>{path}</code>" in page
    for name in document["components"]["schemas"]:
        assert f'<h3 id="{name}">' in page
    assert '<a href="#StreamState">StreamState</a>' in page
    assert "https://" not in page  # offline: nothing fetched from elsewhere


def test_docs_page_needs_the_api_key_when_one_is_set(make_app: AppFactory) -> None:
    with TestClient(make_app(["--api-key", "docs-key"])) as client:
        assert client.get("/docs").status_code == 401
        reply = client.get("/docs", headers={"Authorization": "Bearer docs-key"})
    assert reply.status_code == 200 and "<h2>Operations</h2>" in reply.text


def test_no_server_errors(cases: st.SearchStrategy[Case]) -> None:
    @given(case=cases)
    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
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
