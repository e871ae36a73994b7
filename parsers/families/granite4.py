"""Granite 4.0's tool calls (``granite4``): JSON objects between ``<tool_call>`` tags.

Granite 4.0 writes each call as::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

A call is read whole once its closing tag arrives; text outside the tags is content.
One-shot, vLLM keeps every call or none: a tag out of order, an empty or unclosed
call, or a body that is not a call object leaves the whole output as content.

Streamed, vLLM's parser re-reads its held text on every chunk; this one searches only
the new text for the closing tag. Where vLLM's stream loses text depending on the
chunking (content that shares a chunk with a malformed call or with the opening tag
of the call after a call that opened and closed in one chunk), this one streams it
(docs/parity.md, ``granite4-chunk-losses``). What it keeps as vLLM does, whatever the
chunking: a body that is not JSON or not an object is dropped, a call object without
``name`` or ``arguments`` (or whose name is not a string) ends the stream's output, and
an unclosed call or a partial opening tag at the end is never sent.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"


def _loads(text: str) -> tuple[bool, Any]:
    """``json.loads`` that never raises: ``(False, None)`` for what it rejects."""
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _dump_arguments(arguments: Any) -> str | None:
    """A call's arguments as vLLM writes them: text as it is, null as none, else JSON."""
    if arguments is None or isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _open_tail(text: str) -> int:
    """Where the longest end of ``text`` that may grow into ``<tool_call>`` starts."""
    for size in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if text.endswith(CALL_OPEN[:size]):
            return len(text) - size
    return len(text)


class Granite4Tools:
    """One-shot: every call or none, content the text outside the tags."""

    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        whole = ExtractedToolCalls(False, [], content)
        outside: list[str] = []
        bodies: list[str] = []
        pos = 0
        while True:
            start = content.find(CALL_OPEN, pos)
            end = content.find(CALL_CLOSE, pos)
            if start < 0 and end < 0:
                break
            if end >= 0 and (start < 0 or end < start):
                return whole  # a closing tag with no call open
            outside.append(content[pos:start])
            body_start = start + len(CALL_OPEN)
            start_again = content.find(CALL_OPEN, body_start)
            end = content.find(CALL_CLOSE, body_start)
            if end < 0 or 0 <= start_again < end or end == body_start:
                return whole  # unclosed, two openings in a row, or an empty call
            bodies.append(content[body_start:end])
            pos = end + len(CALL_CLOSE)
        outside.append(content[pos:])
        calls: list[FunctionCall] = []
        for body in bodies:
            ok, call = _loads(body)
            if not ok or not isinstance(call, dict) or "name" not in call:
                return whole
            name, arguments = call["name"], _dump_arguments(call.get("arguments"))
            if "arguments" not in call or not isinstance(name, str) or arguments is None:
                return whole
            calls.append(FunctionCall(name, arguments))
        return ExtractedToolCalls(bool(calls), calls, "".join(outside) or None)


# ---------------------------------------------------------------------------- streaming


class Granite4State(Struct, tag="granite4"):
    """What the stream keeps: a partial opening tag held as content, or the open call's
    text from its opening tag (``searched``: how far it holds no closing tag); the calls
    sent; whether the output has stopped (a call object vLLM cannot read)."""

    held: str = ""
    in_call: bool = False
    call: GrowingText = field(default_factory=GrowingText)
    searched: int = 0
    calls: int = 0
    null_arguments: bool = False  # the last call's arguments were null
    stopped: bool = False


class Granite4Stream:
    """Granite 4.0's calls streamed as vLLM streams them, reading each character once."""

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: Granite4State | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else Granite4State()

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.stopped:
            return None
        content: list[str] = []
        calls: list[DeltaToolCall] = []
        if s.in_call:
            body = self._closed_call(text)
            if body is None:
                return None
            rest = body[1]
            self._call(body[0], calls)
        else:
            rest, s.held = s.held + text, ""
        if not s.stopped:
            self._read(rest, content, calls)
        joined = "".join(content)
        if joined or calls:
            return Delta(content=joined or None, tool_calls=calls)
        return None

    def finish(self) -> Delta | None:
        """Nothing: an unclosed call and a held partial tag are never sent (as in vLLM)."""
        return None

    def remaining_arguments(self) -> str:
        """vLLM's last-chunk check: a last call with null arguments gets ``null``."""
        return "null" if self.s.null_arguments and not self.s.stopped else ""

    def _closed_call(self, text: str) -> tuple[str, str] | None:
        """The open call's body and the text after it, once its closing tag is in."""
        s = self.s
        s.call.append(text)
        end = s.call.find(CALL_CLOSE, s.searched)
        if end < 0:
            s.searched = max(s.searched, len(s.call) - len(CALL_CLOSE) + 1)
            return None
        whole = s.call.text()
        s.in_call, s.call, s.searched = False, GrowingText(), 0
        return whole[len(CALL_OPEN) : end], whole[end + len(CALL_CLOSE) :]

    def _read(self, text: str, content: list[str], calls: list[DeltaToolCall]) -> None:
        """Content and closed calls in ``text`` (no call open before it), in one pass."""
        s = self.s
        pos = 0
        while not s.stopped:
            start = text.find(CALL_OPEN, pos)
            if start < 0:
                held = max(pos, _open_tail(text))
                content.append(text[pos:held])
                s.held = text[held:]
                return
            content.append(text[pos:start])
            body_start = start + len(CALL_OPEN)
            end = text.find(CALL_CLOSE, body_start)
            if end < 0:
                s.in_call = True
                s.call.append(text[start:])
                s.searched = max(0, len(s.call) - len(CALL_CLOSE) + 1)
                return
            self._call(text[body_start:end], calls)
            pos = end + len(CALL_CLOSE)

    def _call(self, body: str, calls: list[DeltaToolCall]) -> None:
        """One closed call: sent whole, dropped, or (an object vLLM cannot read) the end."""
        if not body:
            return
        ok, call = _loads(body)
        if not ok or not isinstance(call, dict):
            return
        name = call.get("name")
        if "name" not in call or "arguments" not in call or not isinstance(name, str | None):
            self.s.stopped = True
            return
        arguments = _dump_arguments(call["arguments"])
        s = self.s
        calls.append(opening_call_delta(self.id_seed, s.calls, name, arguments))
        s.calls += 1
        s.null_arguments = arguments is None


# ---------------------------------------------------------------------------- the family


def _stream(_: None, request: Request, kept: object) -> tuple[Granite4Stream, Granite4State]:
    state = reuse(kept, Granite4State)
    return Granite4Stream(request.id_seed, state), state


FAMILY = Family(
    title="Granite 4.0",
    tokenizer="any (the calls are text between <tool_call> tags)",
    tools=(
        Tools(
            names=("granite4",),
            engine_based=False,
            states=(Granite4State,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: Granite4Tools(),
            stream=_stream,
            golden=("F1", "F3"),
        ),
    ),
)
