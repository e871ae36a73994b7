"""Replays vLLM 0.33.0's recorded transcripts through the app (tests/support/golden.py)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import msgspec
import pytest

from tests.support.apps import build_app
from tests.support.asgi import InProcessClient
from tests.support.golden import (
    CHUNK_DEPENDENT,
    DEVIATIONS,
    Answer,
    Echo,
    Post,
    flags_of,
    fold_reply,
    load_cases,
    replay,
    tokenizer_of,
)
from tests.support.processes import ROOT

pytestmark = pytest.mark.usefixtures("no_internal_errors")
# Qwen3 (C), DeepSeek (D), gpt-oss (G), Llama (L) and Mistral (S) configurations, and
# the synthetic-tokenizer MiniMax M2 (M), Kimi K2 (K), GLM (Z), Inkling (I) and Poolside
# (V) ones; see tests/golden/README.md.
CONFIGS = (
    *("C1", "C2", "C3", "C4", "C5", "C6", "C7"),
    *("D1", "D2", "D3", "D4", "D5", "D6", "D7"),
    "G1",
    *("M1", "M2", "M3"),
    *("L1", "L2", "L3"),
    *("S1", "S2"),
    "K1",
    "Z1",
    *("Q1", "Q2", "Q3"),
    "Y1",
    *("F1", "F2", "F3"),
    *("I1", "I2", "I3"),
    "V1",
    *("N1", "N2"),
    "P1",
    "O1",
    "W1",
    *("W2", "W3"),
    "W4",
    "W5",
    *("E1", "E2"),
    *("E3", "E4"),
    "E5",
    *("J1", "J2", "J3", "J4", "J5"),
    *("A1", "A2", "A3"),
    *("H1", "H2", "H3", "H4", "H5"),
    *("U1", "U2", "U3", "U4", "U5", "U6"),
    *("B1", "B2", "B3"),
    "E6",
    "T1",
    *("P2", "P3", "P4"),
    *("M5", "M6"),
    "M4",
    *("K2", "K3"),
    "K4",
    "K5",
    "T6",
    "T5",
    "T3",
    *("X1", "X2"),
    *("X3", "X4"),
    "X5",
)
WITHOUT_PARSERS = ("C7", "D7")

CASES = [case for config in CONFIGS for case in load_cases(config)]
# A scenario's transcripts: one-shot, error and streamed, each chunking of a stream.
SCENARIOS: dict[str, list[dict[str, Any]]] = {}
for _case in CASES:
    SCENARIOS.setdefault(_case["scenario"], []).append(_case)
WITHOUT_CACHE = ("--stream-cache-size", "0")


@functools.cache
def _client(model: str, flags: tuple[str, ...]) -> InProcessClient:
    return InProcessClient(build_app(model, flags))


def _modes(case: dict[str, Any]) -> list[tuple[str, tuple[str, ...], Echo]]:
    """The session cache on, and for a parsed stream off too (pure replay, every chunk
    rebuilt from the state it carries). A stream's states go back verbatim in one mode
    and re-encoded by ``json.dumps`` in the other, so both encodings meet the session's
    byte comparison and the replay's decode: verbatim with the cache on at one token a
    chunk (t1, the most chunks), re-encoded at the other chunkings."""
    one_token = case.get("chunking") == "t1"
    on: Echo = "verbatim" if one_token else "json.dumps"
    off: Echo = "json.dumps" if one_token else "verbatim"
    modes = [("session cache on", flags_of(case), on)]
    if case["kind"] == "chat_stream" and case["config"] not in WITHOUT_PARSERS:
        modes.append(("session cache off", (*flags_of(case), *WITHOUT_CACHE), off))
    return modes


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_golden_scenario(scenario: str) -> None:
    """Every transcript of the scenario gives vLLM's replies, and every stream the same
    message at every chunking (unless vLLM's depends on the chunks, CHUNK_DEPENDENT)
    and with the session cache off as on. One test per scenario: its transcripts share
    the apps and the folds compare across them."""
    problems: list[str] = []
    folds: dict[tuple[str, str], str] = {}
    for case in SCENARIOS[scenario]:
        for mode, flags, echo in _modes(case):
            replies: list[Any] = []
            post = _post_to(_client(tokenizer_of(case), flags), replies)
            found = replay(case, post, echo=echo)
            problems += [f"{case['id']}, {mode}: {problem}" for problem in found[:8]]
            if case["kind"] == "chat_stream":
                folds[case["chunking"], mode] = _fold(replies)
    assert not problems, "\n".join(problems)
    for (chunking, mode), fold in folds.items():
        on = folds[chunking, "session cache on"]
        assert fold == on, f"{scenario}#{chunking} assembles {fold} {mode}, {on} with it on"
    if scenario not in CHUNK_DEPENDENT:
        by_chunking = {chunking: fold for (chunking, _), fold in folds.items()}
        assert len(set(by_chunking.values())) <= 1, f"{scenario} by chunking: {by_chunking}"


class _StateOf(msgspec.Struct):
    """A reply's ``stream_state``, the bytes as they came (none: empty)."""

    stream_state: msgspec.Raw = msgspec.Raw()


_state_of = msgspec.json.Decoder(_StateOf)


def _post_to(client: InProcessClient, replies: list[Any]) -> Post:
    """Posts to ``client``, keeping each reply."""

    def post(path: str, body: bytes, content_type: str) -> Answer:
        response = client.post(path, body, content_type=content_type)
        replies.append(json.loads(response.content))
        state = bytes(_state_of.decode(response.content).stream_state)
        return response.status_code, replies[-1], state or None

    return post


def _fold(replies: list[Any]) -> str:
    """The messages a client assembles from a stream's replies, per choice index, and
    the errors it was answered."""
    messages: dict[int, dict[str, Any]] = {}
    errors = []
    for reply in replies:
        if "chunk" in reply:
            fold_reply(messages, reply)
        else:
            errors.append(reply)
    return json.dumps([messages, errors], sort_keys=True, ensure_ascii=False)


# ----------------------------------------------------------------- documented deviations


def _parity_classes() -> dict[str, str]:
    """The classes of docs/parity.md's table of deviations, each with its golden-case
    cell."""
    doc = (ROOT / "docs" / "parity.md").read_text()
    table = doc.split("| class | vLLM 0.33.0 | derender-server | golden case |", 1)[1]
    table = table.split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]
    return {row[0].removeprefix("| "): row[-1] for row in rows if not row[0].startswith("| --")}


CLASSES = _parity_classes()
CASE_ID = re.compile(r"`([A-Z]\d\.\w+/\w+#\w+)`")


def test_every_deviation_is_labelled_with_classes_docs_parity_lists() -> None:
    assert len(CLASSES) > 20  # the table was found and read
    labels = {label for classes in DEVIATIONS.values() for label in classes}
    assert labels <= set(CLASSES), labels - set(CLASSES)
    known = {case["id"] for case in CASES}
    assert set(DEVIATIONS) <= known, set(DEVIATIONS) - known


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_golden_cases_docs_parity_cites_show_their_class(name: str) -> None:
    """A case the table cites for a class is a deviation of that class, and "and N
    more" counts the others."""
    cell = CLASSES[name]
    cited = CASE_ID.findall(cell)
    for case_id in cited:
        assert name in DEVIATIONS.get(case_id, ()), f"{case_id} is not labelled {name}"
    more = re.search(r"and (\d+) more", cell)
    if more:
        labelled = [case_id for case_id, classes in DEVIATIONS.items() if name in classes]
        assert len(labelled) == len(cited) + int(more.group(1)), labelled


@pytest.mark.parametrize("case_id", sorted(DEVIATIONS))
def test_every_documented_deviation_still_differs_from_vllm(case_id: str) -> None:
    """With the deltas compared too, the case differs: no entry outlives its cause."""
    case = next(c for c in CASES if c["id"] == case_id)
    client = _client(tokenizer_of(case), flags_of(case))
    assert replay(case, _post_to(client, []), deltas=True)
