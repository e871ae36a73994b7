"""MiniMax M2's parsers: ``minimax_m2`` reasoning and tool calls, ``minimax_m2_append_think``.

MiniMax M2 writes its reasoning without an opening tag and its calls as XML::

    reasoning</think>answer
    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    </invoke>
    </minimax:tool_call>

The markers are text (``<minimax:tool_call>``, ``</minimax:tool_call>``, ``<think>``
and ``</think>`` also count by id where they are tokens), declared on the marker
engine as vLLM 0.33.0's engine config declares them: an ``<invoke`` opens a call
even outside the wrapper, a name may be quoted either way or bare, and text between
calls is dropped. A call's body is read by ``ParamTools`` (shared with Qwen3-Coder)
through ``MiniMaxParamScan``; values are kept verbatim and typed by the tool's schema,
and a call to a tool the request does not declare is dropped.

``minimax_m2_append_think`` is vLLM's other reading: no reasoning at all, the whole
output content with the ``<think>`` the template swallowed put back in front.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    PARAM_END,
    PARAM_START,
    REASONING,
    REASONING_END,
    STATE_EVENTS,
    THINK_END,
    THINK_START,
    THINK_TRANSITIONS,
    TOOL_ARGS,
    TOOL_BETWEEN,
    TOOL_END,
    TOOL_NAME,
    TOOL_PREAMBLE,
    TOOL_START,
    TOOL_STATES,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import PromptMarkers
from parsers.engine.tools import EngineToolState, tool_builders
from parsers.families.dsml import DsmlReasoning, DsmlReasoningState
from parsers.families.qwen3_coder import ParamSlot, ParamTools
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.growing_text import Text
from parsers.types import Delta, ParseOptions, Vocabulary

# Terminals beyond the engine's own.
INVOKE_PREFIX = "INVOKE_PREFIX"
NAME_END = "NAME_END"
INVOKE_END = "INVOKE_END"

OPEN_THINK = "<think>"
CLOSE_THINK = "</think>"
CALLS_START = "<minimax:tool_call>"
CALLS_END = "</minimax:tool_call>"

_LITERALS: dict[str, str | tuple[str, ...]] = {
    THINK_START: OPEN_THINK,
    THINK_END: CLOSE_THINK,
    TOOL_START: CALLS_START,
    TOOL_END: CALLS_END,
    PARAM_START: "<parameter name=",
    PARAM_END: "</parameter>",
    INVOKE_PREFIX: ('<invoke name="', "<invoke name='", "<invoke name="),
    INVOKE_END: "</invoke>",
    NAME_END: ('">', "'>", ">"),
}
_ID_TERMINALS = (THINK_START, THINK_END, TOOL_START, TOOL_END)

MINIMAX_FORMAT = Format(
    transitions={
        **THINK_TRANSITIONS,
        (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END,)),
        (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, ()),
        (TOOL_ARGS, PARAM_START): Transition(TOOL_ARGS, (CALL_ARGS,)),
        (TOOL_ARGS, PARAM_END): Transition(TOOL_ARGS, (CALL_ARGS,)),
        (TOOL_PREAMBLE, TOOL_END): Transition(CONTENT, ()),
        (TOOL_BETWEEN, TOOL_END): Transition(CONTENT, ()),
        (CONTENT, TOOL_END): Transition(CONTENT, ()),
        (TOOL_ARGS, INVOKE_END): Transition(TOOL_BETWEEN, (CALL_END,)),
        (CONTENT, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_PREAMBLE, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_BETWEEN, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_NAME, NAME_END): Transition(TOOL_ARGS, ()),
    },
    state_events=STATE_EVENTS,
    call_states=TOOL_STATES,
)


class MiniMaxGrammar(PromptMarkers):
    """The format for one tokenizer, plus what reasoning reads of the prompt."""

    def __init__(self, vocab: Vocabulary) -> None:
        spelled = {t for s in _LITERALS.values() for t in ((s,) if isinstance(s, str) else s)}
        self.grammar = Grammar(
            _LITERALS,
            {t: s for t in _ID_TERMINALS if isinstance(s := _LITERALS[t], str)},
            vocab.special_tokens - spelled,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=MINIMAX_FORMAT,
        )
        self.start_id = vocab.id_of(OPEN_THINK)
        self.end_id = vocab.id_of(CLOSE_THINK)
        # Reasoning ends at </think> or at a call section, by id where they are tokens.
        self.end_ids = frozenset(
            i for i in (self.end_id, vocab.id_of(CALLS_START)) if i is not None
        )
        self.boundary_ids: frozenset[int] = frozenset()


class MiniMaxReasoning(DsmlReasoning):
    """``minimax_m2`` reasoning: everything up to ``</think>`` (or a call section) is reasoning."""

    def __init__(
        self,
        grammar: MiniMaxGrammar,
        options: ParseOptions,
        state: DsmlReasoningState | None = None,
    ) -> None:
        # Always thinking: with neither marker in the prompt, reasoning is open.
        super().__init__(grammar, options, state, thinking=True)

    def content_ids(self, token_ids: list[int]) -> list[int]:
        """The ids after the delta's last ``</think>`` (none without one), as vLLM's M2 has it."""
        end_id = self.grammar.end_id
        for i in range(len(token_ids) - 1, -1, -1):
            if token_ids[i] == end_id:
                return token_ids[i + 1 :]
        return []


# ---------------------------------------------------------------------------- append think


class AppendThinkState(Struct, tag="minimax_append_think"):
    seen_tokens: bool = False
    ended: bool = False  # the output's last think marker so far is </think>


class AppendThinkReasoning:
    """``minimax_m2_append_think``: no reasoning; ``<think>`` goes back in front of the output.

    Its "reasoning end" is the output's last think marker being ``</think>``; after it
    the tool parser (if any) reads on.
    """

    engine_based = False

    def __init__(self, vocab: Vocabulary, state: AppendThinkState | None = None) -> None:
        self.start_id = vocab.id_of(OPEN_THINK)
        self.end_id = vocab.id_of(CLOSE_THINK)
        self.state = state if state is not None else AppendThinkState()

    def _last_marker_ends(self, token_ids: Sequence[int], default: bool) -> bool:
        for token_id in reversed(token_ids):
            if token_id == self.end_id:
                return True
            if token_id == self.start_id:
                return False
        return default

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self._last_marker_ends(prompt_token_ids, False)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        return None, OPEN_THINK + text

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        if not state.seen_tokens:
            text = OPEN_THINK + text
        state.seen_tokens = state.seen_tokens or bool(token_ids)
        state.ended = self._last_marker_ends(token_ids, state.ended)
        return Delta(content=text)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.ended

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return token_ids

    def finish(self) -> Delta | None:
        return None


# ---------------------------------------------------------------------------- tool calls

# MiniMaxParamScan phases, and the head's steps after ``name=``.
_SEEK, _HEAD, _VALUE = 0, 1, 2
_BEFORE_NAME, _QUOTED, _AFTER_QUOTE, _BARE, _AFTER_BARE = range(5)
# TagScan results.
_NONE, _CLOSE, _OPEN = 0, 1, 2
_WORD = "parameter"
_KEY = "name"
# TagScan steps: after ``<`` / ``</``; 1..9 letters of the word; then the opener's gap
# and key letters, or the closer's space before ``>``.
_LT, _SLASH = -1, -2
_GAP = 20
_KEY_AT = 30  # + letters of ``name`` matched (1..4)


class TagScan(Struct):
    """Finds ``<\\s*/\\s*parameter\\s*>`` and ``<\\s*parameter\\s+name\\s*=`` a character at a time.

    Neither contains a ``<`` past its first character, so one candidate is live at a
    time and each character is looked at once.
    """

    start: int = -1  # the live candidate's ``<``; -1 when there is none
    step: int = 0
    closing: bool = False

    def feed(self, ch: str, pos: int) -> int:
        """Advance by ``ch`` (at ``pos``): ``_CLOSE`` or ``_OPEN`` when a tag ends with it
        (``start`` is then its ``<``; the caller clears it)."""
        if self.start >= 0:
            result = self._advance(ch)
            if result is not None:
                return result
            self.start = -1
        if ch == "<":
            self.start, self.step, self.closing = pos, _LT, False
        return _NONE

    def _advance(self, ch: str) -> int | None:
        """The live candidate takes ``ch``: a result, or None when it dies."""
        step = self.step
        space = ch.isspace()
        if step in (_LT, _SLASH):
            if space:
                return _NONE
            if ch == "/" and step == _LT:
                self.step, self.closing = _SLASH, True
                return _NONE
            if ch == _WORD[0]:
                self.step = 1
                return _NONE
        elif step < len(_WORD):
            if ch == _WORD[step]:
                self.step = step + 1
                return _NONE
        elif step == len(_WORD):
            if space:
                self.step = len(_WORD) if self.closing else _GAP
                return _NONE
            if self.closing and ch == ">":
                return _CLOSE
        elif step == _GAP:
            if space:
                return _NONE
            if ch == _KEY[0]:
                self.step = _KEY_AT + 1
                return _NONE
        elif step < _KEY_AT + len(_KEY):
            if ch == _KEY[step - _KEY_AT]:
                self.step = step + 1
                return _NONE
        else:
            if space:
                return _NONE
            if ch == "=":
                return _OPEN
        return None


class MiniMaxParamScan(Struct):
    """vLLM's MiniMax parameter pattern, matched once per character as the body grows.

    A head is ``<\\s*parameter\\s+name\\s*=\\s*`` then a name in double quotes,
    single quotes or bare, then ``\\s*>``; its value runs to ``</parameter>`` or to
    the next ``<parameter name=``. A head that fails restarts the search just past
    its ``<``, as a regex search would. A parameter whose name is blank is read and
    dropped. Once a head finds no end, no later one can, so the open parameter is
    always the last one.
    """

    scanned: int = 0
    phase: int = _SEEK
    tag: TagScan = field(default_factory=TagScan)
    head_start: int = 0  # the head's ``<``
    step: int = _BEFORE_NAME
    quote: str = ""
    name_start: int = 0
    name_stop: int = 0
    name: str = ""
    name_end: int = 0  # the head's ``>``

    def next_parameter(self, raw: Text) -> tuple[str, str] | None:
        """The next parameter ``raw`` completes (name, verbatim value); None when no more."""
        pos, size, tag = self.scanned, len(raw), self.tag
        while pos < size:
            if self.phase == _HEAD:
                pos = self._head(raw, pos)
                continue
            if tag.start < 0:
                pos = raw.find("<", pos)
                if pos < 0:
                    pos = size
                    break
            result = tag.feed(raw[pos], pos)
            pos += 1
            if result == _NONE:
                continue
            start, tag.start = tag.start, -1
            completed = None
            if self.phase == _VALUE and self.name:
                completed = self.name, raw[self.name_end + 1 : start]
            if result == _CLOSE:
                self.phase = _SEEK
            else:
                self.phase, self.step, self.head_start = _HEAD, _BEFORE_NAME, start
            if completed is not None:
                self.scanned = pos
                return completed
        self.scanned = pos
        return None

    def open_name(self, raw: Text) -> str | None:
        """The name of the unterminated last parameter, if it has one."""
        return self.name if self.phase == _VALUE and self.name else None

    def settled(self) -> int:
        """How far the scanned text is final: up to a tag still being spelled."""
        return self.tag.start if self.tag.start >= 0 else self.scanned

    def _head(self, raw: Text, pos: int) -> int:
        """Read the head from ``pos``: where to go on (the end of ``raw`` while it is open)."""
        size = len(raw)
        while pos < size:
            step = self.step
            ch = raw[pos]
            if step in (_BEFORE_NAME, _AFTER_QUOTE, _AFTER_BARE) and ch.isspace():
                pos += 1
            elif step == _BEFORE_NAME:
                if ch == ">":
                    return self._fail()
                self.name_start = pos
                if ch in "\"'":
                    self.step, self.quote = _QUOTED, ch
                    pos += 1
                else:
                    self.step = _BARE
            elif step == _QUOTED:
                end = raw.find(self.quote, pos)
                if end < 0:
                    return size
                self.step, self.name_stop = _AFTER_QUOTE, end
                pos = end + 1
            elif step == _BARE:
                while pos < size and not raw[pos].isspace() and raw[pos] != ">":
                    pos += 1
                if pos == size:
                    return size
                self.step, self.name_stop = _AFTER_BARE, pos
            elif ch == ">":
                start = self.name_start + (step == _AFTER_QUOTE)
                return self._open(raw[start : self.name_stop].strip(), pos)
            elif step == _AFTER_QUOTE:
                # Not a quoted name after all: read it bare, from its quote.
                self.step, pos = _BARE, self.name_start
            else:
                return self._fail()
        return size

    def _open(self, name: str, close: int) -> int:
        self.phase, self.name, self.name_end = _VALUE, name, close
        return close + 1

    def _fail(self) -> int:
        self.phase, self.name = _SEEK, ""
        return self.head_start + 1


class MiniMaxSlot(ParamSlot):
    """A MiniMax call: ``<parameter name="K">`` parameters."""

    scan: MiniMaxParamScan = field(default_factory=MiniMaxParamScan)


class MiniMaxToolState(EngineToolState[MiniMaxSlot], tag="minimax_m2"): ...


class MiniMaxTools(ParamTools[MiniMaxSlot, MiniMaxToolState]):
    """``minimax_m2`` tool calls, streamed or one-shot."""

    trims_newlines = False
    validates_names = True

    def _scan(self, slot: MiniMaxSlot) -> MiniMaxParamScan:
        return slot.scan


# ---------------------------------------------------------------------------- the family


def _grammar(_: str, vocab: Vocabulary) -> MiniMaxGrammar:
    return MiniMaxGrammar(vocab)


def _reasoning_stream(
    grammar: MiniMaxGrammar, request: Request, kept: object
) -> tuple[MiniMaxReasoning, DsmlReasoningState]:
    state = reuse(kept, DsmlReasoningState)
    return MiniMaxReasoning(grammar, request.options, state), state


def _vocabulary(_: str, vocab: Vocabulary) -> Vocabulary:
    return vocab


def _append_think_stream(
    vocab: Vocabulary, request: Request, kept: object
) -> tuple[AppendThinkReasoning, AppendThinkState]:
    state = reuse(kept, AppendThinkState)
    return AppendThinkReasoning(vocab, state), state


_tools, _tools_stream = tool_builders(MiniMaxTools)


FAMILY = Family(
    title="MiniMax M2",
    tokenizer="model directory",
    reasoning=(
        # Always thinking: with neither think marker in the prompt, reasoning is open.
        Reasoning(
            names=("minimax_m2",),
            engine_based=True,
            states=(DsmlReasoningState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: MiniMaxReasoning(grammar, request.options),
            stream=_reasoning_stream,
            golden=("M1", "M3"),
        ),
        # No reasoning: ``<think>`` goes back in front of the content.
        Reasoning(
            names=("minimax_m2_append_think",),
            engine_based=False,
            states=(AppendThinkState,),
            prepare=_vocabulary,
            one_shot=lambda vocab, request: AppendThinkReasoning(vocab),
            stream=_append_think_stream,
            golden=("M2",),
        ),
    ),
    tools=(
        Tools(
            names=("minimax_m2",),
            engine_based=True,
            states=(MiniMaxToolState,),
            prepare=_grammar,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("M1", "M2"),
        ),
    ),
)
