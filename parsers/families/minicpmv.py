"""MiniCPM-V reasoning (``minicpmv``): Qwen3's format with three differences.

vLLM declares it on its engine as Qwen3's grammar (``<think>`` reasoning, a
``<tool_call>`` ending it; its calls are Qwen3-Coder's, read by ``qwen3_coder``) with:

- ``<|im_end|>`` and the reserved markers (``<|reserved_12|>`` … ``<|reserved_15|>``,
  and ``<reserved_12>`` … spelled in text) dropped from reasoning and content;
- no turn boundaries: the prompt is read back to its last ``<think>`` or ``</think>``,
  however many turns back, and a ``<think>`` there leaves reasoning open even when the
  request turns thinking off;
- thinking on unless ``enable_thinking`` is false; with it off, a ``<think>`` span in the
  answer is dropped, not printed, and reasoning counts as ended from the first chunk.

On top, vLLM serves it through a parser of its own that recovers the newlines the
tokenizer writes as ``\\n`` in every delta and in a whole output's reasoning and content
(parsers/families/minicpmv_newlines.py): this parser is that rewrite (``Rewrites``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from msgspec import field

from parsers.engine.core import (
    CLOSE_ANGLE,
    CONTENT,
    FUNC_END,
    FUNC_PREFIX,
    PARAM_END,
    PARAM_START,
    REASONING,
    STATE_EVENTS,
    TEXT,
    THINK_END,
    THINK_START,
    TOOL_END,
    TOOL_START,
    TOOL_STATES,
    TRANSITIONS,
    EngineState,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import ThinkMarkers
from parsers.families.minicpmv_newlines import NewlineState, recover, recover_whole
from parsers.families.qwen3 import Qwen3Reasoning, Qwen3ReasoningState
from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import Delta, ParseOptions, Vocabulary

RESERVED = "RESERVED"  # a reserved marker spelled in text (dropped, never read by id)
_RESERVED = range(12, 16)
# Dropped where the tokenizer has them as tokens, else as text.
_DROPPED = ("<|im_end|>", *(f"<|reserved_{i}|>" for i in _RESERVED))
# Found by id where the tokenizer has them (Qwen3's), else in text.
_BY_ID = {
    THINK_START: "<think>",
    THINK_END: "</think>",
    TOOL_START: "<tool_call>",
    TOOL_END: "</tool_call>",
}
_LITERALS: dict[str, str | tuple[str, ...]] = {
    **_BY_ID,
    FUNC_PREFIX: "<function=",
    FUNC_END: "</function>",
    PARAM_START: "<parameter=",
    PARAM_END: "</parameter>",
    CLOSE_ANGLE: ">",
    RESERVED: tuple(f"<reserved_{i}>" for i in _RESERVED),
}
_DROP_RESERVED = {
    (REASONING, RESERVED): Transition(REASONING, ()),
    (CONTENT, RESERVED): Transition(CONTENT, ()),
}
THINKING = Format({**TRANSITIONS, **_DROP_RESERVED}, STATE_EVENTS, TOOL_STATES)
# Thinking off: a <think> in the answer opens a span that is dropped.
ANSWERING = Format(
    {**TRANSITIONS, **_DROP_RESERVED, (CONTENT, THINK_START): Transition(REASONING, ())},
    STATE_EVENTS,
    TOOL_STATES,
)


class MiniCPMVGrammars(NamedTuple):
    """The grammar a request is read with, by its thinking switch; built once."""

    thinking: ThinkMarkers
    answering: ThinkMarkers


def _markers(vocab: Vocabulary, markup: Format) -> ThinkMarkers:
    texts = {
        text
        for spelled in _LITERALS.values()
        for text in (spelled if isinstance(spelled, tuple) else (spelled,))
    }
    grammar = Grammar(
        _LITERALS,
        _BY_ID,
        (vocab.special_tokens | set(_DROPPED)) - texts,
        dict(vocab.token_ids),
        vocab.token_text,
        markup,
    )
    return ThinkMarkers(
        grammar, vocab, start="<think>", end="</think>", implicit_ends=("<tool_call>",)
    )


def prepare(name: str, vocab: Vocabulary) -> MiniCPMVGrammars:
    return MiniCPMVGrammars(_markers(vocab, THINKING), _markers(vocab, ANSWERING))


class MiniCPMVReasoningState(Qwen3ReasoningState, tag="minicpmv"):
    # The newline recovery of each text channel between chunks.
    reasoning_text: NewlineState = field(default_factory=NewlineState)
    content_text: NewlineState = field(default_factory=NewlineState)


class MiniCPMVReasoning(Qwen3Reasoning):
    """Qwen3's reasoning on MiniCPM-V's grammar, and vLLM's newline recovery after
    every parser (``Rewrites``)."""

    def __init__(
        self,
        grammars: MiniCPMVGrammars,
        options: ParseOptions,
        state: MiniCPMVReasoningState | None = None,
    ) -> None:
        self.minicpmv = state if state is not None else MiniCPMVReasoningState()
        thinking = bool(options.chat_template_kwargs.get("enable_thinking", True))
        super().__init__(
            grammars.thinking if thinking else grammars.answering, options, self.minicpmv
        )

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        if self.thinking:
            return super().extract(text, prompt_token_ids)
        # Thinking off: the answer without its <think> spans and dropped markers.
        engine = self._engine(EngineState(CONTENT))
        events = engine.feed(text, []) + engine.finish()
        return None, "".join(e.value for e in events if e.kind == TEXT) or None

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        delta = super().stream(text, token_ids)
        if self.thinking or delta is None:
            return delta
        delta.reasoning = None
        return delta if delta.content is not None or delta.tool_calls else None

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        # Thinking off, there is no reasoning to end: the first chunk ends it.
        return not self.thinking or self.minicpmv.ended

    def rewrite_delta(self, delta: Delta | None, finished: bool) -> Delta | None:
        """Each channel's newlines recovered; reasoning releases what it holds once
        content or a call shows it is over."""
        state = self.minicpmv
        over = finished or (
            delta is not None and (delta.content is not None or bool(delta.tool_calls))
        )
        reasoning = recover(state.reasoning_text, (delta.reasoning if delta else None) or "", over)
        content = recover(state.content_text, (delta.content if delta else None) or "", finished)
        if delta is None:
            if not reasoning and not content:
                return None
            return Delta(content=content or None, reasoning=reasoning or None)
        delta.reasoning = reasoning or None
        delta.content = content or None
        if not delta.content and not delta.reasoning and not delta.tool_calls:
            return None
        return delta

    def rewrite_text(self, text: str | None) -> str | None:
        return recover_whole(text)


# ------------------------------------------------------------------ the family


def _stream(
    grammars: MiniCPMVGrammars, request: Request, kept: object
) -> tuple[MiniCPMVReasoning, MiniCPMVReasoningState]:
    state = reuse(kept, MiniCPMVReasoningState)
    return MiniCPMVReasoning(grammars, request.options, state), state


# Thinking: on unless ``enable_thinking`` is false (read by ``MiniCPMVReasoning``).
FAMILY = Family(
    title="MiniCPM-V",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("minicpmv",),
            engine_based=True,
            states=(MiniCPMVReasoningState,),
            prepare=prepare,
            one_shot=lambda grammars, request: MiniCPMVReasoning(grammars, request.options),
            stream=_stream,
            golden=("M5", "M6"),
        ),
    ),
)
