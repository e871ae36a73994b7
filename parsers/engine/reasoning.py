"""Think-marker reasoning on the marker engine, as vLLM's engine adapters read it.

The families whose whole format (reasoning and calls) is one engine declaration
(Kimi K2, GLM-4.5/4.7) share how their reasoning parser behaves: ``<think>`` /
``</think>`` by id, tool markup that ends reasoning implicitly, the prompt read back
to the last turn boundary, and trailing reasoning whitespace held until more
reasoning shows it was not the end. What differs is the grammar, given per request
because a request that turns thinking off is read with a grammar that has no think
markers at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from msgspec import field

from parsers.engine.core import (
    CONTENT,
    REASONING,
    REASONING_TEXT,
    TEXT,
    EngineState,
    Grammar,
)
from parsers.families.qwen3 import Qwen3Reasoning, Qwen3ReasoningState, ThinkGrammar
from parsers.types import Delta, ParseOptions, PlainText, Vocabulary


def thinking_from_kwargs(kwargs: dict[str, Any]) -> bool:
    """Thinking unless ``thinking`` / ``enable_thinking`` say otherwise (either true wins)."""
    thinking, enable = kwargs.get("thinking"), kwargs.get("enable_thinking")
    if thinking is None and enable is None:
        return True
    return bool(thinking) or bool(enable)


class PromptMarkers:
    """The ids a format's reasoning reads back through the prompt (vLLM's
    ``is_reasoning_end``): its last end marker (or a call that ends reasoning) closes
    reasoning, its last start marker leaves it open, a turn boundary stops the scan;
    with neither, thinking decides."""

    start_id: int | None
    end_ids: frozenset[int]
    boundary_ids: frozenset[int]

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool:
        for token_id in reversed(prompt_token_ids):
            if token_id in self.end_ids:
                return True
            if token_id == self.start_id:
                return False
            if token_id in self.boundary_ids:
                break
        return not thinking


class ThinkMarkers(PromptMarkers):
    """A grammar plus the ids prompt inspection reads.

    ``end_ids`` are the markers whose transition out of reasoning ends it (``</think>``
    and any tool opener that ends it implicitly); the scan back through the prompt
    stops at a turn boundary.
    """

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        *,
        start: str | None,
        end: str | None,
        implicit_ends: Iterable[str],
        boundaries: Iterable[str] = (),
    ) -> None:
        self.grammar = grammar
        self.start_id = vocab.id_of(start) if start is not None else None
        self.end_id = vocab.id_of(end) if end is not None else None
        ends = [self.end_id, *(vocab.id_of(text) for text in implicit_ends)]
        self.end_ids = frozenset(i for i in ends if i is not None)
        self.boundary_ids = frozenset(
            i for i in (vocab.id_of(t) for t in boundaries) if i is not None
        )


class HeldReasoning(Protocol):
    trailing_reasoning: list[str]


def hold_trailing_reasoning(delta: Delta | None, state: HeldReasoning, ended: bool) -> Delta | None:
    """vLLM's engines hold a reasoning delta's trailing whitespace until more reasoning
    shows it was not the end (the end drops it).

    The whitespace is held in the pieces it came in: a blank reasoning grows it by every
    chunk, and adding each piece to it would copy it all each time.
    """
    if delta is not None and delta.reasoning is not None:
        held = state.trailing_reasoning
        trimmed = delta.reasoning.rstrip()
        tail = delta.reasoning[len(trimmed) :]
        if trimmed and held:
            trimmed = "".join(held) + trimmed
            state.trailing_reasoning = held = []
        if tail:
            held.append(tail)
        delta.reasoning = trimmed or None
        if delta.reasoning is None and delta.content is None and not delta.tool_calls:
            return None
    elif state.trailing_reasoning and ended:
        state.trailing_reasoning = []
    return delta


class HeldReasoningState(Qwen3ReasoningState):
    """A reasoning stream's state plus the trailing whitespace it holds back."""

    trailing_reasoning: list[str] = field(default_factory=list)


class HoldingReasoning(Qwen3Reasoning):
    """Reasoning on the engine as vLLM's engine parsers read it (Kimi K2, GLM, DSML,
    MiniMax, Mistral): trailing whitespace is held until more reasoning shows it was
    not the end, and a one-shot reasoning loses it."""

    def __init__(
        self, grammar: ThinkGrammar, options: ParseOptions, state: HeldReasoningState
    ) -> None:
        super().__init__(grammar, options, state)
        self.held = state

    def _split(self, text: str, start: str) -> tuple[str | None, str | None]:
        """The whole output read from ``start``: its reasoning and content."""
        engine = self._engine(EngineState(start))
        events = engine.feed(text, []) + engine.finish()
        reasoning = "".join(e.value for e in events if e.kind == REASONING_TEXT).rstrip()
        content = "".join(e.value for e in events if e.kind == TEXT)
        return reasoning or None, content or None

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        delta = super().stream(text, token_ids)
        return hold_trailing_reasoning(delta, self.held, self.held.ended)

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Plain reasoning text (``Qwen3Reasoning.plain_text``) with no whitespace held
        before it and none at its end to hold (``hold_trailing_reasoning``)."""
        looks = super().plain_text(token_ids)
        if looks is None or self.held.trailing_reasoning:
            return None
        return looks._replace(check=ends_unspaced)


def ends_unspaced(text: str) -> bool:
    """Whether ``text`` ends in no whitespace (none ``hold_trailing_reasoning`` holds)."""
    return not text[-1:].isspace()


class EngineReasoningState(HeldReasoningState, tag="engine_reasoning"):
    """Kimi K2's and GLM's reasoning state, tagged for snapshots."""


class EngineReasoning(HoldingReasoning):
    """Reasoning of an engine-declared family: the engine run with tool markup as content.

    ``last_tool_opener`` is Kimi's reading of a delta's content ids when no
    ``</think>`` is among them: from the last tool-section opener, else nothing.
    """

    def __init__(
        self,
        markers: ThinkGrammar,
        options: ParseOptions,
        state: EngineReasoningState | None = None,
        *,
        last_tool_opener: bool = False,
    ) -> None:
        super().__init__(markers, options, state if state is not None else EngineReasoningState())
        self.thinking = thinking_from_kwargs(options.chat_template_kwargs)
        self.last_tool_opener = last_tool_opener

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output; reasoning loses its trailing whitespace."""
        if not self.thinking:
            return None, text
        closed = (
            prompt_token_ids is not None
            and bool(self.grammar.boundary_ids)
            and self.is_reasoning_end(prompt_token_ids)
        )
        return self._split(text, CONTENT if closed else REASONING)

    def content_ids(self, token_ids: list[int]) -> list[int]:
        if not self.last_tool_opener or not self.thinking:
            return super().content_ids(token_ids)
        end_id = self.grammar.end_id
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] == end_id:
                return token_ids[i + 1 :]
        openers = self.grammar.end_ids - {end_id}
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] in openers:
                return token_ids[i:]
        return []
