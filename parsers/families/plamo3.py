"""PLaMo 3's parsers (``plamo3`` reasoning and tools), declared on the marker engine.

PLaMo 3 writes reasoning between ``<|plamo:begin_think:plamo|>`` and
``<|plamo:end_think:plamo|>`` (a stream starts in it unless ``enable_thinking`` is
false) and calls as nested blocks::

    <|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>
    <|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>
    <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"city": "Paris"}
    <|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>
    <|plamo:end_tool_requests:plamo|>

Its markers are several tokens each (an anchor ``<|plamo:begin_`` or ``<|plamo:end_``,
the name as text, ``:plamo|>``), so they are read from text; only ``<|plamo:tag|>``,
the turn's end, is one token. Arguments are the model's JSON as written, streamed as
they come but for a closing bracket that may end the object (vLLM's engine holds it
until the next character or the arguments' end). A call's name goes out with its first
argument text.

What vLLM 0.33.0's ``Plamo3Parser`` adds to its engine, reproduced here: at the end of
a stream, text cut inside a marker is dropped where its token ids begin a marker's
(reasoning, content, a name; arguments only where the rest still parses as JSON),
blank arguments of a call sent then read ``{}``, and whether the prompt ended
reasoning is read from the marker's ids.
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
    STATE_EVENTS,
    TEXT,
    THINK_END,
    THINK_START,
    TOOL_ARGS,
    TOOL_BETWEEN,
    TOOL_END,
    TOOL_NAME,
    TOOL_PREAMBLE,
    TOOL_START,
    TOOL_STATES,
    EngineState,
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.tools import BodyTools, CallSlot, EngineToolState, json_name, tool_builders
from parsers.families.hermes import KeyMatch
from parsers.families.kimi_k2 import JsonHold
from parsers.families.qwen3 import Qwen3Reasoning, Qwen3ReasoningState
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.readers.schema import coerce_arguments
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    OutputRefused,
    ParseOptions,
    Vocabulary,
)

BEGIN_THINK = "<|plamo:begin_think:plamo|>"
END_THINK = "<|plamo:end_think:plamo|>"
EOT = "<|plamo:tag|>"
# Where a marker starts: the text from its last occurrence may be a cut marker.
MARKER_HEAD = "<|plamo:"
# Marker pieces the tokenizer has as special tokens that are kept in the text.
PRESERVED = frozenset({"<|plamo:begin_", "<|plamo:end_", ":plamo|>"})

# Terminals beyond the engine's own (the requests block is TOOL_START / TOOL_END).
REQUEST_OPEN = "REQUEST_OPEN"
REQUEST_CLOSE = "REQUEST_CLOSE"
NAME_OPEN = "NAME_OPEN"
NAME_CLOSE = "NAME_CLOSE"
ARGS_OPEN = "ARGS_OPEN"
ARGS_CLOSE = "ARGS_CLOSE"
TURN_END = "EOT"
# What vLLM answers when arguments come before any name: its stream fails the request;
# its one-shot parse raises IndexError (a 500 there, a 400 here).
STREAM_REFUSED = "invalid stream_state: derender failed"
ONE_SHOT_REFUSED = "list index out of range"
# Leaving the arguments releases the bracket the engine held (vLLM flushes it there).
ARGS_DONE = "args_done"

_TOOL_MARKERS: dict[str, str | tuple[str, ...]] = {
    TOOL_START: "<|plamo:begin_tool_requests:plamo|>",
    TOOL_END: "<|plamo:end_tool_requests:plamo|>",
    REQUEST_OPEN: "<|plamo:begin_tool_request:plamo|>",
    REQUEST_CLOSE: "<|plamo:end_tool_request:plamo|>",
    NAME_OPEN: "<|plamo:begin_tool_name:plamo|>",
    NAME_CLOSE: "<|plamo:end_tool_name:plamo|>",
    ARGS_OPEN: "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>",
    ARGS_CLOSE: "<|plamo:end_tool_arguments:plamo|>",
    TURN_END: EOT,
}
_THINK_MARKERS: dict[str, str | tuple[str, ...]] = {THINK_START: BEGIN_THINK, THINK_END: END_THINK}

_CALLS = {
    (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, ()),
    (TOOL_PREAMBLE, REQUEST_OPEN): Transition(TOOL_PREAMBLE, ()),
    (TOOL_PREAMBLE, NAME_OPEN): Transition(TOOL_NAME, (CALL_START,)),
    (TOOL_NAME, NAME_CLOSE): Transition(TOOL_PREAMBLE, ()),
    (TOOL_PREAMBLE, ARGS_OPEN): Transition(TOOL_ARGS, ()),
    (TOOL_ARGS, ARGS_CLOSE): Transition(TOOL_BETWEEN, (ARGS_DONE,)),
    (TOOL_BETWEEN, REQUEST_CLOSE): Transition(TOOL_PREAMBLE, (CALL_END,)),
    (TOOL_PREAMBLE, TOOL_END): Transition(CONTENT, ()),
    # The turn's end leaves any block (vLLM keeps it out of the text however it comes).
    (CONTENT, TURN_END): Transition(CONTENT, ()),
    (TOOL_PREAMBLE, TURN_END): Transition(CONTENT, ()),
    (TOOL_NAME, TURN_END): Transition(CONTENT, ()),
    (TOOL_ARGS, TURN_END): Transition(CONTENT, (ARGS_DONE,)),
    (TOOL_BETWEEN, TURN_END): Transition(CONTENT, ()),
}
_THINKING = {
    (REASONING, THINK_START): Transition(REASONING, ()),
    (CONTENT, THINK_START): Transition(REASONING, ()),
    (REASONING, THINK_END): Transition(CONTENT, (REASONING_END,)),
    (CONTENT, THINK_END): Transition(CONTENT, ()),
    (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END,)),
    (REASONING, TURN_END): Transition(CONTENT, (REASONING_END,)),
}
PLAMO_FORMAT = Format({**_THINKING, **_CALLS}, STATE_EVENTS, TOOL_STATES)
PLAMO_PLAIN_FORMAT = Format(_CALLS, STATE_EVENTS, TOOL_STATES)


def _cut_markers(literals: Sequence[str], vocab: Vocabulary) -> frozenset[str]:
    """The texts vLLM drops from the end of a stream as a cut marker: a text from
    ``<|plamo:`` whose token ids are a proper prefix of a marker's ids. Such a text is
    the marker's first k tokens, so the set is those prefixes that encode as themselves.
    A vocabulary that cannot encode counts every proper text prefix."""
    encode = vocab.encode
    cut: set[str] = set()
    for literal in literals:
        if encode is None:
            cut.update(literal[:i] for i in range(len(MARKER_HEAD), len(literal)))
            continue
        ids = encode(literal)
        for k in range(1, len(ids)):
            prefix = "".join(vocab.token_text(i) for i in ids[:k])
            if prefix.startswith(MARKER_HEAD) and encode(prefix) == ids[:k]:
                cut.add(prefix)
    return frozenset(cut)


class PlamoMarkers:
    """PLaMo 3's grammar for one tokenizer and thinking switch, and the ids vLLM reads
    through the prompt (computed once)."""

    def __init__(self, vocab: Vocabulary, thinking: bool) -> None:
        literals = {**_THINK_MARKERS, **_TOOL_MARKERS} if thinking else dict(_TOOL_MARKERS)
        by_id = {TURN_END: EOT, **_THINK_MARKERS} if thinking else {TURN_END: EOT}
        spelled = [s for s in literals.values() if isinstance(s, str)]
        self.grammar = Grammar(
            literals,
            {name: text for name, text in by_id.items() if isinstance(text, str)},
            vocab.special_tokens - set(spelled) - PRESERVED,
            dict(vocab.token_ids),
            vocab.token_text,
            markup=PLAMO_FORMAT if thinking else PLAMO_PLAIN_FORMAT,
        )
        self.cut = _cut_markers(spelled, vocab)
        encode = vocab.encode
        self.start_ids = tuple(encode(BEGIN_THINK)) if encode else ()
        self.end_ids_seq = tuple(encode(END_THINK)) if encode else ()
        self.eot_id = vocab.id_of(EOT)
        # What Qwen3Reasoning reads of a think grammar (this one reads its own way).
        self.end_id: int | None = None
        self.end_ids: frozenset[int] = frozenset()
        self.boundary_ids: frozenset[int] = frozenset()

    def strip_cut(self, text: str | None) -> str | None:
        """``text`` without a cut marker at its end (None when nothing is left)."""
        if not text:
            return text
        at = text.rfind(MARKER_HEAD)
        if at >= 0 and text[at:] in self.cut:
            return text[:at] or None
        return text or None

    def prompt_closes_reasoning(self, prompt_token_ids: Sequence[int], thinking: bool) -> bool:
        """vLLM's reading back through the prompt: the last end marker's ids close
        reasoning; a start marker's ids or the turn's end before it leave it open."""
        if not thinking:
            return True
        ids = prompt_token_ids
        for i in range(len(ids) - 1, -1, -1):
            if _ids_at(ids, i, self.end_ids_seq):
                return True
            if _ids_at(ids, i, self.start_ids):
                return False
            if ids[i] == self.eot_id:
                return False
        return False

    def content_ids(self, token_ids: list[int]) -> list[int]:
        """The ids after the last end marker's ids, else all of them."""
        end = self.end_ids_seq
        for i in range(len(token_ids) - len(end), -1, -1):
            if _ids_at(token_ids, i, end):
                return token_ids[i + len(end) :]
        return token_ids


def _ids_at(ids: Sequence[int], at: int, marker: tuple[int, ...]) -> bool:
    """Whether ``marker``'s ids (at least one) start at ``at`` in ``ids``."""
    if not marker or at + len(marker) > len(ids):
        return False
    return all(ids[at + k] == token for k, token in enumerate(marker))


class PlamoGrammars:
    """PLaMo 3's two grammars for one tokenizer: thinking on (the default) and off."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.thinking = PlamoMarkers(vocab, True)
        self.plain = PlamoMarkers(vocab, False)

    def of(self, thinking: bool) -> PlamoMarkers:
        return self.thinking if thinking else self.plain


def thinking_of(options: ParseOptions) -> bool:
    """Thinking unless ``enable_thinking`` is false (vLLM reads only that switch)."""
    return bool(options.chat_template_kwargs.get("enable_thinking", True))


# ---------------------------------------------------------------------------- reasoning


class PlamoReasoningState(Qwen3ReasoningState, tag="plamo3_reasoning"):
    """PLaMo 3's reasoning stream (the engine's state and the content it defers)."""


class PlamoReasoning(Qwen3Reasoning):
    """``plamo3`` reasoning: the engine from reasoning (thinking on) with call markup
    as content; no trailing whitespace is held (PLaMo's engine keeps it)."""

    def __init__(
        self, grammars: PlamoGrammars, options: ParseOptions, state: PlamoReasoningState
    ) -> None:
        self.markers = grammars.of(thinking_of(options))
        super().__init__(self.markers, options, state)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.markers.prompt_closes_reasoning(prompt_token_ids, self.thinking)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        """The whole output from the start state (the prompt is not read); a cut marker
        ends no reasoning."""
        engine = self._engine(EngineState(self._start_state()))
        events = engine.feed(text, []) + engine.finish()
        reasoning = "".join(e.value for e in events if e.kind == REASONING_TEXT)
        content = "".join(e.value for e in events if e.kind == TEXT)
        return self.markers.strip_cut(reasoning or None), content or None

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return self.markers.content_ids(token_ids) if self.thinking else token_ids

    def finish(self) -> Delta | None:
        delta = super().finish()
        if delta is None:
            return None
        delta.reasoning = self.markers.strip_cut(delta.reasoning)
        if delta.reasoning is None and delta.content is None:
            return None
        return delta


# ---------------------------------------------------------------------------- tools


class PlamoSlot(CallSlot):
    """One call: its name, argument text (the held bracket apart), what was sent."""

    json_name: KeyMatch = field(default_factory=KeyMatch)
    hold: JsonHold = field(default_factory=JsonHold)


class PlamoToolState(EngineToolState[PlamoSlot], tag="plamo3"):
    """PLaMo 3's tool stream: the engine's state and the calls."""


def _runs(events: list[Event], markers: PlamoMarkers) -> list[Event]:
    """vLLM's end-of-stream reading: a call's consecutive name or argument pieces as one,
    the name without a cut marker (and gone when nothing is left)."""
    runs: list[Event] = []
    pieces: list[str] = []
    for i, event in enumerate(events):
        if event.kind not in (CALL_NAME, CALL_ARGS):
            runs.append(event)
            continue
        pieces.append(event.value)
        after = events[i + 1] if i + 1 < len(events) else None
        if after is not None and after.kind == event.kind and after.call == event.call:
            continue
        value = "".join(pieces)
        pieces = []
        if event.kind == CALL_NAME:
            value = markers.strip_cut(value) or ""
            if not value:
                continue
        runs.append(Event(event.kind, value, event.call))
    return runs


class PlamoTools(BodyTools[PlamoSlot, PlamoToolState]):
    """``plamo3`` tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    strip_content_beside_calls = False

    def __init__(
        self,
        grammars: PlamoMarkers,
        options: ParseOptions,
        *,
        reasoning_markup_is_text: bool,
        id_seed: str = "",
        state: PlamoToolState | None = None,
    ) -> None:
        super().__init__(
            grammars,
            options,
            reasoning_markup_is_text=reasoning_markup_is_text,
            id_seed=id_seed,
            state=state,
        )
        self.markers = grammars
        self.finishing = False

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        if not finished:
            return super()._delta(events, finished)
        self.finishing = True
        delta = super()._delta(_runs(events, self.markers), finished)
        if delta is None:
            return None
        delta.reasoning = self.markers.strip_cut(delta.reasoning)
        delta.content = self.markers.strip_cut(delta.content)
        for call in delta.tool_calls:
            if not (call.arguments or "").strip():
                call.arguments = "{}"
        if delta.reasoning is None and delta.content is None and not delta.tool_calls:
            return None
        return delta

    def _slot(self, index: int) -> PlamoSlot:
        if index < 0:
            # vLLM's engine indexes its (empty) call list with -1: arguments before
            # any name fail the request (docs/parity.md, plamo3-arguments-before-name).
            raise OutputRefused(STREAM_REFUSED)
        return super()._slot(index)

    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        self._slot(index)  # a request closed before any name fails as its arguments do
        super()._end(index, calls)

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        try:
            return super().extract(content, id_seed)
        except OutputRefused:
            raise OutputRefused(ONE_SHOT_REFUSED) from None

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        slot = self._slot(event.call)
        if self.finishing:
            self._chunk(event.call, slot, slot.hold.feed(event.value) + slot.hold.release(), calls)
            return
        released = slot.hold.feed(event.value)
        if released:
            self._take(event.call, slot, released, calls)

    def _other(self, event: Event, calls: list[DeltaToolCall]) -> None:
        if event.kind == ARGS_DONE:
            self._release(event.call, calls)

    def _release(self, index: int, calls: list[DeltaToolCall]) -> None:
        """The held bracket goes out (the arguments ended, or the stream did)."""
        if index < 0 or index >= len(self.state.slots):
            return
        slot = self.state.slots[index]
        held = slot.hold.release()
        if held:
            self._chunk(index, slot, held, calls)

    def _chunk(self, index: int, slot: PlamoSlot, text: str, calls: list[DeltaToolCall]) -> None:
        """Argument text as vLLM's PLaMo handles one piece: at the end of a stream, a cut
        marker at its end goes where the arguments still parse without it."""
        at = text.rfind(MARKER_HEAD) if self.finishing else -1
        if at >= 0:
            try:
                json.loads(slot.args.text() + text[:at])
            except (ValueError, RecursionError):
                pass
            else:
                text = text[:at]
        if text:
            self._take(index, slot, text, calls)

    def _take(self, index: int, slot: PlamoSlot, text: str, calls: list[DeltaToolCall]) -> None:
        """Released argument text: sent after the name, or with it once it is known
        (a call without a name may name itself with a ``"name"`` in its arguments)."""
        start = len(slot.args)
        slot.args.append(text)
        if slot.name_sent:
            calls.append(DeltaToolCall(index=index, arguments=text))
            return
        if slot.name:
            calls.append(self._announce(index, slot, slot.name, text))
            return
        found = json_name(slot.args, slot.json_name)
        if found is None:
            return
        # vLLM reads the pieces one character at a time mid-stream: the arguments go
        # out from the name's closing quote; at the end, the piece goes out whole.
        sent_from = start if self.finishing else max(start, slot.json_name.value_end)
        calls.append(self._announce(index, slot, found, slot.args[sent_from:]))

    def _ending(self, index: int, slot: PlamoSlot, calls: list[DeltaToolCall]) -> str | None:
        self._release(index, calls)
        return None

    def _body_arguments(self, slot: PlamoSlot, name: str) -> str:
        return coerce_arguments(slot.args.text().strip(), self._properties(name))


# ---------------------------------------------------------------------------- the family


def _grammars(_: str, vocab: Vocabulary) -> PlamoGrammars:
    return PlamoGrammars(vocab)


def _reasoning_stream(
    grammars: PlamoGrammars, request: Request, kept: object
) -> tuple[PlamoReasoning, PlamoReasoningState]:
    state = reuse(kept, PlamoReasoningState)
    return PlamoReasoning(grammars, request.options, state), state


def _grammar_of(grammars: PlamoGrammars, request: Request) -> PlamoMarkers:
    """The grammar of the request's thinking switch."""
    return grammars.of(bool(request.thinking))


_tools, _tools_stream = tool_builders(PlamoTools, _grammar_of)


FAMILY = Family(
    title="PLaMo 3",
    tokenizer="model directory (its markers are several tokens each)",
    reasoning=(
        Reasoning(
            names=("plamo3",),
            engine_based=True,
            states=(PlamoReasoningState,),
            thinking=thinking_of,
            prepare=_grammars,
            one_shot=lambda grammars, request: PlamoReasoning(
                grammars, request.options, PlamoReasoningState()
            ),
            stream=_reasoning_stream,
            golden=("P2", "P3"),
        ),
    ),
    tools=(
        Tools(
            names=("plamo3",),
            engine_based=True,
            states=(PlamoToolState,),
            thinking=thinking_of,
            prepare=_grammars,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("P2", "P4"),
        ),
    ),
)
