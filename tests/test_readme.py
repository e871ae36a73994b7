"""The README against the real thing: its streaming example run verbatim, its metric names."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from starlette.testclient import TestClient

from parsers.registry import REASONING_PARSERS, TOOL_PARSERS
from tests.support.apps import AppFactory
from tests.support.processes import ROOT, serving

PARSER_FLAGS = ("--reasoning-parser", "qwen3", "--tool-call-parser", "hermes")


def section(heading: str) -> str:
    """The README's text from ``## heading`` to the next ``## ``."""
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.S | re.M)


def run_python(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_streaming_example_prints_what_the_readme_shows() -> None:
    text = section("Streaming chat with parsers")
    [start_command, _] = fenced(text, "bash")
    [example] = fenced(text, "python")
    [printed] = fenced(text, "text")
    flags = start_command.split()[1:]
    assert flags == [*PARSER_FLAGS, "--enable-auto-tool-choice"]
    with serving(*flags) as base:
        output = run_python("-c", example, env={"DERENDER_URL": base})
    assert output == printed
    assert "reasoning: " in output and "content: " in output
    assert 'called get_weather({"city": "Paris"})' in output
    assert "finish_reason: tool_calls" in output


def test_the_token_id_one_liner_prints_what_the_readme_says() -> None:
    text = section("Streaming chat with parsers")
    [_, one_liner] = fenced(text, "bash")
    argv = one_liner.split(" ", 1)[1]
    match = re.fullmatch(r"-c '(.*)' '(.*)'\n", argv, re.S)
    assert match is not None, one_liner
    assert run_python("-c", *match.groups()) == "[9707, 0]\n"
    assert "prints `[9707, 0]`" in text


def test_every_metric_the_readme_names_is_served(make_app: AppFactory) -> None:
    named = set(re.findall(r"`(derender_[a-z_]+)", (ROOT / "README.md").read_text()))
    assert len(named) >= 15
    app = make_app(["--redis-url", "redis://127.0.0.1:1/0"])
    with TestClient(app) as client:
        exposition = client.get("/metrics").text
    families = set(re.findall(r"^# TYPE (\S+) ", exposition, re.M))
    assert named - families == set()


def family_table() -> list[list[str]]:
    """The cells of each row of the README's model family table."""
    text = section("Flags").split("### Model families", 1)[1]
    table = text[text.index("\n| ") :].split("\n\n", 1)[0]
    rows = table.strip().splitlines()[2:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def names(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z0-9_]+(?:-[a-z0-9_]+)*)`", cell))


def test_the_model_family_table_names_every_registered_parser_and_no_other() -> None:
    """A parser added to the registry is also placed in a family's row, and a row
    names only parsers the server has."""
    rows = family_table()
    assert len(rows) >= 20
    assert set().union(*(names(row[1]) for row in rows)) == set(REASONING_PARSERS)
    assert set().union(*(names(row[2]) for row in rows)) == set(TOOL_PARSERS)


def test_the_model_family_table_names_goldens_its_parsers_were_recorded_with() -> None:
    """What a row calls its golden transcripts is what the declarations list
    (``derender-server --list-parsers``)."""
    for row in family_table():
        entries = [REASONING_PARSERS[n] for n in names(row[1])]
        entries += [TOOL_PARSERS[n] for n in names(row[2])]
        declared = {config for entry in entries for config in entry.golden}
        assert set(re.findall(r"\b[A-Z][0-9]\b", row[4])) <= declared, row


def test_the_router_example_prints_what_the_readme_shows() -> None:
    text = section("The render side: one server for both")
    [start_command] = fenced(text, "bash")
    [example] = fenced(text, "python")
    [printed] = fenced(text, "text")
    flags = start_command.split()[1:]
    assert flags == [*PARSER_FLAGS, "--enable-auto-tool-choice"]
    with serving(*flags) as base:
        output = run_python("-c", example, env={"DERENDER_URL": base})
    assert output == printed
    assert 'call: get_weather {"city": "Paris"}' in output
