"""DSML call bodies to JSON arguments, as vLLM's DSML converter reads them, in linear time.

A DSML call body is parameters::

    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="count" string="false">5</｜DSML｜parameter>

A value with ``string="true"`` is taken as written; any other value is JSON if it
parses, else its text. A value ends at the closing tag or where the next parameter
opens. While a call streams, its still-open last parameter counts too, if it is a
string or already parses. The object is then unwrapped (a lone ``arguments`` or
``input`` parameter that the tool does not declare, holding an object of declared
keys, stands for that object) and typed by the tool's schema.

vLLM re-runs that conversion over the whole body at every ``>`` the body receives
(quadratic in a long body). Here the body is scanned once per character
(``ParamScan``), each finished parameter's JSON entry is written once, and an open
string value streams by escaping only what it adds.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from msgspec import Struct, field

from parsers.growing_text import Text
from parsers.readers.jsonscan import JsonScanner, JsonScanState
from parsers.readers.schema import coerce_value, schema_types

_WRAPPERS = ("arguments", "input")
_NAME_KEYWORD = 'name="'
_STRING_KEYWORD = 'string="'

# ParamScan phases.
_SEEK, _HEAD, _VALUE = "seek", "head", "value"
# Head steps after the opening literal.
_GAP, _KEYWORD, _NAME, _AFTER_NAME, _STR_KEYWORD, _STR_VALUE, _AFTER_STR = range(7)


class Dialect(NamedTuple):
    """One DSML spelling of the parameter tags."""

    param_start: str
    param_close: str


def _ends_inside(raw: Text, at: int, literal: str) -> bool:
    """Whether ``raw`` from ``at`` on is a prefix of ``literal`` (so may still grow into it).

    Only a tail shorter than the literal is copied: slicing the whole rest at each
    ``<`` would read the text again per candidate, quadratic in a storm of them.
    """
    return len(raw) - at <= len(literal) and literal.startswith(raw[at:])


class Param(NamedTuple):
    name: str
    is_string: bool
    value: str


class ParamScan(Struct):
    """vLLM's parameter pattern, matched a character at a time over the growing body.

    The head is ``START\\s+name="N"(\\s+string="S")?\\s*>``; its value runs lazily
    to the closing tag or to the next ``START\\s+name=``. A head that fails restarts
    the search just past its ``<``, as a regex search would; only a ``<`` starts a
    head or an end, and only one candidate is live at a time.
    """

    phase: str = _SEEK
    pos: int = 0  # the next character to read
    start: int = -1  # the live candidate's ``<`` (a value's end: -1 while searching)
    step: int = 0
    index: int = 0  # progress through a keyword
    gap: int = 0  # whitespace characters in the current gap
    name_start: int = 0
    name_end: int = 0
    string_start: int = -1
    string_end: int = -1
    value_start: int = 0
    json: JsonScanState = field(default_factory=JsonScanState)
    json_fed: int = 0

    def advance(self, raw: Text, dialect: Dialect) -> list[Param]:
        """The parameters ``raw`` completes since the last call."""
        found: list[Param] = []
        size = len(raw)
        waiting = False
        while self.pos < size and not waiting:
            if self.phase == _SEEK:
                waiting = self._seek(raw, dialect)
            elif self.phase == _HEAD:
                self._head(raw)
            else:
                param, waiting = self._value(raw, dialect)
                if param is not None:
                    found.append(param)
        if self.phase == _VALUE and self.json_fed < size:
            JsonScanner(self.json).feed(raw[self.json_fed :])
            self.json_fed = size
        return found

    def open_start(self) -> int:
        """Where the open last parameter's value starts (-1: none is open)."""
        return self.value_start if self.phase == _VALUE else -1

    def open_head(self, raw: Text) -> tuple[str, bool, bool] | None:
        """The open last parameter's name, whether it is a string, and whether its text
        so far may be one JSON value (its text is not read)."""
        if self.phase != _VALUE:
            return None
        name, is_string = self._name_and_kind(raw)
        return name, is_string, JsonScanner(self.json).complete

    def open_param(self, raw: Text) -> tuple[Param, bool] | None:
        """The open last parameter, and whether its text so far may be one JSON value."""
        head = self.open_head(raw)
        if head is None:
            return None
        name, is_string, complete = head
        return Param(name, is_string, raw[self.value_start :]), complete

    def _name_and_kind(self, raw: Text) -> tuple[str, bool]:
        is_string = self.string_start >= 0 and raw[self.string_start : self.string_end] == "true"
        return raw[self.name_start : self.name_end], is_string

    def _seek(self, raw: Text, dialect: Dialect) -> bool:
        literal = dialect.param_start
        at = raw.find(literal[0], self.pos)
        if at < 0:
            self.pos = len(raw)
            return False
        self.pos = at
        if raw.startswith(literal, at):
            self.phase, self.start, self.step, self.gap = _HEAD, at, _GAP, 0
            self.pos = at + len(literal)
            return False
        if _ends_inside(raw, at, literal):
            return True  # may still grow into the literal
        self.pos = at + 1
        return False

    def _fail(self) -> None:
        self.phase, self.pos = _SEEK, self.start + 1

    def _head(self, raw: Text) -> None:
        """One character of the head after its literal."""
        ch = raw[self.pos]
        step = self.step
        if step in (_GAP, _AFTER_NAME, _AFTER_STR):
            if ch.isspace():
                self.gap += 1
            elif step == _GAP:
                if not self.gap or ch != _NAME_KEYWORD[0]:
                    return self._fail()
                self.step, self.index = _KEYWORD, 1
            elif ch == ">":
                if step == _AFTER_NAME:
                    self.string_start = self.string_end = -1
                self.phase, self.start = _VALUE, -1
                self.value_start = self.json_fed = self.pos + 1
                self.json = JsonScanState()
            elif step == _AFTER_NAME and self.gap and ch == _STRING_KEYWORD[0]:
                self.step, self.index = _STR_KEYWORD, 1
            else:
                return self._fail()
        elif step in (_KEYWORD, _STR_KEYWORD):
            keyword = _NAME_KEYWORD if step == _KEYWORD else _STRING_KEYWORD
            if ch != keyword[self.index]:
                return self._fail()
            self.index += 1
            if self.index == len(keyword):
                if step == _KEYWORD:
                    self.step, self.name_start = _NAME, self.pos + 1
                else:
                    self.step, self.string_start = _STR_VALUE, self.pos + 1
        elif ch == '"':
            if step == _NAME:
                if self.pos == self.name_start:
                    return self._fail()
                self.step, self.name_end, self.gap = _AFTER_NAME, self.pos, 0
            else:
                self.step, self.string_end, self.gap = _AFTER_STR, self.pos, 0
        self.pos += 1
        return None

    def _value(self, raw: Text, dialect: Dialect) -> tuple[Param | None, bool]:
        """Look on for the open value's end: (the completed parameter, waiting for text)."""
        size = len(raw)
        if self.start < 0:
            at = raw.find("<", self.pos)
            if at < 0:
                self.pos = size
                return None, False
            self.start = self.pos = at
        at = self.start
        close, opener = dialect.param_close, dialect.param_start
        if raw.startswith(close, at):
            return self._complete(raw, at, at + len(close)), False
        if raw.startswith(opener, at):
            gap_start = at + len(opener)
            cursor = max(self.pos, gap_start)
            while cursor < size and raw[cursor].isspace():
                cursor += 1
            self.pos = cursor
            if cursor == size:
                return None, True  # whitespace may go on
            if cursor > gap_start:
                if raw.startswith("name=", cursor):
                    return self._complete(raw, at, at), False
                if _ends_inside(raw, cursor, "name="):
                    return None, True
        elif _ends_inside(raw, at, close) or _ends_inside(raw, at, opener):
            return None, True
        self.start, self.pos = -1, at + 1
        return None, False

    def _complete(self, raw: Text, value_end: int, resume: int) -> Param:
        name, is_string = self._name_and_kind(raw)
        self.phase, self.pos, self.start = _SEEK, resume, -1
        return Param(name, is_string, raw[self.value_start : value_end])


# ---------------------------------------------------------------------------- values


def _loads(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def param_value(param: Param) -> Any:
    """vLLM's reading of a value: the text, or its JSON when not marked a string."""
    if param.is_string:
        return param.value
    ok, value = _loads(param.value)
    return value if ok else param.value


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # parsed, but too deep to write back
        return json.dumps(str(value), ensure_ascii=False)


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class Schema:
    """The called tool's declared properties ({} without tools or for an unknown tool)."""

    def __init__(self, properties: dict[str, Any]) -> None:
        self.properties = properties

    def entry(self, key: str, value: Any) -> str:
        """One ``"key": value`` of the arguments, typed by the key's schema."""
        schema = self.properties.get(key)
        if isinstance(schema, dict):
            value = coerce_value(value, schema)
        return _dumps(key) + ": " + _dumps(value)

    def unwrapped(self, keys: list[str], values: list[Any]) -> tuple[list[str], list[str]] | None:
        """The keys and entries of a wrapped object, when a lone wrapper parameter holds one."""
        if not self.properties or len(keys) != 1:
            return None
        key, inner = keys[0], values[0]
        if key not in _WRAPPERS or key in self.properties:
            return None
        if isinstance(inner, str):
            ok, inner = _loads(inner)
            if not ok:
                return None
        if not isinstance(inner, dict) or not set(inner).issubset(self.properties):
            return None
        return list(inner), [self.entry(k, v) for k, v in inner.items()]

    def head(self, entry: str, key: str) -> tuple[str, bool]:
        """What of the last entry later text cannot change, and whether it ends in an open string.

        The key and colon; the open text of a string value too when the key can only
        be a string (compared JSON-escaped, as vLLM compares it).
        """
        colon_end = len(_dumps(key)) + 2
        streams = True
        if self.properties:
            schema = self.properties.get(_escaped(key))
            streams = schema is not None and set(schema_types(schema)) == {"string"}
        if streams and entry[colon_end : colon_end + 1] == '"':
            return entry[:-1], True
        return entry[:colon_end], False


def arguments_json(raw: Text, dialect: Dialect, schema: Schema) -> str:
    """A finished body's arguments (one-shot, and at a call's end): closed parameters only."""
    keys: list[str] = []
    values: list[Any] = []
    positions: dict[str, int] = {}
    for param in ParamScan().advance(raw, dialect):
        position = positions.setdefault(param.name, len(keys))
        if position == len(keys):
            keys.append(param.name)
            values.append(param_value(param))
        else:
            values[position] = param_value(param)
    unwrapped = schema.unwrapped(keys, values)
    if unwrapped is not None:
        entries = unwrapped[1]
    else:
        entries = [schema.entry(k, v) for k, v in zip(keys, values, strict=True)]
    return "{" + ", ".join(entries) + "}"


class ArgsState(Struct):
    """What one call's streamed arguments have read and sent.

    Finished parameters are kept with their typed JSON entry, one per key (a
    repeated key keeps its first place and takes the last value). What was sent is
    the entries it covers plus the head of the next one (and the pieces an open value
    streamed past it, ``streamed``); ``stale`` counts covered entries that no longer
    read as sent.
    """

    scan: ParamScan = field(default_factory=ParamScan)
    params: list[Param] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    sent_entries: list[str] = field(default_factory=list)
    sent_tail: str = ""
    # Joined to sent_tail when it is next read (appending to a long string held by a
    # struct copies it every time).
    streamed: list[str] = field(default_factory=list)
    sent_length: int = 0
    stale: int = 0
    version: int = 0  # parameters completed so far
    # An open string value being streamed: its start, and how far it was sent.
    streaming_from: int = -1
    streamed_to: int = 0
    # What the last conversion saw: the version, the open parameter's start (-1:
    # none) and how it counted (0 not, 1 as text or partial, 2 as a whole JSON value).
    seen_version: int = -1
    seen_open: int = -1
    seen_mode: int = 0


class _View:
    """The entries of one conversion: the kept ones with the open parameter laid over
    or after them, or a whole other list (unwrapped)."""

    def __init__(self, base: list[str], keys: list[str] | None) -> None:
        self.base = base
        self.keys = keys
        self.over = -1
        self.over_entry = ""
        self.extra: str | None = None
        self.extra_key = ""

    def __len__(self) -> int:
        return len(self.base) + (self.extra is not None)

    def __getitem__(self, i: int) -> str:
        if i == self.over:
            return self.over_entry
        if i == len(self.base) and self.extra is not None:
            return self.extra
        return self.base[i]


class ArgsStream:
    """vLLM's streamed DSML arguments for one call: JSON prefixes as the body grows."""

    def __init__(self, state: ArgsState, dialect: Dialect, schema: Schema) -> None:
        self.s = state
        self.dialect = dialect
        self.schema = schema

    def piece(self, raw: Text, delta: str) -> str | None:
        """The arguments text that ``delta``, just appended to ``raw``, adds.

        As in vLLM, only a delta with a ``>`` in it converts the body again. A
        conversion that would read exactly what the last one read adds nothing.
        """
        s = self.s
        self._read(raw)
        if ">" not in delta:
            return None
        start = s.scan.open_start()
        if s.version == s.seen_version and start >= 0 and start == s.streaming_from:
            # Only the text since the last piece is read (the open value is not copied).
            piece = _escaped(raw[s.streamed_to :])
            s.streamed_to = len(raw)
            if piece:
                s.streamed.append(piece)
            s.sent_length += len(piece)
            return piece or None
        # The open value's text is read only once the conversion is known to read it.
        open_head = s.scan.open_head(raw)
        mode = 0
        if open_head is not None and (open_head[1] or open_head[2]):
            mode = 2 if open_head[2] else 1
        overlays = open_head is not None and mode and open_head[0] in s.positions
        if (s.version, start, mode) == (s.seen_version, s.seen_open, s.seen_mode) and not overlays:
            return None
        s.seen_version, s.seen_open, s.seen_mode = s.version, start, mode
        opened = s.scan.open_param(raw) if mode else None
        view = self._view(opened)
        if len(view) == 0:
            return None
        last = len(view) - 1
        if view.keys is not None:
            key = view.keys[last]
        elif view.extra is not None:
            key = view.extra_key
        else:
            key = s.params[last].name
        head, open_string = self.schema.head(view[last], key)
        extended = self._extend(view, head)
        streams = (
            extended is not None
            and open_string
            and view.extra is not None
            and view.keys is None
            and opened is not None
            and opened[0].is_string
        )
        s.streaming_from = start if streams else -1
        s.streamed_to = len(raw)
        return extended or None

    def final(self, raw: Text) -> str | None:
        """What the finished object adds at the call's end (None if it does not extend)."""
        s = self.s
        text = arguments_json(raw, self.dialect, self.schema)
        if len(text) <= s.sent_length:
            return None
        if s.sent_length:
            sent = "{" + "".join(e + ", " for e in s.sent_entries) + self._sent_tail()
            if not text.startswith(sent):
                return None
        piece = text[s.sent_length :]
        s.sent_length = len(text)
        s.streaming_from = -1
        return piece

    def _sent_tail(self) -> str:
        """What was sent past the covered entries, the streamed pieces joined to it."""
        s = self.s
        if s.streamed:
            s.sent_tail += "".join(s.streamed)
            s.streamed = []
        return s.sent_tail

    def _read(self, raw: Text) -> None:
        """Keep the parameters the body completed since the last delta."""
        s = self.s
        found = s.scan.advance(raw, self.dialect)
        s.version += len(found)
        for param in found:
            entry = self.schema.entry(param.name, param_value(param))
            position = s.positions.setdefault(param.name, len(s.params))
            covered = position < len(s.sent_entries)
            if position == len(s.params):
                s.params.append(param)
                s.entries.append(entry)
                if covered:  # a position sent unwrapped: counted stale while empty
                    s.stale += (entry != s.sent_entries[position]) - 1
                continue
            if covered:
                sent = s.sent_entries[position]
                s.stale += (entry != sent) - (s.entries[position] != sent)
            s.params[position], s.entries[position] = param, entry

    def _view(self, opened: tuple[Param, bool] | None) -> _View:
        """This conversion's entries: the kept ones, the open parameter, then unwrapping."""
        s = self.s
        view = _View(s.entries, None)
        key, value = "", None
        if opened is not None:
            key, value = opened[0].name, param_value(opened[0])
            entry = self.schema.entry(key, value)
            position = s.positions.get(key)
            if position is None:
                view.extra, view.extra_key = entry, key
            else:
                view.over, view.over_entry = position, entry
        if len(view) == 1 and self.schema.properties:
            if view.extra is None and view.over < 0:
                key, value = s.params[0].name, param_value(s.params[0])
            unwrapped = self.schema.unwrapped([key], [value])
            if unwrapped is not None:
                return _View(unwrapped[1], unwrapped[0])
        return view

    def _extend(self, view: _View, head: str) -> str | None:
        """The text by which the view (its last entry as ``head``) extends what was sent."""
        s = self.s
        covered = len(s.sent_entries)
        size = len(view)
        if s.sent_length:
            if size <= covered:
                return None
            if view.keys is not None:
                stale = sum(view[i] != s.sent_entries[i] for i in range(covered))
            else:
                stale = s.stale
                if 0 <= view.over < covered:
                    sent = s.sent_entries[view.over]
                    stale += (view.over_entry != sent) - (s.entries[view.over] != sent)
                if view.extra is not None and len(s.entries) < covered:
                    stale += (view.extra != s.sent_entries[len(s.entries)]) - 1
            if stale:
                return None
            rest = "".join(view[i] + ", " for i in range(covered, size - 1)) + head
            sent_tail = self._sent_tail()
            if not rest.startswith(sent_tail):
                return None
            piece = rest[len(sent_tail) :]
        else:
            piece = "{" + "".join(view[i] + ", " for i in range(size - 1)) + head
        s.sent_entries.extend(view[i] for i in range(covered, size - 1))
        if view.keys is not None:
            # Sent unwrapped: count afresh which kept entries no longer read as sent.
            kept = s.entries
            s.stale = sum(
                i >= len(kept) or kept[i] != sent for i, sent in enumerate(s.sent_entries)
            )
        else:
            s.stale += sum(s.entries[i] != view[i] for i in range(covered, size - 1))
        s.sent_tail = head
        s.sent_length += len(piece)
        return piece
