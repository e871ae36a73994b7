"""Tool parsers on the marker engine: its events turned into one delta per chunk.

Every tool format declared on the engine (Qwen3-Coder's XML, DeepSeek's DSML) meets the
same events in the same order, and vLLM's engine parsers treat content, reasoning and
whitespace around calls alike; what differs between formats is only how a call's name
and argument text become JSON. A format's parser subclasses ``EngineTools`` and says
that in ``_arguments``, ``_end`` and ``_call``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from parsers.engine import (
    CALL_ARGS,
    CALL_END,
    CALL_NAME,
    CALL_START,
    REASONING_END,
    REASONING_TEXT,
    TEXT,
    EngineState,
    Event,
    Grammar,
    MarkerEngine,
)
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ParseOptions


class ToolSlot(Protocol):
    name: str


SlotT = TypeVar("SlotT", bound=ToolSlot)


class ToolsState(Protocol[SlotT]):
    """What the shared part reads and keeps of a format's plain-data state."""

    engine: EngineState
    slots: list[SlotT]
    deferred_content: str  # content held while calls may follow (whitespace, or in calls)
    content_has_nonws: bool


class EngineTools(ABC, Generic[SlotT]):
    supports_required_and_named = False
    engine_based = True
    # One-shot, content beside calls: vLLM's Qwen3-Coder strips it; DSML keeps it
    # unless it is all whitespace.
    strip_content_beside_calls = True

    def __init__(
        self,
        grammar: Grammar,
        options: ParseOptions,
        state: ToolsState[SlotT],
        new_slot: Callable[[], SlotT],
        *,
        reasoning_markup_is_text: bool,
        id_seed: str,
    ) -> None:
        self.options = options
        self.id_seed = id_seed
        self.state = state
        self._new_slot = new_slot
        self.engine = MarkerEngine(grammar, state.engine, skip_reasoning=reasoning_markup_is_text)
        # tool_choice "none" with tools: calls are read and dropped.
        self.suppress = options.tool_choice == "none" and bool(options.tools)

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        return self._delta(self.engine.feed(text, token_ids or []), finished=False)

    def finish(self) -> Delta | None:
        events = self.engine.finish()
        if events or self.state.deferred_content:
            return self._delta(events, finished=True)
        return None

    def remaining_arguments(self) -> str:
        return ""

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """One-shot: the whole content through the streaming machinery, then finish."""
        self.id_seed = id_seed
        events = self.engine.feed(content, []) + self.engine.finish()
        delta = self._delta(events, finished=True)
        calls = [call for i in range(len(self.state.slots)) if (call := self._call(i))]
        text = delta.content if delta is not None else None
        if text and calls:
            if self.strip_content_beside_calls:
                text = text.strip()
            elif not text.strip():
                text = None
        return ExtractedToolCalls(bool(calls), calls, text or None)

    def _slot(self, index: int) -> SlotT:
        slots = self.state.slots
        while len(slots) <= index:
            slots.append(self._new_slot())
        return slots[index]

    # ------------------------------------------------------------------ format hooks

    @abstractmethod
    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """More of a call's argument text: append what it streams to ``calls``."""

    @abstractmethod
    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        """Call ``index`` has ended: append what is left of it to ``calls``."""

    @abstractmethod
    def _call(self, index: int) -> FunctionCall | None:
        """Call ``index`` as one-shot reads it, if it is one."""

    def _reasoning_ended(self) -> None:
        """The reasoning section has closed (a format that tracks it says so here)."""

    def _other(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """An event kind of the format's own (e.g. argument text its decoder buffers)."""

    # ------------------------------------------------------------------ events to deltas

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        state = self.state
        if not events and not state.deferred_content:
            return None
        calls: list[DeltaToolCall] = []
        content: list[str] = []
        reasoning: list[str] = []
        carried = state.deferred_content
        in_calls = False
        for event in events:
            kind = event.kind
            if kind == TEXT:
                if in_calls:
                    state.deferred_content += event.value
                    continue
                if carried and not content:
                    # Whitespace held from earlier chunks goes before this text, even
                    # when calls follow in the same chunk.
                    content.append(carried)
                    state.deferred_content = carried = ""
                content.append(event.value)
            elif kind == REASONING_TEXT:
                reasoning.append(event.value)
            elif kind == REASONING_END:
                self._reasoning_ended()
            elif self.suppress:
                continue
            else:
                in_calls = True
                if kind == CALL_START:
                    self._slot(event.call)
                elif kind == CALL_NAME:
                    self._slot(event.call).name += event.value
                elif kind == CALL_ARGS:
                    self._arguments(event, calls)
                elif kind == CALL_END:
                    self._end(event.call, calls)
                else:
                    self._other(event, calls)
        if len(calls) > 1:
            calls = coalesce_calls(calls)
        if state.deferred_content and (not in_calls or not calls):
            now = state.deferred_content[len(carried) :]
            if carried:
                content.insert(0, carried)
            if now:
                content.append(now)
            state.deferred_content = ""
        text = "".join(content)
        if not state.content_has_nonws and text:
            if text.strip():
                state.content_has_nonws = True
            elif state.slots:
                text = ""
            elif not finished:
                state.deferred_content = text
                text = ""
        thought = "".join(reasoning)
        if text or calls or thought:
            return Delta(content=text or None, reasoning=thought or None, tool_calls=calls)
        return None


def coalesce_calls(calls: list[DeltaToolCall]) -> list[DeltaToolCall]:
    """One delta per call index, later pieces merged into the first.

    Argument pieces are joined once per call: a one-shot parse can bring thousands of
    pieces for one call, and adding them one by one would copy the text each time.
    """
    merged: dict[int, DeltaToolCall] = {}
    pieces: dict[int, list[str]] = {}
    for call in calls:
        first = merged.get(call.index)
        if first is None:
            merged[call.index] = call
            pieces[call.index] = [] if call.arguments is None else [call.arguments]
            continue
        if first.id is None:
            first.id = call.id
        if first.type is None:
            first.type = call.type
        if first.name is None:
            first.name = call.name
        if call.arguments is not None:
            pieces[call.index].append(call.arguments)
    if len(merged) == len(calls):
        return calls
    for index, first in merged.items():
        if pieces[index]:
            first.arguments = "".join(pieces[index])
    return list(merged.values())
