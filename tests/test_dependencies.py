"""What the code imports: what pyproject.toml declares, and nothing across the layout.

Every module the product (app/, cache/, parsers/) imports at run time, at the top of a
file or inside a function, must come from a declared runtime dependency, not from a
package that happens to arrive with another one (httpx with the dev tools, anyio with
starlette, huggingface_hub with transformers). The suite's and the benches' imports
must come from the runtime dependencies or their own extras. Imports are read from the
source, mapped to distributions with ``importlib.metadata.packages_distributions``.
Bench and tests may import the product, never each other, and a test module takes its
helpers from tests/support, never from another test module.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache

from tests.support.processes import ROOT

PRODUCT = ("app", "cache", "parsers")
FIRST_PARTY = frozenset({*PRODUCT, "bench", "tests"})
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(*extras: str) -> frozenset[str]:
    """The distributions the runtime dependencies and ``extras`` name (an extra that
    names this project's own extra, ``derender-server[bench]``, brings that one in)."""
    requirements = list(PROJECT["dependencies"])
    for extra in extras:
        requirements += PROJECT["optional-dependencies"][extra]
    names = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        assert match is not None, requirement
        names.add(normalized(match.group()))
    return frozenset(names - {normalized(PROJECT["name"])})


def _runtime_imports(tree: ast.AST) -> Iterator[str]:
    """The modules the absolute imports in ``tree`` name, leaving out those under
    ``if TYPE_CHECKING:`` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (name for child in node.orelse for name in _runtime_imports(child))
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        yield from _runtime_imports(node)


def imports_by_file(*folders: str) -> Iterator[tuple[str, str]]:
    """Each file of the folders (as a path from the root) with each module it imports."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for module in _runtime_imports(ast.parse(path.read_text(), str(path))):
                yield str(path.relative_to(ROOT)), module


def third_party_imports(*folders: str) -> dict[str, set[str]]:
    """Each third-party module the folders' files import, with the files importing it."""
    found: dict[str, set[str]] = {}
    for where, module in imports_by_file(*folders):
        top = module.split(".")[0]
        if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
            found.setdefault(top, set()).add(where)
    return found


@cache
def distributions_of() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def undeclared(imports: dict[str, set[str]], allowed: frozenset[str]) -> list[str]:
    """The imports no allowed distribution provides, each with who imports it."""
    problems = []
    for module, files in sorted(imports.items()):
        providers = distributions_of().get(module)
        if not providers:
            problems.append(f"{module} (in {sorted(files)}) comes from no installed distribution")
        elif not {normalized(d) for d in providers} & allowed:
            problems.append(f"{module} (in {sorted(files)}) comes from undeclared {providers}")
    return problems


def test_the_product_imports_only_declared_runtime_dependencies() -> None:
    imports = third_party_imports(*PRODUCT)
    assert {"starlette", "msgspec", "anyio", "httpx", "huggingface_hub"} <= set(imports)
    assert not undeclared(imports, declared())


def test_the_suite_and_the_benches_import_only_what_their_extras_declare() -> None:
    assert not undeclared(third_party_imports("tests"), declared("dev", "bench"))
    assert not undeclared(third_party_imports("bench"), declared("bench"))


def test_an_import_that_only_arrives_with_another_package_is_reported() -> None:
    """The check can fail: anyio is installed (starlette needs it) but is not declared
    when only starlette is allowed."""
    problems = undeclared({"anyio": {"app/serving/server.py"}}, frozenset({"starlette"}))
    assert problems == ["anyio (in ['app/serving/server.py']) comes from undeclared ['anyio']"]


def test_bench_and_tests_never_import_each_other() -> None:
    """Each side imports the product only (a test may run ``python -m bench``)."""
    crossing = [
        f"{where} imports {module}"
        for where, module in imports_by_file("bench", "tests")
        if module.split(".")[0] == ("tests" if where.startswith("bench/") else "bench")
    ]
    assert not crossing


def test_test_modules_take_shared_helpers_from_tests_support() -> None:
    shared = [
        f"{where} imports {module}"
        for where, module in imports_by_file("tests")
        if module.startswith("tests.") and not module.startswith("tests.support.")
    ]
    assert not shared
