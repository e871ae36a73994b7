"""The quick starts (``python -m app.examples FAMILY``): each streams its family's output
and prints the reasoning, the answer and the tool call that output holds; one runs
against a real server as the README says; the README names each one and every bundled
tokenizer's directory and helper."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys

import pytest

from app.examples.__main__ import main, run
from app.examples.families import ANSWER, ARGUMENTS, EXAMPLES, REASONING
from app.tokenizer import BUNDLED
from tests.support.processes import ROOT, serving
from tests.support.tokenizers import bundled_tokenizer


def printed(name: str) -> str:
    """What the quick start prints, run in process (tokenizers loaded once per session)."""
    example = EXAMPLES[name]
    out = io.StringIO()
    run(example, None, 4, out, bundled_tokenizer(example.model))
    return out.getvalue()


def test_without_a_family_it_lists_each_with_its_server_command() -> None:
    out = io.StringIO()
    main([], out=out)
    for name, example in EXAMPLES.items():
        assert f"{name} " in out.getvalue()
        assert f"scripts/serve {' '.join(example.flags)}\n" in out.getvalue()


def parts(output: str, kind: str) -> str:
    """The text of every ``kind:`` delta line, joined."""
    return "".join(ast.literal_eval(v) for v in re.findall(rf"^{kind}: +(.*)$", output, re.M))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_quick_start_prints_the_reasoning_the_answer_and_the_call(name: str) -> None:
    output = printed(name)
    assert parts(output, "reasoning").strip() == REASONING
    assert parts(output, "content").strip() == ANSWER
    [call] = re.findall(r"^called get_weather\((.*)\)$", output, re.M)
    assert json.loads(call) == ARGUMENTS
    assert output.count("finish_reason: tool_calls\n") == 1
    # Streamed a few tokens a chunk: several deltas of each kind.
    assert output.count("\nreasoning: ") >= 3 and output.count("\ntool call 0: ") >= 2


def test_a_quick_start_streams_through_a_running_server_as_the_readme_says() -> None:
    example = EXAMPLES["deepseek-v4"]
    readme = (ROOT / "README.md").read_text()
    assert f"scripts/serve {' '.join(example.flags)}" in readme
    assert "python -m app.examples deepseek-v4 --url http://127.0.0.1:8000" in readme
    with serving(*example.flags) as url:
        done = subprocess.run(
            [sys.executable, "-m", "app.examples", "deepseek-v4", "--url", url],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed("deepseek-v4")


def test_the_readme_names_every_quick_start_and_bundled_tokenizer() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Model families", 1)[1].split("\n\n\u1d43", 1)[0]
    rows = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")}
    assert len(rows) > 10
    for name, example in EXAMPLES.items():
        assert example.family in rows, f"{example.family} is not a row of the family table"
        assert f"`{name}`" in readme, name
    for name, helper in BUNDLED.items():
        directory = helper.__module__.replace(".", "/")
        assert f"`{helper.__module__}.{helper.__name__}()`" in readme, name
        assert (ROOT / f"{directory}.py").is_file()
        assert re.search(rf"`~/\.cache/derender-server/{re.escape(name)}-v\d+`", readme), name
