"""Step-3 (``step3``): reasoning up to ``</think>``, and calls as ``steptml`` invokes in a
block of ``<｜tool_calls_begin｜>`` ... ``<｜tool_calls_end｜>``, each call
``<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME">`` with
``<steptml:parameter name="KEY">VALUE</steptml:parameter>`` lines, then
``</steptml:invoke><｜tool_call_end｜>``.

vLLM 0.33.0 reads both with legacy parsers, reproduced here:

* Reasoning: everything before the first ``</think>`` (a ``<think>`` is kept as text);
  a prompt holding ``</think>`` anywhere has ended it. A chunk of ``</think>`` alone sends
  nothing.
* Calls, one-shot: only with the block closed; content is the text around the block,
  stripped. A call whose type is not ``function`` or that has no name is skipped; with no
  call left the whole output is content. Values are stripped and cast by the tool's
  schema (``integer``, ``number``, ``boolean``, ``null``; the rest stay strings).
* Calls, streamed: a cursor walks the text and each chunk takes one step: text before
  the block (held while, spaces aside, it could still begin the block's marker), the
  markers, a call's name once its invoke tag is whole, its cast arguments once
  ``<｜tool_call_end｜>`` closes it (none when it has no parameters), and everything
  after the block as content. What a step leaves is read by the next chunk's step and
  never when the stream has ended. On the last chunk, vLLM adds ``{}`` to the arguments
  of a call it sends then (the "unstreamed" arguments it expects of every call).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from msgspec import Struct, field

from parsers.families.think import THINK_END
from parsers.family import Family, ParserUnavailable, Reasoning, Request, Tools, reuse
from parsers.growing_text import GrowingText, Text
from parsers.ids import opening_call_delta
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    ParseOptions,
    Vocabulary,
)

BLOCK_BEGIN = "<｜tool_calls_begin｜>"
BLOCK_END = "<｜tool_calls_end｜>"
CALL_BEGIN = "<｜tool_call_begin｜>"
CALL_END = "<｜tool_call_end｜>"
SEP = "<｜tool_sep｜>"
INVOKE = '<steptml:invoke name="'
PARAMETER = '<steptml:parameter name="'
PARAMETER_END = "</steptml:parameter>"


# --------------------------------------------------------------------------- reasoning


class Step3Reasoning:
    """Reasoning up to the first ``</think>``, by its token id in a stream."""

    engine_based = False

    def __init__(self, vocab: Vocabulary) -> None:
        end_id = vocab.id_of(THINK_END)
        if end_id is None:
            raise ParserUnavailable(f"this tokenizer has no {THINK_END} token for reasoning")
        self.end_id = end_id

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.end_id in prompt_token_ids

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        reasoning, end, content = text.partition(THINK_END)
        return (reasoning, content or None) if end else (text, None)

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        if len(token_ids) == 1 and token_ids[0] == self.end_id:
            return None
        if self.end_id not in token_ids:
            return Delta(reasoning=text)
        # The marker's text is looked for as vLLM does (a miss cuts at -1).
        end = text.find(THINK_END)
        return Delta(reasoning=text[:end], content=text[end + len(THINK_END) :] or None)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.end_id in token_ids

    def content_ids(self, token_ids: list[int]) -> list[int]:
        if self.end_id not in token_ids[:-1]:
            return []
        return token_ids[token_ids.index(self.end_id) + 1 :]

    def finish(self) -> Delta | None:
        return None


# ------------------------------------------------------------------ reading an invoke


def _tag_value(text: Text, tag: str, at: int, limit: int) -> tuple[int, int] | None:
    """Where ``tag`` at ``at`` is followed by a quote-free run and ``">`` before
    ``limit`` (the run's bounds), as vLLM's ``tag([^"]+)">`` reads there."""
    start = at + len(tag)
    quote = text.find('"', start, limit)
    if quote <= start or not text.startswith('">', quote) or quote + 2 > limit:
        return None
    return start, quote


def _invoke_name(text: str) -> str | None:
    """The first whole invoke tag's name."""
    at = text.find(INVOKE)
    while at >= 0:
        found = _tag_value(text, INVOKE, at, len(text))
        if found is not None:
            return text[found[0] : found[1]]
        at = text.find(INVOKE, at + 1)
    return None


def _parameters(text: str) -> Iterator[tuple[str, str]]:
    """Each parameter's name and stripped value, left to right (vLLM's ``findall``).

    A tag without a closing tag after it means no later one has either: the scan ends.
    """
    at = text.find(PARAMETER)
    while at >= 0:
        found = _tag_value(text, PARAMETER, at, len(text))
        if found is None:
            at = text.find(PARAMETER, at + 1)
            continue
        value_start = found[1] + 2
        close = text.find(PARAMETER_END, value_start)
        if close < 0:
            return
        yield text[found[0] : found[1]], text[value_start:close].strip()
        at = text.find(PARAMETER, close + len(PARAMETER_END))


def _cast(value: str, kind: object) -> Any:
    """A value as vLLM casts it for its schema type; what does not cast stays text."""
    cast: Any = value
    if kind == "integer":
        with contextlib.suppress(ValueError):
            cast = int(value)
    elif kind == "number":
        with contextlib.suppress(ValueError):
            cast = float(value)
    elif kind == "boolean":
        cast = value.lower() == "true" if value.lower() in ("true", "false") else value
    elif kind == "null":
        cast = None if value.lower() == "null" else value
    return cast


def arguments_json(options: ParseOptions, name: str, text: str) -> str:
    """An invoke's parameters as vLLM's JSON arguments: the last value of a repeated
    name, cast by the first tool of that name ("" when there are none)."""
    params: dict[str, Any] = dict(_parameters(text))
    tool = options.tool(name)
    if tool is not None:
        properties = tool.properties()
        for key, value in params.items():
            prop = properties.get(key)
            params[key] = _cast(value, prop.get("type") if isinstance(prop, dict) else None)
    return json.dumps(params, ensure_ascii=False) if params else ""


# ------------------------------------------------------------------------------ one-shot


class Step3Tools:
    supports_required_and_named = True

    def __init__(self, options: ParseOptions) -> None:
        self.options = options

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """vLLM's one-shot reading (the module docstring)."""
        before, begin, rest = content.partition(BLOCK_BEGIN)
        block, end, after = rest.partition(BLOCK_END)
        if not begin or not end:
            return ExtractedToolCalls(False, [], content)
        calls = []
        for part in block.split(CALL_BEGIN):
            call, closed, _ = part.partition(CALL_END)
            kind, sep, invoke = call.partition(SEP)
            if not closed or not sep or kind.strip() != "function":
                continue
            name = _invoke_name(invoke)
            if name:
                arguments = arguments_json(self.options, name, invoke) or "{}"
                calls.append(FunctionCall(name, arguments))
        if not calls:
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(True, calls, (before + after).strip() or None)


# ----------------------------------------------------------------------------- streamed


class Step3ToolState(Struct, tag="step3"):
    """The text the cursor has not passed (``text`` from ``at``) and where the block
    and the current call stand. ``searched``: no marker being looked for starts before
    it. ``held``: how far the text before the block was checked as possibly its
    marker (``held_core``: the non-space text seen, ``held_phase``: before, in or after
    it). ``name_at``: the invoke tag being read (or -1), ``name_from``: where the next
    one is looked for. ``calls_seen``: vLLM then expects ``{}`` of the last call."""

    text: GrowingText = field(default_factory=GrowingText)
    at: int = 0
    searched: int = 0
    held: int = 0
    held_core: str = ""
    held_phase: int = 0
    started: bool = False
    finished: bool = False
    call: int = -1
    call_open: bool = False
    calls_seen: bool = False
    name: str | None = None
    name_sent: bool = False
    name_at: int = -1
    name_from: int = 0


# A step's result: a delta to send (or None), or _AGAIN when a marker was consumed and
# the same step goes on.
_AGAIN = Delta()


class Step3ToolStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, options: ParseOptions, id_seed: str, state: Step3ToolState) -> None:
        self.options = options
        self.id_seed = id_seed
        self.state = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.state
        s.text.append(text)
        while True:
            if s.at >= len(s.text):
                return None
            if s.finished:
                rest = s.text[s.at :]
                self._advance(len(s.text) - s.at)
                return Delta(content=rest)
            step = self._in_block() if s.started else self._before_block()
            if step is not _AGAIN:
                return step

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        """vLLM expects ``{}`` of the last call once there has been one, and finds none
        streamed (this parser streams no arguments the way it counts them)."""
        return "{}" if self.state.calls_seen else ""

    # ----------------------------------------------------------------- the cursor

    def _advance(self, count: int) -> None:
        """Move the cursor on; the text behind it goes once it is most of the buffer."""
        s = self.state
        s.at += count
        if s.at * 2 < len(s.text):
            return
        dropped = s.at
        rest = s.text[dropped:]
        s.text = GrowingText()
        s.text.append(rest)
        s.at = 0
        s.searched = max(0, s.searched - dropped)
        s.held = max(0, s.held - dropped)
        s.name_from = max(0, s.name_from - dropped)
        s.name_at = s.name_at - dropped if s.name_at >= dropped else -1

    def _find(self, marker: str) -> int:
        """``marker`` from the cursor on, reading each character once across chunks."""
        s = self.state
        found = s.text.find(marker, max(s.searched, s.at))
        if found < 0:
            s.searched = max(s.at, len(s.text) - len(marker) + 1)
        return found

    def _reset_search(self) -> None:
        s = self.state
        s.searched = s.held = s.at
        s.held_core, s.held_phase = "", 0

    def _rest_begins(self, marker: str) -> bool:
        """Whether the text from the cursor is a beginning of ``marker`` (or empty)."""
        s = self.state
        size = len(s.text) - s.at
        return size <= len(marker) and marker.startswith(s.text[s.at :])

    # ------------------------------------------------------------- before the block

    def _before_block(self) -> Delta | None:
        s = self.state
        if s.text.startswith(BLOCK_BEGIN, s.at):
            self._advance(len(BLOCK_BEGIN))
            s.started = True
            self._reset_search()
            return _AGAIN
        begin = self._find(BLOCK_BEGIN)
        if begin >= 0:
            content = s.text[s.at : begin]
            self._advance(begin - s.at)
            self._reset_search()
            return Delta(content=content)
        if self._held():
            return None
        content = s.text[s.at :]
        self._advance(len(s.text) - s.at)
        self._reset_search()
        return Delta(content=content)

    def _held(self) -> bool:
        """Whether the text from the cursor, spaces stripped, begins the block marker:
        read on from where the last check stopped."""
        s = self.state
        new = s.text[s.held :]
        s.held = len(s.text)
        for char in new:
            if char.isspace():
                s.held_phase = 2 if s.held_phase == 1 else s.held_phase
                continue
            if s.held_phase == 2:
                s.held_phase = 3
                return False
            s.held_core += char
            s.held_phase = 1
            if not BLOCK_BEGIN.startswith(s.held_core):
                s.held_phase = 3
                return False
        return s.held_phase != 3

    # ---------------------------------------------------------------- in the block

    def _in_block(self) -> Delta | None:
        s = self.state
        spaces = 0
        while s.at + spaces < len(s.text) and s.text[s.at + spaces].isspace():
            spaces += 1
        if spaces:
            self._advance(spaces)
        if s.text.startswith(BLOCK_END, s.at):
            self._advance(len(BLOCK_END))
            s.finished, s.call = True, -1
            return _AGAIN
        if not s.call_open:
            if s.text.startswith(CALL_BEGIN, s.at):
                self._advance(len(CALL_BEGIN))
                s.call += 1
                s.call_open = s.calls_seen = True
                s.name, s.name_sent, s.name_at = None, False, -1
                self._reset_search()
                s.name_from = s.at
                return _AGAIN
            # Between calls: wait for the next one (text that starts none waits forever).
            return None
        return self._call_step()

    def _call_step(self) -> Delta | None:
        """One step of the open call: its name once whole, its arguments once closed."""
        s = self.state
        end = self._find(CALL_END)
        if end < 0 and self._rest_begins(CALL_END):
            return None
        name = self._name(end if end >= 0 else len(s.text))
        if name is None:
            return None
        if not s.name_sent:
            s.name_sent = True
            return Delta(tool_calls=[opening_call_delta(self.id_seed, s.call, name)])
        if end < 0:
            return None
        body = s.text[s.at : end]
        self._advance(end + len(CALL_END) - s.at)
        s.call_open = False
        self._reset_search()
        arguments = arguments_json(self.options, name, body)
        if not arguments:
            return None
        return Delta(tool_calls=[DeltaToolCall(index=s.call, arguments=arguments)])

    def _name(self, limit: int) -> str | None:
        """The first whole invoke tag's name before ``limit``, read on from where the
        last look stopped (a tag's run is read once however it arrives)."""
        s = self.state
        text = s.text
        while s.name is None:
            if s.name_at < 0:
                found = text.find(INVOKE, s.name_from, limit)
                if found < 0:
                    s.name_from = max(s.name_from, limit - len(INVOKE) + 1)
                    return None
                s.name_at, s.name_from = found, found + len(INVOKE)
            quote = text.find('"', s.name_from, limit)
            if quote < 0:
                s.name_from = max(s.name_from, limit)
                return None
            if quote + 1 >= len(text):
                s.name_from = quote
                return None
            start = s.name_at + len(INVOKE)
            if quote > start and text[quote + 1] == ">" and quote + 1 < limit:
                s.name = text[start:quote]
            else:
                s.name_from, s.name_at = s.name_at + 1, -1
        return s.name


# ------------------------------------------------------------------------------ family


def _tool_stream(_: None, request: Request, kept: object) -> tuple[Step3ToolStream, Step3ToolState]:
    state = reuse(kept, Step3ToolState)
    return Step3ToolStream(request.options, request.id_seed, state), state


FAMILY = Family(
    title="Step-3",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("step3",),
            engine_based=False,
            needs=(THINK_END,),
            states=(),
            prepare=lambda name, vocab: Step3Reasoning(vocab),
            one_shot=lambda parser, request: parser,
            stream=lambda parser, request, kept: (parser, None),
            golden=("E3", "E4"),
        ),
    ),
    tools=(
        Tools(
            names=("step3",),
            engine_based=False,
            states=(Step3ToolState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: Step3Tools(request.options),
            stream=_tool_stream,
            golden=("E3",),
        ),
    ),
)
