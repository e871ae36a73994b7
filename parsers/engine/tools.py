"""Tool parsers on the marker engine: its events turned into one delta per chunk.

Every tool format declared on the engine (Qwen3-Coder's XML, DeepSeek's DSML) meets the
same events in the same order, and vLLM's engine parsers treat content, reasoning and
whitespace around calls alike; what differs between formats is only how a call's name
and argument text become JSON. A format's parser subclasses ``EngineTools`` (or
``BodyTools``, where a call's body is kept as text and may name it), names its state
and slot types, and says the rest in its hooks; its state subclasses
``EngineToolState`` with its own tag (session snapshots name it).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast, get_args

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_ARGS,
    CALL_END,
    CALL_NAME,
    CALL_START,
    CONTENT,
    REASONING_END,
    REASONING_TEXT,
    TEXT,
    EngineState,
    Event,
    Format,
    Grammar,
    MarkerEngine,
)
from parsers.engine.reasoning import hold_trailing_reasoning
from parsers.families.hermes import KeyMatch
from parsers.family import Request, reuse
from parsers.growing_text import GrowingText
from parsers.ids import chat_tool_call_id
from parsers.readers.schema import coerce_arguments, coerce_string, schema_types
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    ParseOptions,
    PlainText,
)

_NAME_KEY = "name"


class ToolSlot(Protocol):
    """What the shared part reads and keeps of a format's call."""

    id: str
    name: str
    name_sent: bool


SlotT = TypeVar("SlotT", bound=ToolSlot)


class CallSlot(Struct):
    """One call as every format keeps it: its id, name, raw text, and whether the name
    was sent; a format's slot adds its own fields after these."""

    id: str = ""
    name: str = ""
    args: GrowingText = field(default_factory=GrowingText)
    name_sent: bool = False


class EngineToolState(Struct, Generic[SlotT]):
    """The plain-data state every engine tool format keeps; a format's state subclasses
    it with its tag and its own fields (so its encoded form stays field for field)."""

    engine: EngineState = field(default_factory=lambda: EngineState(CONTENT))
    slots: list[SlotT] = field(default_factory=list)
    deferred_content: str = ""  # content held while calls may follow (whitespace, or in calls)
    content_has_nonws: bool = False
    # Content that is only whitespace so far, held in the pieces it came in while no call
    # has opened: a blank output grows it by every chunk, and joining it per chunk would
    # copy it all each time. Joined into ``deferred_content`` once something else comes.
    blank_pieces: list[str] = field(default_factory=list)
    # Name text of call ``naming_call`` not yet added to its name: a run of it is joined
    # once, when an event that may read the name comes (a marker storm inside a name
    # brings a piece per marker, and adding each to the name would copy the name).
    naming: list[str] = field(default_factory=list)
    naming_call: int = -1


class ReasoningToolState(EngineToolState[SlotT]):
    """The state of a format whose tool parser holds a reasoning delta's trailing
    whitespace (see ``EngineTools.reasoning_format``)."""

    trailing_reasoning: list[str] = field(default_factory=list)
    reasoning_ended: bool = False


class BodySlot(ToolSlot, Protocol):
    """A call whose body is kept as text, where a ``"name"`` key may name it."""

    args: GrowingText
    json_name: KeyMatch


StateT = TypeVar("StateT", bound=EngineToolState[Any])
BodySlotT = TypeVar("BodySlotT", bound=BodySlot)


class HasGrammar(Protocol):
    """A family's grammar for one tokenizer (``ThinkMarkers``, ``DsmlGrammar``...)."""

    @property
    def grammar(self) -> Grammar: ...


class EngineTools(ABC, Generic[SlotT, StateT]):
    """A tool format on the marker engine. A family names its slot and state types as
    the engine's parameters (``EngineTools[KimiSlot, KimiToolState]``), which become
    ``slot_type`` and ``state_type``, and extends the constructor only for work of its own."""

    supports_required_and_named = False
    engine_based = True
    # One-shot, content beside calls: vLLM's Qwen3-Coder strips it; DSML keeps it
    # unless it is all whitespace (and Step-5 keeps even that).
    strip_content_beside_calls = True
    # Whitespace-only content once calls began: dropped (streamed and one-shot), except
    # by a format that keeps its content's whitespace (Step-5).
    drop_whitespace_beside_calls = True
    # A format whose state is a ``ReasoningToolState`` holds back a reasoning delta's
    # trailing whitespace, as vLLM's engines do, while its grammar reasons (is this
    # format, thinking on) and reasoning has not ended.
    reasoning_format: Format | None = None
    slot_type: type[SlotT]
    state_type: type[StateT]
    # Whether ``plain_text`` is ``stream``'s test: False where a subclass reads otherwise.
    _stream_is_ours: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A format's slot and state types from its parameters; a format with its own
        ``stream`` or ``_delta`` reads chunks otherwise than ``plain_text`` tells, unless
        it gives its own ``plain_text``."""
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            types = get_args(base)
            if len(types) == 2 and all(isinstance(t, type) for t in types):
                cls.slot_type, cls.state_type = types
        own = vars(cls)
        if "plain_text" not in own and ("stream" in own or "_delta" in own):
            cls._stream_is_ours = False

    def __init__(
        self,
        grammars: HasGrammar,
        options: ParseOptions,
        *,
        reasoning_markup_is_text: bool,
        id_seed: str = "",
        state: StateT | None = None,
    ) -> None:
        self.options = options
        self.id_seed = id_seed
        self.state: StateT = state if state is not None else self.state_type()
        grammar = grammars.grammar
        self.engine = MarkerEngine(
            grammar, self.state.engine, skip_reasoning=reasoning_markup_is_text
        )
        self.has_reasoning = grammar.format is self.reasoning_format
        # The state holds reasoning's trailing whitespace (``plain_text`` asks).
        self.holds_reasoning = isinstance(self.state, ReasoningToolState)
        # tool_choice "none" with tools: calls are read and dropped.
        self.suppress = options.tool_choice == "none" and bool(options.tools)
        self._properties_by_name: dict[str, dict[str, Any]] = {}

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        state = self.state
        if not isinstance(state, ReasoningToolState):
            return self._delta(self.engine.feed(text, token_ids or []), finished=False)
        delta = self._delta(self.engine.feed(text, token_ids or []), finished=False)
        # Read after the chunk, as vLLM's parsers read it: a chunk that ends reasoning
        # lets the held whitespace go, even when it brings no reasoning of its own.
        ended = state.reasoning_ended or not self.has_reasoning
        return hold_trailing_reasoning(delta, state, ended)

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Content alone (``ReadsPlain``): the engine's plain text in content, once the
        content has shown more than whitespace (blank content is held, or dropped beside
        calls: ``_delta``), with no content held for calls that may follow and no
        reasoning whitespace held for ``stream`` to let go; the first chunks past those
        are read by ``stream``. None in a subclass that reads a chunk otherwise
        (``__init_subclass__``)."""
        state = self.state
        if (
            not self._stream_is_ours
            or not state.content_has_nonws
            or state.blank_pieces
            or state.deferred_content
            or (self.holds_reasoning and cast(ReasoningToolState[Any], state).trailing_reasoning)
            or self.engine.plain_kind() != TEXT
        ):
            return None
        return self.engine.plain_text(token_ids)

    def finish(self) -> Delta | None:
        events = self.engine.finish()
        if events or self.state.deferred_content or self.state.blank_pieces:
            return self._delta(events, finished=True)
        return None

    def remaining_arguments(self) -> str:
        return ""

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """One-shot: the whole content through the streaming machinery, then finish."""
        self.id_seed = id_seed
        events = self.engine.feed(content, []) + self.engine.finish()
        delta = self._delta(events, finished=True)
        calls = [call for i in range(len(self.state.slots)) if (call := self._call(i))]
        text = delta.content if delta is not None else None
        if text and calls:
            if self.strip_content_beside_calls:
                text = text.strip()
            elif self.drop_whitespace_beside_calls and not text.strip():
                text = None
        return ExtractedToolCalls(bool(calls), calls, text or None)

    def _slot(self, index: int) -> SlotT:
        slots: list[SlotT] = self.state.slots
        while len(slots) <= index:
            slots.append(self.slot_type())
        return slots[index]

    # ------------------------------------------------------------------ names and ids

    def _new_id(self, index: int) -> str:
        """Call ``index``'s id when the model gives none (a format may have its own kind)."""
        return chat_tool_call_id(self.id_seed, index)

    def _ensure_id(self, index: int, slot: SlotT) -> None:
        if not slot.id:
            slot.id = self._new_id(index)

    def _named(self, slot: SlotT, name: str) -> None:
        """The call's name is sent (a format that types by it reads the tool here)."""

    def _announce(self, index: int, slot: SlotT, name: str, arguments: str | None) -> DeltaToolCall:
        """The call's first delta: its name (now sent) and id, with ``arguments``."""
        slot.name = name
        slot.name_sent = True
        self._named(slot, name)
        self._ensure_id(index, slot)
        return DeltaToolCall(
            id=slot.id, type="function", index=index, name=name, arguments=arguments
        )

    # ------------------------------------------------------------------ the called tool

    def _properties(self, name: str) -> dict[str, Any]:
        """The tool's declared properties ({} without tools or for an unknown tool)."""
        properties = self._properties_by_name.get(name)
        if properties is None:
            tool = self.options.tool(name) if self.options.tools else None
            properties = tool.properties() if tool is not None else {}
            self._properties_by_name[name] = properties
        return properties

    def _string_keys(self, name: str) -> list[str] | None:
        """Keys whose values can only be strings, so their open text may stream."""
        properties = self._properties(name)
        if not properties:
            return None
        return [k for k, schema in properties.items() if set(schema_types(schema)) == {"string"}]

    def _entry(self, call_name: str, key: str, value: str) -> str:
        """One ``"key": value`` of the arguments, the value (text) typed by the tool's schema."""
        typed: Any = value
        if self.options.tools and call_name:
            schema = self._properties(call_name).get(key)
            if isinstance(schema, dict):
                typed = coerce_string(value, schema_types(schema))
        try:
            value_json = json.dumps(typed, ensure_ascii=False)
        except RecursionError:  # parsed, but too deep to write back: keep the text
            value_json = json.dumps(value, ensure_ascii=False)
        return json.dumps(key, ensure_ascii=False) + ": " + value_json

    # ------------------------------------------------------------------ format hooks

    @abstractmethod
    def _arguments(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """More of a call's argument text: append what it streams to ``calls``."""

    @abstractmethod
    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        """Call ``index`` has ended: append what is left of it to ``calls``."""

    @abstractmethod
    def _call(self, index: int) -> FunctionCall | None:
        """Call ``index`` as one-shot reads it, if it is one."""

    def _other(self, event: Event, calls: list[DeltaToolCall]) -> None:
        """An event kind of the format's own (e.g. argument text its decoder buffers)."""

    # ------------------------------------------------------------------ events to deltas

    def _name_grows(self) -> None:
        """The name text held joins its call's name."""
        state = self.state
        self._slot(state.naming_call).name += "".join(state.naming)
        state.naming = []

    def _delta(self, events: list[Event], finished: bool) -> Delta | None:
        state = self.state
        if state.blank_pieces:
            if not finished and all(e.kind == TEXT and e.value.isspace() for e in events):
                # Still nothing but whitespace: held as it came, nothing to send.
                state.blank_pieces.extend(event.value for event in events)
                return None
            state.deferred_content = "".join(state.blank_pieces)
            state.blank_pieces = []
        if not events and not state.deferred_content:
            return None
        calls: list[DeltaToolCall] = []
        content: list[str] = []
        reasoning: list[str] = []
        carried = state.deferred_content
        in_calls = False
        for event in events:
            kind = event.kind
            if kind == TEXT:
                if in_calls:
                    state.deferred_content += event.value
                    continue
                if carried and not content:
                    # Whitespace held from earlier chunks goes before this text, even
                    # when calls follow in the same chunk.
                    content.append(carried)
                    state.deferred_content = carried = ""
                content.append(event.value)
            elif kind == REASONING_TEXT:
                reasoning.append(event.value)
            elif kind == REASONING_END:
                if isinstance(state, ReasoningToolState):
                    state.reasoning_ended = True
            elif self.suppress:
                continue
            else:
                in_calls = True
                if state.naming and (kind != CALL_NAME or event.call != state.naming_call):
                    self._name_grows()
                if kind == CALL_START:
                    self._slot(event.call)
                elif kind == CALL_NAME:
                    state.naming.append(event.value)
                    state.naming_call = event.call
                elif kind == CALL_ARGS:
                    self._arguments(event, calls)
                elif kind == CALL_END:
                    self._end(event.call, calls)
                else:
                    self._other(event, calls)
        if finished and state.naming:
            self._name_grows()
        if len(calls) > 1:
            calls = coalesce_calls(calls)
        if state.deferred_content and (not in_calls or not calls):
            now = state.deferred_content[len(carried) :]
            if carried:
                content.insert(0, carried)
            if now:
                content.append(now)
            state.deferred_content = ""
        text = "".join(content)
        if not state.content_has_nonws and text:
            if text.strip():
                state.content_has_nonws = True
            elif state.slots:
                if self.drop_whitespace_beside_calls:
                    text = ""
            elif not finished:
                state.blank_pieces.append(text)
                text = ""
        thought = "".join(reasoning)
        if text or calls or thought:
            return Delta(content=text or None, reasoning=thought or None, tool_calls=calls)
        return None


def json_name(args: GrowingText, match: KeyMatch) -> str | None:
    """The first ``"name": "..."`` in a call body (None if empty), found incrementally."""
    match.advance(args, _NAME_KEY, want_value=True, empty_is_match=True)
    if match.phase != "done" or match.value_end == match.value_start:
        return None
    return args[match.value_start : match.value_end]


def name_and_arguments(
    raw: str, keys: tuple[str, ...] = ("arguments", "parameters")
) -> tuple[str, str]:
    """A JSON body that names its function: ``{"name": ..., "arguments": ...}`` (the
    first of ``keys`` it has holds the arguments)."""
    raw = raw.strip()
    try:
        parsed: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return "", raw
    if not isinstance(parsed, dict) or not isinstance(name := parsed.get("name", ""), str):
        return "", raw
    for key in keys:
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    rest = {k: v for k, v in parsed.items() if k != "name"}
    return name, json.dumps(rest, ensure_ascii=False)


def entry_head(entry: str, key: str, string_keys: list[str] | None) -> tuple[str, bool]:
    """What of the last entry later text cannot change, and whether that runs into its value.

    The key and colon; the open text of a string value too when the key allows only
    strings (keys are compared JSON-escaped, as vLLM compares them).
    """
    spelled = json.dumps(key, ensure_ascii=False)
    colon_end = len(spelled) + 2
    allowed = string_keys is None or spelled[1:-1] in string_keys
    if allowed and entry[colon_end : colon_end + 1] == '"':
        return entry[:-1], True
    return entry[:colon_end], False


class BodyTools(EngineTools[BodySlotT, StateT]):
    """Calls whose body is kept as text and whose name, when they open without one, may
    be the body's ``"name"`` (Kimi K2, GLM, DSML, Qwen3-Coder, MiniMax): how such a
    call ends and how one-shot reads it; a format says what its body's arguments are."""

    # One-shot calls carry their slot's id (Kimi's are the model's own); else the
    # message numbers the calls it keeps.
    one_shot_ids = False
    # The keys of a body that names its function which may hold its arguments, first wins.
    argument_keys: tuple[str, ...] = ("arguments", "parameters")

    def _accepts(self, name: str) -> bool:
        """Whether a call of this name is one (a format may check it against the tools)."""
        return bool(name)

    def _grow(self, event: Event) -> BodySlotT:
        """The event's call, its body grown by the event's text."""
        slot = self._slot(event.call)
        slot.args.append(event.value)
        return slot

    @abstractmethod
    def _ending(self, index: int, slot: BodySlotT, calls: list[DeltaToolCall]) -> str | None:
        """The call is ending: what its arguments add to those sent (None if nothing);
        a format that held text back lets it go into ``calls`` here."""

    @abstractmethod
    def _body_arguments(self, slot: BodySlotT, name: str) -> str:
        """One-shot: the arguments JSON of a call named ``name`` with a non-blank body."""

    def _coerce(self, arguments: str, name: str) -> str:
        """One-shot: a body that names its function, its arguments typed by the tool."""
        return coerce_arguments(arguments, self._properties(name) if name else {})

    def _end(self, index: int, calls: list[DeltaToolCall]) -> None:
        if index >= len(self.state.slots):
            return
        slot: BodySlotT = self.state.slots[index]
        remaining = self._ending(index, slot, calls)
        if not slot.name_sent:
            name = slot.name or json_name(slot.args, slot.json_name)
            if name and self._accepts(name):
                calls.append(self._announce(index, slot, name, remaining or ""))
                return
        if remaining and slot.name_sent:
            calls.append(DeltaToolCall(index=index, arguments=remaining))

    def _call(self, index: int) -> FunctionCall | None:
        slot: BodySlotT = self.state.slots[index]
        if not slot.name and not slot.args:
            return None
        name = slot.name.strip()
        raw = slot.args.text()
        if not name and raw.strip():
            name, arguments = name_and_arguments(raw, self.argument_keys)
            arguments = self._coerce(arguments, name)
        elif raw.strip():
            arguments = self._body_arguments(slot, name)
        else:
            arguments = "{}"
        if not self._accepts(name):
            return None
        self._ensure_id(index, slot)
        return FunctionCall(name, arguments, slot.id if self.one_shot_ids else None)


def coalesce_calls(calls: list[DeltaToolCall]) -> list[DeltaToolCall]:
    """One delta per call index, later pieces merged into the first.

    Argument pieces are joined once per call: a one-shot parse can bring thousands of
    pieces for one call, and adding them one by one would copy the text each time.
    """
    merged: dict[int, DeltaToolCall] = {}
    pieces: dict[int, list[str]] = {}
    for call in calls:
        first = merged.get(call.index)
        if first is None:
            merged[call.index] = call
            pieces[call.index] = [] if call.arguments is None else [call.arguments]
            continue
        if first.id is None:
            first.id = call.id
        if first.type is None:
            first.type = call.type
        if first.name is None:
            first.name = call.name
        if call.arguments is not None:
            pieces[call.index].append(call.arguments)
    if len(merged) == len(calls):
        return calls
    for index, first in merged.items():
        if pieces[index]:
            first.arguments = "".join(pieces[index])
    return list(merged.values())


ToolsT = TypeVar("ToolsT", bound=EngineTools[Any, Any])
# What a family's ``prepare`` made of the tokenizer, to the grammar one request reads.
GrammarOf = Callable[[Any, Request], HasGrammar]


def _prepared(prepared: Any, request: Request) -> HasGrammar:
    grammar: HasGrammar = prepared
    return grammar


def tool_builders(
    parser: type[ToolsT], grammar_of: GrammarOf = _prepared
) -> tuple[Callable[[Any, Request], ToolsT], Callable[[Any, Request, object], tuple[ToolsT, Any]]]:
    """A family's one-shot and stream builders for its engine tool parser (the
    declaration's ``one_shot`` and ``stream``): every engine format is built alike, from
    the grammar the request reads (``grammar_of``: by default what ``prepare`` made)."""

    def one_shot(prepared: Any, request: Request) -> ToolsT:
        markup_is_text = not request.with_reasoning
        return parser(
            grammar_of(prepared, request), request.options, reasoning_markup_is_text=markup_is_text
        )

    def stream(prepared: Any, request: Request, kept: object) -> tuple[ToolsT, Any]:
        state = reuse(kept, parser.state_type)
        tools = parser(
            grammar_of(prepared, request),
            request.options,
            reasoning_markup_is_text=not request.with_reasoning,
            id_seed=request.id_seed,
            state=state,
        )
        return tools, state

    return one_shot, stream
