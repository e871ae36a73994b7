"""GigaChat 3 tool calls (``gigachat3``): one JSON ``{"name", "arguments"}`` object after
``function call<|role_sep|>\\n`` or ``<|function_call|>``.

vLLM 0.33.0's parser, one-shot: the text after the first opener must be that object
alone (``json.loads``, control characters allowed in strings) with object arguments,
else no call; content is the text before the first ``<|message_sep|>`` or
``<|function_call|>`` (the whole output when there is neither), a trailing ``</s>`` cut
first. Streamed: until the opener, each chunk's text up to such a marker is content
(nothing after the first one); the chunk that brings the opener sends its content only,
else the call starts there. The name goes alone once ``"name": "..."`` is complete;
then the arguments stream as the text after ``"arguments":`` grows, trailing
whitespace and a final ``</s>`` left out, and the object's closing ``}`` too once what
precedes it is JSON. Text after the call is never sent. At the end, a call whose
arguments never streamed gets ``{}``, and arguments that ``json.dumps`` writes out
longer than they were sent get the rest, as vLLM's server adds them.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.readers.jsonscan import JsonScanner, JsonScanState
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

OPENERS = ("function call<|role_sep|>\n", "<|function_call|>")
CONTENT_ENDS = ("<|message_sep|>", "<|function_call|>")
EOS = "</s>"
NAME_KEY = '"name"'
ARGS_KEY = '"arguments"'
_LONGEST_OPENER = max(len(opener) for opener in OPENERS)


def _first(text: str, needles: tuple[str, ...], start: int = 0) -> tuple[int, str]:
    """The first of ``needles`` in ``text`` from ``start`` (-1 and "" if none)."""
    best, found = -1, ""
    for needle in needles:
        at = text.find(needle, start)
        if at >= 0 and (best < 0 or at < best):
            best, found = at, needle
    return best, found


def _is_call(value: Any) -> bool:
    """An object with a name and object arguments."""
    return isinstance(value, dict) and "name" in value and isinstance(value.get("arguments"), dict)


def extract_gigachat3(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring)."""
    if text.rstrip().endswith(EOS):
        text = text[: text.rfind(EOS)]
    at, opener = _first(text, OPENERS)
    call: Any = None
    if at >= 0:
        try:
            call = json.loads(text[at + len(opener) :], strict=False)
        except (ValueError, RecursionError):
            return ExtractedToolCalls(False, [], text)
        if not _is_call(call):
            call = None
    end, _ = _first(text, CONTENT_ENDS)
    content = text[:end] if end >= 0 else text
    if call is None:
        return ExtractedToolCalls(False, [], content or None)
    try:
        arguments = json.dumps(call["arguments"], ensure_ascii=False)
    except RecursionError:
        return ExtractedToolCalls(False, [], text)
    return ExtractedToolCalls(True, [FunctionCall(call["name"], arguments)], content or None)


class GigaChat3Tools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_gigachat3(content)


class GigaChat3State(Struct, tag="gigachat3"):
    """``carry``: the end of the text while no opener is found; ``tail``: the text after
    the opener; positions below are into it. ``args`` is where the arguments' text
    starts (-1: not yet), ``sent`` where what was sent of it ends, ``solid`` where the
    text stops being trailing whitespace."""

    started: bool = False
    content_ended: bool = False
    carry: str = ""
    found: bool = False
    engaged: bool = False
    tail: GrowingText = field(default_factory=GrowingText)
    name_from: int = 0
    name_sent: bool = False
    args_from: int = 0
    args: int = -1
    sent: int = -1
    solid: int = 0
    scan: JsonScanState = field(default_factory=JsonScanState)
    scanned: int = -1


class GigaChat3Stream:
    """The tool side of a stream (the module docstring says what it sends)."""

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: GigaChat3State) -> None:
        self.id_seed = id_seed
        self.state = state

    def finish(self) -> Delta | None:
        return None

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        state = self.state
        self._read(text)
        if not state.started:
            end, _ = _first(text, CONTENT_ENDS)
            content = None
            if end >= 0:
                content, state.content_ended = text[:end], True
            elif not state.content_ended:
                content = text
            state.started = state.found
            if content:
                return Delta(content=content)
        if not state.found:
            return None
        state.engaged = True
        if not state.name_sent:
            name = self._name()
            if not name:
                return None
            state.name_sent = True
            return Delta(tool_calls=[opening_call_delta(self.id_seed, 0, name)])
        return self._arguments()

    def _read(self, text: str) -> None:
        """Find the opener; keep the text after it."""
        state = self.state
        if state.found:
            before = len(state.tail)
            state.tail.append(text)
            if text.strip():
                state.solid = before + len(text.rstrip())
            return
        seen = state.carry + text
        at, opener = _first(seen, OPENERS)
        if at < 0:
            state.carry = seen[-(_LONGEST_OPENER - 1) :]
            return
        after = seen[at + len(opener) :]
        state.found, state.carry = True, ""
        state.tail = GrowingText([after] if after else [], len(after))
        state.solid = len(after.rstrip())

    def _name(self) -> str | None:
        """``"name"\\s*:\\s*"([^"]*)"``: the first complete one (None while there is none)."""
        state = self.state
        tail = state.tail
        at = tail.find(NAME_KEY, state.name_from)
        while at >= 0:
            colon = _skip_space(tail, at + len(NAME_KEY))
            if colon == len(tail):
                break
            if tail[colon] == ":":
                quote = _skip_space(tail, colon + 1)
                if quote == len(tail):
                    break
                if tail[quote] == '"':
                    close = tail.find('"', quote + 1)
                    if close < 0:
                        break
                    return tail[quote + 1 : close]
            at = tail.find(NAME_KEY, at + 1)
        state.name_from = at if at >= 0 else max(len(tail) - len(NAME_KEY) + 1, 0)
        return None

    def _arguments(self) -> Delta | None:
        state = self.state
        tail = state.tail
        if state.args < 0:
            state.args = self._arguments_start()
            if state.args < 0:
                return None
        if state.sent <= state.args:  # nothing sent: whitespace before the text is no part
            state.args = _skip_space(tail, state.args)
            state.sent = state.scanned = state.args
        end = max(state.solid, state.args)
        if end - 4 >= state.args and tail[end - 4 : end] == EOS:
            end -= 4
        if end > state.args and tail[end - 1] == "}" and self._json_before(end - 1):
            end -= 1
            while end > state.args and tail[end - 1].isspace():
                end -= 1
        if end <= state.sent:
            return None
        piece = tail[state.sent : end]
        state.sent = end
        return Delta(tool_calls=[DeltaToolCall(index=0, arguments=piece)])

    def _arguments_start(self) -> int:
        """Where ``"arguments"\\s*:\\s*`` ends, once one is complete (-1 until then)."""
        state = self.state
        tail = state.tail
        at = tail.find(ARGS_KEY, state.args_from)
        while at >= 0:
            colon = _skip_space(tail, at + len(ARGS_KEY))
            if colon == len(tail):
                break
            if tail[colon] == ":":
                return _skip_space(tail, colon + 1)
            at = tail.find(ARGS_KEY, at + 1)
        state.args_from = at if at >= 0 else max(len(tail) - len(ARGS_KEY) + 1, 0)
        return -1

    def _json_before(self, brace: int) -> bool:
        """Whether the arguments' text before ``brace`` is one JSON value."""
        state = self.state
        if brace < state.scanned:
            return False
        scanner = JsonScanner(state.scan, lenient=True)
        scanner.feed(state.tail[state.scanned : brace])
        state.scanned = brace
        return scanner.complete

    def remaining_arguments(self) -> str:
        """What vLLM's server adds to the last chunk's call (the module docstring)."""
        state = self.state
        if not state.engaged:
            return ""
        if state.args < 0 or state.sent <= state.args:
            return "{}"
        sent = state.tail[state.args : state.sent]
        try:
            arguments: Any = json.loads(sent, strict=False)
        except (ValueError, RecursionError):
            arguments = {}
        try:
            expected = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, ensure_ascii=False)
            )
        except RecursionError:
            return ""
        return expected[len(sent) :] if expected.startswith(sent) else ""


def _skip_space(text: GrowingText, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _stream(_: None, request: Request, kept: object) -> tuple[GigaChat3Stream, GigaChat3State]:
    state = reuse(kept, GigaChat3State)
    return GigaChat3Stream(request.id_seed, state), state


FAMILY = Family(
    title="GigaChat 3",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("gigachat3",),
            engine_based=False,
            states=(GigaChat3State,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: GigaChat3Tools(),
            stream=_stream,
            golden=("J5",),
        ),
    ),
)
