"""An incremental JSON validator with Python's ``json.loads`` rules.

Streamed tool-call arguments grow a few characters at a time, and vLLM asks after
every delta whether the text so far is one complete JSON value
(``json.loads`` succeeds). Re-parsing the whole text each time is O(n) per delta;
this scanner consumes each character once and answers the same question.

It accepts what ``json.loads`` accepts: ``NaN``, ``Infinity`` and ``-Infinity``,
strict strings (no raw control characters), surrounding whitespace (callers strip
non-JSON whitespace at the ends first, as ``str.strip`` does).
"""

from __future__ import annotations

import re

from msgspec import Struct, field

# The lexical constants, shared with ``parsers.readers.partialjson``'s reader.
WS = " \t\n\r"
DIGITS = "0123456789"
HEX = "0123456789abcdefABCDEF"
ESCAPES = '"\\/bfnrt'
PLAIN = re.compile(r'[^"\\\x00-\x1f]+')  # string content with nothing to decide
# A literal's first character and its whole text.
LITERALS = {"t": "true", "f": "false", "n": "null", "N": "NaN", "I": "Infinity"}

# Phases.
VALUE = "value"  # a value must follow
FIRST_KEY = "first_key"  # after '{': a key or '}'
KEY = "key"  # after ',' in an object
COLON = "colon"
OBJ_NEXT = "obj_next"  # after a member: ',' or '}'
FIRST_ITEM = "first_item"  # after '[': a value or ']'
ARR_NEXT = "arr_next"  # after an item: ',' or ']'
STRING = "string"
ESCAPE = "escape"
UNICODE = "unicode"
LITERAL = "literal"
MINUS = "minus"
ZERO = "zero"
INT = "int"
DOT = "dot"
FRAC = "frac"
EXP = "exp"
EXP_SIGN = "exp_sign"
EXP_DIGITS = "exp_digits"
DONE = "done"
ERROR = "error"

# Number phases a value may end in.
NUMBER_ENDS = frozenset({ZERO, INT, FRAC, EXP_DIGITS})
NUMBER_PHASES = frozenset({MINUS, ZERO, INT, DOT, FRAC, EXP, EXP_SIGN, EXP_DIGITS})


def _number_step(phase: str, ch: str) -> str:
    """A number's phase after ``ch``, or "" when ``ch`` is not part of it.

    After ``-``, ``I`` starts ``-Infinity``: the phase is LITERAL, "nfinity" still owed.
    """
    digit = ch in DIGITS
    if phase == MINUS:
        if ch == "I":
            return LITERAL
        return ZERO if ch == "0" else INT if digit else ""
    if phase in (ZERO, INT):
        if digit and phase == INT:
            return INT
        return DOT if ch == "." else EXP if ch in "eE" else ""
    if phase in (DOT, FRAC):
        if digit:
            return FRAC
        return EXP if ch in "eE" and phase == FRAC else ""
    if phase == EXP:
        return EXP_SIGN if ch in "+-" else EXP_DIGITS if digit else ""
    return EXP_DIGITS if digit else ""  # EXP_SIGN, EXP_DIGITS


# The same as a table: phase -> character -> next phase (missing: not part of it).
NUMBER_NEXT = {
    phase: {ch: step for ch in DIGITS + ".eE+-I" if (step := _number_step(phase, ch))}
    for phase in NUMBER_PHASES
}


class JsonScanState(Struct):
    phase: str = VALUE
    stack: list[str] = field(default_factory=list)  # "{" or "["
    started: bool = False
    is_key: bool = False  # the open string is an object key
    pending: str = ""  # rest of a literal, or hex digits still owed by \\u


class JsonScanner:
    """Feed text; ``complete`` says whether all of it is exactly one JSON value."""

    def __init__(self, state: JsonScanState | None = None, lenient: bool = False) -> None:
        self.s = state if state is not None else JsonScanState()
        # Raw control characters allowed in strings (``json.loads(strict=False)``).
        self.lenient = lenient

    @property
    def complete(self) -> bool:
        s = self.s
        if s.phase == DONE:
            return True
        return s.phase in NUMBER_ENDS and not s.stack

    @property
    def failed(self) -> bool:
        return self.s.phase == ERROR

    def feed(self, text: str) -> None:
        s = self.s
        i, size = 0, len(text)
        while i < size:
            phase = s.phase
            if phase == ERROR:
                return
            if phase == STRING:
                # A run of plain string content changes nothing: skip it at once.
                plain = PLAIN.match(text, i)
                if plain is not None:
                    i = plain.end()
                    continue
            ch = text[i]
            i += 1
            if not s.started:
                if ch.isspace():
                    continue
                s.started = True
            self._char(ch)

    def _char(self, ch: str) -> None:
        s = self.s
        phase = s.phase
        if phase == STRING:
            if ch == '"':
                self._string_closed()
            elif ch == "\\":
                s.phase = ESCAPE
            elif ch < " " and not self.lenient:
                s.phase = ERROR
            return
        if phase == ESCAPE:
            if ch == "u":
                s.phase, s.pending = UNICODE, "xxxx"
            elif ch in ESCAPES:
                s.phase = STRING
            else:
                s.phase = ERROR
            return
        if phase == UNICODE:
            if ch not in HEX:
                s.phase = ERROR
                return
            s.pending = s.pending[1:]
            if not s.pending:
                s.phase = STRING
            return
        if phase == LITERAL:
            if ch != s.pending[0]:
                s.phase = ERROR
                return
            s.pending = s.pending[1:]
            if not s.pending:
                self._value_done()
            return
        if phase in NUMBER_PHASES:
            if self._number(ch):
                return
            if phase not in NUMBER_ENDS:
                s.phase = ERROR
                return
            self._value_done()
            self._char(ch)
            return
        if phase == DONE:
            if not ch.isspace():
                s.phase = ERROR
            return
        if ch in WS:
            return
        if phase in (VALUE, FIRST_ITEM):
            if phase == FIRST_ITEM and ch == "]":
                self._close("[")
            else:
                self._value(ch)
        elif phase in (FIRST_KEY, KEY):
            if ch == '"':
                s.phase, s.is_key = STRING, True
            elif ch == "}" and phase == FIRST_KEY:
                self._close("{")
            else:
                s.phase = ERROR
        elif phase == COLON:
            s.phase = VALUE if ch == ":" else ERROR
        elif phase == OBJ_NEXT:
            if ch == ",":
                s.phase = KEY
            elif ch == "}":
                self._close("{")
            else:
                s.phase = ERROR
        elif phase == ARR_NEXT:
            if ch == ",":
                s.phase = VALUE
            elif ch == "]":
                self._close("[")
            else:
                s.phase = ERROR

    def _value(self, ch: str) -> None:
        s = self.s
        if ch == '"':
            s.phase, s.is_key = STRING, False
        elif ch in "{[":
            s.stack.append(ch)
            s.phase = FIRST_KEY if ch == "{" else FIRST_ITEM
        elif ch == "-":
            s.phase = MINUS
        elif ch == "0":
            s.phase = ZERO
        elif ch in DIGITS:
            s.phase = INT
        elif ch in LITERALS:
            s.phase, s.pending = LITERAL, LITERALS[ch][1:]
        else:
            s.phase = ERROR

    def _number(self, ch: str) -> bool:
        """Advance a number by ``ch``; False when ``ch`` is not part of it."""
        s = self.s
        phase = NUMBER_NEXT[s.phase].get(ch)
        if phase is None:
            return False
        s.phase = phase
        if phase == LITERAL:
            s.pending = "nfinity"
        return True

    def _string_closed(self) -> None:
        s = self.s
        if s.is_key:
            s.is_key = False
            s.phase = COLON
        else:
            self._value_done()

    def _close(self, opener: str) -> None:
        s = self.s
        if not s.stack or s.stack[-1] != opener:
            s.phase = ERROR
            return
        s.stack.pop()
        self._value_done()

    def _value_done(self) -> None:
        s = self.s
        if not s.stack:
            s.phase = DONE
        else:
            s.phase = OBJ_NEXT if s.stack[-1] == "{" else ARR_NEXT
