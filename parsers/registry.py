"""Parsers by vLLM's names: a table built from the families' declarations
(parsers/families/__init__.py), checked once at start-up and built per request.

Nothing here knows a family by name: what differs between families is in their
declarations (parsers/family.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parsers.chat import ChatParser, ReasoningParser, ToolParser
from parsers.families import FAMILIES
from parsers.family import (
    Family,
    ParserUnavailable,
    Reasoning,
    Request,
    Tools,
    Whole,
    WholeWithRequest,
)
from parsers.stream import ChatStream, ChatStreamState, ReasoningStream, ToolStream
from parsers.types import ParseOptions, Vocabulary

# How many names vLLM 0.33.0 registers (vllm/tool_parsers, vllm/reasoning), for the
# listing to say how many of them are served.
VLLM_TOOL_PARSERS = 58
VLLM_REASONING_PARSERS = 42


@dataclass(frozen=True, slots=True)
class Entry:
    """One name vLLM registers: the family that serves it and its parser's declaration.
    ``prepared_as``: the name the parser is prepared with (an alias's target)."""

    name: str
    family: Family
    parser: Reasoning[Any] | Tools[Any] | Whole[Any]
    prepared_as: str

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other names of this parser (for an alias: the name it stands for)."""
        if isinstance(self.parser, Whole):
            return ()
        if self.name != self.prepared_as:
            return (self.prepared_as,)
        return tuple(a for a, target in self.parser.aliases.items() if target == self.name)

    @property
    def needs(self) -> tuple[str, ...]:
        return self.parser.needs

    @property
    def golden(self) -> tuple[str, ...]:
        return self.parser.golden


def _table(kind: str) -> dict[str, Entry]:
    """Every name of one kind (``reasoning``, ``tools``), each declared once."""
    table: dict[str, Entry] = {}

    def add(name: str, entry: Entry) -> None:
        if name in table:
            raise ValueError(f"{kind} parser {name!r} is declared twice")
        table[name] = entry

    for family in FAMILIES:
        parsers: tuple[Reasoning[Any] | Tools[Any], ...] = getattr(family, kind)
        for parser in parsers:
            for name in parser.names:
                add(name, Entry(name, family, parser, name))
            for alias, target in parser.aliases.items():
                assert target in parser.names, f"alias {alias!r} of an undeclared {target!r}"
                add(alias, Entry(alias, family, parser, target))
        if family.whole is not None:
            for name in getattr(family.whole, kind):
                add(name, Entry(name, family, family.whole, name))
    return dict(sorted(table.items()))


REASONING_PARSERS = _table("reasoning")
TOOL_PARSERS = _table("tools")
_FLAGS = {"reasoning": "--reasoning-parser", "tools": "--tool-call-parser"}


class ParserConfigError(ValueError):
    """A parser flag that cannot work with this server or tokenizer."""


def _entry(table: dict[str, Entry], flag: str, name: str | None) -> Entry | None:
    if name is None:
        return None
    entry = table.get(name)
    if entry is None:
        raise ParserConfigError(f"unknown {flag} {name!r}; choose one of: {', '.join(table)}")
    return entry


def _check_tokens(flag: str, name: str, needs: tuple[str, ...], vocab: Vocabulary) -> None:
    missing = [token for token in needs if vocab.id_of(token) is None]
    if missing:
        raise ParserConfigError(
            f"{flag} {name} cannot be used with this tokenizer: it has no "
            f"{' / '.join(repr(token) for token in missing)} token"
        )


@dataclass(frozen=True, slots=True)
class _Side:
    """One configured parser, prepared for the server's tokenizer."""

    parser: Reasoning[Any] | Tools[Any]
    made: Any

    def request(
        self, options: ParseOptions, id_seed: str, with_reasoning: bool, with_tools: bool = False
    ) -> Request:
        thinking = self.parser.thinking(options) if self.parser.thinking is not None else None
        return Request(options, id_seed, with_reasoning, thinking, with_tools)


@dataclass(frozen=True, slots=True)
class _WholeSide:
    """A format read whole, prepared, with which of its sides the server turned on."""

    parser: Whole[Any]
    made: Any
    reasoning: bool
    tools: bool


def _prepare(flag: str, entry: Entry, vocab: Vocabulary) -> Any:
    """What the parser makes of the tokenizer, or the flag's error when it cannot."""
    _check_tokens(flag, entry.name, entry.needs, vocab)
    try:
        return entry.parser.prepare(entry.prepared_as, vocab)
    except ParserUnavailable as exc:
        raise ParserConfigError(f"{flag} {entry.name}: {exc}") from None


def _whole_owner(reasoning: Entry | None, tools: Entry | None) -> tuple[str, Entry] | None:
    """The side whose parser is a format read whole (it combines with nothing else)."""
    sides = {"reasoning": reasoning, "tools": tools}
    whole = [(kind, e) for kind, e in sides.items() if e and isinstance(e.parser, Whole)]
    if not whole:
        return None
    kind, entry = whole[0]
    spec = entry.parser
    assert isinstance(spec, Whole)
    mixed = [
        f"{_FLAGS[k]} {e.name}" for k, e in sides.items() if e is not None and e.parser is not spec
    ]
    if mixed:
        raise ParserConfigError(
            f"{' and '.join(mixed)} cannot be combined with the {entry.family.title} parsers "
            f"(--reasoning-parser {' / '.join(spec.reasoning)}, "
            f"--tool-call-parser {' / '.join(spec.tools)})"
        )
    return kind, entry


def named_parsers(
    tool_parser: str | None, reasoning_parser: str | None, enable_auto_tools: bool
) -> tuple[Entry | None, Entry | None]:
    """The reasoning and tool entries the flags name (the tool parser only when active,
    as in vLLM), refusing unknown names and a format read whole paired with another
    family's parser: the checks that need no tokenizer, made before one loads."""
    reasoning = _entry(REASONING_PARSERS, _FLAGS["reasoning"], reasoning_parser)
    tools = _entry(TOOL_PARSERS, _FLAGS["tools"], tool_parser)
    if not enable_auto_tools:
        tools = None
    _whole_owner(reasoning, tools)
    return reasoning, tools


def _whole_side(
    reasoning: Entry | None, tools: Entry | None, vocab: Vocabulary
) -> _WholeSide | None:
    """The format read whole, prepared, when one of the parsers is one."""
    owner = _whole_owner(reasoning, tools)
    if owner is None:
        return None
    kind, entry = owner
    assert isinstance(entry.parser, Whole)
    made = _prepare(_FLAGS[kind], entry, vocab)
    if entry.parser.check is not None:
        try:
            entry.parser.check(made, reasoning is not None, tools is not None)
        except ParserUnavailable as exc:
            raise ParserConfigError(str(exc)) from None
    return _WholeSide(entry.parser, made, reasoning is not None, tools is not None)


class ParserFactory:
    """The server's parser configuration; builds a ``ChatParser`` for each request.

    As in vLLM, the tool parser is only active with ``--enable-auto-tool-choice`` (and
    only an active one is built and checked against the tokenizer); with neither
    parser active the server derenders without parsing.
    """

    def __init__(
        self,
        tool_parser: str | None,
        reasoning_parser: str | None,
        enable_auto_tools: bool,
        vocab: Vocabulary,
    ) -> None:
        reasoning, tools = named_parsers(tool_parser, reasoning_parser, enable_auto_tools)
        self.reasoning_name = reasoning_parser
        self.tool_name = tools.prepared_as if tools is not None else None
        self._whole = _whole_side(reasoning, tools, vocab)
        self._reasoning = self._side("reasoning", reasoning, vocab)
        self._tools = self._side("tools", tools, vocab)
        active = [s.parser for s in (self._reasoning, self._tools) if s is not None]
        self.engine_based = all(parser.engine_based for parser in active)

    def _side(self, kind: str, entry: Entry | None, vocab: Vocabulary) -> _Side | None:
        if entry is None or self._whole is not None:
            return None
        assert not isinstance(entry.parser, Whole)
        return _Side(entry.parser, _prepare(_FLAGS[kind], entry, vocab))

    @property
    def configured(self) -> bool:
        """Whether requests are parsed at all (vLLM: the parser factory returned one)."""
        return self.reasoning_name is not None or self.tool_name is not None

    @property
    def has_tool_parser(self) -> bool:
        return self.tool_name is not None

    def call_tags(self) -> tuple[str, str] | None:
        """The tags the active tool parser's calls sit between, where vLLM forces calls
        with a Hermes-style structural tag (``Tools.call_tags``); else None."""
        side = self._tools
        if side is None or not isinstance(side.parser, Tools) or side.parser.call_tags is None:
            return None
        return side.parser.call_tags(side.made)

    def for_request(self, options: ParseOptions) -> ChatParser:
        whole = self._whole
        if whole is not None:
            harmony, _ = whole.parser.build(whole.made, whole.reasoning, whole.tools, "", None)
            if isinstance(harmony, WholeWithRequest):
                harmony.use_request(options)
            return ChatParser(options, None, None, engine_based=False, harmony=harmony)
        with_reasoning = self._reasoning is not None
        reasoning: ReasoningParser | None = None
        if (side := self._reasoning) is not None:
            assert isinstance(side.parser, Reasoning)
            request = side.request(options, "", True, self._tools is not None)
            reasoning = side.parser.one_shot(side.made, request)
        tools: ToolParser | None = None
        if (side := self._tools) is not None:
            assert isinstance(side.parser, Tools)
            tools = side.parser.one_shot(side.made, side.request(options, "", with_reasoning))
        return ChatParser(options, reasoning, tools, engine_based=self.engine_based)

    def stream_for_request(
        self, options: ParseOptions, id_seed: str, state: ChatStreamState | None = None
    ) -> ChatStream:
        """A streamed parse of one choice, fresh or continuing from ``state``."""
        state = state if state is not None else ChatStreamState()
        whole = self._whole
        if whole is not None:
            harmony, state.harmony = whole.parser.build(
                whole.made, whole.reasoning, whole.tools, id_seed, state.harmony
            )
            if isinstance(harmony, WholeWithRequest):
                harmony.use_request(options)
            return ChatStream(
                options,
                None,
                None,
                engine_based=False,
                keep_tool_calls=self._keeps_calls(options, whole.tools),
                id_seed=id_seed,
                state=state,
                harmony=harmony,
            )
        with_reasoning = self._reasoning is not None
        reasoning: ReasoningStream | None = None
        if (side := self._reasoning) is not None:
            assert isinstance(side.parser, Reasoning)
            request = side.request(options, id_seed, True, self._tools is not None)
            if (built := side.parser.stream(side.made, request, state.reasoning)) is not None:
                reasoning, state.reasoning = built
        tools: ToolStream | None = None
        if (side := self._tools) is not None:
            assert isinstance(side.parser, Tools)
            request = side.request(options, id_seed, with_reasoning)
            if (made := side.parser.stream(side.made, request, state.tools)) is not None:
                tools, state.tools = made
        return ChatStream(
            options,
            reasoning,
            tools,
            engine_based=self.engine_based,
            keep_tool_calls=self._keeps_calls(options, tools is not None),
            id_seed=id_seed,
            state=state,
        )

    @staticmethod
    def _keeps_calls(options: ParseOptions, tool_parser: bool) -> bool:
        """Whether the stream keeps the calls it reads (``tool_choice`` and the tools)."""
        return options.forces_tool_calls or (
            tool_parser and options.tool_choice == "auto" and bool(options.tools)
        )


def listing() -> str:
    """Every served name with its family, aliases, tokenizer and golden configurations
    (``derender-server --list-parsers``)."""
    lines = [
        f"Parsers served by vLLM 0.33.0's names: {len(REASONING_PARSERS)} of its "
        f"{VLLM_REASONING_PARSERS} reasoning parsers, {len(TOOL_PARSERS)} of its "
        f"{VLLM_TOOL_PARSERS} tool-call parsers. Golden configurations are the transcripts "
        "recorded from vLLM (tests/golden)."
    ]
    for kind, table in (("reasoning", REASONING_PARSERS), ("tools", TOOL_PARSERS)):
        lines += ["", f"{_FLAGS[kind]} NAME:"]
        rows = [
            (
                entry.name,
                entry.family.title,
                _aliases(entry),
                entry.family.tokenizer + _needs(entry),
                ", ".join(entry.golden) or "none",
            )
            for entry in table.values()
        ]
        header = ("name", "family", "aliases", "tokenizer", "golden")
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(4)]
        for row in (header, *rows):
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append("  " + "  ".join([*cells, row[4]]))
    return "\n".join(lines)


def _aliases(entry: Entry) -> str:
    if entry.name != entry.prepared_as:
        return f"alias of {entry.prepared_as}"
    return ", ".join(entry.aliases) or "-"


def _needs(entry: Entry) -> str:
    return f"; needs {' '.join(entry.needs)}" if entry.needs else ""
