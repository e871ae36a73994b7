"""Plain data that parsers take and give: the request facts they read, their results."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from msgspec import Struct


class ToolSpec(Struct, frozen=True):
    """A tool of the request, as parsers need it: its name and parameter schema."""

    name: str
    parameters: dict[str, Any] | None = None

    def properties(self) -> dict[str, Any]:
        props = (self.parameters or {}).get("properties")
        return props if isinstance(props, dict) else {}


class ParseOptions(Struct, frozen=True):
    """What of the chat request decides how an output is split.

    ``tool_choice`` is "none", "auto" or "required"; a named function sets
    ``named_tool`` instead (and leaves ``tool_choice`` None).
    """

    tools: tuple[ToolSpec, ...] | None = None
    tool_choice: str | None = "none"
    named_tool: str | None = None
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] = {}
    logprobs: bool = False  # the request asks for them (one parser sends "" then)

    @property
    def forces_tool_calls(self) -> bool:
        return self.named_tool is not None or self.tool_choice == "required"

    def tool(self, name: str) -> ToolSpec | None:
        for tool in self.tools or ():
            if tool.name == name:
                return tool
        return None


class FunctionCall(Struct):
    name: str
    arguments: str
    id: str | None = None


class ParsedMessage(Struct):
    """A one-shot parse: the assistant message's reasoning, content and tool calls."""

    reasoning: str | None
    content: str | None
    tool_calls: list[FunctionCall]


class OutputRefused(ValueError):
    """vLLM's parser raises on this output (and its server answers a 400 with this
    message): the request fails as vLLM's does."""


class ExtractedToolCalls(Struct):
    tools_called: bool
    calls: list[FunctionCall]
    content: str | None


class DeltaToolCall(Struct, kw_only=True):
    """A streamed piece of a tool call; only the first piece of a call has its id."""

    id: str | None = None
    type: str | None = None
    index: int
    name: str | None = None
    arguments: str | None = None


class Citation(Struct):
    """A span of the text a model cites (Cohere's ``<co>...</co: ...>``), as vLLM streams
    it: where in its section, the text, and whether in thinking or the answer. Its
    sources are resolved only by Cohere's own chat API, so a derender sends none."""

    start: int
    end: int
    text: str
    sources: list[Any] = []
    content_index: None = None
    type: str = "TEXT_CONTENT"


class Delta(Struct, gc=False):
    """What one streamed chunk adds to the message. Made for every chunk and never part
    of a reference cycle, so the garbage collector does not track it (cheaper to make)."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] = []
    citations: list[Citation] = []


class PlainText(NamedTuple):
    """What a parser, as it stands, reads as its section's text alone: a chunk of text
    with none of ``chars`` whose ids are none of ``ids`` (``ReadsPlain``), and that
    ``check`` passes where the parser tests the text further (trailing whitespace it
    would hold back) or keeps what it reads. Tested per chunk, so sets: a chunk's test
    costs its length, not the markers' count."""

    ids: frozenset[int]
    chars: frozenset[str]
    check: Callable[[str], bool] | None = None


# Any text: content that passes through as it is.
ANY_TEXT = PlainText(frozenset(), frozenset())


def _no_text(token_id: int) -> str:
    return ""


def _no_decode(token_ids: Sequence[int]) -> str:
    return ""


@dataclass(frozen=True)
class Vocabulary:
    """The tokenizer facts parsers need: token ids, the special tokens, token texts.

    ``token_text`` decodes one id on its own, special tokens kept; ``decode`` decodes
    ids together (a prompt), special tokens kept. ``encode`` turns text into ids (no
    special tokens added), for a family whose markers are several tokens and which vLLM
    compares by ids (PLaMo 3); None where the tokenizer cannot. ``response_template``:
    the tokenizer configuration's description of the output markup (vLLM's ``hf`` and
    ``beam`` parsers read it), when it has one.
    """

    token_ids: Mapping[str, int]
    special_tokens: frozenset[str] = field(default_factory=frozenset)
    token_text: Callable[[int], str] = _no_text
    encode: Callable[[str], list[int]] | None = None
    decode: Callable[[Sequence[int]], str] = _no_decode
    response_template: Mapping[str, Any] | None = None

    def id_of(self, token: str) -> int | None:
        return self.token_ids.get(token)
