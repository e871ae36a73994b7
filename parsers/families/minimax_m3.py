"""MiniMax M3's parsers: ``minimax_m3`` reasoning and tool calls.

M3 writes its reasoning in ``<mm:think>`` (parsers/families/minimax_m3_thinking.py) and
prefixes every tag of its calls with the ``]<]minimax[>[`` namespace::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="get_weather">
    ]<]minimax[>[<city>Paris]<]minimax[>[</city>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

The calls are M2's markers (parsers/families/minimax.py), namespaced, on the marker
engine as vLLM 0.33.0's engine config declares them: an ``<invoke>`` opens a call only
inside the wrapper (or after a call), a name may be quoted either way or bare, and
everything between and after calls is dropped. A call's name is sent with its first
argument text; its arguments (parsers/families/minimax_m3_args.py) once its ``<invoke>``
closes, typed by the tool's schema. Unknown tools are calls too (vLLM does not check
M3's names), and content beside calls keeps its whitespace.
"""

from __future__ import annotations

import hashlib

from msgspec import field

from parsers.engine.core import (
    CALL_END,
    CALL_START,
    CONTENT,
    STATE_EVENTS,
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
from parsers.engine.tools import BodyTools, CallSlot, EngineToolState, json_name, tool_builders
from parsers.families.hermes import KeyMatch
from parsers.families.minimax import INVOKE_END, INVOKE_PREFIX, NAME_END
from parsers.families.minimax_m3_args import NAMESPACE, read_arguments
from parsers.families.minimax_m3_thinking import (
    END,
    START,
    M3Thinking,
    M3ThinkingState,
    thinking_mode,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.readers.schema import coerce_arguments
from parsers.types import DeltaToolCall, Vocabulary

_LITERALS: dict[str, str | tuple[str, ...]] = {
    TOOL_START: NAMESPACE + "<tool_call>",
    TOOL_END: NAMESPACE + "</tool_call>",
    INVOKE_PREFIX: tuple(
        NAMESPACE + spelled for spelled in ('<invoke name="', "<invoke name='", "<invoke name=")
    ),
    INVOKE_END: NAMESPACE + "</invoke>",
    NAME_END: ('">', "'>", ">"),
}

M3_FORMAT = Format(
    transitions={
        (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, ()),
        (TOOL_PREAMBLE, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_BETWEEN, INVOKE_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_NAME, NAME_END): Transition(TOOL_ARGS, ()),
        # Nested elements are argument text; only the invoke closer ends the call.
        (TOOL_ARGS, INVOKE_END): Transition(TOOL_BETWEEN, (CALL_END,)),
        # The wrapper's closer ends the message: what follows is dropped.
        (TOOL_PREAMBLE, TOOL_END): Transition(TOOL_BETWEEN, ()),
        (TOOL_BETWEEN, TOOL_END): Transition(TOOL_BETWEEN, ()),
    },
    state_events=STATE_EVENTS,
    call_states=TOOL_STATES,
)


class M3Markup:
    """The calls' grammar for one tokenizer (every marker is read from text)."""

    def __init__(self, vocab: Vocabulary) -> None:
        spelled = {t for s in _LITERALS.values() for t in ((s,) if isinstance(s, str) else s)}
        self.grammar = Grammar(
            _LITERALS,
            {},
            vocab.special_tokens - spelled,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=M3_FORMAT,
        )


class M3Slot(CallSlot):
    """One call: its body, whether a body's ``"name"`` names it, whether its arguments
    were sent (a call is ended once more when the stream stops after it), and its index."""

    json_name: KeyMatch = field(default_factory=KeyMatch)
    flushed: bool = False
    index: int = 0


class M3ToolState(EngineToolState[M3Slot], tag="minimax_m3"):
    """The calls, and by a digest of each body read the first call that had it: vLLM
    types a body by the tool of the first call whose body is the same text."""

    bodies: dict[str, int] = field(default_factory=dict)


class M3Tools(BodyTools[M3Slot, M3ToolState]):
    """``minimax_m3`` tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    strip_content_beside_calls = False

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """The name goes with the call's first argument text; the arguments wait for its end."""
        slot = self._grow(event)
        if slot.name_sent:
            return
        name = slot.name or (json_name(slot.args, slot.json_name) if event.value else None)
        if name:
            calls.append(self._announce(event.call, slot, name, None))

    def _ending(self, index: int, slot: M3Slot, calls: list[DeltaToolCall]) -> str | None:
        if slot.flushed:
            return None
        slot.flushed, slot.index = True, index
        return self._typed(self._read(slot), slot.name)

    def _body_arguments(self, slot: M3Slot, name: str) -> str:
        return self._typed(self._read(slot), name)

    def _read(self, slot: M3Slot) -> str:
        """The call's arguments, its elements typed by the tool of the first call whose
        body is this one's text."""
        body = slot.args.text()
        digest = hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        first = self.state.bodies.setdefault(digest, slot.index)
        name = self.state.slots[first].name.strip()
        return read_arguments(body, self._properties(name) if self.options.tools else {})

    def _typed(self, arguments: str, name: str) -> str:
        """The arguments typed by the called tool's schema (when the request has tools)."""
        if not self.options.tools or not name:
            return arguments
        return coerce_arguments(arguments, self._properties(name))


# ---------------------------------------------------------------------------- the family


def _markup(_: str, vocab: Vocabulary) -> M3Markup:
    return M3Markup(vocab)


def _vocabulary(_: str, vocab: Vocabulary) -> Vocabulary:
    return vocab


def _thinking_stream(
    vocab: Vocabulary, request: Request, kept: object
) -> tuple[M3Thinking, M3ThinkingState]:
    state = reuse(kept, M3ThinkingState)
    return M3Thinking(vocab, bool(request.thinking), state), state


_tools, _tools_stream = tool_builders(M3Tools)


FAMILY = Family(
    title="MiniMax M3",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("minimax_m3",),
            engine_based=False,
            needs=(START, END),
            states=(M3ThinkingState,),
            thinking=thinking_mode,
            prepare=_vocabulary,
            one_shot=lambda vocab, request: M3Thinking(vocab, bool(request.thinking)),
            stream=_thinking_stream,
            golden=("W2", "W3"),
        ),
    ),
    tools=(
        Tools(
            names=("minimax_m3",),
            engine_based=True,
            states=(M3ToolState,),
            prepare=_markup,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("W2",),
        ),
    ),
)
