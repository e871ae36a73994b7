"""Cohere Command: reasoning and tool calls ``cohere_command3`` (Command A, A Reasoning,
A Vision) and ``cohere_command4`` (Command 4).

One filter reads the whole output (cohere_reader.py: vLLM 0.33.0 runs Cohere's
``cohere_melody`` package as one parser for both sides), so the two names combine only
with each other; with both set, the reasoning one picks the dialect, as in vLLM.
Reasoning is told apart whichever side is configured; calls are read only with the tool
side on. A call's id is the model's ``tool_call_id`` (a call whose id is empty gets
ours); a streamed call's id goes out with its name, as vLLM holds an id that comes first.
Citation tags (``<co>...</co: 0:[1]>``) are taken out of the text.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from parsers.families.cohere_reader import (
    FIRST_SECTION,
    Cited,
    CohereFilter,
    CohereState,
    Pieces,
)
from parsers.family import Family, Whole, reuse
from parsers.types import Citation, Delta, DeltaToolCall, FunctionCall, Vocabulary

PRESET = {"cohere_command3": "cmd3", "cohere_command4": "cmd4"}


class CohereStreamState(Struct, tag="cohere_stream"):
    """The filter's state and the call ids read before their names."""

    preset: str = "cmd3"
    filter: CohereState | None = None
    pending_ids: dict[int, str] = {}


class CohereStream:
    """One choice's read of a Command model's output: streamed by ``step``, whole by
    ``parse``."""

    engine_based = False

    def __init__(self, preset: str, *, tools: bool, state: CohereStreamState) -> None:
        self.tools = tools
        self.s = state
        if state.filter is None:
            state.preset = preset
            state.filter = CohereState(section=FIRST_SECTION[preset])
        self.preset = state.preset
        self.filter = CohereFilter(state.preset, state.filter)

    def step(self, text: str, token_ids: Sequence[int], finished: bool) -> Delta | None:
        """The delta of one chunk: its reasoning, content and call pieces."""
        results = [self.filter.write(text)]
        if finished:
            results.append(self.filter.flush())
        content = _joined([r.content for r in results])
        reasoning = _joined([r.reasoning for r in results])
        calls: list[DeltaToolCall] = []
        if self.tools:
            for result in results:
                calls += self._call_deltas(result)
        cited = [_citation(c) for result in results for c in result.citations]
        if not (content or reasoning or calls or cited):
            return None
        return Delta(content=content, reasoning=reasoning, tool_calls=calls, citations=cited)

    def _call_deltas(self, result: Pieces) -> list[DeltaToolCall]:
        pending = self.s.pending_ids
        deltas = []
        for piece in result.ordered_calls():
            if piece.id:
                pending[piece.index] = piece.id
            if not piece.name and not piece.arguments:
                continue
            delta = DeltaToolCall(index=piece.index, arguments=piece.arguments or None)
            if piece.name:
                delta.name = piece.name
                delta.id = piece.id or pending.pop(piece.index, None)
                delta.type = "function"
            deltas.append(delta)
        return deltas

    def parse(
        self, text: str, token_ids: Sequence[int]
    ) -> tuple[str | None, str | None, list[FunctionCall]]:
        """A whole output, read as one write and the end (a fresh filter per output)."""
        whole = CohereStream(self.preset, tools=self.tools, state=CohereStreamState())
        read = whole.filter.write(text)
        rest = whole.filter.flush()
        content = _joined([read.content, rest.content])
        reasoning = _joined([read.reasoning, rest.reasoning])
        if not self.tools:
            return reasoning, content, []
        for piece in rest.ordered_calls():
            read.call(piece.index, id=piece.id, name=piece.name, arguments=piece.arguments)
        calls = [
            FunctionCall(piece.name, piece.arguments, piece.id or None)
            for piece in read.ordered_calls()
        ]
        return reasoning, content, calls


def _citation(cited: Cited) -> Citation:
    kind = "THINKING_CONTENT" if cited.thinking else "TEXT_CONTENT"
    return Citation(cited.start, cited.end, cited.text, type=kind)


def _joined(parts: list[str | None]) -> str | None:
    present = [part for part in parts if part is not None]
    return "".join(present) if present else None


def _prepare(name: str, _: Vocabulary) -> str:
    return PRESET[name]


def _stream(
    preset: str, reasoning: bool, tools: bool, id_seed: str, kept: object
) -> tuple[CohereStream, CohereStreamState]:
    state = reuse(kept, CohereStreamState)
    return CohereStream(preset, tools=tools, state=state), state


FAMILY = Family(
    title="Cohere Command A, Command 4",
    tokenizer="model directory",
    whole=Whole(
        reasoning=("cohere_command3", "cohere_command4"),
        tools=("cohere_command3", "cohere_command4"),
        states=(CohereStreamState,),
        prepare=_prepare,
        build=_stream,
        golden=("H1", "H2", "H3"),
    ),
)
