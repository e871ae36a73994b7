"""Models whose tokenizer configuration describes their output: vLLM's ``hf`` reasoning and
tool-call parsers (``ResponseTemplateParser``), which read a message by the
``response_template`` in ``tokenizer_config.json``, not by a format of their own.

The template is read once at start-up (response_template.py): a tokenizer without one,
or with one this server does not read, stops the server with a message that says so;
``--reasoning-parser hf`` needs a ``thinking`` field and ``--tool-call-parser hf`` a
``tool_calls`` field. One reader takes reasoning, content and calls alike, so ``hf``
combines only with ``hf``. The prompt's part of the message is read first (a template
that pre-opens ``<think>`` leaves reasoning open); a call goes out whole when its region
closes; with ``tool_choice: none`` (or the tool side off) call markup reads as content,
and without the reasoning side, reasoning reads as content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from msgspec import Struct, field

from parsers import budget
from parsers.families.response_template import (
    CONTENT,
    THINKING,
    TOOLS,
    Template,
    read_template,
)
from parsers.families.template_regions import Event, RegionReader, RegionState
from parsers.families.template_values import tool_calls
from parsers.family import Family, ParserUnavailable, Whole, reuse
from parsers.ids import chat_tool_call_id
from parsers.types import Delta, DeltaToolCall, FunctionCall, ParseOptions, Vocabulary

# Characters read between two looks at the server's budget (parsers/budget.py checks
# once per budget.SLICE of them).
_SLICE = 64


@dataclass(frozen=True, slots=True)
class Prepared:
    """The served template, and how a prompt's ids decode."""

    template: Template
    decode: Callable[[Sequence[int]], str]


class TemplateStreamState(Struct, tag="response_template"):
    """The region reader's state, the next call's index, and whether the output ended."""

    regions: RegionState = field(default_factory=RegionState)
    next_index: int = 0
    finished: bool = False


class _Pieces:
    """One delta's reasoning, content and calls, joined once."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[DeltaToolCall] = []

    def delta(self) -> Delta | None:
        reasoning = "".join(self.reasoning) or None
        content = "".join(self.content) or None
        if reasoning is None and content is None and not self.calls:
            return None
        return Delta(content=content, reasoning=reasoning, tool_calls=self.calls)


class TemplateStream:
    """One choice's read of an output with the template: by ``step`` or whole."""

    def __init__(
        self,
        prepared: Prepared,
        reasoning: bool,
        tools: bool,
        id_seed: str,
        state: TemplateStreamState,
    ) -> None:
        self.prepared = prepared
        self.reasoning = reasoning
        self.tools = tools
        self.id_seed = id_seed
        self.s = state
        self.read_calls = tools
        self.reader = RegionReader(prepared.template, {}, state.regions)
        # The prompt's text for the next whole output (``parse`` reads each fresh).
        self.prompt_text = ""

    def use_request(self, options: ParseOptions) -> None:
        """Calls are read unless ``tool_choice`` is none; string arguments are coerced to
        the request's tool schemas."""
        self.read_calls = self.tools and options.tool_choice != "none"
        self.reader.properties = {tool.name: tool.properties() for tool in options.tools or ()}

    def continue_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self.prompt_text = self.prepared.decode(prompt_token_ids)
        self.reader.prompt(self.prompt_text)

    def step(self, text: str, token_ids: Sequence[int], finished: bool) -> Delta | None:
        if self.s.finished:
            return None
        pieces = _Pieces()
        # A slice at a time, so the server's budget can stop a long output between them
        # (the reader holds what a slice leaves open: slicing changes no result).
        slices = [text[i : i + _SLICE] for i in range(0, len(text), _SLICE)]
        for piece in budget.paced(slices):
            self._route(self.reader.feed(piece), pieces)
        if finished:
            self.s.finished = True
            if self.reader.read_output:
                self._route(self.reader.finish(), pieces)
        return pieces.delta()

    def parse(
        self, text: str, token_ids: Sequence[int]
    ) -> tuple[str | None, str | None, list[FunctionCall]]:
        """A whole output, read by a fresh reader after the prompt it was last told of
        (each choice of a request is parsed anew, as vLLM builds a parser per choice)."""
        whole = TemplateStream(
            self.prepared, self.reasoning, self.tools, self.id_seed, TemplateStreamState()
        )
        whole.read_calls = self.read_calls
        whole.reader.properties = self.reader.properties
        whole.reader.prompt(self.prompt_text)
        self.prompt_text = ""
        delta = whole.step(text, token_ids, True)
        if delta is None:
            return None, None, []
        calls = [FunctionCall(c.name or "", c.arguments or "{}") for c in delta.tool_calls]
        return delta.reasoning, delta.content, calls

    def _route(self, events: list[Event], pieces: _Pieces) -> None:
        for event in events:
            if event.field == TOOLS:
                self._route_call(event, pieces)
            elif event.kind == "chunk":
                if event.field == THINKING and self.reasoning:
                    pieces.reasoning.append(event.text)
                elif event.field in (THINKING, CONTENT):
                    pieces.content.append(event.text)

    def _route_call(self, event: Event, pieces: _Pieces) -> None:
        """A closed call region's calls, once it reads; with calls not read, its text
        (delimiters included) is content."""
        if not self.read_calls:
            pieces.content.append(event.text)
            return
        if event.kind != "close":
            return
        for name, arguments in tool_calls(event.value):
            index = self.s.next_index
            self.s.next_index += 1
            pieces.calls.append(
                DeltaToolCall(
                    id=chat_tool_call_id(self.id_seed, index),
                    type="function",
                    index=index,
                    name=name,
                    arguments=arguments,
                )
            )


def prepare_template(name: str, vocab: Vocabulary) -> Prepared:
    return Prepared(read_template(vocab.response_template), vocab.decode)


def check_sides(prepared: Prepared, reasoning: bool, tools: bool, name: str) -> None:
    """vLLM's start-up check: each side needs its field in the template."""
    template = prepared.template
    if reasoning and not template.has(THINKING):
        raise ParserUnavailable(
            f"--reasoning-parser {name} requires a response_template with a thinking field"
        )
    if tools and not template.has(TOOLS):
        raise ParserUnavailable(
            f"--tool-call-parser {name} requires a response_template with a tool_calls field"
        )


def _check(prepared: Prepared, reasoning: bool, tools: bool) -> None:
    check_sides(prepared, reasoning, tools, "hf")


def build_stream(
    prepared: Prepared, reasoning: bool, tools: bool, id_seed: str, kept: object
) -> tuple[TemplateStream, TemplateStreamState]:
    state = reuse(kept, TemplateStreamState)
    return TemplateStream(prepared, reasoning, tools, id_seed, state), state


FAMILY = Family(
    title="Response template (tokenizer_config.json)",
    tokenizer="model directory whose tokenizer_config.json has a response_template",
    whole=Whole(
        reasoning=("hf",),
        tools=("hf",),
        states=(TemplateStreamState,),
        prepare=prepare_template,
        build=build_stream,
        check=_check,
        golden=("X1", "X2", "X5"),
    ),
)
