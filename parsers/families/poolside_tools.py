"""Poolside Laguna's tool calls (``poolside_v1``), as vLLM 0.33.0 reads them::

    <tool_call>NAME
    <arg_key>city</arg_key><arg_value>Paris</arg_value>
    </tool_call>

A value is kept as written where the tool's schema types that argument ``string``, else
read as JSON, then as a Python literal, else kept as text. Streamed, a string value goes
out as it arrives (JSON-escaped), any other once its ``</arg_value>`` closes, a key given
twice is dropped, and text outside calls is content (less what may be the start of
``<tool_call>``). When a request asks for logprobs, a chunk that sends nothing sends an
empty content. One-shot, every whole ``<tool_call>``…``</tool_call>`` is read with vLLM's
patterns (matched here by linear scans); content is the text before the first one.
"""

from __future__ import annotations

import ast
import json
import warnings
from typing import Any

from msgspec import Struct, field

from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ParseOptions

CALL = "<tool_call>"
CALL_END = "</tool_call>"
KEY = "<arg_key>"
KEY_END = "</arg_key>"
VALUE = "<arg_value>"
VALUE_END = "</arg_value>"
_LONGEST = len(VALUE_END)


def _deserialize(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _escaped(text: str) -> str:
    """``text`` as it goes inside a JSON string."""
    return _dumps(text)[1:-1] if text else ""


def is_string(options: ParseOptions, tool: str, argument: str) -> bool:
    """Whether the tool's schema types ``argument`` exactly ``string``."""
    spec = options.tool(tool)
    if spec is None or spec.parameters is None:
        return False
    schema = spec.properties().get(argument)
    return isinstance(schema, dict) and schema.get("type") == "string"


# ---------------------------------------------------------------------------- one-shot


def _name_and_args(body: str) -> tuple[str, str | None] | None:
    """vLLM's ``<tool_call>\\s*([^\\n<]+?)\\s*\\n?\\s*(<arg_key>.*?)?</tool_call>`` on
    one call's ``body`` (between the tags): the name and the arguments' markup."""
    lead = len(body) - len(body.lstrip())
    rest = body[lead:]
    stop = len(rest)
    for mark in ("<", "\n"):
        at = rest.find(mark)
        if at != -1:
            stop = min(stop, at)
    name = rest[:stop].rstrip()
    after = rest[len(name) :].lstrip() if name else rest
    if after and not after.startswith(KEY):
        return None
    if not name and not any(c.isspace() and c != "\n" for c in body[:lead]):
        return None
    return name.strip(), after or None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _pairs(markup: str) -> list[tuple[str, str]]:
    """vLLM's ``<arg_key>(.*?)</arg_key>\\s*<arg_value>(.*?)</arg_value>`` found all
    through ``markup``: a key runs to the first ``</arg_key>`` a value follows."""
    last_close = markup.rfind(VALUE_END)
    good: list[int] = []  # where each </arg_key> followed by a value opener starts
    at = markup.find(KEY_END)
    while at != -1:
        opened = _skip_space(markup, at + len(KEY_END)) + len(VALUE)
        if markup.startswith(VALUE, opened - len(VALUE)) and last_close >= opened:
            good.append(at)
        at = markup.find(KEY_END, at + len(KEY_END))
    pairs: list[tuple[str, str]] = []
    pos = g = 0
    while True:
        start = markup.find(KEY, pos)
        if start == -1:
            return pairs
        while g < len(good) and good[g] < start + len(KEY):
            g += 1
        if g == len(good):
            return pairs
        close = good[g]
        opened = _skip_space(markup, close + len(KEY_END)) + len(VALUE)
        end = markup.find(VALUE_END, opened)
        pairs.append((markup[start + len(KEY) : close], markup[opened:end]))
        pos = end + len(VALUE_END)


def extract_calls(text: str, options: ParseOptions) -> ExtractedToolCalls:
    calls: list[FunctionCall] = []
    pos = 0
    try:
        while (start := text.find(CALL, pos)) != -1:
            end = text.find(CALL_END, start + len(CALL))
            if end == -1:
                break
            pos = end + len(CALL_END)
            call = _call(text[start + len(CALL) : end], options)
            if call is not None:
                calls.append(call)
    except (TypeError, ValueError, RecursionError, MemoryError):
        return ExtractedToolCalls(False, [], text)
    if not calls:
        return ExtractedToolCalls(False, [], text)
    before = text[: text.find(CALL)]
    return ExtractedToolCalls(True, calls, before if before.strip() else None)


def _call(inner: str, options: ParseOptions) -> FunctionCall | None:
    # The pattern may match from a later <tool_call> inside (the first one's name fails).
    at = 0
    while True:
        found = _name_and_args(inner[at:])
        if found is not None:
            break
        nxt = inner.find(CALL, at)
        if nxt == -1:
            return None
        at = nxt + len(CALL)
    name, markup = found
    arguments: dict[str, Any] = {}
    for key, value in _pairs(markup or ""):
        key = key.strip()
        arguments[key] = value if is_string(options, name, key) else _deserialize(value.strip())
    return FunctionCall(name, _dumps(arguments))


# ---------------------------------------------------------------------------- streamed


class PoolsideTools:
    """One-shot reading of a whole output's calls."""

    supports_required_and_named = False

    def __init__(self, options: ParseOptions) -> None:
        self.options = options

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content, self.options)


class PoolsideToolState(Struct, tag="poolside_v1_tools"):
    # Text read but not yet done with: it grows while the reader waits for a tag (a
    # name, key or value that does not end), so it is kept as parts, not recopied.
    held: GrowingText = field(default_factory=GrowingText)
    searched: int = 0  # how much of ``held`` holds none of the tags the reader waits for
    in_call: bool = False
    name_sent: bool = False
    name: str = ""
    key: str | None = None  # the key whose value comes next
    in_string: bool = False  # streaming a string value
    args: list[str] = field(default_factory=list)  # per call: the arguments sent
    started: list[bool] = field(default_factory=list)
    closed: list[bool] = field(default_factory=list)
    keys: list[list[str]] = field(default_factory=list)


class PoolsideToolStream:
    engine_based = False
    supports_required_and_named = False

    def __init__(
        self, options: ParseOptions, id_seed: str, logprobs: bool, state: PoolsideToolState
    ) -> None:
        self.options = options
        self.id_seed = id_seed
        self.logprobs = logprobs
        self.s = state

    def finish(self) -> None:
        return None

    def remaining_arguments(self) -> str:
        """What vLLM's last chunk adds: the closers of the last call's arguments."""
        s = self.s
        if not s.args:
            return ""
        last = len(s.args) - 1
        if s.closed[last]:
            return ""
        if not s.started[last]:
            return "{}"
        return ('"' if s.in_string and s.in_call else "") + "}"

    # ------------------------------------------------------------------ reading

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        if not self.options.tools or self.options.tool_choice == "none":
            return Delta(content=text) if text else None
        s = self.s
        s.held.append(text)
        content: list[str] = []
        pieces: dict[int, DeltaToolCall] = {}
        while self._step(content, pieces):
            pass
        calls = list(pieces.values())
        if not content and not calls:
            return Delta(content="") if self.logprobs else None
        return Delta(content="".join(content) if content else None, tool_calls=calls)

    def _take(self, size: int) -> None:
        self._keep(self.s.held[size:])

    def _keep(self, rest: str) -> None:
        """Hold ``rest`` alone: what was held before it is done with."""
        s = self.s
        s.held = GrowingText([rest], len(rest)) if rest else GrowingText()
        s.searched = 0

    def _find(self, tag: str) -> int:
        s = self.s
        return s.held.find(tag, max(0, s.searched - _LONGEST))

    def _wait(self) -> bool:
        """Nothing more until text arrives: what is held holds none of the awaited tags."""
        self.s.searched = len(self.s.held)
        return False

    def _step(self, content: list[str], pieces: dict[int, DeltaToolCall]) -> bool:
        """One move of the reader; False when it waits for more text."""
        s = self.s
        if not s.in_call:
            return self._outside(content)
        if not s.name_sent:
            return self._name(pieces)
        if s.in_string:
            return self._string(pieces)
        if s.key is not None:
            return self._value(pieces)
        return self._next_key(pieces)

    def _outside(self, content: list[str]) -> bool:
        s = self.s
        held = s.held.text()  # a tag's start and this chunk at most: read joined
        start = held.find(CALL)
        if start == -1:
            keep = _tag_start(held, CALL)
            if len(held) > keep:
                content.append(held[: len(held) - keep])
            self._keep(held[len(held) - keep :])
            return False
        if start:
            content.append(held[:start])
        self._keep(held[start + len(CALL) :])
        s.in_call, s.name_sent, s.name, s.key, s.in_string = True, False, "", None, False
        s.args.append("")
        s.started.append(False)
        s.closed.append(False)
        s.keys.append([])
        return True

    def _name(self, pieces: dict[int, DeltaToolCall]) -> bool:
        s = self.s
        ends = [at for at in (self._find("\n"), self._find(KEY), self._find(CALL_END)) if at != -1]
        if not ends:
            return self._wait()
        cut = min(ends)
        name = s.held[:cut].strip()
        if not name and s.held.startswith(CALL_END, cut):
            # <tool_call></tool_call>: no call at all.
            self._take(cut + len(CALL_END))
            s.in_call = False
            for kept in (s.args, s.started, s.closed, s.keys):
                kept.pop()
            return True
        self._take(cut + 1 if s.held[cut] == "\n" else cut)
        s.name, s.name_sent = name, True
        index = len(s.args) - 1
        pieces[index] = opening_call_delta(self.id_seed, index, name, "")
        return True

    def _string(self, pieces: dict[int, DeltaToolCall]) -> bool:
        s = self.s
        held = s.held.text()  # a tag's start and this chunk at most: read joined
        end = held.find(VALUE_END, max(0, s.searched - _LONGEST))
        if end != -1:
            self._arguments(pieces, _escaped(held[:end]) + '"')
            self._keep(held[end + len(VALUE_END) :])
            s.in_string, s.key = False, None
            return True
        safe = len(held) - _tag_start(held, VALUE_END)
        if safe > 0:
            escaped = _escaped(held[:safe])
            self._keep(held[safe:])
            if escaped:
                self._arguments(pieces, escaped)
        return False

    def _value(self, pieces: dict[int, DeltaToolCall]) -> bool:
        s = self.s
        assert s.key is not None
        at = 0 if s.held.startswith(VALUE) else self._find(VALUE)
        if at == -1:
            return self._wait()
        if at:
            self._take(at)
        key = s.key.strip()
        index = len(s.args) - 1
        if is_string(self.options, s.name, key):
            self._take(len(VALUE))
            if key in s.keys[index]:
                s.key = None
                return True
            s.keys[index].append(key)
            opener = "{" if not s.started[index] else ", "
            s.started[index] = True
            s.in_string = True
            self._arguments(pieces, f'{opener}{_dumps(key)}: "')
            return True
        end = self._find(VALUE_END)
        if end == -1:
            return self._wait()
        raw = s.held[len(VALUE) : end].strip()
        self._take(end + len(VALUE_END))
        s.key = None
        if key and key not in s.keys[index]:
            opener = "{" if not s.started[index] else ", "
            s.started[index] = True
            s.keys[index].append(key)
            self._arguments(pieces, f"{opener}{_dumps(key)}: {_value_json(raw)}")
        return True

    def _next_key(self, pieces: dict[int, DeltaToolCall]) -> bool:
        s = self.s
        if s.held.startswith(KEY):  # waiting for its </arg_key>
            end, key = -1, 0
        else:
            end, key = self._find(CALL_END), self._find(KEY)
        if end != -1 and (key == -1 or end < key):
            self._take(end + len(CALL_END))
            index = len(s.args) - 1
            s.in_call = False
            if not s.closed[index]:
                s.closed[index] = True
                if s.started[index]:
                    self._arguments(pieces, "}")
                else:
                    s.args[index] = ""
                    self._arguments(pieces, "{}")
            return True
        if key == -1:
            return self._wait()
        if key:
            self._take(key)
        close = s.held.find(KEY_END, max(len(KEY), s.searched - _LONGEST))
        if close == -1:
            return self._wait()
        s.key = s.held[len(KEY) : close]
        self._take(close + len(KEY_END))
        return True

    def _arguments(self, pieces: dict[int, DeltaToolCall], piece: str) -> None:
        s = self.s
        index = len(s.args) - 1
        grown, s.args[index] = s.args[index], ""
        grown += piece
        s.args[index] = grown
        delta = pieces.get(index)
        if delta is None:
            delta = pieces[index] = DeltaToolCall(index=index, arguments="")
        delta.arguments = (delta.arguments or "") + piece


def _value_json(raw: str) -> str:
    """A value that is not a string, as vLLM writes it: read, then dumped (a value JSON
    cannot write stays the text it was)."""
    value = _deserialize(raw)
    try:
        return _dumps(value)
    except (TypeError, ValueError):
        return _dumps(raw)


def _tag_start(text: str, tag: str) -> int:
    """How many of ``text``'s last characters begin ``tag`` (vLLM's partial tag check)."""
    for size in range(1, len(tag)):
        if text.endswith(tag[:size]):
            return size
    return 0
