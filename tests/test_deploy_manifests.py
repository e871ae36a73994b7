"""deploy/'s manifests against their schemas, offline.

Kubernetes objects are checked strictly (unknown fields fail) against the schemas
kubernetes-validate ships; the compose file against the compose-spec schema that
check-jsonschema vendors. Gateway API and Envoy Gateway kinds are custom resources
with no schema shipped in either package: for those only what routes a stream is
checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
CUSTOM_KINDS = {"Gateway", "HTTPRoute", "BackendTrafficPolicy"}


def k8s_objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}:{doc['kind']}", doc)
        for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    ]


@pytest.mark.parametrize(("name", "doc"), k8s_objects(), ids=[n for n, _ in k8s_objects()])
def test_kubernetes_objects_match_their_schema(name: str, doc: dict[str, Any]) -> None:
    version = kubernetes_validate.latest_version()
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        assert doc["kind"] in CUSTOM_KINDS, f"{name}: no schema for a kind we do not expect"


def test_kubernetes_balancers_hash_on_the_stream_header() -> None:
    docs = {doc["kind"]: doc for _, doc in k8s_objects()}
    policy = docs["BackendTrafficPolicy"]["spec"]
    assert policy["loadBalancer"]["consistentHash"] == {
        "type": "Header",
        "header": {"name": "X-Derender-Stream-Id"},
    }
    annotations = docs["Ingress"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == (
        "$http_x_derender_stream_id"
    )
    assert "sessionAffinity" not in docs["Service"]["spec"]


def test_compose_file_matches_the_compose_spec() -> None:
    check = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(DEPLOY / "compose.yaml")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_balancer_configs_hash_on_the_stream_header() -> None:
    nginx = (DEPLOY / "nginx" / "nginx.conf").read_text()
    assert "hash $http_x_derender_stream_id consistent;" in nginx
    assert "keepalive " in nginx
    haproxy = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    assert "balance hdr(X-Derender-Stream-Id)" in haproxy
    assert "hash-type consistent" in haproxy
