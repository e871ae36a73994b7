"""deploy/observability against a real server: every series the dashboard and the alert
rules read is on /metrics, the rules and the scrape configuration pass promtool, and the
dashboard has the structure Grafana imports.

Grafana's own dashboard schema is not shipped in any package here, so the dashboard is
checked against the part of it the import relies on (a schema below: panels, grid
positions, targets, a datasource variable, schemaVersion), and its queries are checked
as PromQL by promtool (each as a recording rule). promtool is Debian's `prometheus`
package (scripts/install installs it); without it those checks are skipped and the
series names are still checked.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from tests.support.processes import ROOT, serving

OBSERVABILITY = ROOT / "deploy" / "observability"
DASHBOARD = OBSERVABILITY / "derender-dashboard.json"
RULES = OBSERVABILITY / "derender-rules.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool missing: scripts/install installs Debian's prometheus"
)

# Series Prometheus makes itself, not the server.
SYNTHETIC = {"up"}
# Labels a scrape adds to every series of a target.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "le"}
SERIES = re.compile(r"\b((?:derender|process)_[a-z0-9_]+|up)\b(\{[^}]*\})?")

DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {
                "list": {
                    "type": "array",
                    "items": {"type": "object", "required": ["name", "type"]},
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos"],
                "properties": {
                    "id": {"type": "integer"},
                    "type": {"enum": ["row", "timeseries", "stat", "table", "gauge"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "y": {"type": "integer", "minimum": 0},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                            "h": {"type": "integer", "minimum": 1},
                        },
                    },
                    "datasource": {
                        "type": "object",
                        "required": ["type", "uid"],
                        "properties": {"type": {"const": "prometheus"}},
                    },
                    "targets": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["refId", "expr"],
                            "properties": {"expr": {"type": "string", "minLength": 1}},
                        },
                    },
                },
            },
        },
    },
}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def as_promql(query: str) -> str:
    """A dashboard query with Grafana's variables given values Prometheus accepts."""
    return query.replace("$__rate_interval", "5m").replace("$instance", ".+")


def test_the_dashboard_has_the_structure_grafana_imports() -> None:
    board = dashboard()
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            assert '$instance"' in target["expr"] or "instance=~" in target["expr"]
    # No two panels overlap on the grid.
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        g = panel["gridPos"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not mine & cells, panel["title"]
        cells |= mine


def test_every_rule_has_what_an_alert_needs() -> None:
    names = [rule["alert"] for rule in rules()]
    assert len(set(names)) == len(names)
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    used = " ".join(rule["expr"] for rule in rules())
    for series in (
        "derender_requests_total",
        "derender_request_seconds_bucket",
        "derender_cache_hits_total",
        "derender_redis_rejected_total",
        "derender_redis_breaker_open",
        "derender_cache_evictions_total",
        "process_resident_memory_bytes",
        "derender_cache_max_bytes",
    ):
        assert series in used, f"no alert reads {series}"


@needs_promtool
def test_promtool_accepts_the_rules_the_config_and_the_dashboard_queries(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    for argv in (
        ["check", "rules", str(RULES)],
        ["check", "config", str(OBSERVABILITY / "prometheus.yml")],
    ):
        check = subprocess.run([PROMTOOL, *argv], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    recorded = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query{i}", "expr": as_promql(query)}
                    for i, query in enumerate(dashboard_queries())
                ],
            }
        ]
    }
    (tmp_path / "dashboard-rules.yml").write_text(yaml.safe_dump(recorded))
    check = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "dashboard-rules.yml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@needs_promtool
def test_the_alerts_fire_on_series_shaped_like_the_servers(tmp_path: Path) -> None:
    """promtool's rule unit test: two replicas' series as the server names them."""
    assert PROMTOOL is not None
    # promtool compares annotations too: what is tested here is when each alert fires.
    groups = yaml.safe_load(RULES.read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    (tmp_path / RULES.name).write_text(yaml.safe_dump(groups))
    one, two = 'job="derender", instance="a:8000"', 'job="derender", instance="b:8000"'
    cases = {
        "rule_files": [RULES.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'derender_requests_total{{{one}, endpoint="chat", '
                        'mode="stream", status="200"}',
                        "values": "0+600x40",
                    },
                    {
                        "series": f'derender_requests_total{{{one}, endpoint="chat", '
                        'mode="stream", status="500"}',
                        "values": "0+60x40",
                    },
                    {"series": f"derender_cache_hits_total{{{one}}}", "values": "0+100x40"},
                    {
                        "series": f'derender_cache_misses_total{{{one}, reason="absent"}}',
                        "values": "0+400x40",
                    },
                    {
                        "series": f'derender_cache_evictions_total{{{two}, reason="bytes"}}',
                        "values": "0+5x40",
                    },
                    {"series": f"derender_redis_breaker_open{{{two}}}", "values": "1x40"},
                    {
                        "series": f"process_resident_memory_bytes{{{two}}}",
                        "values": f"{3 * 2**30}x40",
                    },
                    {"series": f"derender_cache_max_bytes{{{two}}}", "values": f"{2**30}x40"},
                    {"series": f"process_resident_memory_bytes{{{one}}}", "values": f"{2**29}x40"},
                    {"series": f"derender_cache_max_bytes{{{one}}}", "values": f"{2**30}x40"},
                ],
                "alert_rule_test": [
                    {"eval_time": "35m", "alertname": name, "exp_alerts": expected}
                    for name, expected in {
                        "DerenderServerErrors": [
                            {"exp_labels": {"severity": "critical", "job": "derender"}}
                        ],
                        "DerenderCacheHitRatioLow": [
                            {"exp_labels": {"severity": "warning", "job": "derender"}}
                        ],
                        "DerenderSessionsEvicted": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "instance": "b:8000",
                                    "reason": "bytes",
                                }
                            }
                        ],
                        "DerenderRedisBreakerOpen": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "job": "derender",
                                    "instance": "b:8000",
                                }
                            }
                        ],
                        "DerenderMemoryAboveCap": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "job": "derender",
                                    "instance": "b:8000",
                                }
                            }
                        ],
                        "DerenderRedisRejections": [],
                    }.items()
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(cases))
    check = subprocess.run(
        [PROMTOOL, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def exposition_series(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """The series names a scrape can read (a histogram's _bucket, _sum and _count; a
    labelled counter whose children do not exist yet by its _total), and the label names
    seen on each."""
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split()
            base = family.removesuffix("_total")
            names |= {
                "counter": {base + "_total"},
                "histogram": {base + "_bucket", base + "_sum", base + "_count"},
            }.get(kind, {family})
        elif line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            name = name.split()[0]
            names.add(name)
            labels.setdefault(name, set()).update(re.findall(r'(\w+)="', rest.split("}")[0]))
    return names, labels


def test_every_series_the_dashboard_and_rules_read_is_served() -> None:
    flags = ("--reasoning-parser", "qwen3", "--tool-call-parser", "hermes")
    with serving(*flags) as url, httpx.Client(base_url=url, timeout=30) as http:
        state = None
        for ids, finish in (([9707, 0], None), ([2585, 646], None), ([151645], "stop")):
            body: dict[str, Any] = {
                "stream": True,
                "generate_chunk": {
                    "request_id": "observed",
                    "choices": [{"index": 0, "token_ids": ids, "finish_reason": finish}],
                },
                "chat_request": {"messages": []},
                "prompt_token_ids": [1, 2],
            }
            if state is not None:
                body["stream_state"] = state
            reply = http.post("/v1/chat/completions/derender", json=body)
            assert reply.status_code == 200, reply.text
            state = reply.json()["stream_state"]
        assert http.post("/v1/completions/derender", content=b"{").status_code == 400
        exposition = http.get("/metrics").text
    names, labels = exposition_series(exposition)
    assert not [n for n in names if n.endswith("_created")], "created series are exported"
    assert re.search(
        r'^derender_build_info\{python="3[^"]*",version="[^"]+"\} 1\.0$', exposition, re.M
    )
    assert labels["derender_cache_hits_total"] == set()
    queries = [*dashboard_queries(), *(rule["expr"] for rule in rules())]
    for query in queries:
        for name, selector in SERIES.findall(query):
            if name in SYNTHETIC:
                continue
            assert name in names, f"{name} (in {query!r}) is not on /metrics"
            matched = set(re.findall(r"(\w+)\s*(?:=~|!=|!~|=)", selector)) - TARGET_LABELS
            seen = labels.get(name)
            if seen:  # a family with samples: the labels a query matches must be its own
                assert matched <= seen, f"{name} has no label {matched - seen} ({query!r})"
