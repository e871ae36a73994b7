"""The table of parsers, built from the families' declarations: every name once, each
declaration true to the golden transcripts it names, and nothing outside a family's
module that knows a family by name."""

from __future__ import annotations

import ast
import glob
import itertools
import json
import re

import pytest

from parsers.families import FAMILIES
from parsers.family import Whole
from parsers.registry import (
    REASONING_PARSERS,
    TOOL_PARSERS,
    VLLM_REASONING_PARSERS,
    VLLM_TOOL_PARSERS,
    ParserConfigError,
    ParserFactory,
)
from parsers.stream import ChatStreamState
from parsers.types import Vocabulary
from tests.support.golden import GOLDEN_DIR, load_cases
from tests.support.processes import ROOT

# Modules that serve every family alike: none may name one.
GENERIC = ("parsers/registry.py", "parsers/families/__init__.py", "parsers/family.py",
           "parsers/stream.py", "parsers/chat.py")  # fmt: skip


def golden_flags() -> dict[str, tuple[str | None, str | None]]:
    """Each golden configuration's (reasoning, tool) parser names."""
    found = {}
    for path in sorted(glob.glob(str(GOLDEN_DIR / "golden-*.jsonl.gz"))):
        match = re.search(r"golden-(\w+)\.jsonl", path)
        assert match is not None
        flags = load_cases(match.group(1))[0]["server_flags"]
        named = dict(itertools.pairwise(flags))
        found[match.group(1)] = (named.get("--reasoning-parser"), named.get("--tool-call-parser"))
    return found


def test_each_declaration_names_the_goldens_recorded_with_its_parsers() -> None:
    flags = golden_flags()
    for kind, table in ((0, REASONING_PARSERS), (1, TOOL_PARSERS)):
        for entry in table.values():
            # A declaration's goldens are those of every name it answers to.
            spelled = {entry.name, *entry.aliases}
            if hasattr(entry.parser, "names"):
                spelled |= set(entry.parser.names) | set(entry.parser.aliases)
            recorded = {config for config, pair in flags.items() if pair[kind] in spelled}
            if isinstance(entry.parser, Whole):  # one declaration: its names on either side
                spelled = {*entry.parser.reasoning, *entry.parser.tools}
                recorded = {config for config, pair in flags.items() if set(pair) & spelled}
            assert set(entry.golden) == recorded, entry.name


def test_every_name_is_declared_once_and_every_state_has_its_own_tag() -> None:
    declared = []
    for family in FAMILIES:
        for parser in (*family.reasoning, *family.tools):
            declared += [(type(parser).__name__, n) for n in (*parser.names, *parser.aliases)]
        if family.whole is not None:
            declared += [("Reasoning", name) for name in family.whole.reasoning]
            declared += [("Tools", name) for name in family.whole.tools]
    assert len(declared) == len(set(declared)) == len(REASONING_PARSERS) + len(TOOL_PARSERS)
    states = {s for f in FAMILIES for p in (*f.reasoning, *f.tools) for s in p.states}
    tags = [state.__struct_config__.tag for state in states]
    assert None not in tags and len(tags) == len(set(tags))


def test_every_declared_state_decodes_in_a_snapshot() -> None:
    """A family's states are in ChatStreamState's union, built from the declarations."""
    import msgspec

    for family in FAMILIES:
        for parser in family.reasoning:
            for state in parser.states:
                saved = msgspec.msgpack.encode(ChatStreamState(reasoning=state()))
                decoded = msgspec.msgpack.decode(saved, type=ChatStreamState)
                assert type(decoded.reasoning) is state
        for parser in family.tools:
            for state in parser.states:
                saved = msgspec.msgpack.encode(ChatStreamState(tools=state()))
                assert type(msgspec.msgpack.decode(saved, type=ChatStreamState).tools) is state


def test_generic_modules_name_no_parser() -> None:
    """No branch on a parser's name outside its family's module: the modules that
    serve every family hold no parser name at all."""
    served = set(REASONING_PARSERS) | set(TOOL_PARSERS)
    for where in GENERIC:
        tree = ast.parse((ROOT / where).read_text(encoding="utf-8"))
        named = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in served
        ]  # fmt: skip
        assert named == [], where


def test_a_tool_parser_is_checked_against_the_tokenizer_only_when_active() -> None:
    bare = Vocabulary({"a": 0})
    for name, entry in TOOL_PARSERS.items():
        if entry.needs:
            with pytest.raises(ParserConfigError, match=f"--tool-call-parser {name} cannot"):
                ParserFactory(name, None, True, bare)
            assert not ParserFactory(name, None, False, bare).configured
    with pytest.raises(ParserConfigError, match="unknown --tool-call-parser 'nope'"):
        ParserFactory("nope", None, False, bare)


def test_a_family_reads_whole_output_combines_with_nothing_else() -> None:
    whole = [f for f in FAMILIES if f.whole is not None]
    assert whole
    for family in whole:
        assert family.whole is not None
        with pytest.raises(ParserConfigError, match="cannot be combined"):
            ParserFactory("hermes", family.whole.reasoning[0], True, Vocabulary({}))


# vLLM 0.33.0's registered names (scripts/record_parser_names.py, run with the oracle).
VLLM_NAMES = json.loads((GOLDEN_DIR / "vllm-parser-names.json").read_text())


@pytest.mark.parametrize(
    ("kind", "served", "counted"),
    [
        ("tool_parsers", TOOL_PARSERS, VLLM_TOOL_PARSERS),
        ("reasoning_parsers", REASONING_PARSERS, VLLM_REASONING_PARSERS),
    ],
)
def test_every_name_vllm_registers_is_served(
    kind: str, served: dict[str, object], counted: int
) -> None:
    """The names are exactly vLLM's as its registries list them (every one is served),
    and the listing's count of vLLM's names is theirs."""
    assert VLLM_NAMES["vllm"] == "0.33.0"
    assert len(VLLM_NAMES[kind]) == counted
    assert sorted(served) == sorted(VLLM_NAMES[kind])
