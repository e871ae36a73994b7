"""The product's code stays readable in pieces: no function over 60 lines and no class
over 250 in app/ and cache/, declaration tables aside (the CLI's flags, the metrics)."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
# Tables of declarations: one statement per flag or metric, nothing to split (the CLI's
# flags are declared a group per function).
DECLARATION_TABLES = {("app/serving/cli.py", "_*_flags"), ("app/serving/metrics.py", "__init__")}


def too_long() -> list[str]:
    found = []
    for folder in ("app", "cache"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    limit = MAX_FUNCTION_LINES
                elif isinstance(node, ast.ClassDef):
                    limit = MAX_CLASS_LINES
                else:
                    continue
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                table = any(
                    where == file and fnmatch.fnmatchcase(node.name, name)
                    for file, name in DECLARATION_TABLES
                )
                if lines > limit and not table:
                    found.append(f"{where}:{node.lineno} {node.name} is {lines} lines")
    return found


def test_no_function_or_class_outgrows_its_limit() -> None:
    assert too_long() == []
