"""Reading MiniCPM5's XML calls: ``<function name="N"><param name="K">V</param>...</function>``.

As vLLM 0.33.0's ``minicpm5`` parser reads a block (the text from ``<function`` to the
first ``</function>``): first as XML (the standard library's parser, as vLLM's without
lxml), then, where that fails or names no function, by its tag patterns. A value is
typed by the tool's schema (a string stays one; anything else reads as JSON, else as a
Python literal, else stays text); a key the schema lacks is ignored, an OpenAI-style
``properties``/``arguments`` wrapper is unpacked, a few tau-bench tool names map to the
request's tools (``ALIASES``). A block with a param without a name, a key given twice,
an unknown tool or a required key missing reads as no call.

The tag patterns are read by resumable scanners (``TagScan``, ``ParamScan``,
``MissingNames``) that look at each character a bounded number of times, so a stream can
keep them between chunks; one-shot runs them once over a whole block.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any, NamedTuple

from msgspec import Struct, field

from parsers.growing_text import Text
from parsers.types import ToolSpec

OPEN = "<function"
CLOSE = "</function>"
PARAM = "<param"
PARAM_CLOSE = "</param>"
CDATA = ("<![CDATA[", "]]>")
_QUOTES = "'\""
# The Python values a literal may read as that JSON cannot write: the call then fails.
DUMP_ERRORS = (TypeError, ValueError, RecursionError, OverflowError)
# What ``json.loads`` and ``ast.literal_eval`` raise on text that is not a value (the
# latter's documented list); anything else is a failure of ours, not the model's text.
LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


# ------------------------------------------------------------------ the request's tools


class ToolMaps(NamedTuple):
    """The request's tools as the parser reads them: names, each one's property keys
    and required keys, and its properties' schemas."""

    names: frozenset[str]
    allowed: dict[str, frozenset[str]]
    required: dict[str, frozenset[str]]
    props: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, tools: tuple[ToolSpec, ...]) -> ToolMaps:
        allowed, required, props = {}, {}, {}
        for tool in tools:
            if not tool.name:
                continue
            params = tool.parameters or {}
            props[tool.name] = tool.properties()
            allowed[tool.name] = frozenset(props[tool.name])
            wanted = params.get("required", [])
            try:
                required[tool.name] = frozenset(wanted)
            except TypeError:
                required[tool.name] = frozenset()
        return cls(frozenset(props), allowed, required, props)

    def kind(self, name: str, key: str) -> Any:
        schema = self.props.get(name, {}).get(key)
        return schema.get("type") if isinstance(schema, dict) else None


# ------------------------------------------------------------------ values


def parsed(text: str) -> tuple[Any, bool]:
    """A value's reading: JSON, else a Python literal, else the text (False)."""
    try:
        try:
            return json.loads(text), True
        except json.JSONDecodeError:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                return ast.literal_eval(text), True
    except LITERAL_ERRORS:  # not a literal either: the text stays text
        return text, False


def coerced(tools: ToolMaps, name: str, key: str, value: Any) -> Any:
    if tools.kind(name, key) == "string":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return parsed(value)[0] if isinstance(value, str) else value


def add_argument(
    tools: ToolMaps,
    name: str,
    key: str,
    value: str,
    arguments: dict[str, Any],
    seen: set[str],
) -> bool:
    """Add one param; False when it makes the block no call (a key given twice, a
    wrapper that is not an object)."""
    allowed = tools.allowed.get(name, frozenset())
    if key in ("properties", "arguments") and allowed and key not in allowed:
        wrapped, ok = parsed(value)
        if not ok or not isinstance(wrapped, dict):
            return False
        added = False
        for inner, inner_value in wrapped.items():
            if inner not in allowed:
                continue
            if inner in seen:
                return False
            seen.add(inner)
            arguments[inner] = coerced(tools, name, inner, inner_value)
            added = True
        return added
    if allowed and key not in allowed:
        return True
    if key in seen:
        return False
    seen.add(key)
    arguments[key] = coerced(tools, name, key, value)
    return True


def param_value(raw: str) -> str:
    """A value as the tag patterns read it: a CDATA section's text, else stripped."""
    if raw.startswith(CDATA[0]) and raw.endswith(CDATA[1]):
        return raw[len(CDATA[0]) : -len(CDATA[1])]
    return raw.strip()


# ------------------------------------------------------------------ aliases


def _first(arguments: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if arguments.get(key):
            return arguments[key]
    return arguments.get(keys[-1]) if keys else None


def _id_of(*keys: str) -> Callable[[dict[str, Any]], Any]:
    return lambda arguments: _first(arguments, *keys)


def _phone(arguments: dict[str, Any]) -> dict[str, Any] | None:
    phone = _first(arguments, "phone_number", "phone")
    return None if phone is None else {"phone_number": phone}


def _by_name(arguments: dict[str, Any]) -> dict[str, Any] | None:
    mapped: dict[str, Any] = {}
    if (full := _first(arguments, "full_name", "name")) is not None:
        mapped["full_name"] = full
    if (dob := _first(arguments, "date_of_birth", "dob")) is not None:
        mapped["date_of_birth"] = mapped["dob"] = dob
    return mapped or None


def _details(*keys: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def mapped(arguments: dict[str, Any]) -> dict[str, Any] | None:
        found = _first(arguments, *keys)
        return None if found is None else {"id": found}

    return mapped


def _roaming(enabled: bool) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def mapped(arguments: dict[str, Any]) -> dict[str, Any] | None:
        line = _first(arguments, "line_id", "id")
        return None if line is None else {"line_id": line, "enabled": enabled}

    return mapped


def _refuel(arguments: dict[str, Any]) -> dict[str, Any] | None:
    mapped: dict[str, Any] = {}
    if "customer_id" in arguments:
        mapped["customer_id"] = arguments["customer_id"]
    if (line := _first(arguments, "line_id", "id")) is not None:
        mapped["line_id"] = line
    amount = _first(arguments, "amount_gb", "gb", "gb_amount", "amount")
    if amount is not None:
        mapped["amount_gb"] = amount
    return mapped or None


_Mapper = Callable[[dict[str, Any]], dict[str, Any] | None]
# The model's name -> (the request's tool it stands for, its arguments mapped).
ALIASES: dict[str, tuple[str, _Mapper]] = {
    "get_details_by_phone": ("get_customer_by_phone", _phone),
    "get_details_by_name": ("get_customer_by_name", _by_name),
    "get_line_details": ("get_details_by_id", _details("line_id", "id")),
    "get_line_status": ("get_details_by_id", _details("line_id", "id")),
    "get_roaming_status": ("get_details_by_id", _details("line_id", "id")),
    "get_plan_details": ("get_details_by_id", _details("plan_id", "id")),
    "enable_roaming": ("toggle_roaming", _roaming(True)),
    "disable_roaming": ("toggle_roaming", _roaming(False)),
    "add_refueled_data": ("refuel_data", _refuel),
    "add_data_to_line": ("refuel_data", _refuel),
}


def aliased(name: str, arguments: dict[str, Any], names: frozenset[str]) -> tuple[str, Any]:
    """The request's tool a name not among them stands for, and its arguments."""
    if name in names or name not in ALIASES:
        return name, arguments
    target, mapper = ALIASES[name]
    if target in names and (mapped := mapper(arguments)) is not None:
        return target, mapped
    return name, arguments


# ------------------------------------------------------------------ tag scanners


class TagScan(Struct):
    """One ``<WORD\\s+name=['"]NAME['"]`` tag read a character at a time, then ``>``
    right after the quote (``tight``) or after anything but ``>``. ``start``: where
    the candidate ``<WORD`` is (-1: none yet); ``phase``: how far it has read."""

    start: int = -1
    pos: int = 0
    phase: int = 0
    name_start: int = 0
    name_end: int = 0


# Phases: the first space after the word; more spaces, or the "n" of ``name=``; its
# "ame="; the opening quote; the name's first character; the rest of the name; after
# the closing quote; then done (or failed).
_SPACE, _SPACES = 0, 1
_KEYWORD = 2  # 2..5: "a", "m", "e", "="
_QUOTE, _NAME1, _NAME, _AFTER, DONE, FAILED = 6, 7, 8, 9, 10, 11
_KEYWORD_TEXT = "ame="


def scan_tag(scan: TagScan, text: Text, end: int, tight: bool) -> int:
    """Read ``text`` up to ``end`` into the candidate; its phase (``DONE``: ``pos`` is
    past the tag's ``>``; ``FAILED``: this candidate is none)."""
    if scan.pos >= end or scan.phase >= DONE:
        return scan.phase
    base = scan.pos
    phase = scan.phase
    for i, char in enumerate(text[base:end]):
        if phase == _SPACE:
            phase = _SPACES if char.isspace() else FAILED
        elif phase == _SPACES:
            if char == "n":
                phase = _KEYWORD
            elif not char.isspace():
                phase = FAILED
        elif phase < _QUOTE:
            phase = phase + 1 if char == _KEYWORD_TEXT[phase - _KEYWORD] else FAILED
        elif phase == _QUOTE:
            phase = _NAME1 if char in _QUOTES else FAILED
            scan.name_start = base + i + 1
        elif phase == _NAME1:
            phase = _NAME if char not in _QUOTES else FAILED
        elif phase == _NAME:
            if char in _QUOTES:
                scan.name_end, phase = base + i, _AFTER
        elif char == ">":
            phase = DONE
        elif tight:
            phase = FAILED
        if phase >= DONE:
            scan.pos, scan.phase = base + i + 1, phase
            return phase
    scan.pos, scan.phase = end, phase
    return phase


def next_tag(scan: TagScan, text: Text, end: int, word: str, tight: bool, origin: int) -> bool:
    """Read on to the first ``word`` tag at or after ``origin`` that matches: True once
    found (``scan`` holds it), False while none has (yet)."""
    while True:
        if scan.start < 0:
            found = text.find(word, max(origin, scan.pos), end)
            if found < 0:
                scan.pos = max(origin, scan.pos, end - len(word) + 1)
                return False
            scan.start, scan.pos, scan.phase = found, found + len(word), _SPACE
        phase = scan_tag(scan, text, end, tight)
        if phase == DONE:
            return True
        if phase != FAILED:
            return False
        scan.pos, scan.start = scan.start + 1, -1


class ParamScan(Struct):
    """``<param name=K>V</param>`` elements found left to right, as vLLM's pattern finds
    them: the tag, then the value up to the first ``</param>``. ``close_from``: where
    the search for the open element's closing resumes (-1: its tag is being read)."""

    tag: TagScan = field(default_factory=TagScan)
    close_from: int = -1


def next_param(scan: ParamScan, text: Text, end: int, origin: int) -> tuple[str, str] | None:
    """The next whole element (its key and raw value) in ``text`` up to ``end``."""
    if scan.close_from < 0:
        if not next_tag(scan.tag, text, end, PARAM, tight=True, origin=origin):
            return None
        scan.close_from = scan.tag.pos
    closing = text.find(PARAM_CLOSE, scan.close_from, end)
    if closing < 0:
        scan.close_from = max(scan.tag.pos, end - len(PARAM_CLOSE) + 1)
        return None
    tag = scan.tag
    key = text[tag.name_start : tag.name_end].strip()
    value = text[tag.pos : closing]
    scan.tag = TagScan(pos=closing + len(PARAM_CLOSE))
    scan.close_from = -1
    return key, value


class MissingNames(Struct):
    """vLLM's ``<param(?![^>]*\\bname=)[^>]*>``: a ``<param`` tag with no ``name=`` before
    its ``>``. Only the last ``<param`` since the last ``>`` matters: if it has a
    ``name=`` after it, so have the earlier ones."""

    pos: int = 0
    last: int = -1
    named: bool = False
    found: bool = False


_MARKS = re.compile(r"<param|name=|>")


def scan_missing(scan: MissingNames, text: Text, end: int) -> bool:
    """Read on to ``end``; whether such a tag was found. ``pos``: marks starting before
    it were read (one straddling the end is read next time)."""
    if scan.found or scan.pos >= end:
        return scan.found
    last = -1
    for mark in _MARKS.finditer(text[scan.pos : end]):
        at = scan.pos + mark.start()
        last = at
        if mark.group() == ">":
            if scan.last >= 0 and not scan.named:
                scan.found = True
                return True
            scan.last, scan.named = -1, False
        elif mark.group() == "<param":
            scan.last, scan.named = at, False
        elif scan.last >= 0 and at >= scan.last + 6 and _word_start(text, at):
            scan.named = True
    scan.pos = max(last + 1, end - 5, scan.pos)
    return scan.found


def _word_start(text: Text, at: int) -> bool:
    if at == 0:
        return True
    char = text[at - 1]
    return not (char.isalnum() or char == "_")


# ------------------------------------------------------------------ a whole block


class Block(NamedTuple):
    """What one ``<function ...</function>`` block reads as: a call, or None."""

    name: str
    arguments: dict[str, Any]


def _xml_params(block: str, tools: ToolMaps, arguments: dict[str, Any]) -> tuple[str | None, bool]:
    """The XML reading: the function's name and whether its params were refused
    (``arguments`` filled). Raises where the block is no XML."""
    # The block opens with <function: no DTD (so no entity of its own) can precede it.
    root = ET.fromstring(block)
    node = root if root.tag == "function" else root.find("function")
    if node is None:
        return None, False
    name = (node.attrib.get("name") or "").strip()
    params = node.findall("param")
    wrapper = node.find("arguments")
    if wrapper is not None and not params:
        params = wrapper.findall("param")
    seen: set[str] = set()
    for param in params:
        key = param.attrib.get("name")
        if not key or not add_argument(tools, name, key, param.text or "", arguments, seen):
            arguments.clear()
            return name, True
    return name, False


def _pattern_params(
    block: str, tools: ToolMaps, arguments: dict[str, Any], name: str | None
) -> tuple[str | None, bool]:
    """The tag patterns' reading: the name (the XML one where no tag names one) and
    whether the params were refused."""
    tag = TagScan()
    if next_tag(tag, block, len(block), OPEN, tight=False, origin=0):
        name = block[tag.name_start : tag.name_end].strip()
    refused = scan_missing(MissingNames(), block, len(block))
    seen: set[str] = set()
    scan = ParamScan()
    while not refused and (found := next_param(scan, block, len(block), 0)) is not None:
        key, raw = found
        refused = not add_argument(tools, name or "", key, param_value(raw), arguments, seen)
    if refused:
        arguments.clear()
    return name, refused


def read_block(block: str, tools: ToolMaps) -> Block | None:
    """One block as vLLM reads it: XML first, the tag patterns where that fails."""
    arguments: dict[str, Any] = {}
    name: str | None = None
    refused = False
    try:
        name, refused = _xml_params(block, tools, arguments)
        ok = bool(name)
    except (ET.ParseError, *DUMP_ERRORS):  # not XML, or a value JSON cannot write
        ok = False
    if not ok:
        try:
            name, refused_here = _pattern_params(block, tools, arguments, name)
            refused = refused or refused_here
            ok = bool(name)
        except DUMP_ERRORS:
            ok = False
    if not name or refused:
        return None
    name, arguments = aliased(name, arguments, tools.names)
    required = tools.required.get(name, frozenset())
    if name not in tools.names or not required <= arguments.keys() or not ok:
        return None
    return Block(name, arguments)
