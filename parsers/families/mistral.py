"""Mistral's ``mistral`` reasoning and tool parsers, in the newer ``[ARGS]`` form.

Tokenizers from v11 on write calls as ``[TOOL_CALLS]name[ARGS]{...}`` (a call may
also open straight on ``{``: ``[TOOL_CALLS]name{...}``), one ``[TOOL_CALLS]`` per
call, and v13 ones (Magistral) reason in ``[THINK]...[/THINK]``. vLLM 0.33.0 reads
this with its declarative engine; so do we, with the same table on the shared
marker engine. A stream starts in content: reasoning opens only on ``[THINK]``.

Arguments are JSON text passed through as written, except that a closing brace at
the top level is held back until more text shows it was not the last (vLLM's
``tool_args_json`` buffering); one-shot, a call's arguments are the first JSON
value of its text, re-typed to the tool's schema.

Which form a tokenizer gets is vLLM's choice: without ``[ARGS]`` in the vocabulary
calls are the older JSON array (parsers/families/mistral_json.py); without ``[THINK]`` there
is no reasoning. Tool-call ids are Mistral's: 9 letters and digits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from msgspec import field

from parsers.engine.core import (
    CALL_ARGS,
    CALL_END,
    CALL_NAME,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    REASONING_TEXT,
    REOPENING_THINK,
    TEXT,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_NAME,
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import HoldingReasoning, PromptMarkers
from parsers.engine.tools import CallSlot, EngineTools, ReasoningToolState
from parsers.families.dsml import DsmlReasoningState
from parsers.families.kimi_k2 import JsonHold
from parsers.family import ParserUnavailable
from parsers.ids import mistral_tool_call_id
from parsers.readers.schema import coerce_arguments
from parsers.types import DeltaToolCall, FunctionCall, ParseOptions, PlainText, Vocabulary

TOOL_CALLS_TOKEN = "[TOOL_CALLS]"
ARGS_TOKEN = "[ARGS]"
THINK_TOKEN = "[THINK]"
END_THINK_TOKEN = "[/THINK]"

# Terminals beyond the engine's own.
TOOL_CALLS = "TOOL_CALLS"
ARGS = "ARGS"
OPEN_BRACE = "OPEN_BRACE"
# Argument text after the opening: it goes through the top-level brace hold.
ARGS_TEXT = "args_text"

_CALLS = {
    (TOOL_NAME, ARGS): Transition(TOOL_ARGS, ()),
    # The brace that ends a name is the arguments' first character.
    (TOOL_NAME, OPEN_BRACE): Transition(TOOL_ARGS, (CALL_ARGS,)),
    (TOOL_ARGS, TOOL_CALLS): Transition(TOOL_NAME, (CALL_END, CALL_START)),
}
_WITHOUT_THINK = {(CONTENT, TOOL_CALLS): Transition(TOOL_NAME, (CALL_START,))}
_THINK = {
    **REOPENING_THINK,
    (REASONING, TOOL_CALLS): Transition(TOOL_NAME, (REASONING_END, CALL_START)),
    (CONTENT, TOOL_CALLS): Transition(TOOL_NAME, (REASONING_END, CALL_START)),
}
_STATE_EVENTS = {
    CONTENT: TEXT,
    REASONING: REASONING_TEXT,
    TOOL_NAME: CALL_NAME,
    TOOL_ARGS: ARGS_TEXT,
}
_CALL_STATES = frozenset({TOOL_NAME, TOOL_ARGS})
THINK_FORMAT = Format({**_CALLS, **_THINK}, _STATE_EVENTS, _CALL_STATES)
PLAIN_FORMAT = Format({**_CALLS, **_WITHOUT_THINK}, _STATE_EVENTS, _CALL_STATES)


class MistralGrammar(PromptMarkers):
    """The format for one tokenizer: which call form and whether it reasons."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.tool_calls_id = vocab.id_of(TOOL_CALLS_TOKEN)
        if self.tool_calls_id is None:
            raise ParserUnavailable(f"the tokenizer has no {TOOL_CALLS_TOKEN!r} token")
        # vLLM: the JSON array for tokenizers before v11 (no [ARGS]); reasoning only
        # where [THINK] is a token (an HF tokenizer never "supports grammar").
        self.json_array = vocab.id_of(ARGS_TOKEN) is None
        self.has_think = vocab.id_of(THINK_TOKEN) is not None
        literals: dict[str, str | tuple[str, ...]] = {
            TOOL_CALLS: TOOL_CALLS_TOKEN,
            ARGS: ARGS_TOKEN,
            OPEN_BRACE: "{",
        }
        by_id = {TOOL_CALLS: TOOL_CALLS_TOKEN, ARGS: ARGS_TOKEN}
        if self.has_think:
            literals = {THINK_START: THINK_TOKEN, THINK_END: END_THINK_TOKEN, **literals}
            by_id = {THINK_START: THINK_TOKEN, THINK_END: END_THINK_TOKEN, **by_id}
        spelled = {text for text in literals.values() if isinstance(text, str)}
        self.grammar = Grammar(
            literals,
            by_id,
            vocab.special_tokens - spelled,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=THINK_FORMAT if self.has_think else PLAIN_FORMAT,
        )
        self.start_id = vocab.id_of(THINK_TOKEN)
        self.end_id = vocab.id_of(END_THINK_TOKEN)
        # A call ends reasoning too.
        self.end_ids = (
            frozenset(i for i in (self.end_id, self.tool_calls_id) if i is not None)
            if self.has_think
            else frozenset()
        )
        self.boundary_ids: frozenset[int] = frozenset()


class MistralReasoningState(DsmlReasoningState, tag="mistral_reasoning"):
    pass


class MistralReasoning(HoldingReasoning):
    """``mistral`` reasoning: ``[THINK]...[/THINK]`` wherever it opens; none without it."""

    def __init__(
        self,
        grammar: MistralGrammar,
        options: ParseOptions,
        state: MistralReasoningState | None = None,
    ) -> None:
        super().__init__(grammar, options, state if state is not None else MistralReasoningState())
        self.thinking = grammar.has_think

    def _start_state(self) -> str:
        return CONTENT

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output from content; reasoning loses trailing whitespace."""
        if not self.thinking:
            return None, text
        return self._split(text, CONTENT)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.ended or not self.thinking

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """``HoldingReasoning.plain_text`` while thinking (``ended_by`` then reads the
        state that plain text leaves as it was); without thinking every chunk ends
        reasoning."""
        return super().plain_text(token_ids) if self.thinking else None


# ---------------------------------------------------------------------------- tool calls


class MistralSlot(CallSlot):
    """A Mistral call: the fields every format keeps, no more."""


class MistralToolState(ReasoningToolState[MistralSlot], tag="mistral"):
    """The engine's fields, the held reasoning and the arguments' brace hold."""

    # The brace that ended a name is not fed to it: its partner is held at once.
    hold: JsonHold = field(default_factory=JsonHold)


class MistralTools(EngineTools[MistralSlot, MistralToolState]):
    """``[TOOL_CALLS]name[ARGS]{...}`` calls, streamed or one-shot, as vLLM emits them."""

    reasoning_format = THINK_FORMAT

    # ------------------------------------------------------------------ format hooks

    def _new_id(self, index: int) -> str:
        return mistral_tool_call_id(self.id_seed, index)

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """The brace that ended the name: sent as it is."""
        self._chunk(event.call, event.value, calls)

    def _other(self, event: Event, calls: list[DeltaToolCall]) -> None:
        if event.kind == ARGS_TEXT:
            released = self.state.hold.feed(event.value)
            if released:
                self._chunk(event.call, released, calls)

    def _chunk(self, index: int, text: str, calls: list[DeltaToolCall]) -> None:
        """Argument text: the call opens with its name (even an empty one) and it."""
        slot = self._slot(index)
        slot.args.append(text)
        if slot.name_sent:
            calls.append(DeltaToolCall(index=index, arguments=text))
            return
        calls.append(self._announce(index, slot, slot.name, text))

    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        held = self.state.hold.release()
        self.state.hold = JsonHold()
        if index >= len(self.state.slots):
            return
        if held:
            self._chunk(index, held, calls)
        slot = self.state.slots[index]
        if not slot.name_sent:
            calls.append(self._announce(index, slot, slot.name, ""))

    def _call(self, index: int) -> FunctionCall | None:
        slot = self.state.slots[index]
        if not slot.name and not slot.args:
            return None
        name = slot.name.strip()
        arguments = first_json_value(slot.args.text())
        tool = self.options.tool(name) if self.options.tools and name else None
        if tool is not None:
            arguments = coerce_arguments(arguments, tool.properties())
        self._ensure_id(index, slot)
        return FunctionCall(name, arguments, slot.id)


def first_json_value(raw: str) -> str:
    """A call's arguments one-shot: its first JSON value (text after it is dropped),
    the text as it is when it does not start with one, ``{}`` when empty."""
    stripped = raw.strip()
    if not stripped:
        return "{}"
    try:
        _, end = json.JSONDecoder().raw_decode(stripped)
    except (ValueError, RecursionError):
        return stripped
    return stripped[:end]
