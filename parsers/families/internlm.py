"""InternLM2 tool calls (``internlm``): ``<|action_start|><|plugin|>{json}<|action_end|>``.

The call is one JSON object with a ``name`` and ``parameters`` (or ``arguments``).
vLLM 0.33.0 reads it with a legacy parser, reproduced here:

* One-shot: the text before the marker is the content (None when empty); the object
  after it, from its first ``{`` up to ``<|action_end|>``, is the call, its arguments
  re-serialized, whatever tools the request has. An object that does not read, or a
  second marker, fails the request (vLLM's parser raises).
* Streamed: text goes out as content until ``<|action_start|>`` appears; from then on
  nothing goes out until the whole marker has; the text before it then goes out as
  one content piece. The call is read again each chunk with ``partial-json-parser``:
  its name once its string is complete, then its arguments. The first arguments sent
  run up to the end of the chunk's own text within their dump (the whole dump once the
  object is complete; nothing while neither holds); later chunks send what two
  successive readings agree on, and every chunk after that sends an empty piece.
  Text after the call is never sent; a second marker fails the stream.

Reading the call again each chunk costs its length: here the readings are bounded as
``llama3_json``'s are (``REREAD_PER_CHAR``; docs/parity.md, internlm-reread-budget),
and once the call's end is in, its reading is kept rather than repeated.
"""

from __future__ import annotations

import json
from typing import Any

import partial_json_parser
from msgspec import Struct, field
from partial_json_parser.core.options import Allow

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.readers.partialjson import common_length
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, OutputRefused

ACTION_START = "<|action_start|>"
MARKER = "<|action_start|><|plugin|>"
ACTION_END = "<|action_end|>"
# Reading the call again may cost this many characters per character of output, plus a
# start; past it no more argument pieces are sent (docs/parity.md, internlm-reread-budget).
REREAD_PER_CHAR = 8
REREAD_FREE = 1 << 16
UNREADABLE = "the tool call is not an object with a string name that can be read"
# What vLLM's stream swallows (its ``except Exception``): the chunk then sends nothing.
_SWALLOWED = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    AssertionError,
    RecursionError,
    partial_json_parser.core.exceptions.MalformedJSON,
)


def _arguments(call: dict[str, Any]) -> Any:
    """A call's ``parameters``, else its ``arguments``, else None (vLLM's order)."""
    if "parameters" in call:
        return call["parameters"]
    return call.get("arguments")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def extract_call(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring); OutputRefused where it raises."""
    if MARKER not in text:
        return ExtractedToolCalls(False, [], text)
    parts = text.split(MARKER)
    if len(parts) != 2:
        raise OutputRefused("too many values to unpack (expected 2)")
    content, action = parts
    action = action.split(ACTION_END)[0]
    action = action[action.find("{") :]
    try:
        call = json.loads(action)
    except ValueError as exc:
        raise OutputRefused(str(exc)) from None
    except RecursionError:
        raise OutputRefused(UNREADABLE) from None
    # Where vLLM's server fails with a 500 (docs/parity.md, internlm-unreadable-call).
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise OutputRefused(UNREADABLE)
    try:
        arguments = _dump(call.get("parameters", call.get("arguments", {})))
    except RecursionError:
        raise OutputRefused(UNREADABLE) from None
    name = call["name"]
    return ExtractedToolCalls(True, [FunctionCall(name, arguments)], content or None)


class InternlmTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_call(content)


class InternlmState(Struct, tag="internlm"):
    """Where the stream stands: the text since ``<|action_start|>`` appeared (``held``),
    the marker's place in it (-1: not found; ``searched``: no marker starts before),
    whether the content before it went out, the call's last reading (``previous``,
    plain JSON data; ``named`` once its name went out), the arguments sent, the
    reading kept once the call's end is in, and the characters read again so far."""

    tail: str = ""  # the last characters before ``<|action_start|>`` appeared
    started: bool = False
    held: GrowingText = field(default_factory=GrowingText)
    marker: int = -1
    searched: int = 0
    content_sent: bool = False
    named: bool = False
    previous: Any = None
    read: bool = False  # ``previous`` holds a reading
    streamed: str = ""
    final: str | None = None  # the call's text once its end is in (it reads the same)
    done: bool = False  # the final reading's arguments are all sent
    starved: bool = False  # past the re-read budget: the last chunk settles the call
    reread: int = 0


class InternlmStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: InternlmState) -> None:
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if not s.started:
            seen = s.tail + text
            if ACTION_START not in seen:
                s.tail = seen[-len(ACTION_START) :]
                return Delta(content=text)
            s.started, s.tail = True, ""
        s.held.append(text)
        if not self._find_marker():
            return None
        if not s.content_sent:
            s.content_sent = True
            if s.marker > 0:
                return Delta(content=s.held[: s.marker])
        return self._step(text)

    def _find_marker(self) -> bool:
        """Whether the held text has the marker; OutputRefused at a second one (vLLM's
        split into two parts fails)."""
        s = self.s
        held = s.held
        if s.marker < 0:
            s.marker = held.find(MARKER, s.searched)
            s.searched = max(s.searched, len(held) - len(MARKER) + 1)
            if s.marker < 0:
                return False
            s.searched = s.marker + len(MARKER)
        if held.find(MARKER, s.searched) >= 0:
            raise OutputRefused("invalid stream_state: derender failed")
        s.searched = max(s.searched, len(held) - len(MARKER) + 1)
        return True

    def _action(self) -> str | None:
        """The call's text as vLLM reads it (stripped, cut at its end), or None once
        reading it again would pass the budget."""
        s = self.s
        start = s.marker + len(MARKER)
        cost = len(s.held) - start if s.final is None else len(s.final)
        if s.reread + cost > REREAD_PER_CHAR * len(s.held) + REREAD_FREE:
            s.starved = True
            return None
        s.reread += cost
        if s.final is not None:
            return s.final
        action = s.held[start:].strip()
        end = action.find(ACTION_END)
        if end >= 0:
            s.final = action = action[:end]
        return action

    def _step(self, text: str) -> Delta | None:
        s = self.s
        if s.done:
            # The call reads the same from now on: every chunk sends an empty piece.
            return Delta(tool_calls=[DeltaToolCall(index=0, arguments="")])
        action = self._action()
        if action is None:
            return None
        flags = Allow.ALL if s.named else Allow.ALL & ~Allow.STR
        try:
            call = partial_json_parser.loads(action, flags)
            keep, delta = (
                (True, self._name(call)) if not s.named else self._arguments(call, action, text)
            )
            if not keep:
                return None
            call["arguments"] = _arguments(call)
        except _SWALLOWED:
            return None
        s.previous, s.read = call, True
        return delta

    def _name(self, call: Any) -> Delta | None:
        name = call.get("name")
        if not name:
            return None
        if not isinstance(name, str):
            raise TypeError("a call's name must be a string")
        self.s.named = True
        return Delta(tool_calls=[opening_call_delta(self.id_seed, 0, name)])

    def _arguments(self, call: Any, action: str, text: str) -> tuple[bool, Delta | None]:
        """The arguments piece of one step, and whether the step keeps its reading
        (not while the first arguments wait for their chunk's text, as vLLM's)."""
        s = self.s
        previous = _arguments(s.previous) if s.read else None
        current = _arguments(call)
        if not current:
            return True, None
        dump = _dump(current)
        if not previous:
            at = dump.find(text)
            if at >= 0:
                piece = dump[: at + len(text)]
            elif _complete(action):
                piece = dump
            else:
                return False, None
        elif _complete(action):
            piece = dump[len(s.streamed) :]
            s.done = s.final is not None
        else:
            before = _dump(previous)
            common = common_length(before, dump) if before != dump else len(s.streamed)
            piece = dump[len(s.streamed) : max(common, len(s.streamed))]
        s.streamed += piece
        return True, Delta(tool_calls=[DeltaToolCall(index=0, arguments=piece)])

    def finish(self) -> Delta | None:
        """Past the re-read budget, the last chunk settles a complete call as one token
        per chunk would have: its name if not sent, and the rest of its arguments."""
        s = self.s
        if not s.starved:
            return None
        s.starved = False
        action = s.held[s.marker + len(MARKER) :].strip()
        try:
            call = json.loads(action[: action.find(ACTION_END) % (len(action) + 1)])
            name = call.get("name")
            arguments = _arguments(call)
            dump = _dump(arguments) if arguments else s.streamed
        except (ValueError, AttributeError, RecursionError):
            return None
        if not isinstance(name, str) or not name:
            return None
        calls = [] if s.named else [opening_call_delta(self.id_seed, 0, name)]
        s.named = True
        if dump.startswith(s.streamed) and dump != s.streamed:
            calls.append(DeltaToolCall(index=0, arguments=dump[len(s.streamed) :]))
            s.streamed = dump
        return Delta(tool_calls=calls) if calls else None

    def remaining_arguments(self) -> str:
        """What vLLM's server adds to a last chunk that carries a call piece: the rest
        of the call's last reading (``null`` when it has no arguments)."""
        s = self.s
        if not s.read:
            return ""
        arguments = _arguments(s.previous)
        expected = arguments if isinstance(arguments, str) else _dump(arguments)
        if not expected.startswith(s.streamed):
            return ""
        rest = expected[len(s.streamed) :]
        s.streamed += rest
        return rest


def _complete(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _stream(_: None, request: Request, kept: object) -> tuple[InternlmStream, InternlmState]:
    state = reuse(kept, InternlmState)
    return InternlmStream(request.id_seed, state), state


FAMILY = Family(
    title="InternLM2",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("internlm",),
            engine_based=False,
            states=(InternlmState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: InternlmTools(),
            stream=_stream,
            golden=("E6",),
        ),
    ),
)
