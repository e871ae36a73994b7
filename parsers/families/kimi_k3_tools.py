"""Kimi K3's calls (``kimi_k3`` tools): a ``tools`` channel of typed ``call`` elements.

    <|open|>response<|sep|>Checking.<|close|>response<|sep|><|open|>tools<|sep|>
    <|open|>call tool="get_weather" index="1"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|>

A ``string`` argument is its raw text, any other type its JSON (kept raw when it is no
JSON); a call without a ``tool`` attribute is dropped. As vLLM 0.33.0 streams it, a call
goes out whole once its closing tag arrives, and the content is the response channel's
text (from the response opener, if any, to the first response closer or tools channel),
held back only while its end may still grow into one of those markers. vLLM reads that
from the whole text at every chunk; here each character is read once and only the
unsent end of the text is kept.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.families.kimi_k3_markup import (
    CLOSE,
    OPEN,
    Elements,
    ElementState,
    Tag,
    TagState,
    attributes,
    first,
    held_back,
    remove,
)
from parsers.ids import chat_tool_call_id
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

RESPONSE_OPEN = Tag(OPEN, "response")
RESPONSE_CLOSE = Tag(CLOSE, "response")
MESSAGE_CLOSE = Tag(CLOSE, "message")
TOOLS_OPEN = Tag(OPEN, "tools")
TOOLS_CLOSE = Tag(CLOSE, "tools")
CALLS = Elements.of("call")
ARGUMENTS = Elements.of("argument")
# What the streamed content holds back: an end that may grow into one of these.
_CONTENT_MARKERS = (RESPONSE_OPEN.exact, RESPONSE_CLOSE.exact, TOOLS_OPEN.exact)
_LAST = max(len(marker) for marker in _CONTENT_MARKERS)


def decode_call(attrs: str, body: str) -> tuple[str, str] | None:
    """A call element's function name and JSON arguments; None without a name."""
    name = attributes(attrs).get("tool", "")
    arguments: dict[str, Any] = {}
    for arg_attrs, value in ARGUMENTS.feed(ElementState(), body, 0):
        found = attributes(arg_attrs)
        key = found.get("key", "")
        if found.get("type", "string") == "string":
            arguments[key] = value
            continue
        try:
            arguments[key] = json.loads(value)
        except (ValueError, RecursionError):  # vLLM keeps text that is no JSON as it is
            arguments[key] = value
    if not name:
        return None
    try:
        return name, json.dumps(arguments, ensure_ascii=False)
    except RecursionError:
        return None


def unwrap(text: str) -> str:
    """The response channel's text: from its opener (if any) to its closer, else
    ``text`` without response closers; message closers removed either way."""
    opener = first(RESPONSE_OPEN, text)
    if opener is not None:
        closer = first(RESPONSE_CLOSE, text, opener[1])
        text = text[opener[1] : closer[0]] if closer is not None else text[opener[1] :]
    else:
        text = remove(RESPONSE_CLOSE, text)
    return remove(MESSAGE_CLOSE, text)


def _content(output: str, before: str) -> str | None:
    """A one-shot's content: the first whole response channel, else ``before`` unwrapped."""
    opener = first(RESPONSE_OPEN, output)
    if opener is not None and (closer := first(RESPONSE_CLOSE, output, opener[1])) is not None:
        return output[opener[1] : closer[0]] or None
    return unwrap(before) or None


def extract_calls(text: str) -> ExtractedToolCalls:
    """Calls and content of a whole output (vLLM's ``extract_tool_calls``)."""
    opener = first(TOOLS_OPEN, text)
    if opener is None:
        return ExtractedToolCalls(False, [], _content(text, text))
    closer = first(TOOLS_CLOSE, text, opener[1])
    section = text[opener[1] : closer[0] if closer is not None else len(text)]
    calls = [
        FunctionCall(*call)
        for attrs, body in CALLS.feed(ElementState(), section, 0)
        if (call := decode_call(attrs, body)) is not None
    ]
    return ExtractedToolCalls(bool(calls), calls, _content(text, text[: opener[0]]))


class KimiK3Tools:
    """``kimi_k3`` calls read from a whole output."""

    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


class KimiK3ToolState(Struct, tag="kimi_k3_tools"):
    """Where the stream is: the content's markers (positions count the text read),
    the unsent text, and the calls channel."""

    read: int = 0  # characters read
    last: str = ""  # the last characters read (what may grow into a marker)
    response: TagState | None = field(default_factory=TagState)  # None once found
    body_start: int = 0
    stops: TagState = field(default_factory=TagState)  # a tools channel after the body
    closes: TagState = field(default_factory=TagState)  # a response closer after it
    stop_at: int | None = None
    sent: int = 0
    unsent: str = ""  # the text from ``unsent_at`` on, while content may still go out
    unsent_at: int = 0
    channel: TagState | None = field(default_factory=TagState)  # None once the tools open
    calls: ElementState = field(default_factory=ElementState)
    calls_sent: int = 0


class KimiK3ToolStream:
    """``kimi_k3`` calls streamed as vLLM 0.33.0 streams them."""

    engine_based = False
    supports_required_and_named = False

    def __init__(self, id_seed: str, state: KimiK3ToolState) -> None:
        self.id_seed = id_seed
        self.state = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        base = self.state.read
        self.state.read += len(text)
        content = self._content(text, base)
        calls = self._calls(text, base)
        if not calls:
            return Delta(content=content) if content else None
        return Delta(content=content or None, tool_calls=calls)

    def _content(self, text: str, base: int) -> str | None:
        """The response text this chunk releases (vLLM's ``_extract_response_content``)."""
        s = self.state
        s.last = (s.last + text)[-_LAST:]
        rest = 0
        if s.response is not None and (end := RESPONSE_OPEN.scan(s.response, text, base)) >= 0:
            s.response = None
            s.body_start = base + end
            s.stops, s.closes, s.stop_at = TagState(), TagState(), None
            s.unsent, s.unsent_at, rest = "", base + end, end
        if s.stop_at is None:
            s.unsent += text[rest:]
            starts = [
                state.start
                for tag, state in ((TOOLS_OPEN, s.stops), (RESPONSE_CLOSE, s.closes))
                if tag.scan(state, text, base, rest) >= 0
            ]
            if starts:
                s.stop_at = min(starts)
        sendable = (
            s.stop_at if s.stop_at is not None else s.read - held_back(s.last, _CONTENT_MARKERS)
        )
        content = None
        if sendable > s.body_start:
            s.sent = max(s.sent, s.body_start)
            if sendable > s.sent:
                content = s.unsent[s.sent - s.unsent_at : sendable - s.unsent_at]
                s.sent = sendable
        if s.stop_at is not None:
            s.unsent, s.unsent_at = "", s.read  # no more content unless a response opens
        else:
            keep = max(s.sent, s.body_start)
            s.unsent, s.unsent_at = s.unsent[keep - s.unsent_at :], keep
        return content

    def _calls(self, text: str, base: int) -> list[DeltaToolCall]:
        """The calls whose closing tag this chunk brings, each whole."""
        s = self.state
        if s.channel is not None:
            end = TOOLS_OPEN.scan(s.channel, text, base)
            if end < 0:
                return []
            s.channel = None
            text, base = text[end:], base + end
        calls = []
        for attrs, body in CALLS.feed(s.calls, text, base):
            call = decode_call(attrs, body)
            if call is None:
                continue
            index = s.calls_sent
            s.calls_sent += 1
            calls.append(
                DeltaToolCall(
                    id=chat_tool_call_id(self.id_seed, index),
                    type="function",
                    index=index,
                    name=call[0],
                    arguments=call[1],
                )
            )
        return calls

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        return ""
