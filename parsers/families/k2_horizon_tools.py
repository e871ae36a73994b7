"""K2 Horizon's calls (``k2_horizon`` tools): one IFM group of calls, in the format the
kwarg ``tool_call_format`` names (``xml``, the default, ``xml_typed`` or ``json``)::

    <ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>
    <ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>

A call is its function's name then its arguments (``xml_typed`` gives each an
``<ifm|arg_type>``), or one JSON object with ``name`` and ``arguments``; values are typed
by the tool's schema (an explicit type picks among the schema's). The group is all or
nothing: a name the request lacks (or not the named tool_choice), a malformed argument,
a duplicate key or text between calls leaves the whole group as content. As vLLM 0.33.0
streams it, the calls go out whole when the group closes; content before it goes out
once it holds more than whitespace (a blank start is dropped), held back while its end
may grow into the group's opener. vLLM keeps the whole text and searches it for the
group's closer at every chunk; here only the open group is kept, and its closer is
looked for in what each chunk adds.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from msgspec import Struct, field

from parsers.families.kimi_k3_markup import SPACE, held_back, tail_of
from parsers.ids import chat_tool_call_id
from parsers.readers.schema import coerce_string, schema_types
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    OutputRefused,
    ParseOptions,
)

GROUP_START = "<ifm|tool_calls>"
GROUP_END = "</ifm|tool_calls>"
CALL_START = "<ifm|tool_call>"
CALL_END = "</ifm|tool_call>"
KEY_START, KEY_END = "<ifm|arg_key>", "</ifm|arg_key>"
TYPE_START, TYPE_END = "<ifm|arg_type>", "</ifm|arg_type>"
VALUE_START, VALUE_END = "<ifm|arg_value>", "</ifm|arg_value>"
_ARG_MARKERS = (KEY_START, KEY_END, TYPE_START, TYPE_END, VALUE_START, VALUE_END)
FORMATS = ("json", "xml", "xml_typed")


def tool_format(options: ParseOptions) -> str:
    """The request's call format; vLLM refuses any other (a 400)."""
    fmt = options.chat_template_kwargs.get("tool_call_format", "xml")
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise OutputRefused(
            f"Unsupported tool_call_format {fmt!r}. Supported values: {', '.join(FORMATS)}."
        )
    return fmt


def _occurrences(text: str, marker: str) -> list[int]:
    found = []
    at = text.find(marker)
    while at >= 0:
        found.append(at)
        at = text.find(marker, at + len(marker))
    return found


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in SPACE:
        at += 1
    return at


def _first_from(positions: list[int], at: int) -> int | None:
    index = bisect_left(positions, at)
    return positions[index] if index < len(positions) else None


def arguments(body: str, start: int) -> Iterator[tuple[int, int, str, str | None, str]]:
    """vLLM's argument pattern's matches from ``start`` (``KEY_START (.*?) KEY_END \\s*
    (?:TYPE_START (.*?) TYPE_END \\s*)? VALUE_START (.*?) VALUE_END``, leftmost first,
    the lazy groups as short as the rest allows): start, end, key, type, value. Each
    marker's places are found once, so this is linear where the regex backtracks."""
    last_value_end = body.rfind(VALUE_END)

    def value_after(at: int) -> bool:
        return body.startswith(VALUE_START, at) and last_value_end >= at + len(VALUE_START)

    typed = [
        t for t in _occurrences(body, TYPE_END) if value_after(_skip_space(body, t + len(TYPE_END)))
    ]

    def after_key(k: int) -> bool:
        at = _skip_space(body, k + len(KEY_END))
        if body.startswith(VALUE_START, at):
            return last_value_end >= at + len(VALUE_START)
        return (
            body.startswith(TYPE_START, at) and _first_from(typed, at + len(TYPE_START)) is not None
        )

    keys = [k for k in _occurrences(body, KEY_END) if after_key(k)]
    at = start
    while (begin := body.find(KEY_START, at)) >= 0:
        key_end = _first_from(keys, begin + len(KEY_START))
        if key_end is None:
            return
        place = _skip_space(body, key_end + len(KEY_END))
        kind = None
        if not body.startswith(VALUE_START, place):
            type_end = _first_from(typed, place + len(TYPE_START))
            assert type_end is not None
            kind = body[place + len(TYPE_START) : type_end]
            place = _skip_space(body, type_end + len(TYPE_END))
        value_start = place + len(VALUE_START)
        value_end = body.find(VALUE_END, value_start)
        end = value_end + len(VALUE_END)
        yield begin, end, body[begin + len(KEY_START) : key_end], kind, body[value_start:value_end]
        at = end


def _name(name: Any, options: ParseOptions) -> str:
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise ValueError("IFM tool call has an invalid function name.")
    if options.tools and options.tool(name) is None:
        raise ValueError(f"Unknown IFM tool name: {name}.")
    if options.named_tool is not None and name != options.named_tool:
        raise ValueError(f"Unexpected IFM tool name: {name}.")
    return name


def _properties(options: ParseOptions, name: str) -> dict[str, Any]:
    tool = options.tool(name)
    return tool.properties() if tool is not None else {}


def _json_value(value: Any, schema: Any) -> Any:
    if not isinstance(schema, dict):
        return value
    raw = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=False)
    )
    return coerce_string(raw, schema_types(schema))


def _xml_value(value: str, schema: Any, explicit: str | None) -> Any:
    base = explicit.split("[", 1)[0].strip().lower() if explicit else None
    targets = schema_types(schema)
    if isinstance(schema, dict):
        if base in targets and len(set(targets)) > 1:
            targets = [base]
    elif base == "any":
        return value
    elif base:
        targets = [base]
    return coerce_string(value if "string" in targets else value.strip(), targets)


def _json_call(body: str, options: ParseOptions) -> tuple[str, dict[str, Any]]:
    call = json.loads(body.strip())
    if not isinstance(call, dict):
        raise ValueError("IFM JSON tool call must be an object.")
    name = _name(call.get("name"), options)
    args = call.get("arguments", {})
    if not isinstance(args, dict):
        raise ValueError("IFM JSON tool-call arguments must be an object.")
    properties = _properties(options, name)
    return name, {key: _json_value(value, properties.get(key)) for key, value in args.items()}


def _xml_call(body: str, options: ParseOptions, fmt: str) -> tuple[str, dict[str, Any]]:
    first = body.find(KEY_START)
    if first < 0:
        if any(marker in body for marker in _ARG_MARKERS):
            raise ValueError("Malformed IFM XML argument tags.")
        return _name(body.strip(), options), {}
    name = _name(body[:first].strip(), options)
    properties = _properties(options, name)
    args: dict[str, Any] = {}
    position = first
    for begin, end, raw_key, kind, value in arguments(body, first):
        key = raw_key.strip()
        if body[position:begin].strip() or not key or key in args:
            raise ValueError("Malformed IFM XML argument tags.")
        explicit = kind.strip() if kind is not None else None
        if (fmt == "xml" and explicit is not None) or (fmt == "xml_typed" and not explicit):
            raise ValueError("IFM XML argument type tags do not match the format.")
        args[key] = _xml_value(value, properties.get(key), explicit)
        position = end
    if position == first or body[position:].strip():
        raise ValueError("Malformed IFM XML argument tags.")
    return name, args


def _group_calls(group: str) -> list[str] | None:
    """The group's call bodies; None when text other than whitespace is between them."""
    bodies: list[str] = []
    between: list[str] = []
    at = 0
    while (begin := group.find(CALL_START, at)) >= 0:
        end = group.find(CALL_END, begin + len(CALL_START))
        if end < 0:
            break
        between.append(group[at:begin])
        bodies.append(group[begin + len(CALL_START) : end])
        at = end + len(CALL_END)
    between.append(group[at:])
    return bodies if bodies and not "".join(between).strip() else None


def _blank_none(text: str) -> str | None:
    return text if text.strip() else None


def extract_calls(text: str, options: ParseOptions) -> ExtractedToolCalls:
    """Calls and content of a whole output (vLLM's ``extract_tool_calls``)."""
    fmt = tool_format(options)
    if options.tool_choice == "none":
        return ExtractedToolCalls(False, [], _blank_none(text))
    start = text.find(GROUP_START)
    end = text.find(GROUP_END, start + len(GROUP_START)) if start >= 0 else -1
    bodies = _group_calls(text[start + len(GROUP_START) : end]) if end >= 0 else None
    if bodies is None:
        return ExtractedToolCalls(False, [], _blank_none(text))
    calls = []
    try:
        for body in bodies:
            name, args = (
                _json_call(body, options) if fmt == "json" else _xml_call(body, options, fmt)
            )
            calls.append(FunctionCall(name, json.dumps(args, ensure_ascii=False, allow_nan=False)))
    except (ValueError, TypeError, RecursionError):
        return ExtractedToolCalls(False, [], _blank_none(text))
    rest = text[:start] + text[end + len(GROUP_END) :]
    return ExtractedToolCalls(True, calls, _blank_none(rest))


class K2HorizonTools:
    """``k2_horizon`` calls read from a whole output."""

    supports_required_and_named = False

    def __init__(self, options: ParseOptions) -> None:
        self.options = options

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content, self.options)


class K2HorizonToolState(Struct, tag="k2_horizon_tools"):
    """Content not yet sent (a blank start, a tail that may open the group), the open
    group's text, and whether the group was read."""

    blank: list[str] = field(default_factory=list)  # content held while only whitespace
    content_seen: bool = False
    held: str = ""  # an end that may grow into the group's opener
    group: list[str] | None = None  # the open group's text, from its opener
    group_size: int = 0  # its length
    resolved: bool = False


class K2HorizonToolStream:
    """``k2_horizon`` calls streamed as vLLM 0.33.0 streams them."""

    engine_based = True
    supports_required_and_named = False

    def __init__(self, options: ParseOptions, id_seed: str, state: K2HorizonToolState) -> None:
        self.options = options
        self.id_seed = id_seed
        self.state = state

    def _emit(self, text: str, final: bool = False) -> str | None:
        """Content, once it holds more than whitespace (vLLM's ``_emit_content``)."""
        s = self.state
        if text:
            if s.content_seen:
                return text
            # What is held is all whitespace: this text alone decides (and a run of
            # blank chunks is kept as pieces, not copied and stripped again per chunk).
            if text.strip():
                s.content_seen = True
                out = "".join([*s.blank, text])
                s.blank = []
                return out
            s.blank.append(text)
        if final:
            s.blank = []
        return None

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        tool_format(self.options)
        s = self.state
        if self.options.tool_choice == "none" or s.resolved:
            passed = self._emit(text)
            return Delta(content=passed) if passed is not None else None
        content: str | None = None
        if s.group is None:
            pending = s.held + text
            start = pending.find(GROUP_START)
            if start < 0:
                cut = len(pending) - held_back(pending, (GROUP_START,))
                s.held = pending[cut:]
                content = self._emit(pending[:cut])
                return Delta(content=content) if content is not None else None
            content = self._emit(pending[:start])
            s.held, s.group, s.group_size, text = "", [], 0, pending[start:]
        group = s.group
        seen = tail_of(group, len(GROUP_END) - 1)
        # The closer is looked for from the body's start, in the group's last characters
        # and this chunk.
        body = len(GROUP_START) - s.group_size + len(seen)
        at = (seen + text).find(GROUP_END, max(body, 0))
        if at < 0:
            if text:  # empty pieces would lengthen every later walk back for the tail
                group.append(text)
                s.group_size += len(text)
            return Delta(content=content) if content is not None else None
        cut = at - len(seen) + len(GROUP_END)
        group.append(text[:cut])
        whole, after = "".join(group), text[cut:]
        s.group, s.resolved = None, True
        found = extract_calls(whole, self.options)
        if not found.tools_called:
            rest = self._emit(whole + after)
            joined = (content or "") + (rest or "")
            return Delta(content=joined) if joined else None
        calls = [
            DeltaToolCall(
                id=chat_tool_call_id(self.id_seed, index),
                type="function",
                index=index,
                name=call.name,
                arguments=call.arguments,
            )
            for index, call in enumerate(found.calls)
        ]
        suffix = self._emit(after)
        return Delta(content=(content or "") + (suffix or "") or None, tool_calls=calls)

    def finish(self) -> Delta | None:
        s = self.state
        if s.resolved:
            self._emit("", final=True)
            return None
        rest = s.held + "".join(s.group or [])
        s.held, s.group, s.resolved = "", None, True
        content = self._emit(rest, final=True)
        return Delta(content=content) if content is not None else None

    def remaining_arguments(self) -> str:
        return ""
