"""One llama3_json call read incrementally, the way partial_json_parser reads its prefixes.

vLLM reads the call's text again on every chunk with partial_json_parser and dumps the
arguments it finds. While the text so far is the start of valid JSON (no key twice in
an object, numbers of bounded length), that reading is the natural one: complete
members and items, the last string cut before an unfinished escape and trailing
whitespace, the last number without its trailing ``.-+eE``, a started literal
completed, a key with no value dropped. Its dump is then a settled head that only
grows, a volatile end (the open string's unsettled units, the open number) and the
open containers' closers. ``CallReader`` keeps that head and end as the text grows,
each character read once. A key twice or a number over ``MAX_NUMBER`` characters
mutes the reading (the dump is no longer kept, the call's structure still is); a raw
control character in a string makes every later reading fail (``Unreadable``); other
text leaves the language (``Irregular``: the caller reads the call again).
"""

from __future__ import annotations

import json

from msgspec import Struct, field

from parsers.readers.jsonscan import (
    ARR_NEXT,
    COLON,
    DIGITS,
    ESCAPE,
    ESCAPES,
    FIRST_ITEM,
    FIRST_KEY,
    HEX,
    INT,
    KEY,
    LITERAL,
    LITERALS,
    MINUS,
    NUMBER_ENDS,
    NUMBER_NEXT,
    NUMBER_PHASES,
    OBJ_NEXT,
    PLAIN,
    STRING,
    UNICODE,
    VALUE,
    WS,
    ZERO,
)

_FALSY_LITERALS = frozenset({"false", "null"})
_ARGUMENT_KEYS = frozenset({"arguments", "parameters"})
_IN_STRING = frozenset({STRING, ESCAPE, UNICODE})
# Longer numbers are not read (their dump is not cheap to keep): the call is muted.
MAX_NUMBER = 64


def dump_content(raw: str) -> str:
    """The dump of a string's complete escapes and characters, without its quotes."""
    return json.dumps(json.loads('"' + raw + '"'), ensure_ascii=False)[1:-1]


def string_units(raw: str) -> tuple[int, int]:
    """Where ``raw`` (valid string content) may be cut for good, and where its last
    complete escape or character ends.

    A ``\\uD800``-``\\uDBFF`` escape may pair with the next one, so a cut never
    falls right after the last escape when it is one; any other unit settles the
    escapes before it. Trailing whitespace and then an unfinished escape are left
    out, as partial_json_parser does (it strips the text it completes).
    """
    raw = raw.rstrip()
    cut = end = i = 0
    size = len(raw)
    high = False  # the unit ending at ``end`` is a high-surrogate escape
    while i < size:
        if raw[i] != "\\":
            i += 1
            cut = end = i
            high = False
            continue
        if i + 1 == size:
            break
        if raw[i + 1] != "u":
            i += 2
            cut = end = i
            high = False
            continue
        if i + 6 > size:
            break
        surrogate = raw[i + 2] in "dD"
        if high and not (surrogate and raw[i + 3] in "cdefCDEF"):
            cut = i  # the high surrogate before this escape stays alone
        high = surrogate and raw[i + 3] in "89abAB"
        i += 6
        end = i
        if not high:
            cut = i
    return cut, end


def _number_dump(raw: str) -> str | None:
    """The dump of a number partial_json_parser reads from ``raw`` (None: dropped)."""
    text = raw.rstrip(".-+eE")
    if text in ("", "-"):
        return None
    if any(c in text for c in ".eE"):
        value = float(text)
        return json.dumps(value)
    return str(int(text))


def common_length(a: str, b: str) -> int:
    """The length of the common prefix of ``a`` and ``b`` (slice comparisons in C)."""
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


class CallReading(Struct):
    """Plain data: where the reading of one call stands."""

    pos: int  # how far the text is read
    phase: str = VALUE
    stack: list[str] = field(default_factory=list)  # '{' or '['
    keys: list[set[str]] = field(default_factory=list)  # per frame in the arguments
    kept: list[int] = field(default_factory=list)  # per frame: members or items kept
    max_depth: int = 0  # the deepest nesting read, the call's object counted
    args_max_depth: int = 0  # the deepest nesting in the arguments
    token: int = 0  # where the open string's content, number or literal starts
    pending: str = ""  # a literal's rest, or the hex digits \\u still owes
    role: str = ""  # of the open string: "key", "name", "args" or "" (ignored)
    blank: bool = False  # the open string holds a raw whitespace control character
    key_dump: str = ""
    top_key: str = ""  # the current member's key in the call object
    name: str | None = None
    name_seen: bool = False
    args_seen: bool = False  # an arguments (or parameters) key was read
    args_kept: bool = False  # the arguments value is in the reading
    args_depth: int = -1  # frames up to the arguments' root container
    args_truthy: bool = False  # once the arguments value is closed
    in_args: bool = False  # the open scalar is part of the arguments
    member: str = ""  # what a kept value adds before itself: ", " and its key
    number: str | None = None  # the open number's dump, once it has a digit
    settled_at: int = 0  # the open string's content is settled up to here
    tail: str = ""  # the dump of the open string's unsettled units
    pieces: list[str] = field(default_factory=list)  # settled dump not yet taken
    closers: str = ""  # the closers of the open containers in the arguments
    done: bool = False  # the call's object is closed at ``end``
    end: int = -1
    # A key twice in an object or a number over MAX_NUMBER characters: from here on
    # only the call's structure is read (where it ends, its name), not its arguments.
    muted: bool = False
    dead: bool = False  # every reading of the call fails from now on (the stream's)
    # Kept by the stream between steps: the dump's settled length and what of it is
    # unsent, the volatile end and truthiness of the last reading, its flags.
    settled_len: int = 0
    unsent: str = ""
    volatile: str = ""
    truthy: bool = False
    read_named: bool = False
    read_args_depth: int = 0


class Irregular(Exception):
    """The text left the language ``CallReader`` reads exactly."""


class Unreadable(Irregular):
    """A raw control character in a string: json.loads fails on every later reading.

    (A whitespace one fails it once something follows it: partial_json_parser strips
    the text's end.)
    """


class CallReader:
    """A call's text read once, left to right, into what its dump holds.

    A JSON lexer (``parsers.readers.jsonscan``'s phases and number automaton) whose every
    value knows its place: in the arguments (kept: it adds to the dump's settled
    head, or to its volatile end while open), the call's name, or elsewhere (only
    its structure counts). ``read`` raises ``Irregular`` where the text leaves the
    language read exactly; a duplicate key or a long number mutes the reading
    instead (``CallReading.muted``).
    """

    def __init__(self, state: CallReading) -> None:
        self.r = state

    # ------------------------------------------------------------------ queries

    def arguments_truthy(self) -> bool:
        r = self.r
        if not r.args_kept:
            return False
        if r.args_depth >= 0 and len(r.stack) > r.args_depth:
            return r.kept[r.args_depth] > 0
        if r.in_args and r.phase in _IN_STRING:
            return r.settled_len + sum(map(len, r.pieces)) > 1 or bool(r.tail)
        if r.in_args and r.number is not None and r.args_depth < 0:
            return float(r.number) != 0
        return r.args_truthy

    def volatile(self) -> str:
        """The dump's end after its settled head."""
        r = self.r
        end = ""
        if r.in_args:
            if r.phase in _IN_STRING:
                end = r.tail + '"'
            elif r.number is not None:
                end = r.number
        return end + r.closers

    def in_argument_string(self) -> bool:
        r = self.r
        return r.in_args and r.phase in _IN_STRING

    # ------------------------------------------------------------------ reading

    def read(self, text: str) -> None:
        """Read ``text`` from where the reading stopped; Irregular when it leaves."""
        r = self.r
        i = r.pos
        size = len(text)
        first = i
        while i < size and not r.done:
            if r.phase == STRING:
                i = self._string(text, i)
                continue
            ch = text[i]
            i += 1
            self._char(ch, text, i - 1)
            if r.done:
                r.end = i
        r.pos = i
        if r.muted:
            return
        if r.in_args and r.phase in _IN_STRING:
            self._settle(text, first)
        if r.number is not None and r.in_args:
            r.number = self._dump_number(text[r.token : r.pos])

    def _string(self, text: str, i: int) -> int:
        """Read string content from ``i``: where the reading goes on."""
        r = self.r
        ch = text[i]
        if r.blank:
            # Stripped while only whitespace follows; anything else keeps it in.
            if not ch.isspace():
                raise Unreadable
            return i + 1
        match = PLAIN.match(text, i)
        if match is not None:
            return match.end()
        if ch == '"':
            self._string_closed(text, i)
        elif ch == "\\":
            r.phase = ESCAPE
        elif ch.isspace():
            r.blank = True
        else:
            raise Unreadable
        return i + 1

    def _char(self, ch: str, text: str, at: int) -> None:
        r = self.r
        phase = r.phase
        if phase == ESCAPE:
            if ch == "u":
                r.phase, r.pending = UNICODE, "xxxx"
            elif ch in ESCAPES:
                r.phase = STRING
            else:
                raise Irregular
            return
        if phase == UNICODE:
            if ch not in HEX:
                raise Irregular
            r.pending = r.pending[1:]
            if not r.pending:
                r.phase = STRING
            return
        if phase == LITERAL:
            if ch != r.pending[0]:
                raise Irregular
            r.pending = r.pending[1:]
            if not r.pending:
                self._value_done()
            return
        if phase in NUMBER_PHASES:
            if self._number(ch):
                if at + 1 - r.token > MAX_NUMBER and not r.muted:
                    self._mute()
                return
            if phase not in NUMBER_ENDS:
                raise Irregular
            if r.in_args:
                dumped = self._dump_number(text[r.token : at])
                r.pieces.append(dumped)
                if len(r.stack) == 1:
                    r.args_truthy = float(dumped) != 0
                r.number = None
            self._value_done()
            self._char(ch, text, at)
            return
        if ch in WS:
            return
        if phase in (VALUE, FIRST_ITEM):
            if phase == FIRST_ITEM and ch == "]":
                self._close("[")
            else:
                self._value(ch, at)
        elif phase in (FIRST_KEY, KEY):
            if ch == '"':
                r.phase, r.role, r.token = STRING, "key", at + 1
            elif ch == "}" and phase == FIRST_KEY:
                self._close("{")
            else:
                raise Irregular
        elif phase == COLON:
            if ch != ":":
                raise Irregular
            r.phase = VALUE
        elif phase == OBJ_NEXT:
            if ch == ",":
                r.phase = KEY
            elif ch == "}":
                self._close("{")
            else:
                raise Irregular
        elif phase == ARR_NEXT:
            if ch == ",":
                r.phase = VALUE
            elif ch == "]":
                self._close("[")
            else:
                raise Irregular
        else:
            raise Irregular

    def _mute(self) -> None:
        """Stop reading the arguments: their dump is no longer kept."""
        r = self.r
        r.muted, r.in_args = True, False
        r.pieces.clear()
        r.keys.clear()

    def _value(self, ch: str, at: int) -> None:
        """A value starts: where it belongs decides what its reading adds to the dump."""
        r = self.r
        depth = len(r.stack)
        if depth == 0:
            if ch != "{":
                raise Irregular
            self._push(ch)
            return
        in_args = False
        if depth == 1:
            if r.top_key == "name":
                if ch != '"':
                    raise Irregular
                r.phase, r.role, r.token = STRING, "name", at + 1
                return
            if r.top_key in _ARGUMENT_KEYS:
                in_args, r.member = True, ""
        elif r.args_depth >= 0 and depth > r.args_depth:
            in_args = True
            separator = ", " if r.kept[-1] else ""
            r.member = separator + (r.key_dump + ": " if r.stack[-1] == "{" else "")
        in_args = in_args and not r.muted
        r.in_args = in_args
        if ch == '"':
            r.phase, r.role, r.token = STRING, "args" if in_args else "", at + 1
            if in_args:
                self._keep('"')
                r.settled_at, r.tail = at + 1, ""
        elif ch in "{[":
            if in_args:
                self._keep(ch)
                r.closers = ("}" if ch == "{" else "]") + r.closers
                if depth == 1:
                    r.args_depth = 1
            self._push(ch)
            r.in_args = False
        elif ch == "-" or ch in DIGITS:
            r.phase = MINUS if ch == "-" else ZERO if ch == "0" else INT
            r.token, r.number = at, None
            if in_args and ch != "-":
                self._keep("")
                r.number = ch
        elif ch in LITERALS:
            literal = LITERALS[ch]
            r.phase, r.pending = LITERAL, literal[1:]
            if in_args:
                self._keep(literal)
                r.args_truthy = r.args_truthy or (depth == 1 and literal not in _FALSY_LITERALS)
        else:
            raise Irregular

    def _keep(self, text: str) -> None:
        """The value being read is in the reading from now on."""
        r = self.r
        r.pieces.append(r.member + text)
        r.member = ""
        if len(r.stack) == 1:
            r.args_kept = True
        else:
            r.kept[-1] += 1

    def _push(self, opener: str) -> None:
        r = self.r
        r.stack.append(opener)
        if not r.muted:
            r.keys.append(set())
        r.kept.append(0)
        r.max_depth = max(r.max_depth, len(r.stack))
        if r.args_depth >= 0:
            r.args_max_depth = max(r.args_max_depth, len(r.stack) - 1)
        r.phase = FIRST_KEY if opener == "{" else FIRST_ITEM

    def _close(self, opener: str) -> None:
        r = self.r
        if r.stack[-1] != opener:
            raise Irregular
        closing_args = r.args_depth >= 0 and len(r.stack) > r.args_depth and not r.muted
        if closing_args:
            r.pieces.append(r.closers[0])
            r.closers = r.closers[1:]
            if len(r.stack) == r.args_depth + 1:
                r.args_truthy = r.kept[-1] > 0
                r.args_depth = -1
        r.stack.pop()
        if not r.muted:
            r.keys.pop()
        r.kept.pop()
        if not r.stack:
            r.done = True
            return
        self._value_done()

    def _value_done(self) -> None:
        r = self.r
        r.in_args = False
        r.phase = OBJ_NEXT if r.stack[-1] == "{" else ARR_NEXT

    def _string_closed(self, text: str, at: int) -> None:
        r = self.r
        raw = text[r.token : at] if r.role != "args" else ""
        role = r.role
        if role == "key":
            key = json.loads('"' + raw + '"')
            if len(r.stack) == 1:
                if (key == "name" and r.name_seen) or (key in _ARGUMENT_KEYS and r.args_seen):
                    raise Irregular
                r.name_seen = r.name_seen or key == "name"
                r.args_seen = r.args_seen or key in _ARGUMENT_KEYS
                r.top_key = key
            elif r.args_depth >= 0 and len(r.stack) > r.args_depth and not r.muted:
                if key in r.keys[-1]:
                    self._mute()
                else:
                    r.keys[-1].add(key)
                    r.key_dump = '"' + dump_content(raw) + '"'
            r.phase, r.role = COLON, ""
            return
        if role == "name":
            r.name = json.loads('"' + raw + '"')
        elif role == "args":
            content = text[r.settled_at : at]
            r.pieces.append(dump_content(content) + '"')
            if len(r.stack) == 1:
                r.args_truthy = r.settled_len + sum(map(len, r.pieces)) > 2
            r.settled_at, r.tail = at, ""
        r.role = ""
        self._value_done()

    def _settle(self, text: str, first: int) -> None:
        """The open argument string read up to ``pos``: settle what no later text changes."""
        r = self.r
        added = text[max(first, r.settled_at) : r.pos]
        if not added or added.isspace():
            return  # trailing whitespace is stripped: the reading is unchanged
        raw = text[r.settled_at : r.pos]
        cut, end = string_units(raw)
        if cut:
            r.pieces.append(dump_content(raw[:cut]))
            r.settled_at += cut
        r.tail = dump_content(raw[cut:end])

    def _dump_number(self, raw: str) -> str:
        dumped = _number_dump(raw)
        if dumped is None:
            raise Irregular  # "-" alone is followed by a digit or I in valid JSON
        return dumped

    def _number(self, ch: str) -> bool:
        """Advance a number by ``ch``; False when ``ch`` is not part of it."""
        r = self.r
        phase = NUMBER_NEXT[r.phase].get(ch)
        if phase is None:
            return False
        if r.phase == MINUS:
            if phase == LITERAL:
                r.pending = "nfinity"
                if r.in_args:
                    self._keep("-Infinity")
                    r.args_truthy = r.args_truthy or len(r.stack) == 1
            elif r.in_args:
                self._keep("")
                r.number = "-" + ch
        r.phase = phase
        return True
