"""Mistral's older tool calls: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``.

Tokenizers before v11 (no ``[ARGS]`` token) write every call of a turn as one JSON
array after ``[TOOL_CALLS]``. vLLM 0.33.0 reads it apart from its engine:

- one-shot, the first JSON value after the marker is decoded (a bare object is one
  call; entries that are not call objects are skipped; arguments that are not a
  string are dumped as Python's ``json.dumps`` writes them); with no marker, a
  forced call (``required`` or a named tool) reads the whole output as that array;
- streamed, an event-driven JSON reader (ijson over yajl) is fed the text cut at the
  characters where the call's phase can change, and a phase machine turns its
  events into deltas: a call opens on ``{``, its name goes out when its string is
  complete, object arguments stream as written (left-stripped at their start),
  string arguments go out decoded; text after the array is content. A JSON error
  loses the chunk and every later chunk that still reaches the reader.

``JsonEvents`` is our incremental reader with ijson's events and prefixes (only
prefixes two levels deep are spelled out; deeper ones never matter here), so no
step rescans earlier text and nesting costs no recursion.
"""

from __future__ import annotations

import json
import re
from typing import Any

from msgspec import Struct, field

from parsers.engine.tools import tool_builders
from parsers.families.mistral import (
    TOOL_CALLS_TOKEN,
    MistralGrammar,
    MistralReasoning,
    MistralReasoningState,
    MistralTools,
    MistralToolState,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import mistral_tool_call_id
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    ParseOptions,
    Vocabulary,
)

# The phases of vLLM's reader (its StreamingState).
TOOL_START = "tool_start"
TOOL_KEY = "tool_key"
NAME = "name"
NAME_DONE = "name_done"
ARGUMENTS_START = "arguments_start"
ARGUMENTS = "arguments"
ARGUMENTS_DONE = "arguments_done"
TOOL_DONE = "tool_done"
ALL_DONE = "all_done"

# Where each phase cuts the text: just after the first of these characters.
_CUTS = {
    TOOL_START: re.compile(r"\{"),
    TOOL_KEY: re.compile(r"[:{}]"),
    NAME: re.compile(r"[,\]}]"),
    ARGUMENTS_START: re.compile(r"[{}]"),
    ARGUMENTS: re.compile(r"\}"),
    ARGUMENTS_DONE: re.compile(r"[}\]]"),
    NAME_DONE: re.compile(r"[}\]]"),
    TOOL_DONE: re.compile(r"[{\]]"),
}

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_LITERALS = ("true", "false", "null")
_WHITESPACE = frozenset(" \t\n\r")


class JsonError(ValueError):
    """The text is not JSON (the reader's state is then spent)."""


class JsonEvents(Struct):
    """An incremental JSON reader's state: the unfinished token and the open containers.

    The unfinished token grows a chunk at a time (a long string argument: appending to
    one string would copy it every chunk); only what a chunk adds to it is read.
    """

    partial: GrowingText = field(default_factory=GrowingText)
    escape: bool = False  # the unfinished string ends inside an escape
    containers: list[str] = field(default_factory=list)  # "m" map, "a" array
    path: list[str | None] = field(default_factory=list)  # the first two levels
    expect: str = "value"
    failed: bool = False


class Reader(Struct):
    """vLLM's phase machine over the reader's events."""

    events: JsonEvents = field(default_factory=JsonEvents)
    phase: str = TOOL_START
    bare_object: bool = False
    new_tool: bool = False
    name: str | None = None
    string_arguments: str | None = None


class MistralJsonState(Struct, tag="mistral_json"):
    started: bool = False
    reader: Reader = field(default_factory=Reader)
    tool_index: int = -1
    pending_id: str | None = None


# ---------------------------------------------------------------------------- the reader


def _string_end(text: str, start: int, escape: bool) -> tuple[int, bool]:
    """The quote closing a string scanned from ``start`` (-1: not yet), and whether
    the text then ends inside an escape. Each character is looked at once."""
    size = len(text)
    i = start + 1 if escape else start
    if i > size:
        return -1, True
    quote = text.find('"', i)
    while True:
        backslash = text.find("\\", i, quote if quote >= 0 else size)
        if backslash < 0:
            return quote, False
        if backslash + 1 >= size:
            return -1, True
        i = backslash + 2
        if 0 <= quote < i:
            quote = text.find('"', i)


def _prefix(path: list[str | None], depth: int, drop_last: bool = False) -> str | None:
    """ijson's dotted prefix, or None when it is deeper than two levels."""
    size = depth - 1 if drop_last else depth
    if size > 2:
        return None
    return ".".join(p or "" for p in path[:size])


class _Feeder:
    """Feeds text to a reader, sending ijson's (prefix, event, value) to the phases."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.s = reader.events

    def feed(self, text: str) -> None:
        s = self.s
        if s.failed:
            raise JsonError("the reader failed earlier")
        try:
            self._feed(text)
        except JsonError:
            s.failed = True
            raise

    def _feed(self, text: str) -> None:
        s = self.s
        start = 0
        if s.partial:
            start = self._resume(text)
            if start < 0:
                return
        size = len(text)
        i = start
        while i < size:
            char = text[i]
            if char in _WHITESPACE:
                i += 1
            elif char == '"':
                end, escape = _string_end(text, i + 1, False)
                if end < 0:
                    return self._hold(text[i:], escape)
                self._string(text[i : end + 1])
                i = end + 1
            elif char in _NUMBER_CHARS:
                end = self._run_end(text, i, _NUMBER_CHARS)
                if end == size:
                    return self._hold(text[i:])
                self._number(text[i:end])
                i = end
            elif char.isalpha():
                end = self._alpha_end(text, i)
                if end == size and any(lit.startswith(text[i:]) for lit in _LITERALS):
                    return self._hold(text[i:])
                self._literal(text[i:end])
                i = end
            else:
                self._punctuation(char)
                i += 1

    def _resume(self, text: str) -> int:
        """Finish the held token with the new text; where in it to go on (-1: still held)."""
        s = self.s
        held = s.partial
        first = held[0]
        if first == '"':
            end, escape = _string_end(text, 0, s.escape)
            s.escape = escape
            if end < 0:
                held.append(text)
                return -1
            self._string(self._release(text[: end + 1]))
            return end + 1
        if first in _NUMBER_CHARS:
            end = self._run_end(text, 0, _NUMBER_CHARS)
            if end == len(text):
                held.append(text)
                return -1
            self._number(self._release(text[:end]))
            return end
        # A literal is held only while it may still become one: a few characters.
        word = held.text() + text
        end = self._alpha_end(word, len(held))
        if end == len(word) and any(lit.startswith(word) for lit in _LITERALS):
            held.append(text)
            return -1
        used = end - len(held)
        self._literal(self._release(text[:used]))
        return used

    def _release(self, rest: str) -> str:
        """The held token completed by ``rest`` (the reader then holds nothing)."""
        token = self.s.partial.text() + rest
        self.s.partial = GrowingText()
        return token

    def _hold(self, token: str, escape: bool = False) -> None:
        s = self.s
        s.partial = GrowingText([token], len(token))
        s.escape = escape

    @staticmethod
    def _run_end(text: str, start: int, chars: frozenset[str]) -> int:
        i = start
        size = len(text)
        while i < size and text[i] in chars:
            i += 1
        return i

    @staticmethod
    def _alpha_end(text: str, start: int) -> int:
        i = start
        size = len(text)
        while i < size and text[i].isalpha():
            i += 1
        return i

    # ------------------------------------------------------------------ tokens

    def _string(self, token: str) -> None:
        try:
            value = json.loads(token)
        except ValueError:
            raise JsonError("bad string") from None
        s = self.s
        if s.expect in ("key_or_end", "key"):
            depth = len(s.containers)
            if depth <= 2:
                s.path[depth - 1] = value
            s.expect = "colon"
            self._event(_prefix(s.path, depth, drop_last=True), "map_key", value)
            return
        self._scalar("string", value)

    def _number(self, token: str) -> None:
        if _NUMBER.fullmatch(token) is None:
            raise JsonError("bad number")
        self._scalar("number", token)

    def _literal(self, token: str) -> None:
        if token not in _LITERALS:
            raise JsonError("bad literal")
        self._scalar("boolean" if token != "null" else "null", token)

    def _scalar(self, event: str, value: Any) -> None:
        s = self.s
        if s.expect not in ("value", "value_or_end"):
            raise JsonError("unexpected value")
        self._event(_prefix(s.path, len(s.containers)), event, value)
        self._value_done()

    def _value_done(self) -> None:
        s = self.s
        s.expect = "comma_or_end" if s.containers else "done"

    def _punctuation(self, char: str) -> None:
        s = self.s
        expect = s.expect
        if char in "{[":
            if expect not in ("value", "value_or_end"):
                raise JsonError("unexpected container")
            depth = len(s.containers)
            prefix = _prefix(s.path, depth)
            s.containers.append("m" if char == "{" else "a")
            if depth < 2:
                s.path.append(None if char == "{" else "item")
            s.expect = "key_or_end" if char == "{" else "value_or_end"
            self._event(prefix, "start_map" if char == "{" else "start_array", None)
        elif char in "}]":
            kind = "m" if char == "}" else "a"
            empty = "key_or_end" if kind == "m" else "value_or_end"
            if not s.containers or s.containers[-1] != kind:
                raise JsonError("unbalanced")
            if expect not in (empty, "comma_or_end"):
                raise JsonError("unexpected close")
            s.containers.pop()
            depth = len(s.containers)
            if depth < 2:
                del s.path[depth:]
            self._event(_prefix(s.path, depth), "end_map" if kind == "m" else "end_array", None)
            self._value_done()
        elif char == ":":
            if expect != "colon":
                raise JsonError("unexpected colon")
            s.expect = "value"
        elif char == ",":
            if expect != "comma_or_end":
                raise JsonError("unexpected comma")
            s.expect = "key" if s.containers[-1] == "m" else "value"
        else:
            raise JsonError("invalid character")

    # ------------------------------------------------------------------ vLLM's phases

    def _event(self, prefix: str | None, event: str, value: Any) -> None:
        r = self.reader
        if prefix == "" and event == "start_map":
            r.bare_object = True
        if r.bare_object and prefix is not None:
            prefix = f"item.{prefix}" if prefix else "item"
        if prefix == "item":
            if event == "start_map":
                r.phase = TOOL_KEY
                r.new_tool = True
            elif event == "map_key" and value == "name":
                r.phase = NAME
            elif event == "map_key" and value == "arguments":
                r.phase = ARGUMENTS_START
            elif event == "end_map":
                r.phase = ALL_DONE if r.bare_object else TOOL_DONE
        elif prefix == "item.name" and event == "string":
            r.name = value
            r.phase = NAME_DONE
        elif prefix == "item.arguments":
            if event == "start_map":
                r.phase = ARGUMENTS
            elif event == "end_map":
                r.phase = ARGUMENTS_DONE
            elif event == "string":
                r.string_arguments = value
        elif prefix == "" and event == "end_array":
            r.phase = ALL_DONE


# ---------------------------------------------------------------------------- streaming


class MistralJsonTools:
    """The JSON-array calls of pre-v11 Mistral tokenizers, streamed or one-shot."""

    supports_required_and_named = False
    engine_based = True

    def __init__(
        self,
        options: ParseOptions,
        tool_calls_id: int,
        id_seed: str = "",
        state: MistralJsonState | None = None,
    ) -> None:
        self.options = options
        self.tool_calls_id = tool_calls_id
        self.id_seed = id_seed
        self.state = state if state is not None else MistralJsonState()

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        state = self.state
        marked = self.tool_calls_id in (token_ids or ()) or TOOL_CALLS_TOKEN in text
        if marked or (not state.started and text and self.options.forces_tool_calls):
            state.started = True
        if not state.started:
            return Delta(content=text)
        try:
            return self._calls(text, marked)
        except JsonError:
            return None

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        return ""

    def _calls(self, text: str, marked: bool) -> Delta | None:
        state = self.state
        reader = state.reader
        content: str | None = None
        calls: list[DeltaToolCall] = []
        if marked:
            pieces = text.split(TOOL_CALLS_TOKEN)
            if not text.startswith(TOOL_CALLS_TOKEN):
                content = pieces[0]
            text = "".join(pieces[1:])
        current = DeltaToolCall(index=state.tool_index, type="function")
        modified = False
        feeder = _Feeder(reader)
        while text:
            before = reader.phase
            if before == ALL_DONE:
                # vLLM replaces the content before the marker with this text when both
                # come in one chunk (docs/parity.md: mistral-array-content); we keep both.
                content, text = (content or "") + text, ""
                continue
            cut = _CUTS.get(before)
            match = cut.search(text) if cut is not None else None
            end = match.end() if match is not None else len(text)
            piece, text = text[:end], text[end:]
            feeder.feed(piece)
            if reader.new_tool:
                reader.new_tool = False
                if modified:
                    calls.append(self._with_id(current))
                modified = False
                state.tool_index += 1
                state.pending_id = mistral_tool_call_id(self.id_seed, state.tool_index)
                current = DeltaToolCall(index=state.tool_index, type="function")
            if reader.name is not None:
                modified = True
                current.name = reader.name
                reader.name = None
            if reader.string_arguments is not None:
                modified = True
                current.arguments = reader.string_arguments
                reader.string_arguments = None
            if reader.phase == NAME_DONE:
                reader.phase = TOOL_KEY
            if reader.phase in (ARGUMENTS, ARGUMENTS_DONE):
                if reader.phase == ARGUMENTS_DONE:
                    reader.phase = TOOL_KEY
                modified = True
                current.arguments = (current.arguments or "") + piece
                if before != ARGUMENTS:
                    current.arguments = current.arguments.lstrip()
        if modified:
            calls.append(self._with_id(current))
        if content or calls:
            return Delta(content=content or None, tool_calls=calls)
        if reader.phase == ALL_DONE:
            return Delta()
        return None

    def _with_id(self, call: DeltaToolCall) -> DeltaToolCall:
        if self.state.pending_id is not None:
            call.id = self.state.pending_id
            self.state.pending_id = None
        return call

    # ------------------------------------------------------------------ one-shot

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        options = self.options
        if options.tool_choice == "none" and options.tools:
            return ExtractedToolCalls(False, [], content)
        before: str | None = None
        if TOOL_CALLS_TOKEN in content:
            before, *segments = content.split(TOOL_CALLS_TOKEN)
            body = next((s.strip() for s in segments if s.strip()), "")
        elif options.forces_tool_calls:
            body = content.strip()
        else:
            return ExtractedToolCalls(False, [], content)
        calls = function_calls(_decode_calls(body))
        if not calls:
            return ExtractedToolCalls(False, [], body)
        for index, call in enumerate(calls):
            call.id = mistral_tool_call_id(id_seed, index)
        return ExtractedToolCalls(True, calls, before if before and before.strip() else None)


def _decode_calls(body: str) -> Any:
    """The first JSON value of ``body``; else the span from the first ``[{`` to the
    last ``}]``, if that is JSON; else None."""
    try:
        return json.JSONDecoder().raw_decode(body)[0]
    except (ValueError, RecursionError):
        pass
    start = body.find("[{")
    end = body.rfind("}]")
    if start < 0 or end < start + 2:
        return None
    try:
        return json.loads(body[start : end + 2])
    except (ValueError, RecursionError):
        return None


def function_calls(parsed: Any) -> list[FunctionCall]:
    """The calls in a decoded array (or bare object), as vLLM reads them."""
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    calls: list[FunctionCall] = []
    for entry in parsed:
        if not isinstance(entry, dict) or not ("name" in entry or "arguments" in entry):
            continue
        name = entry.get("name")
        arguments = entry.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except RecursionError:
                continue
        calls.append(FunctionCall(name if isinstance(name, str) else "", arguments))
    return calls


# ---------------------------------------------------------------------------- the family
# Mistral's two call forms are one family: the tokenizer decides which one it writes
# (the JSON array before v11, ``name[ARGS]{...}`` from v11 on, where ``[ARGS]`` is a
# token), and whether it reasons (``[THINK]``). Declared here, beside both forms.


def _grammar(_: str, vocab: Vocabulary) -> MistralGrammar:
    return MistralGrammar(vocab)


def _reasoning_stream(
    grammar: MistralGrammar, request: Request, kept: object
) -> tuple[MistralReasoning, MistralReasoningState]:
    state = reuse(kept, MistralReasoningState)
    return MistralReasoning(grammar, request.options, state), state


def _tools(grammar: MistralGrammar, request: Request) -> MistralJsonTools | MistralTools:
    built = _tools_stream(grammar, request, None)
    return built[0]


def _tools_stream(
    grammar: MistralGrammar, request: Request, kept: object
) -> tuple[MistralJsonTools, MistralJsonState] | tuple[MistralTools, MistralToolState]:
    """The calls in the form this tokenizer writes."""
    if grammar.json_array:
        assert grammar.tool_calls_id is not None  # MistralGrammar checks
        json_state = reuse(kept, MistralJsonState)
        tools = MistralJsonTools(
            request.options, grammar.tool_calls_id, request.id_seed, json_state
        )
        return tools, json_state
    return _engine_stream(grammar, request, kept)


_engine_stream = tool_builders(MistralTools)[1]


FAMILY = Family(
    title="Mistral (Nemo, Small, Magistral)",
    tokenizer="model directory (python -m app.tokens.tekken converts a tekken.json)",
    reasoning=(
        Reasoning(
            names=("mistral",),
            engine_based=True,
            needs=(TOOL_CALLS_TOKEN,),
            states=(MistralReasoningState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: MistralReasoning(grammar, request.options),
            stream=_reasoning_stream,
            golden=("S1", "S2"),
        ),
    ),
    tools=(
        Tools(
            names=("mistral",),
            engine_based=True,
            needs=(TOOL_CALLS_TOKEN,),
            states=(MistralJsonState, MistralToolState),
            prepare=_grammar,
            one_shot=_tools,
            stream=_tools_stream,
            golden=("S1", "S2"),
        ),
    ),
)
