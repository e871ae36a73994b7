"""What a model family declares: the names vLLM knows its parsers by, what its tokenizer
must hold, what its parsers keep between chunks, and how to build them.

A family is one ``Family`` at the end of its module, listed once in parsers/families/__init__.py;
the registry (parsers/registry.py) serves every name from those declarations and knows
no family by name. A parser is built in two steps: ``prepare`` once at start-up for the
server's tokenizer (the grammar, the marker ids), then ``one_shot`` or ``stream`` per
request from what ``prepare`` gave.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from parsers.types import Delta, FunctionCall, ParseOptions, Vocabulary

if TYPE_CHECKING:
    from parsers.chat import ReasoningParser, ToolParser
    from parsers.stream import ReasoningStream, ToolStream

__all__ = [
    "Family",
    "ParserUnavailable",
    "Reasoning",
    "Request",
    "Tools",
    "Whole",
    "WholeStream",
    "WholeWithRequest",
    "reuse",
]


class ParserUnavailable(ValueError):
    """The tokenizer lacks what this parser cannot work without."""


G = TypeVar("G")  # what ``prepare`` makes of the tokenizer, once per server
S = TypeVar("S")


def reuse(state: object, kind: type[S]) -> S:
    """``state`` when a parser of this kind left it, else a fresh one."""
    return state if isinstance(state, kind) else kind()


@dataclass(frozen=True, slots=True)
class Request:
    """What a parser is built for: one request's options, the seed of its call ids,
    whether a reasoning parser reads the output first (without one, a tool parser reads
    reasoning markup as text), the thinking switch the parser's ``thinking`` read, and
    whether a tool parser reads what reasoning leaves (Kimi K3's reasoning unwraps its
    answer itself only without one)."""

    options: ParseOptions
    id_seed: str
    with_reasoning: bool
    thinking: bool | None
    with_tools: bool = False


@dataclass(frozen=True, kw_only=True)
class _Parser(Generic[G]):
    """What a reasoning or a tool parser declares besides how it is built.

    ``names`` are vLLM's names for this parser, each passed to ``prepare`` (one
    format's dialects); ``aliases`` maps other names vLLM registers for the same class
    to one of them. ``needs``: tokens the tokenizer must have, checked at start-up
    before ``prepare`` (which may still refuse it with ``ParserUnavailable``).
    ``engine_based``: vLLM builds it on its declarative engine, which decides how
    ``tool_choice: none`` and unparsed markup read. ``states``: what its stream keeps
    between chunks (tagged structs, so snapshots decode them). ``thinking``: how a
    request turns thinking on or off for it (``chat_template_kwargs``,
    ``reasoning_effort``), given to its builders as ``Request.thinking``. ``golden``:
    the configurations of tests/golden recorded with it.
    """

    names: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)
    engine_based: bool
    needs: tuple[str, ...] = ()
    states: tuple[type, ...]
    thinking: Callable[[ParseOptions], bool] | None = None
    prepare: Callable[[str, Vocabulary], G]
    golden: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Reasoning(_Parser[G]):
    """A reasoning parser. ``one_shot`` and ``stream`` may give None: the request is read
    without reasoning. ``stream`` takes the state the stream kept (or None) and gives the
    parser with the state it keeps (``reuse`` it, or make one)."""

    one_shot: Callable[[G, Request], ReasoningParser | None]
    stream: Callable[[G, Request, object], tuple[ReasoningStream, Any] | None]


@dataclass(frozen=True, kw_only=True)
class Tools(_Parser[G]):
    """A tool-call parser, built as ``Reasoning``'s parsers are."""

    one_shot: Callable[[G, Request], ToolParser | None]
    stream: Callable[[G, Request, object], tuple[ToolStream, Any] | None]
    # vLLM forces a required or named call with a structural tag; where its tag is
    # Hermes-style, the tags a call sits between (the render side builds the tag).
    call_tags: Callable[[G], tuple[str, str]] | None = None


class WholeStream(Protocol):
    """A format's parser that reads reasoning, content and calls alike: per chunk
    (``step``, given its text and ids) or a whole output (``parse``). ``tools``: whether
    the tool side is on (calls are read only then)."""

    tools: bool

    def step(self, text: str, token_ids: Sequence[int], finished: bool) -> Delta | None: ...

    def parse(
        self, text: str, token_ids: Sequence[int]
    ) -> tuple[str | None, str | None, list[FunctionCall]]: ...


@runtime_checkable
class WholeWithRequest(Protocol):
    """A format read whole whose reading depends on the request and the prompt (a
    response template's: the tools' schemas and ``tool_choice`` decide how calls read,
    and the prompt may leave a region open). ``use_request`` is told the request once
    the parser is built; ``continue_prompt`` the prompt, once per stream (a restored
    stream keeps what it made of it)."""

    def use_request(self, options: ParseOptions) -> None: ...

    def continue_prompt(self, prompt_token_ids: Sequence[int]) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Whole(Generic[G]):
    """A format one parser reads whole, reasoning, content and calls alike (gpt-oss's
    Harmony, Cohere's Command): its reasoning and tool names combine only with each
    other. ``prepare`` gets the name that picks the dialect (the reasoning side's when
    both are set, as vLLM picks); ``build`` takes what it gave, whether the reasoning
    and the tool side are on, the id seed and the state kept (``ChatStreamState.harmony``,
    named for the first such format). ``check`` (optional) refuses, with
    ``ParserUnavailable``, a side the prepared format cannot serve, told which sides
    the server turned on."""

    reasoning: tuple[str, ...]
    tools: tuple[str, ...]
    needs: tuple[str, ...] = ()
    states: tuple[type, ...]
    prepare: Callable[[str, Vocabulary], G]
    build: Callable[[G, bool, bool, str, object], tuple[WholeStream, Any]]
    golden: tuple[str, ...]
    check: Callable[[G, bool, bool], None] | None = None


@dataclass(frozen=True, kw_only=True)
class Family:
    """A model family: its parsers, where a tokenizer that serves it comes from, and
    what it is. ``title`` names its models (``--list-parsers``, error messages)."""

    title: str
    tokenizer: str
    reasoning: tuple[Reasoning[Any], ...] = ()
    tools: tuple[Tools[Any], ...] = ()
    whole: Whole[Any] | None = None
