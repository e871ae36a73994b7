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

_WS = " \t\n\r"
_DIGITS = "0123456789"
_HEX = "0123456789abcdefABCDEF"
_ESCAPES = '"\\/bfnrt'
_PLAIN = re.compile(r'[^"\\\x00-\x1f]+')  # string content with nothing to decide
_LITERALS = {"t": "true", "f": "false", "n": "null", "N": "NaN", "I": "Infinity"}

# Phases.
_VALUE = "value"  # a value must follow
_FIRST_KEY = "first_key"  # after '{': a key or '}'
_KEY = "key"  # after ',' in an object
_COLON = "colon"
_OBJ_NEXT = "obj_next"  # after a member: ',' or '}'
_FIRST_ITEM = "first_item"  # after '[': a value or ']'
_ARR_NEXT = "arr_next"  # after an item: ',' or ']'
_STRING = "string"
_ESCAPE = "escape"
_UNICODE = "unicode"
_LITERAL = "literal"
_MINUS = "minus"
_ZERO = "zero"
_INT = "int"
_DOT = "dot"
_FRAC = "frac"
_EXP = "exp"
_EXP_SIGN = "exp_sign"
_EXP_DIGITS = "exp_digits"
_DONE = "done"
_ERROR = "error"

# Number phases a value may end in.
_NUMBER_ENDS = frozenset({_ZERO, _INT, _FRAC, _EXP_DIGITS})
_NUMBER_PHASES = frozenset({_MINUS, _ZERO, _INT, _DOT, _FRAC, _EXP, _EXP_SIGN, _EXP_DIGITS})


class JsonScanState(Struct):
    phase: str = _VALUE
    stack: list[str] = field(default_factory=list)  # "{" or "["
    started: bool = False
    is_key: bool = False  # the open string is an object key
    pending: str = ""  # rest of a literal, or hex digits still owed by \\u


class JsonScanner:
    """Feed text; ``complete`` says whether all of it is exactly one JSON value."""

    def __init__(self, state: JsonScanState | None = None) -> None:
        self.s = state if state is not None else JsonScanState()

    @property
    def complete(self) -> bool:
        s = self.s
        if s.phase == _DONE:
            return True
        return s.phase in _NUMBER_ENDS and not s.stack

    @property
    def failed(self) -> bool:
        return self.s.phase == _ERROR

    def feed(self, text: str) -> None:
        s = self.s
        i, size = 0, len(text)
        while i < size:
            phase = s.phase
            if phase == _ERROR:
                return
            if phase == _STRING:
                # A run of plain string content changes nothing: skip it at once.
                plain = _PLAIN.match(text, i)
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
        if phase == _STRING:
            if ch == '"':
                self._string_closed()
            elif ch == "\\":
                s.phase = _ESCAPE
            elif ch < " ":
                s.phase = _ERROR
            return
        if phase == _ESCAPE:
            if ch == "u":
                s.phase, s.pending = _UNICODE, "xxxx"
            elif ch in _ESCAPES:
                s.phase = _STRING
            else:
                s.phase = _ERROR
            return
        if phase == _UNICODE:
            if ch not in _HEX:
                s.phase = _ERROR
                return
            s.pending = s.pending[1:]
            if not s.pending:
                s.phase = _STRING
            return
        if phase == _LITERAL:
            if ch != s.pending[0]:
                s.phase = _ERROR
                return
            s.pending = s.pending[1:]
            if not s.pending:
                self._value_done()
            return
        if phase in _NUMBER_PHASES:
            if self._number(ch):
                return
            if phase not in _NUMBER_ENDS:
                s.phase = _ERROR
                return
            self._value_done()
            self._char(ch)
            return
        if phase == _DONE:
            if not ch.isspace():
                s.phase = _ERROR
            return
        if ch in _WS:
            return
        if phase in (_VALUE, _FIRST_ITEM):
            if phase == _FIRST_ITEM and ch == "]":
                self._close("[")
            else:
                self._value(ch)
        elif phase in (_FIRST_KEY, _KEY):
            if ch == '"':
                s.phase, s.is_key = _STRING, True
            elif ch == "}" and phase == _FIRST_KEY:
                self._close("{")
            else:
                s.phase = _ERROR
        elif phase == _COLON:
            s.phase = _VALUE if ch == ":" else _ERROR
        elif phase == _OBJ_NEXT:
            if ch == ",":
                s.phase = _KEY
            elif ch == "}":
                self._close("{")
            else:
                s.phase = _ERROR
        elif phase == _ARR_NEXT:
            if ch == ",":
                s.phase = _VALUE
            elif ch == "]":
                self._close("[")
            else:
                s.phase = _ERROR

    def _value(self, ch: str) -> None:
        s = self.s
        if ch == '"':
            s.phase, s.is_key = _STRING, False
        elif ch in "{[":
            s.stack.append(ch)
            s.phase = _FIRST_KEY if ch == "{" else _FIRST_ITEM
        elif ch == "-":
            s.phase = _MINUS
        elif ch == "0":
            s.phase = _ZERO
        elif ch in _DIGITS:
            s.phase = _INT
        elif ch in _LITERALS:
            s.phase, s.pending = _LITERAL, _LITERALS[ch][1:]
        else:
            s.phase = _ERROR

    def _number(self, ch: str) -> bool:
        """Advance a number by ``ch``; False when ``ch`` is not part of it."""
        s = self.s
        phase = s.phase
        digit = ch in _DIGITS
        if phase == _MINUS:
            if ch == "I":
                s.phase, s.pending = _LITERAL, "nfinity"
            elif ch == "0":
                s.phase = _ZERO
            elif digit:
                s.phase = _INT
            else:
                return False
        elif phase in (_ZERO, _INT):
            if digit and phase == _INT:
                pass
            elif ch == ".":
                s.phase = _DOT
            elif ch in "eE":
                s.phase = _EXP
            else:
                return False
        elif phase in (_DOT, _FRAC):
            if digit:
                s.phase = _FRAC
            elif ch in "eE" and phase == _FRAC:
                s.phase = _EXP
            else:
                return False
        elif phase == _EXP:
            if ch in "+-":
                s.phase = _EXP_SIGN
            elif digit:
                s.phase = _EXP_DIGITS
            else:
                return False
        elif phase in (_EXP_SIGN, _EXP_DIGITS):
            if not digit:
                return False
            s.phase = _EXP_DIGITS
        return True

    def _string_closed(self) -> None:
        s = self.s
        if s.is_key:
            s.is_key = False
            s.phase = _COLON
        else:
            self._value_done()

    def _close(self, opener: str) -> None:
        s = self.s
        if not s.stack or s.stack[-1] != opener:
            s.phase = _ERROR
            return
        s.stack.pop()
        self._value_done()

    def _value_done(self) -> None:
        s = self.s
        if not s.stack:
            s.phase = _DONE
        else:
            s.phase = _OBJ_NEXT if s.stack[-1] == "{" else _ARR_NEXT
