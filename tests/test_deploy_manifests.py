"""deploy/'s manifests against their schemas, offline.

Kubernetes objects are checked strictly (unknown fields fail) against the schemas
kubernetes-validate ships; the compose file against the compose-spec schema that
check-jsonschema vendors. Gateway API and Envoy Gateway kinds are custom resources
with no schema shipped in either package: for those only what routes a stream is
checked. Every balancer must pass the WebSocket transport's upgrade with an idle
timeout above the server's, hashed like the HTTP chunks.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.serving.server import CHAT_PATH, COMPLETIONS_PATH
from app.serving.settings import Settings
from app.transports.websocket import SOCKET_SUFFIX

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
CUSTOM_KINDS = {
    "Gateway",
    "HTTPRoute",
    "BackendTrafficPolicy",
    "ClientTrafficPolicy",
    "PodMonitor",
}
WS_PATHS = {CHAT_PATH + SOCKET_SUFFIX, COMPLETIONS_PATH + SOCKET_SUFFIX}
# The server's --ws-idle-timeout default: a balancer that cut an idle WebSocket sooner
# would close it before the server's own 1001.
WS_IDLE_TIMEOUT = Settings().ws_idle_timeout
HASH_VARIABLE = "$http_x_derender_stream_id"


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


def k8s_docs() -> dict[str, dict[str, Any]]:
    """The objects by kind and name: ``Ingress/derender-ws``."""
    return {f"{doc['kind']}/{doc['metadata']['name']}": doc for _, doc in k8s_objects()}


def seconds(duration: str) -> float:
    """A Gateway API duration ("330s", "5m") or an ingress-nginx number of seconds."""
    units = {"": 1, "s": 1, "m": 60, "h": 3600}
    match = re.fullmatch(r"(\d+)(s|m|h|)", duration)
    assert match, f"not a duration: {duration!r}"
    return int(match[1]) * units[match[2]]


def test_kubernetes_balancers_hash_on_the_stream_header() -> None:
    docs = k8s_docs()
    policy = docs["BackendTrafficPolicy/derender-stream-hash"]["spec"]
    assert policy["loadBalancer"]["consistentHash"] == {
        "type": "Header",
        "header": {"name": "X-Derender-Stream-Id"},
    }
    annotations = docs["Ingress/derender"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == HASH_VARIABLE
    assert "sessionAffinity" not in docs["Service/derender"]["spec"]


def test_ingress_nginx_gives_the_websocket_paths_long_timeouts_and_the_same_hash() -> None:
    docs = k8s_docs()
    http, ws = docs["Ingress/derender"], docs["Ingress/derender-ws"]
    paths = [path for rule in ws["spec"]["rules"] for path in rule["http"]["paths"]]
    assert {path["path"] for path in paths} == WS_PATHS
    assert {path["pathType"] for path in paths} == {"Exact"}
    http_backend = http["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    assert all(path["backend"] == http_backend for path in paths)
    annotations = ws["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert annotations[prefix + "upstream-hash-by"] == HASH_VARIABLE
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        assert seconds(annotations[prefix + timeout]) > WS_IDLE_TIMEOUT
        # HTTP chunks keep ingress-nginx's defaults.
        assert prefix + timeout not in http["metadata"]["annotations"]


def test_envoy_gateway_routes_the_websocket_paths_on_the_hashed_route() -> None:
    docs = k8s_docs()
    route = docs["HTTPRoute/derender"]
    http_rule, ws_rule = route["spec"]["rules"]
    assert "matches" not in http_rule and "timeouts" not in http_rule
    assert {(m["path"]["type"], m["path"]["value"]) for m in ws_rule["matches"]} == {
        ("Exact", path) for path in WS_PATHS
    }
    assert ws_rule["backendRefs"] == http_rule["backendRefs"]
    # "0s" turns the route timeout off: a WebSocket is not one request.
    assert ws_rule["timeouts"] == {"request": "0s"}
    # The hash policy targets the whole route, so both rules hash on the header.
    hashing = docs["BackendTrafficPolicy/derender-stream-hash"]["spec"]["targetRefs"]
    assert {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "derender"} in (
        hashing
    )
    client = docs["ClientTrafficPolicy/derender-stream-idle"]["spec"]
    gateway = docs["Gateway/derender"]
    assert client["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "derender"}
    ]
    assert route["spec"]["parentRefs"] == [{"name": gateway["metadata"]["name"]}]
    assert seconds(client["timeout"]["http"]["streamIdleTimeout"]) > WS_IDLE_TIMEOUT


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


def nginx_locations(conf: str) -> dict[str, list[str]]:
    """Each ``location`` block of derender-proxy.conf: its directives, comments left out."""
    blocks = re.findall(r"^location ([^{\n]+) \{\n(.*?)^\}", conf, re.M | re.S)
    return {
        where: [line.strip() for line in body.splitlines() if line.strip()[:1] not in ("", "#")]
        for where, body in blocks
    }


def test_nginx_passes_the_websocket_upgrade_on_the_ws_paths_only() -> None:
    locations = nginx_locations((DEPLOY / "nginx" / "derender-proxy.conf").read_text())
    assert set(locations) == {"/", "~ /derender/ws$"}
    ws, http = locations["~ /derender/ws$"], locations["/"]
    assert all(re.search(r"/derender/ws$", path) for path in WS_PATHS)
    assert not re.search(r"/derender/ws$", "/v1/chat/completions/derender")
    for directive in (
        "proxy_pass http://derender;",
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
    ):
        assert directive in ws
    timeouts = {d.split()[0]: d.split()[1].rstrip(";") for d in ws if "_timeout " in d}
    assert seconds(timeouts["proxy_read_timeout"]) > WS_IDLE_TIMEOUT
    assert seconds(timeouts["proxy_send_timeout"]) > WS_IDLE_TIMEOUT
    # HTTP chunks as before: upstream keepalive, a short read timeout, retried POSTs.
    assert 'proxy_set_header Connection "";' in http
    assert "proxy_read_timeout 60s;" in http
    assert "proxy_next_upstream error timeout non_idempotent;" in http
    # $connection_upgrade is mapped in the http block of both configs that include it.
    upgrade_map = re.compile(
        r'map \$http_upgrade \$connection_upgrade \{\{?\s*default upgrade;\s*"" close;'
    )
    assert upgrade_map.search((DEPLOY / "nginx" / "nginx.conf").read_text())
    assert upgrade_map.search((DEPLOY / "local-cluster").read_text())


def test_haproxy_keeps_an_idle_websocket_longer_than_the_server() -> None:
    haproxy = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    tunnel = re.findall(r"^    timeout tunnel (\S+)$", haproxy, re.M)
    assert len(tunnel) == 1 and seconds(tunnel[0]) > WS_IDLE_TIMEOUT
    assert "timeout server 60s" in haproxy and "timeout client 60s" in haproxy


@pytest.mark.skipif(
    not (shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/bin")),
    reason="nginx not installed: scripts/install installs Debian's package",
)
def test_nginx_accepts_the_shipped_config(tmp_path: Path) -> None:
    """deploy/nginx as compose mounts it, with loopback replicas (the names would not
    resolve here): nginx itself checks every directive and variable."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/bin")
    assert nginx
    conf = (DEPLOY / "nginx" / "nginx.conf").read_text()
    conf = conf.replace(
        "/etc/nginx/derender-proxy.conf", str(DEPLOY / "nginx" / "derender-proxy.conf")
    )
    conf, replicas = re.subn(r"derender-(\d):8000", r"127.0.0.1:800\1", conf)
    assert replicas == 3
    (tmp_path / "nginx.conf").write_text(conf)
    check = subprocess.run(
        [nginx, "-t", "-p", tmp_path, "-c", tmp_path / "nginx.conf", "-e", tmp_path / "error.log"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed")
def test_haproxy_accepts_the_shipped_config() -> None:
    """The replicas' names do not resolve here: HAProxy warns and disables them."""
    check = subprocess.run(
        ["haproxy", "-c", "-f", DEPLOY / "haproxy" / "haproxy.cfg"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    assert "Configuration file is valid" in check.stdout
