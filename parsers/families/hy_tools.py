"""HY-V4's tool calls (``hy_v4``), read as vLLM 0.33.0's parser reads them.

HY-V4 writes its calls in ``<tool_calls>`` as
``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>``, each value
typed by the tool's schema (parsers/families/hy_args.py).

* One-shot, strictly: the first ``<tool_calls>`` to the first ``</tool_calls>``, its call
  tags paired, each call a name and nothing but key/value pairs (whitespace between
  them); anything else and the whole output is content. A key given twice keeps its
  last value.
* Streamed: nothing but content until the ``<tool_calls>`` token; then the text after
  it is a buffer. A call's name goes once its first ``<arg_key>`` (or its end) shows;
  its arguments go as the JSON of the pairs completed so far (a key's first value) plus
  an open string value (for a property typed only ``string``), the closing ``}``
  withheld, sent by length: what grew past what was sent. At ``</tool_call>`` the rest
  of the final JSON goes, again by length. Text outside calls is dropped.

The buffer is the output's own text read from cursors, so a chunk costs what it adds.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.families.hy_args import SchemaError, only_string, parse_value, value_types
from parsers.ids import chat_tool_call_id
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ParseOptions

OPEN, CLOSE = "<tool_calls>", "</tool_calls>"
CALL, CALL_END = "<tool_call>", "</tool_call>"
KEY, KEY_END = "<arg_key>", "</arg_key>"
VALUE, VALUE_END = "<arg_value>", "</arg_value>"
_PAIR_JOIN = KEY_END + VALUE
_FINISH = CALL_END + CLOSE


class Malformed(ValueError):
    """What vLLM's strict reading refuses: the output is content."""


def pairs(text: str) -> tuple[list[tuple[str, str]], bool]:
    """vLLM's ``<arg_key>(.*?)</arg_key><arg_value>(.*?)</arg_value>`` matches, and
    whether anything but whitespace lies outside them."""
    found: list[tuple[str, str]] = []
    outside, pos = False, 0
    while (start := text.find(KEY, pos)) >= 0:
        join = text.find(_PAIR_JOIN, start + len(KEY))
        end = text.find(VALUE_END, join + len(_PAIR_JOIN)) if join >= 0 else -1
        if end < 0:
            break  # no later start can match either
        outside = outside or bool(text[pos:start].strip())
        found.append((text[start + len(KEY) : join], text[join + len(_PAIR_JOIN) : end]))
        pos = end + len(VALUE_END)
    return found, outside or bool(text[pos:].strip())


def _arguments(options: ParseOptions, name: str, found: list[tuple[str, str]]) -> str:
    values: dict[str, Any] = {}
    for key, value in found:
        values[key] = parse_value(value, value_types(options, name, key))
    return json.dumps(values, ensure_ascii=False)


def _strict_calls(output: str, options: ParseOptions) -> list[tuple[str, str]]:
    start, end = output.find(OPEN), output.find(CLOSE)
    if start < 0 or end < 0 or end < start:
        raise Malformed("the call block is not closed")
    block = output[start + len(OPEN) : end]
    opened = block.count(CALL)
    if opened != block.count(CALL_END):
        raise Malformed("call tags do not pair")
    bodies, pos = [], 0
    while (at := block.find(CALL, pos)) >= 0 and (close := block.find(CALL_END, at)) >= 0:
        bodies.append(block[at + len(CALL) : close])
        pos = close + len(CALL_END)
    if len(bodies) != opened:
        raise Malformed("a call body is broken")
    calls = []
    for body in bodies:
        split = body.find(KEY)
        name = (body if split < 0 else body[:split]).strip()
        arguments = "" if split < 0 else body[split:].strip()
        if not name:
            raise Malformed("a call without a name")
        if arguments.count(KEY) != arguments.count(KEY_END) or arguments.count(
            VALUE
        ) != arguments.count(VALUE_END):
            raise Malformed("argument tags do not pair")
        found, outside = pairs(arguments)
        if outside:
            raise Malformed("text outside the argument pairs")
        calls.append((name, _arguments(options, name, found)))
    if not calls:
        raise Malformed("no calls")
    return calls


class HyTools:
    """HY-V4's calls read whole (the module docstring)."""

    supports_required_and_named = False

    def __init__(self, options: ParseOptions) -> None:
        self.options = options

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if OPEN not in content:
            return ExtractedToolCalls(False, [], content)
        try:
            calls = _strict_calls(content, self.options)
        except (Malformed, SchemaError, TypeError, ValueError):
            return ExtractedToolCalls(False, [], content)
        found = [FunctionCall(name, arguments) for name, arguments in calls]
        return ExtractedToolCalls(True, found, content[: content.find(OPEN)] or None)


# ------------------------------------------------------------------ streamed


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _entry(key: str, value: Any) -> str:
    return json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)


def _tag_overlap(text: str, tag: str) -> int:
    """Length of the longest start of ``tag`` that ends ``text`` (vLLM's helper)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class HyCall(Struct):
    """The call being streamed: its arguments as found so far, and what was sent."""

    name: str
    keys: list[str] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    head: str = "{"  # "{" and the completed entries, joined: only grows
    scan: int = 0  # where the next pair's key is looked for
    sent: int = 0  # characters of the argument JSON sent (vLLM counts by length)
    end_from: int = 0  # where </tool_call> is looked for next
    # The pair after the last completed one: its key, and how far its tags were sought.
    key_at: int = -1
    join: int = -1  # its key's end (the pattern's), -1: not yet
    join_from: int = 0
    value_start: int = 0
    end_from_pair: int = 0
    # ... and read as the open value: its first "</arg_key>", its "<arg_value>".
    key_end: int = -1
    key_end_from: int = 0
    value_at: int = -1
    value_from: int = 0
    string_key: bool = False
    escaped: str = ""  # the open value's escaped text up to `escaped_to`
    escaped_to: int = -1


class HyToolState(Struct, tag="hy_tools"):
    opened: bool = False
    buffer: str = ""
    base: int = 0  # the buffer's text starts here
    finish_seen: bool = False
    finish_from: int = 0  # how far the output was searched for </tool_call></tool_calls>
    output: str = ""  # the tail of the output that search still needs
    index: int = -1
    call: HyCall | None = None
    call_from: int = 0  # how far a named call's name was searched for its end


class HyToolStream:
    """HY-V4's calls streamed (the module docstring)."""

    engine_based = False
    supports_required_and_named = False
    spaced_pairs = False  # whitespace may stand between a key and its value
    holds_tag = True  # an open value's end that may be "</arg_value>" waits
    escape = staticmethod(_escaped)  # how an open value's text is written

    def __init__(
        self, options: ParseOptions, id_seed: str, open_id: int | None, state: HyToolState
    ) -> None:
        self.options = options
        self.id_seed = id_seed
        self.open_id = open_id
        self.s = state

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        return ""  # vLLM's final check finds every finished call's arguments sent

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        self._watch_finish(text)
        if not s.opened:
            s.opened = self.open_id is not None and self.open_id in (token_ids or ())
            if not s.opened:
                return Delta(content=text)
        content = None
        if OPEN in text:
            parts = text.split(OPEN)
            content = parts[0] or None
            self._append(parts[-1])
        else:
            self._append(text)
        if s.finish_seen and self._find(CALL_END, 0) < 0:
            self._append(_FINISH)
        calls, content = self._drain(content)
        if content is None and not calls:
            return None
        return Delta(content=content, tool_calls=calls)

    # ------------------------------------------------------------ the buffer

    def _append(self, text: str) -> None:
        s = self.s
        buffer, s.buffer = s.buffer, ""
        buffer += text
        s.buffer = buffer

    def _cut(self, at: int) -> None:
        """The buffer from ``at`` (an offset into it) on; offsets kept are relative."""
        s = self.s
        s.buffer = s.buffer[at:]

    def _find(self, tag: str, start: int) -> int:
        return self.s.buffer.find(tag, start)

    def _watch_finish(self, text: str) -> None:
        """Whether the tool text so far holds ``</tool_call></tool_calls>``."""
        s = self.s
        if s.finish_seen:
            return
        window = s.output + text
        s.finish_seen = _FINISH in window
        s.output = window[-(len(_FINISH) - 1) :]

    # ------------------------------------------------------------ calls

    def _drain(self, content: str | None) -> tuple[list[DeltaToolCall], str | None]:
        """Every call the buffer completes, and the content that goes with them."""
        return self._drain_calls(), content

    def _drain_calls(self) -> list[DeltaToolCall]:
        s = self.s
        calls: list[DeltaToolCall] = []
        while True:
            if s.call is None:
                start = self._find(CALL, 0)
                if start < 0:
                    keep = _tag_overlap(s.buffer, CALL)
                    s.buffer = s.buffer[len(s.buffer) - keep :] if keep else ""
                    return calls
                after = max(start, s.call_from - len(CALL_END) + 1)
                key_at, end_at = self._find(KEY, after), self._find(CALL_END, after)
                if key_at < 0 and end_at < 0:
                    if start:
                        self._cut(start)
                    s.call_from = len(s.buffer)
                    return calls
                s.call_from = 0
                stop = key_at if key_at >= 0 else end_at
                name = s.buffer[start + len(CALL) : stop].strip()
                self._cut(stop)
                s.index += 1
                s.call = HyCall(name)
                call_id = chat_tool_call_id(self.id_seed, s.index)
                if self._find(CALL_END, 0) < 0:
                    calls.append(
                        DeltaToolCall(id=call_id, type="function", index=s.index, name=name)
                    )
                    return calls
                piece = self._arguments(s.call)
                calls.append(
                    DeltaToolCall(
                        id=call_id, type="function", index=s.index, name=name, arguments=piece
                    )
                )
            else:
                piece = self._arguments(s.call)
                if piece:
                    calls.append(DeltaToolCall(index=s.index, arguments=piece))
            if s.call is not None or not s.buffer.startswith(CALL):
                return calls

    def _arguments(self, call: HyCall) -> str | None:
        """What the call's argument JSON grew by (vLLM's diff by length)."""
        s = self.s
        end = s.buffer.find(CALL_END, call.end_from)
        limit = end if end >= 0 else len(s.buffer)
        if end < 0:
            call.end_from = max(call.end_from, len(s.buffer) - len(CALL_END) + 1)
        self._read_pairs(call, limit)
        if end >= 0:
            final = json.dumps(dict(zip(call.keys, call.values, strict=True)), ensure_ascii=False)
            piece = final[call.sent :] if call.sent < len(final) else None
            self._cut(end + len(CALL_END))
            s.call = None
            return piece
        # The arguments so far are the head, the open entry's start and its escaped
        # value: only what is past ``sent`` is copied, never the value whole.
        entry = self._open_entry(call, limit)
        parts = (call.head, entry, call.escaped if entry else "")
        snapshot_end = sum(len(part) for part in parts)
        if snapshot_end <= call.sent:
            return None
        pieces, skip = [], call.sent
        for part in parts:
            if skip < len(part):
                pieces.append(part[skip:])
            skip = max(0, skip - len(part))
        call.sent = snapshot_end
        return "".join(pieces)

    def _read_pairs(self, call: HyCall, limit: int) -> None:
        """Complete the pairs that end before ``limit``; a key's first value stays.

        The pair being read keeps where its key starts, where ``</arg_key><arg_value>``
        was found, and how far its next tag was looked for."""
        buffer = self.s.buffer
        while True:
            if call.key_at < 0:
                start = buffer.find(KEY, call.scan, limit)
                if start < 0:
                    call.scan = max(call.scan, limit - len(KEY) + 1)
                    return
                call.key_at = start
                call.join_from = call.key_end_from = start + len(KEY)
            if call.join < 0 and not self._join(call, buffer, limit):
                return
            end = buffer.find(VALUE_END, call.end_from_pair, limit)
            if end < 0:
                call.end_from_pair = max(call.end_from_pair, limit - len(VALUE_END) + 1)
                return
            key = buffer[call.key_at + len(KEY) : call.join].strip()
            if key not in call.keys:
                value = buffer[call.value_start : end]
                try:
                    parsed = parse_value(value, value_types(self.options, call.name, key))
                except SchemaError:
                    parsed = value
                call.keys.append(key)
                call.values.append(parsed)
                call.head += (", " if len(call.keys) > 1 else "") + _entry(key, parsed)
            call.scan = end + len(VALUE_END)
            call.key_at = call.join = call.key_end = call.value_at = -1
            call.escaped, call.escaped_to = "", -1

    def _join(self, call: HyCall, buffer: str, limit: int) -> bool:
        """Find where the open pair's key ends and its value starts (``False``: not
        yet): ``</arg_key><arg_value>`` as one, or (HY-V3) with whitespace between."""
        if not self.spaced_pairs:
            join = buffer.find(_PAIR_JOIN, call.join_from, limit)
            if join < 0:
                call.join_from = max(call.join_from, limit - len(_PAIR_JOIN) + 1)
                return False
            call.join, call.value_start = join, join + len(_PAIR_JOIN)
            call.end_from_pair = call.value_start
            return True
        while (close := buffer.find(KEY_END, call.join_from, limit)) >= 0:
            at = close + len(KEY_END)
            while at < limit and buffer[at].isspace():
                at += 1
            rest = buffer[at : min(limit, at + len(VALUE))]
            if rest == VALUE:
                call.join, call.value_start = close, at + len(VALUE)
                call.end_from_pair = call.value_start
                return True
            if VALUE.startswith(rest) and at + len(rest) == limit:
                call.join_from = close  # whitespace or the tag may still come
                return False
            call.join_from = close + 1
        call.join_from = max(call.join_from, limit - len(KEY_END) + 1)
        return False

    def _open_entry(self, call: HyCall, limit: int) -> str:
        """The open string value's entry as vLLM writes it (no closing quote), up to its
        value (``call.escaped``, brought up to date here): the first ``</arg_key>`` after
        the open key, the first ``<arg_value>`` after that."""
        buffer = self.s.buffer
        if call.key_at < 0:
            return ""
        if call.key_end < 0:
            call.key_end = buffer.find(KEY_END, call.key_end_from, limit)
            if call.key_end < 0:
                call.key_end_from = max(call.key_end_from, limit - len(KEY_END) + 1)
                return ""
            key = buffer[call.key_at + len(KEY) : call.key_end].strip()
            call.string_key = only_string(self.options, call.name, key)
            call.value_from = call.key_end
        if not call.string_key:
            return ""
        if call.value_at < 0:
            at = buffer.find(VALUE, call.value_from, limit)
            if at < 0:
                call.value_from = max(call.value_from, limit - len(VALUE) + 1)
                return ""
            call.value_at = call.escaped_to = at + len(VALUE)
        keep = limit
        if self.holds_tag:
            keep -= _tag_overlap(buffer[max(call.value_at, limit - 11) : limit], VALUE_END)
        if keep > call.escaped_to:
            escaped, call.escaped = call.escaped, ""  # the only reference: += grows it in place
            escaped += self.escape(buffer[call.escaped_to : keep])
            call.escaped, call.escaped_to = escaped, keep
        key = buffer[call.key_at + len(KEY) : call.key_end].strip()
        lead = ", " if call.keys else ""
        return f'{lead}{json.dumps(key, ensure_ascii=False)}: "'


# ------------------------------------------------------------------ HY-V3


SEP = "<tool_sep>"


def spaced_pairs(text: str) -> list[tuple[str, str]]:
    """vLLM's ``<arg_key>(.*?)</arg_key>\\s*<arg_value>(.*?)</arg_value>`` matches."""
    found: list[tuple[str, str]] = []
    pos = 0
    while (start := text.find(KEY, pos)) >= 0:
        close, value_at = text.find(KEY_END, start + len(KEY)), -1
        while close >= 0:
            at = close + len(KEY_END)
            while at < len(text) and text[at].isspace():
                at += 1
            if text.startswith(VALUE, at):
                value_at = at + len(VALUE)
                break
            close = text.find(KEY_END, close + 1)
        end = text.find(VALUE_END, value_at) if value_at >= 0 else -1
        if end < 0:
            break  # no later start can match either
        found.append((text[start + len(KEY) : close], text[value_at:end]))
        pos = end + len(VALUE_END)
    return found


def _v3_bodies(output: str) -> list[tuple[str, str]]:
    """``(name, arguments)`` as vLLM's two patterns find them: every closed call, then
    an open one after the last ``</tool_call>`` (or in the whole text, if none closed)."""
    found: list[tuple[str, str]] = []
    pos = 0
    while (start := output.find(CALL, pos)) >= 0:
        sep = output.find(SEP, start + len(CALL))
        end = output.find(CALL_END, sep + len(SEP)) if sep >= 0 else -1
        if end < 0:
            break
        found.append((output[start + len(CALL) : sep], output[sep + len(SEP) : end]))
        pos = end + len(CALL_END)
    rest = output[output.rfind(CALL_END) + len(CALL_END) :] if found else output
    start = rest.find(CALL)
    sep = rest.find(SEP, start + len(CALL)) if start >= 0 else -1
    if sep >= 0:
        found.append((rest[start + len(CALL) : sep], rest[sep + len(SEP) :]))
    return found


def v3_calls(output: str, options: ParseOptions) -> list[tuple[str, str]]:
    """HY-V3's calls; none at all where vLLM's reading raises."""
    calls = []
    try:
        for name, body in _v3_bodies(output):
            name = name.strip()
            values: dict[str, Any] = {}
            for key, value in spaced_pairs(body.strip()):
                values[key] = parse_value(value, value_types(options, name, key))
            calls.append((name, json.dumps(values, ensure_ascii=False)))
    except (SchemaError, TypeError, ValueError):
        return []
    return calls


class HyV3Tools:
    """HY-V3's calls read whole: once ``<tool_calls>`` shows, whatever calls are found
    (maybe none), the content the text before it."""

    supports_required_and_named = True

    def __init__(self, options: ParseOptions) -> None:
        self.options = options

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if OPEN not in content:
            return ExtractedToolCalls(False, [], content)
        calls = [
            FunctionCall(name, arguments) for name, arguments in v3_calls(content, self.options)
        ]
        return ExtractedToolCalls(True, calls, content[: content.find(OPEN)] or None)


def _v3_escaped(text: str) -> str:
    """HY-V3's own escaping of an open value (only these five characters)."""
    return (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )


class HyV3ToolStream(HyToolStream):
    """HY-V3's calls streamed: HY-V4's steps, but a call's name ends at ``<tool_sep>``,
    one call streams per chunk (the calls after it that the chunk completes go whole),
    whitespace may stand between a key and its value, an open value is escaped by its
    own rule and sent to the end of the text, and content that shares a chunk with an
    argument step is dropped, as in vLLM."""

    supports_required_and_named = True
    spaced_pairs = True
    holds_tag = False
    escape = staticmethod(_v3_escaped)

    def _drain(self, content: str | None) -> tuple[list[DeltaToolCall], str | None]:
        s = self.s
        named: DeltaToolCall | None = None
        if s.call is None:
            start = self._find(CALL, 0)
            if start < 0:
                if content is None:
                    s.buffer = ""
                return [], content
            sep = self._find(SEP, max(0, s.call_from - len(SEP) + 1))
            if sep < 0:
                if start:
                    self._cut(start)
                s.call_from = len(s.buffer)
                return [], content
            name = s.buffer[start + len(CALL) : sep].strip()
            self._cut(sep + len(SEP))
            s.call_from, s.index = 0, s.index + 1
            s.call = HyCall(name)
            call_id = chat_tool_call_id(self.id_seed, s.index)
            named = DeltaToolCall(id=call_id, type="function", index=s.index, name=name)
            if self._find(CALL_END, 0) < 0:
                return [named], content
        index = s.index
        piece = self._arguments(s.call)
        calls: list[DeltaToolCall] = []
        if named is not None:
            named.arguments = piece
            calls.append(named)
        else:
            content = None
            if piece:
                calls.append(DeltaToolCall(index=index, arguments=piece))
        if s.call is None:
            calls += self._whole_calls()
        return calls, content

    def _whole_calls(self) -> list[DeltaToolCall]:
        """The calls the buffer holds complete after the streamed one, each whole."""
        s = self.s
        calls = []
        while (start := self._find(CALL, 0)) >= 0 and (end := self._find(CALL_END, start)) >= 0:
            text = s.buffer[start : end + len(CALL_END)]
            self._cut(end + len(CALL_END))
            for name, arguments in v3_calls(text, self.options):
                s.index += 1
                call_id = chat_tool_call_id(self.id_seed, s.index)
                calls.append(
                    DeltaToolCall(
                        id=call_id, type="function", index=s.index, name=name, arguments=arguments
                    )
                )
        return calls
