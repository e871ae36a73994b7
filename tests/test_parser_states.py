"""Snapshots of every family's sessions stay what they were when recorded
(tests/support/parser_states.py): what this release snapshots is byte for byte what the
recording release did (sets sorted), and a snapshot that release wrote to Redis reads
back as the state this one builds, under the same SCHEMA_VERSION."""

from __future__ import annotations

import base64

import pytest

from tests.support.parser_states import CONFIGS, canonical_snapshot, cases, load_record, record_of

RECORD = load_record()
CASES = cases()


def test_every_recorded_case_is_still_replayed() -> None:
    assert sorted(RECORD) == sorted(case["id"] for case in CASES)
    assert {case["config"] for case in CASES} == set(CONFIGS)


@pytest.mark.parametrize("config", CONFIGS)
def test_each_snapshot_is_the_recorded_one(config: str) -> None:
    changed, misread = [], []
    for case in (c for c in CASES if c["config"] == config):
        recorded, now = RECORD[case["id"]], record_of(case)
        if (now.digest, now.snapshots) != (recorded.digest, recorded.snapshots):
            changed.append(case["id"])
        if recorded.last:
            old = canonical_snapshot(base64.b64decode(recorded.last))
            if old != canonical_snapshot(base64.b64decode(now.last)):
                misread.append(case["id"])
    assert changed == [] and misread == []
