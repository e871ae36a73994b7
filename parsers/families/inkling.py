"""Inkling's parsers (``inkling`` reasoning and tools), declared on the marker engine.

Inkling writes typed blocks, each a message of its own::

    <|message_model|><|content_thinking|>...reasoning...<|end_message|>
    <|message_model|><|content_text|>...visible text...<|end_message|>
    <|message_model|><|content_invoke_tool_json|>{"name": "f", "args": {...}}<|end_message|>

Blocks come in any order and number; ``<|content_model_end_sampling|>`` may close one
too. Text between ``<|message_model|>`` and the content kind is a header (a function
name, say): dropped when a block opens, content where a closer ends it. Raw and error
tool blocks read as visible text. A call's name is the body's ``"name"``; its arguments
are the ``args`` object as written (inkling_args.py), typed by the tool's schema.

vLLM matches every marker by its text, never by id, and starts reading where the
prompt leaves off: inside thinking, text, or a model message's header. A reasoning
parser ends reasoning at the first block that renders as content, not at
``<|end_message|>``, which closes every kind of block.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import field

from parsers.engine.core import (
    CALL_END,
    CALL_START,
    CONTENT,
    HEADER,
    REASONING,
    REASONING_END,
    REASONING_TEXT,
    STATE_EVENTS,
    TEXT,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_START,
    TOOL_STATES,
    Format,
    Grammar,
    HeaderEngineState,
    MarkerEngine,
    Transition,
)
from parsers.engine.reasoning import HeldReasoningState, HoldingReasoning
from parsers.engine.tools import (
    ReasoningToolState,
    tool_builders,
)
from parsers.families.member_calls import MemberSlot, MemberTools
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import Delta, ExtractedToolCalls, ParseOptions, Vocabulary

MESSAGE_MODEL = "<|message_model|>"
CONTENT_TEXT = "<|content_text|>"
CONTENT_THINKING = "<|content_thinking|>"
INVOKE_TOOL_JSON = "<|content_invoke_tool_json|>"
INVOKE_TOOL_TEXT = "<|content_invoke_tool_text|>"
TOOL_ERROR = "<|content_tool_error|>"
END_SAMPLING = "<|content_model_end_sampling|>"
END_MESSAGE = "<|end_message|>"

# Terminals beyond the engine's own (thinking opens with THINK_START, every block
# closes with THINK_END, a tool block opens with TOOL_START).
MODEL = "MODEL"
TEXT_START = "TEXT_START"
SAMPLING_END = "SAMPLING_END"
RAW_TOOL = "RAW_TOOL"
ERROR_TOOL = "ERROR_TOOL"

_MARKERS = {
    MODEL: MESSAGE_MODEL,
    TEXT_START: CONTENT_TEXT,
    THINK_START: CONTENT_THINKING,
    THINK_END: END_MESSAGE,
    SAMPLING_END: END_SAMPLING,
    TOOL_START: INVOKE_TOOL_JSON,
    RAW_TOOL: INVOKE_TOOL_TEXT,
    ERROR_TOOL: TOOL_ERROR,
}
# Openers of blocks that render as content: each confirms reasoning is over.
_VISIBLE = (TEXT_START, RAW_TOOL, ERROR_TOOL)
_CALL = Transition(TOOL_ARGS, (REASONING_END, CALL_START))


def _transitions() -> dict[tuple[str, str], Transition]:
    table = {
        (CONTENT, MODEL): Transition(HEADER, ()),
        (HEADER, MODEL): Transition(HEADER, ()),
        (CONTENT, THINK_START): Transition(REASONING, ()),
        (HEADER, THINK_START): Transition(REASONING, ()),
        (REASONING, THINK_START): Transition(REASONING, ()),
        (CONTENT, TOOL_START): _CALL,
        (HEADER, TOOL_START): _CALL,
        (REASONING, TOOL_START): _CALL,
        # A thinking block's closer leaves reasoning's end to the next block's opener.
        (REASONING, THINK_END): Transition(CONTENT, ()),
        (REASONING, SAMPLING_END): Transition(CONTENT, (REASONING_END,)),
    }
    for opener in _VISIBLE:
        table[(CONTENT, opener)] = Transition(CONTENT, (REASONING_END,))
        table[(HEADER, opener)] = Transition(CONTENT, (REASONING_END,))
    for closer in (THINK_END, SAMPLING_END):
        table[(CONTENT, closer)] = Transition(CONTENT, ())
        table[(TOOL_ARGS, closer)] = Transition(CONTENT, (CALL_END,))
        # A header closed without a content kind is content.
        table[(HEADER, closer)] = Transition(CONTENT, (TEXT,))
    return table


INKLING_FORMAT = Format(_transitions(), STATE_EVENTS, TOOL_STATES)


class InklingGrammar:
    """Inkling's grammar for one tokenizer (markers by text only; other special tokens
    dropped) and the marker ids the prompt is read back with."""

    def __init__(self, vocab: Vocabulary) -> None:
        markers = set(_MARKERS.values())
        self.grammar = Grammar(
            _MARKERS,
            {},
            vocab.special_tokens - markers,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=INKLING_FORMAT,
        )
        # What a think-marker reasoning parser reads of its grammar: no end token.
        self.end_id: int | None = None
        self.end_ids: frozenset[int] = frozenset()
        self.boundary_ids: frozenset[int] = frozenset()
        ids = {text: vocab.id_of(text) for text in markers}
        self.thinking_id = ids[CONTENT_THINKING]
        self.text_id = ids[CONTENT_TEXT]
        self.model_id = ids[MESSAGE_MODEL]
        self.sampling_end_id = ids[END_SAMPLING]
        self.marker_ids = frozenset(i for i in ids.values() if i is not None)

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool:
        """The prompt's last thinking or model-message opener leaves reasoning open; its
        last text opener or end-sampling closer ends it; with none, it is open."""
        open_ids = (self.thinking_id, self.model_id)
        closing_ids = (self.text_id, self.sampling_end_id)
        for token_id in reversed(prompt_token_ids):
            if token_id in open_ids:
                return False
            if token_id in closing_ids:
                return True
        return False

    def prompt_state(self, prompt_token_ids: Sequence[int]) -> str | None:
        """Where the output continues the prompt: the last thinking or text opener or
        model message before any other Inkling marker decides (None: from the start)."""
        for token_id in reversed(prompt_token_ids):
            if token_id == self.thinking_id:
                return REASONING
            if token_id == self.text_id:
                return CONTENT
            if token_id == self.model_id:
                return HEADER
            if token_id in self.marker_ids:
                break
        return None


# ---------------------------------------------------------------------------- reasoning


class InklingReasoningState(HeldReasoningState, tag="inkling_reasoning"):
    """The reasoning stream's state (the engine's starts where the prompt leaves off)."""

    engine: HeaderEngineState | None = None


class InklingReasoning(HoldingReasoning):
    """Reasoning as vLLM's Inkling engine reads it with tool blocks as content: from a
    model message's header unless the prompt says where the output continues."""

    def __init__(
        self,
        grammar: InklingGrammar,
        options: ParseOptions,
        state: InklingReasoningState | None = None,
    ) -> None:
        super().__init__(grammar, options, state if state is not None else InklingReasoningState())
        self.inkling = grammar

    def continue_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        """The prompt leaves reasoning open: start where it leaves off."""
        start = self.inkling.prompt_state(prompt_token_ids)
        if start is not None:
            self.state.engine = HeaderEngineState(start)

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        self._engine_state()
        return super().stream(text, token_ids)

    def finish(self) -> Delta | None:
        self._engine_state()
        return super().finish()

    def _engine_state(self) -> None:
        """Without a prompt that says otherwise, a stream starts in a message header."""
        if self.state.engine is None:
            self.state.engine = HeaderEngineState(HEADER)

    def _split(self, text: str, start: str) -> tuple[str | None, str | None]:
        engine = MarkerEngine(self.grammar.grammar, HeaderEngineState(start), skip_tools=True)
        events = engine.feed(text, []) + engine.finish()
        reasoning = "".join(e.value for e in events if e.kind == REASONING_TEXT).rstrip()
        content = "".join(e.value for e in events if e.kind == TEXT)
        return reasoning or None, content or None

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output, read from a header whatever the prompt (as vLLM's one-shot)."""
        return self._split(text, HEADER)

    def content_ids(self, token_ids: list[int]) -> list[int]:
        """No token ends Inkling's reasoning on its own: the whole delta goes on."""
        return token_ids


# ---------------------------------------------------------------------------- tools


class InklingSlot(MemberSlot):
    """One call: its body as written, the body's ``"name"`` search, the bracket vLLM
    holds back, the ``args`` reading, and what of the arguments was sent."""


class InklingToolState(ReasoningToolState[InklingSlot], tag="inkling"):
    engine: HeaderEngineState = field(default_factory=lambda: HeaderEngineState(CONTENT))


class InklingTools(MemberTools[InklingSlot, InklingToolState]):
    """Inkling's tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    strip_content_beside_calls = False
    reasoning_format = INKLING_FORMAT
    argument_keys = ("args", "arguments", "parameters")

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Text blocks after the calls stay content, as in vLLM's Inkling parser."""
        result = super().extract(content, id_seed)
        trailing = self.state.deferred_content
        if not trailing:
            return result
        self.state.deferred_content = ""
        text = (result.content or "") + trailing
        if result.tools_called and not text.strip():
            text = ""
        return ExtractedToolCalls(result.tools_called, result.calls, text or None)


# ---------------------------------------------------------------------------- the family


def _grammar(_: str, vocab: Vocabulary) -> InklingGrammar:
    return InklingGrammar(vocab)


def _reasoning_stream(
    grammar: InklingGrammar, request: Request, kept: object
) -> tuple[InklingReasoning, InklingReasoningState]:
    state = reuse(kept, InklingReasoningState)
    return InklingReasoning(grammar, request.options, state), state


_tools, _tools_stream = tool_builders(InklingTools)


FAMILY = Family(
    title="Inkling",
    tokenizer="model directory (markers read by their text)",
    reasoning=(
        Reasoning(
            names=("inkling",),
            engine_based=True,
            states=(InklingReasoningState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: InklingReasoning(grammar, request.options),
            stream=_reasoning_stream,
            golden=("I1", "I2"),
        ),
    ),
    tools=(
        Tools(
            names=("inkling",),
            engine_based=True,
            states=(InklingToolState,),
            prepare=_grammar,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("I1", "I3"),
        ),
    ),
)
