"""Kimi K2's parsers (``kimi_k2`` reasoning and tools), declared on the marker engine.

Kimi K2 writes reasoning in ``<think>`` and calls in a section of special tokens::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The header before the argument marker is the model's own call id; the function name
is its first ``:``-separated part without ``functions.``. Arguments are the model's
JSON as written, streamed as they come except that a closing bracket that may end the
object waits for the next character (vLLM's engine holds it). Text after the section
is dropped, as the engine keeps the section state to the end.
"""

from __future__ import annotations

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_END,
    CALL_START,
    CONTENT,
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
    Event,
    Format,
    Grammar,
    Transition,
)
from parsers.engine.reasoning import (
    EngineReasoning,
    EngineReasoningState,
    ThinkMarkers,
    thinking_from_kwargs,
)
from parsers.engine.tools import (
    BodyTools,
    CallSlot,
    EngineToolState,
    json_name,
    name_and_arguments,
    tool_builders,
)
from parsers.families.hermes import KeyMatch
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.readers.schema import coerce_arguments
from parsers.types import DeltaToolCall, ParseOptions, Vocabulary

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_FINISH = "<|tool_call_end|>"

# Terminals beyond the engine's own (the section is TOOL_START / TOOL_END).
CALL_OPEN = "CALL_OPEN"
ARG_START = "ARG_START"
CALL_CLOSE = "CALL_CLOSE"

_TOOLS = {
    (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END,)),
    (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, ()),
    (TOOL_PREAMBLE, CALL_OPEN): Transition(TOOL_NAME, (CALL_START,)),
    (TOOL_NAME, ARG_START): Transition(TOOL_ARGS, ()),
    (TOOL_ARGS, CALL_CLOSE): Transition(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_ARGS, TOOL_END): Transition(TOOL_PREAMBLE, (CALL_END,)),
    (TOOL_BETWEEN, CALL_OPEN): Transition(TOOL_NAME, (CALL_START,)),
    # The section stays open to the end: text after the calls is dropped.
    (TOOL_PREAMBLE, TOOL_END): Transition(TOOL_PREAMBLE, ()),
    (TOOL_BETWEEN, TOOL_END): Transition(TOOL_PREAMBLE, ()),
}
KIMI_FORMAT = Format({**_TOOLS, **THINK_TRANSITIONS}, STATE_EVENTS, TOOL_STATES)
KIMI_PLAIN_FORMAT = Format(_TOOLS, STATE_EVENTS, TOOL_STATES)
_TOOL_MARKERS = {
    TOOL_START: SECTION_BEGIN,
    TOOL_END: SECTION_END,
    CALL_OPEN: CALL_BEGIN,
    ARG_START: ARGUMENT_BEGIN,
    CALL_CLOSE: CALL_FINISH,
}
_THINK_MARKERS = {THINK_START: "<think>", THINK_END: "</think>"}


def _markers(vocab: Vocabulary, thinking: bool) -> ThinkMarkers:
    """Kimi's grammar with or without think markers; every marker also counts by id."""
    markers = {**_THINK_MARKERS, **_TOOL_MARKERS} if thinking else dict(_TOOL_MARKERS)
    grammar = Grammar(
        markers,
        markers,
        vocab.special_tokens - set(markers.values()),
        dict(vocab.token_ids),
        vocab.token_text,
        markup=KIMI_FORMAT if thinking else KIMI_PLAIN_FORMAT,
    )
    return ThinkMarkers(
        grammar,
        vocab,
        start="<think>" if thinking else None,
        end="</think>" if thinking else None,
        implicit_ends=(SECTION_BEGIN,),
    )


class KimiGrammars:
    """Kimi's two grammars for one tokenizer: thinking on (the default) and off."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.thinking = _markers(vocab, True)
        self.plain = _markers(vocab, False)

    def of(self, thinking: bool) -> ThinkMarkers:
        return self.thinking if thinking else self.plain


def header_id_and_name(header: str) -> tuple[str, str] | None:
    """The call id and function name of a header such as ``functions.get_weather:0``.

    vLLM matches ``.+:\\d+`` at the start of the stripped header: the id runs to the
    digits after the line's last ``:`` that digits follow (one character at least
    before it); the name is the id's first ``:``-part without ``functions.``.
    """
    line = header.strip().split("\n", 1)[0]
    colon = len(line)
    while (colon := line.rfind(":", 0, colon)) >= 1:
        end = colon + 1
        while end < len(line) and line[end].isdecimal():
            end += 1
        if end > colon + 1:
            call_id = line[:end].strip()
            name = call_id.split(":")[0].removeprefix("functions.")
            return (call_id, name) if name else None
    return None


class JsonHold(Struct):
    """vLLM's JSON argument buffer: a closing bracket at the object's top level (or
    below it) is held until another character arrives, strings and escapes tracked.
    Held brackets are kept in the pieces they came in, so a run of them is copied once,
    when it goes out."""

    depth: int = 0
    in_string: bool = False
    escape: bool = False
    held: list[str] = field(default_factory=list)

    def feed(self, text: str) -> str:
        """What of the held brackets and ``text`` goes out now."""
        run: int | None = 0 if self.held else None  # where the trailing held run starts
        # Locals, not attributes, in the loop: it runs once per character.
        depth, in_string, escape = self.depth, self.in_string, self.escape
        for i, ch in enumerate(text):
            if escape:
                escape = False
            elif in_string:
                if ch == "\\":
                    escape = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                if depth > 0:
                    depth -= 1
                if depth == 0:
                    if run is None:
                        run = i
                    continue
            run = None
        self.depth, self.in_string, self.escape = depth, in_string, escape
        if run is None:
            return self.release() + text
        if run == 0 and self.held:
            self.held.append(text)
            return ""
        out = self.release() + text[:run]
        self.held = [text[run:]]
        return out

    def release(self) -> str:
        held = "".join(self.held)
        self.held = []
        return held


class KimiSlot(CallSlot):
    """One call: its header (then its name), released argument text, what was sent."""

    json_name: KeyMatch = field(default_factory=KeyMatch)
    json_name_failed: bool = False
    hold: JsonHold = field(default_factory=JsonHold)


class KimiToolState(EngineToolState[KimiSlot], tag="kimi_k2"):
    made_ids: int = 0  # ids made for calls without a usable header (``functions.NAME:N``)


class KimiK2Tools(BodyTools[KimiSlot, KimiToolState]):
    """Kimi K2's tool calls, streamed or one-shot, as vLLM's engine parser emits them."""

    strip_content_beside_calls = False
    one_shot_ids = True

    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        slot = self._slot(event.call)
        released = slot.hold.feed(event.value)
        if released:
            self._take(event.call, slot, released, calls)

    def _take(self, index: int, slot: KimiSlot, text: str, calls: list[DeltaToolCall]) -> None:
        """Released argument text: sent after the name, or the name found with it."""
        start = len(slot.args)
        slot.args.append(text)
        if slot.name_sent:
            calls.append(DeltaToolCall(index=index, arguments=text))
            return
        if slot.name:
            parsed = header_id_and_name(slot.name)
            if parsed is not None:
                slot.id = parsed[0]
                calls.append(self._announce(index, slot, parsed[1], text))
                return
            slot.name = ""  # vLLM then looks for a "name" in the arguments
        if slot.json_name_failed:
            return
        found = json_name(slot.args, slot.json_name)
        if found is None:
            return
        parsed = header_id_and_name(found)
        if parsed is None:
            slot.json_name_failed = True
            return
        # The name counts from its closing quote: the arguments go on from there.
        slot.id = parsed[0]
        sent_from = max(start, slot.json_name.value_end)
        calls.append(self._announce(index, slot, parsed[1], slot.args[sent_from:]))

    def _ending(self, index: int, slot: KimiSlot, calls: list[DeltaToolCall]) -> str | None:
        """The held bracket goes out; a call not yet named takes its header's id and name."""
        released = slot.hold.release()
        if released:
            self._take(index, slot, released, calls)
        if not slot.name_sent and slot.name:
            parsed = header_id_and_name(slot.name)
            if parsed is not None:
                slot.id, slot.name = parsed
        return None

    def _ensure_id(self, index: int, slot: KimiSlot) -> None:
        """A call without a usable header gets vLLM's Kimi id, ``functions.NAME:N``, N
        counting the ids made so in this output (a Kimi K2 model's ``config.json`` says
        ``model_type: kimi_k2``, which makes vLLM number them)."""
        if slot.id:
            return
        name = slot.name.strip()
        if not name:
            body = slot.args.text().strip()  # read once, when the call's id is made
            if body:
                name = name_and_arguments(body)[0]
        slot.id = f"functions.{name}:{self.state.made_ids}"
        self.state.made_ids += 1

    def _body_arguments(self, slot: KimiSlot, name: str) -> str:
        return coerce_arguments(slot.args.text().strip(), self._properties(name))


# ---------------------------------------------------------------------------- the family
# One declaration on the shared engine: the request's thinking switch picks the grammar.


def _grammars(_: str, vocab: Vocabulary) -> KimiGrammars:
    return KimiGrammars(vocab)


def _thinking(options: ParseOptions) -> bool:
    return thinking_from_kwargs(options.chat_template_kwargs)


def _reasoning(grammars: KimiGrammars, request: Request) -> EngineReasoning:
    return EngineReasoning(
        grammars.of(bool(request.thinking)), request.options, last_tool_opener=True
    )


def _reasoning_stream(
    grammars: KimiGrammars, request: Request, kept: object
) -> tuple[EngineReasoning, EngineReasoningState]:
    state = reuse(kept, EngineReasoningState)
    markers = grammars.of(bool(request.thinking))
    return EngineReasoning(markers, request.options, state, last_tool_opener=True), state


def _grammar_of(grammars: KimiGrammars, request: Request) -> ThinkMarkers:
    """The grammar of the request's thinking switch."""
    return grammars.of(bool(request.thinking))


_tools, _tools_stream = tool_builders(KimiK2Tools, _grammar_of)


FAMILY = Family(
    title="Kimi K2",
    tokenizer="model directory with a tokenizer.json (Moonshot ships tiktoken.model: convert it)",
    reasoning=(
        Reasoning(
            names=("kimi_k2",),
            engine_based=True,
            states=(EngineReasoningState,),
            thinking=_thinking,
            prepare=_grammars,
            one_shot=_reasoning,
            stream=_reasoning_stream,
            golden=("K1",),
        ),
    ),
    tools=(
        Tools(
            names=("kimi_k2",),
            engine_based=True,
            states=(KimiToolState,),
            thinking=_thinking,
            prepare=_grammars,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("K1",),
        ),
    ),
)
