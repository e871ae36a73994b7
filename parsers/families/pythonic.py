"""Pythonic tool calls: the whole output is ``[f(a=1), g(b="x")]``.

Model output is untrusted, so nothing here backtracks, rescans or recurses as deep as
the output nests: a one-pass recognizer stands in for vLLM's backtracking pattern, the
literal converter keeps its own stack, and the stream keeps a scanner's place between
deltas, so a delta costs O(delta) amortized however long the list grows.
"""

from __future__ import annotations

import ast
import json
import keyword
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.types import (
    ANY_TEXT,
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    PlainText,
    Vocabulary,
)

_JSON_NAMES: dict[str, Any] = {"null": None, "true": True, "false": False}
# What ``ast.parse`` can raise on hostile text, besides SyntaxError (a ValueError).
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, TypeError, IndexError)


# ---------------------------------------------------------------------------- one-shot


def _name_end(text: str, start: int) -> int:
    """End of the name ``[a-zA-Z]\\w*`` at ``start``, or ``start`` when none is there."""
    if start >= len(text) or not ("a" <= text[start] <= "z" or "A" <= text[start] <= "Z"):
        return start
    end = start + 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return end


def _spaces_end(text: str, start: int) -> int:
    while start < len(text) and text[start].isspace():
        start += 1
    return start


def starts_with_call_list(text: str) -> bool:
    """Whether vLLM's call-list pattern matches at the start of ``text`` (DOTALL).

    vLLM's pattern, with ``N = [a-zA-Z]+\\w*`` and ``S = \\s``::

        \\[ (N\\((N=.*,S*)*(N=.*S)?\\),S*)* (N\\((N=.*,S*)*(N=.*S*)?\\)S*)+ \\]

    backtracks exponentially on ordinary outputs. As ``.*`` matches anything, the
    argument part of the second group is empty or ``N=.*``, and of the first group
    empty or ``N=.*[,S]``. A call with arguments absorbs everything up to the last
    ``)S*]`` (its ``.*`` can swallow later calls whole), and a first-group call with
    arguments needs a later ``)S*]`` too. So the pattern matches exactly when, after
    ``[``, a run of empty calls ``N(),S*`` then ``N()S*`` is followed by either

    * ``]``, the run ending with at least one ``N()S*``, or
    * ``N(N=``, with ``)S*]`` somewhere after the ``=``.

    Checked against the pattern itself by tests/test_pythonic.py.
    """
    if not text.startswith("["):
        return False
    at, empty_calls_with_comma_only = 1, True
    ended_without_comma = False
    while True:
        name_end = _name_end(text, at)
        if name_end == at:
            return ended_without_comma and text.startswith("]", at)
        if not text.startswith("(", name_end):
            return False
        inner = name_end + 1
        key_end = _name_end(text, inner)
        if key_end > inner and text.startswith("=", key_end):
            return _closes_later(text, key_end + 1)
        if not text.startswith(")", inner):
            return False
        at = inner + 1
        if text.startswith(",", at):
            if not empty_calls_with_comma_only:
                return False
            ended_without_comma = False
            at = _spaces_end(text, at + 1)
        else:
            empty_calls_with_comma_only = False
            ended_without_comma = True
            at = _spaces_end(text, at)


def _closes_later(text: str, start: int) -> bool:
    """Whether ``)\\s*]`` occurs at or after ``start``."""
    after_paren = False
    for ch in text[start:]:
        if ch == "]" and after_paren:
            return True
        if ch == ")":
            after_paren = True
        elif not ch.isspace():
            after_paren = False
    return False


class NotALiteral(ValueError):
    """A call argument that has no JSON value."""


def _number(node: ast.expr) -> int | float:
    """A number under unary signs (``-1``, ``+-2.5``), unwound without recursion."""
    signs = []
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        signs.append(node.op)
        node = node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotALiteral("unary signs apply to numbers only")
    for sign in reversed(signs):
        value = -value if isinstance(sign, ast.USub) else value
    return value


def _shallow(node: ast.expr, todo: list[tuple[ast.expr, Any, Any]]) -> Any:
    """One node's JSON value; the items of a container are queued on ``todo``."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return node.value
        raise NotALiteral("constant without a JSON value")
    if isinstance(node, ast.Dict):
        if not all(isinstance(key, ast.Constant) for key in node.keys):
            raise NotALiteral("dict keys must be literals")
        keys = [key.value for key in node.keys]  # type: ignore[union-attr]
        mapping = dict.fromkeys(keys)
        pairs = list(zip(keys, node.values, strict=True))
        todo.extend((value, mapping, key) for key, value in reversed(pairs))
        return mapping
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items: list[Any] = [None] * len(node.elts)
        todo.extend((item, items, i) for i, item in enumerate(node.elts))
        return items
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp):
        return _number(node)
    raise NotALiteral("arguments must be literals")


def literal(node: ast.expr) -> Any:
    """The JSON value of a literal argument expression, built with an explicit stack."""
    root: list[Any] = [None]
    todo: list[tuple[ast.expr, Any, Any]] = [(node, root, 0)]
    while todo:
        item, container, slot = todo.pop()
        container[slot] = _shallow(item, todo)
    return root[0]


def _dotted_name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotALiteral("a call must name its function")
    parts.append(node.id)
    return ".".join(reversed(parts))


def to_call(node: ast.Call) -> FunctionCall:
    arguments = {keyword.arg: literal(keyword.value) for keyword in node.keywords}
    return FunctionCall(_dotted_name(node.func), json.dumps(arguments, ensure_ascii=False))


def parse_calls(source: str) -> list[FunctionCall]:
    """The calls of a source whose first statement is a list of calls; raises otherwise."""
    module = ast.parse(source)
    value = getattr(module.body[0], "value", None)
    if not isinstance(value, ast.List) or not all(isinstance(e, ast.Call) for e in value.elts):
        raise NotALiteral("the output must be a list of calls")
    return [to_call(e) for e in value.elts]  # type: ignore[arg-type]


class PythonicTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if not starts_with_call_list(content):
            return ExtractedToolCalls(False, [], content)
        try:
            calls = parse_calls(content)
        except _PARSE_ERRORS:
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(True, calls, None)


# ---------------------------------------------------------------------------- streaming

_CLOSERS = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}
_QUOTES = ("'", '"')
# Python's tokenizer refuses more open brackets than this, whatever follows.
_MAX_NESTING = 200
# Text after the closed list is checked as Python up to this length, else taken as prose.
_TRAILING_LIMIT = 256
# Number tokens longer than this are left to ``ast`` when their call closes.
_NUMBER_LIMIT = 100
_SPACES = " \t\f"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_NUMBER_START = frozenset("0123456789.-+")
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\n": "",
}
_FRAME_CLOSERS = {"call": ")", "list": "]", "tuple": ")", "dict": "}"}
_HEX_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")
_JSON_ESCAPED = frozenset('"\\')
_JSON_WORDS = {"True": "true", "False": "false", "None": "null"} | {
    name: name for name in _JSON_NAMES
}


def _json_chars(text: str) -> str:
    """``text`` as it appears inside a JSON string (``json.dumps``, non-ASCII kept).

    One character that ``json.dumps`` leaves alone (all but quotes, backslashes and
    control characters) is itself: the scanner's common case skips the encoder.
    """
    if len(text) == 1 and text >= " " and text not in _JSON_ESCAPED:
        return text
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _number_json(token: str) -> str | None:
    """The JSON of a short numeric literal (``-1``, ``0x1f``, ``1.``), else None."""
    if len(token) > _NUMBER_LIMIT:
        return None
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return json.dumps(value)


class Frame(Struct, array_like=True):
    """An open call, list, tuple or dict of the call being scanned.

    ``expect`` is what may come next: ``key``, ``after_key``, ``value`` or
    ``after_value``; ``names`` holds the keyword names or dict keys seen so far. A
    tuple's ``[`` is the JSON piece at ``opener``, blanked if it was only parentheses.
    """

    kind: str
    expect: str
    count: int = 0
    names: set[str] = field(default_factory=set)
    opener: int = -1


class PendingCall(Struct, array_like=True):
    """A closed call not yet passed on: its argument JSON from ``offset`` on."""

    name: str
    arguments: str
    offset: int


class PythonicState(Struct, tag="pythonic"):
    """Where the scan of a streamed output stands; plain data, so it snapshots.

    The first fields follow the text the way vLLM's closing heuristics read it: the
    stack of open brackets and quotes, separator counts, the last characters. The
    rest is the call scanner: ``level`` is ``open``, ``item``, ``callname``, ``call``,
    ``after_item``, ``trailing`` (after the list) or ``opaque`` (text the scanner
    leaves to ``ast`` once its call closes).
    """

    passthrough: bool = False
    started: bool = False
    dead: bool = False  # no closing of the text can parse any more
    closers: list[str] = field(default_factory=list)
    backslashes: int = 0
    equals: int = 0
    commas: int = 0
    colons: int = 0
    brace_colons: int = 0  # counts before the last ``{`` and ``(``
    brace_commas: int = 0
    paren_equals: int = 0
    paren_commas: int = 0
    previous: str = ""
    last: str = ""
    before_last: str = ""
    level: str = "open"
    frames: list[Frame] = field(default_factory=list)
    token: str = ""  # a name, number or keyword in progress
    token_kind: str = ""
    quote: str = ""
    raw: bool = False
    escape: str = ""  # an escape sequence in progress
    held: list[str] = field(default_factory=list)  # JSON of a string's end vLLM strips
    string_open: bool = False  # a closed string's JSON awaits ``"`` (or concatenation)
    open_tuples: int = 0
    call_name: str = ""
    call_text: list[str] = field(default_factory=list)  # for ``ast`` if it turns opaque
    unsent: list[str] = field(default_factory=list)  # the open call's JSON from unsent_start
    unsent_start: int = 0
    settled: int = 0
    trailing: str = ""
    trailing_overflow: bool = False
    finished: list[PendingCall] = field(default_factory=list)
    next_index: int = 0  # calls passed on in full
    sent: int = 0  # JSON characters sent of call ``next_index``
    held_deltas: list[DeltaToolCall] = field(default_factory=list)
    head: str = ""
    called: bool = False


class PythonicStream:
    """Pythonic calls as vLLM streams them, at O(delta) per delta.

    vLLM closes the list so far (``make_valid_python``), parses it and sends the JSON
    arguments minus the added closers. Here one scan keeps what that needs: the
    bracket state its heuristics read, and each call's JSON as a growing string. A
    call the scanner does not model (tuples, calls as values, comments...) is parsed
    with ``ast`` once, when it closes. At token boundaries inside a chunk the same
    closing is tried, and what it yields is held for the next chunk that closes or
    for the end, so any chunking ends with the calls one token per chunk would give.
    """

    engine_based = False
    supports_required_and_named = True

    def __init__(
        self,
        id_seed: str,
        state: PythonicState | None = None,
        token_text: Callable[[int], str] | None = None,
        *,
        implied_list: bool = False,
    ) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else PythonicState()
        self.token_text = token_text
        # 1 where the list's ``[`` is implied (Olmo 3's lines): it never closes.
        self.implied_list = int(implied_list)

    # ------------------------------------------------------------------ the protocol

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Any text is content alone (``ReadsPlain``) once the output did not open a call
        list: it never reads one then."""
        return ANY_TEXT if self.s.passthrough else None

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.passthrough:
            return Delta(content=text)
        if not s.started:
            if not text:
                return Delta(content=text)
            if not text.startswith("["):
                # Output that does not open a call list never becomes one.
                s.passthrough = True
                return Delta(content=text)
            s.started = True
        self.read(text, self.token_boundaries(text, token_ids))
        return self.chunk_end()

    def read(
        self,
        text: str,
        boundaries: list[int],
        synthetic: frozenset[int] = frozenset(),
        quiet: frozenset[int] = frozenset(),
    ) -> None:
        """Scan a chunk's text, trying vLLM's closing at each token boundary inside it.

        ``synthetic``: offsets of characters vLLM parses but its closing heuristics do
        not see (the commas Olmo 3's line join adds); ``quiet``: the indices of the
        boundaries where vLLM's parse fails whatever the scan says (the caller knows why).
        """
        s = self.s
        start = 0
        call_from = 0
        for number, end in enumerate(boundaries):
            call_from = self._scan(text, start, end, call_from, synthetic)
            start = end
            if number < len(boundaries) - 1 and not s.dead and number not in quiet:
                self._hold_closable()
        if s.level in ("call", "callname", "opaque") and not s.dead:
            s.call_text.append(text[call_from:])

    def finish(self) -> Delta | None:
        """Send what a closing at some token boundary yielded and no chunk end sent."""
        return self._release([])

    def remaining_arguments(self) -> str:
        s = self.s
        if not s.called:
            return ""
        return "{}"[len(s.head) :] if "{}".startswith(s.head) else ""

    # ------------------------------------------------------------------ emission

    def token_boundaries(self, text: str, token_ids: list[int] | None) -> list[int]:
        """Offsets in ``text`` where the chunk's tokens end, as far as their texts show it.

        Token texts are matched from the start and from the end of ``text``; tokens
        between (a character split across tokens, which shows only once whole) give
        one boundary where the match from the end begins. A last token with no text
        here (a stop token) is passed over.
        """
        if self.token_text is None or not token_ids or len(token_ids) == 1:
            return [len(text)]
        pieces = [self.token_text(token_id) for token_id in token_ids]
        ends: list[int] = []
        at = 0
        first = 0
        while first < len(pieces) and pieces[first] and text.startswith(pieces[first], at):
            at += len(pieces[first])
            ends.append(at)
            first += 1
        last, end = len(pieces), len(text)
        if last > first and not text.endswith(pieces[-1]):
            last -= 1
        tail: list[int] = []
        while last > first and pieces[last - 1] and end - len(pieces[last - 1]) >= at:
            if not text.startswith(pieces[last - 1], end - len(pieces[last - 1])):
                break
            tail.append(end)
            end -= len(pieces[last - 1])
            last -= 1
        if end > at:
            ends.append(end)
        ends += reversed(tail)
        if not ends or ends[-1] != len(text):
            ends.append(len(text))
        return ends

    def _hold_closable(self) -> None:
        tail = self._closed_tail()
        if tail is not None:
            self.s.held_deltas += self._advance(tail)

    def chunk_end(self) -> Delta | None:
        """What vLLM sends for the chunk just read."""
        s = self.s
        tail = None if s.dead else self._closed_tail()
        if tail is None:
            return None
        delta = self._release(self._advance(tail))
        if delta is None and len(s.closers) == self.implied_list and s.next_index > 0:
            # Every call is done: vLLM's signal that lets finish_reason be set.
            return Delta(content="")
        return delta

    def _release(self, deltas: list[DeltaToolCall]) -> Delta | None:
        """Held and new pieces as one delta, a call's pieces joined as vLLM sends them."""
        s = self.s
        pieces = s.held_deltas + deltas
        s.held_deltas = []
        merged: list[DeltaToolCall] = []
        for piece in pieces:
            if merged and merged[-1].index == piece.index:
                merged[-1].arguments = (merged[-1].arguments or "") + (piece.arguments or "")
            else:
                merged.append(piece)
        if not merged:
            return None
        for piece in merged:
            if piece.index == 0:
                s.head = (s.head + (piece.arguments or ""))[:3]
        s.called = True
        return Delta(tool_calls=merged)

    def _advance(self, tail: str) -> list[DeltaToolCall]:
        """Pieces vLLM would send now: closed calls, then the open call's JSON so far."""
        s = self.s
        deltas: list[DeltaToolCall] = []
        for call in s.finished:
            self._send(deltas, call.name, call.arguments, call.offset)
            s.next_index += 1
            s.sent = 0
        s.finished = []
        if s.level == "call":
            settled = "".join(s.unsent)
            self._send(deltas, s.call_name, settled + tail, s.unsent_start)
            sent = max(0, min(s.sent, s.settled) - s.unsent_start)  # never needed again
            s.unsent = [settled[sent:]] if sent < len(settled) else []
            s.unsent_start += sent
        return deltas

    def _send(self, deltas: list[DeltaToolCall], name: str, arguments: str, offset: int) -> None:
        s = self.s
        if not s.sent:
            deltas.append(opening_call_delta(self.id_seed, s.next_index, name, arguments))
            s.sent = len(arguments)
            return
        piece = arguments[s.sent - offset :]
        if piece:
            deltas.append(DeltaToolCall(index=s.next_index, arguments=piece))
            s.sent += len(piece)

    # ------------------------------------------------------------------ closing

    def _closed_tail(self) -> str | None:
        """What closing the text as vLLM does adds to the open call's JSON; None: no parse.

        vLLM's heuristics give up when the text (right-stripped) ends in ``=`` or
        ``:``, when the innermost ``{``/``(`` has no more ``:``/``=`` than ``,``
        before it in the whole text, or when an open list does not end in ``[`` or
        ``)`` (a trailing comma dropped); then the closed text must parse.
        """
        s = self.s
        top = s.closers[-1] if s.closers else ""
        end = s.before_last if s.last == "," else s.last
        if (
            s.last in ("=", ":")
            or (top == "{" and s.brace_colons <= s.brace_commas)
            or (top == "(" and s.paren_equals <= s.paren_commas)
            or (top == "[" and end not in ("[", ")"))
        ):
            return None
        if s.level in ("item", "after_item"):
            return ""
        if s.level == "trailing":
            return "" if self._trailing_parses() else None
        if s.level == "call":
            return self._open_call_tail()
        return None

    def _open_call_tail(self) -> str | None:
        s = self.s
        frame = s.frames[-1]
        if s.open_tuples:
            return None  # vLLM's withheld ``)`` never ends the JSON of a tuple
        if (
            frame.kind == "dict"
            and frame.expect in ("key", "after_key")
            and (s.quote or s.token_kind or frame.expect == "after_key")
        ):
            return None  # a dict cut at a key closes into a set or a syntax error
        if s.quote:
            if not s.escape:
                return ""
            digits = s.escape[1:]
            if not s.raw and digits and set(digits) <= _OCTAL:
                return _json_chars(chr(int(digits, 8)))
            return None
        if s.token_kind == "number":
            return _number_json(s.token)
        if s.token_kind == "word":
            return _JSON_WORDS.get(s.token)
        if s.token_kind == "key" or (frame.kind == "call" and frame.expect == "after_key"):
            positional = not keyword.iskeyword(s.token) or s.token in _JSON_WORDS
            return "" if frame.count == 0 and positional else None
        if s.token_kind or (frame.kind != "list" and frame.expect == "value"):
            return None
        return '"' if s.string_open else ""

    def _trailing_parses(self) -> bool:
        """Whether the text after the list keeps the output a list of calls, as Python."""
        s = self.s
        tail = s.trailing.rstrip()
        if not tail:
            return True
        if s.trailing_overflow:
            return False
        added = "".join(_CLOSERS[ch] for ch in reversed(s.closers))
        source = "[a()]" + tail.removesuffix(",") + added
        try:
            module = ast.parse(source)
        except _PARSE_ERRORS:
            return False
        first = module.body[0]
        if not isinstance(first, ast.Expr) or not isinstance(first.value, ast.List):
            return False
        return "}" not in added or not any(isinstance(n, ast.Set) for n in ast.walk(module))

    # ------------------------------------------------------------------ scanning

    def _scan(
        self, text: str, start: int, end: int, call_from: int, synthetic: frozenset[int]
    ) -> int:
        """Scan ``text[start:end]``; returns where the current call's text starts in it."""
        s = self.s
        for index in range(start, end):
            if s.dead:
                return call_from
            ch = text[index]
            if index not in synthetic:
                self._bracket(ch)
            if s.dead:
                return call_from
            if s.level == "opaque":
                self._opaque(text, call_from, index)
            elif s.level == "trailing":
                if len(s.trailing) < _TRAILING_LIMIT:
                    s.trailing += ch
                elif not ch.isspace():
                    s.trailing_overflow = True
            else:
                if s.level == "item" and ch not in _SPACES and ch not in "\r\n]":
                    s.call_text, call_from = [], index
                self._grammar(ch)
                if s.level == "opaque":
                    self._opaque(text, call_from, index)
        return call_from

    def _bracket(self, ch: str) -> None:
        """Follow the text as vLLM's closing heuristics read it, one character."""
        s = self.s
        closers = s.closers
        if closers and closers[-1] in _QUOTES:
            if ch == closers[-1] and s.backslashes % 2 == 0:
                closers.pop()
        elif ch in "[({":
            closers.append(ch)
            if len(closers) > _MAX_NESTING:
                s.dead = True
        elif ch in "])}":
            if not closers or _CLOSERS[closers.pop()] != ch:
                s.dead = True
        elif ch in _QUOTES:
            closers.append(ch)
        if ch == "\x00":
            s.dead = True
        s.backslashes = s.backslashes + 1 if ch == "\\" else 0
        if ch == "{":
            s.brace_colons, s.brace_commas = s.colons, s.commas
        elif ch == "(":
            s.paren_equals, s.paren_commas = s.equals, s.commas
        elif ch == "=":
            s.equals += 1
        elif ch == ",":
            s.commas += 1
        elif ch == ":":
            s.colons += 1
        if not ch.isspace():
            s.before_last, s.last = s.previous, ch
        s.previous = ch

    def _opaque(self, text: str, call_from: int, index: int) -> None:
        """Once bracket depth is back at the list, let ``ast`` read the skipped call."""
        s = self.s
        ch = text[index]
        if not ((ch == ")" and s.closers == ["["]) or (ch == "]" and not s.closers)):
            return
        source = "[" + "".join(s.call_text) + text[call_from : index + 1]
        try:
            calls = parse_calls(source if ch == "]" else source + "]")
        except _PARSE_ERRORS:
            s.dead = True
            return
        if not calls and ch == ")":
            s.dead = True
            return
        s.finished += [PendingCall(call.name, call.arguments, 0) for call in calls]
        s.level = "trailing" if ch == "]" else "after_item"
        s.call_text, s.unsent, s.unsent_start, s.settled = [], [], 0, 0

    def _to_opaque(self) -> None:
        s = self.s
        s.level, s.frames, s.token, s.token_kind, s.quote, s.escape = "opaque", [], "", "", "", ""
        s.held, s.string_open, s.open_tuples = [], False, 0

    def _append(self, json_text: str) -> None:
        s = self.s
        s.unsent.append(json_text)
        s.settled += len(json_text)

    def _grammar(self, ch: str) -> None:
        """Advance the call scanner by one character."""
        s = self.s
        if s.level == "open":
            s.level = "item"  # the list's own ``[``
        elif s.level == "item":
            if ch in _SPACES or ch in "\r\n":
                return
            if ch == "]":
                s.level = "trailing"
            elif ch in _NAME_CHARS and not ch.isdigit():
                s.level, s.token = "callname", ch
            else:
                self._to_opaque()
        elif s.level == "callname":
            if ch in _NAME_CHARS or (ch == "." and not s.token.endswith(".")):
                s.token += ch
            elif ch == "(" and not s.token.endswith(".") and self._plain_name(s.token):
                s.level, s.call_name, s.token = "call", s.token, ""
                s.frames = [Frame("call", "key")]
                s.unsent, s.unsent_start, s.settled = [], 0, 0
                self._append("{")
            else:
                self._to_opaque()
        elif s.level == "after_item":
            if ch in _SPACES or ch in "\r\n":
                return
            if ch == ",":
                s.level = "item"
            elif ch == "]":
                s.level = "trailing"
            else:
                s.dead = True  # nothing after a call but a comma makes a list of calls
        elif s.quote:
            self._string(ch)
        elif s.token_kind:
            self._token(ch)
        else:
            self._structure(ch)

    @staticmethod
    def _plain_name(dotted: str) -> bool:
        parts = dotted.split(".")
        return all(part.isidentifier() and not keyword.iskeyword(part) for part in parts)

    def _structure(self, ch: str) -> None:
        """A character outside strings and tokens, by what the innermost frame expects."""
        s = self.s
        frame = s.frames[-1]
        if ch in _SPACES or ch in "\r\n":
            return
        expect = frame.expect
        if expect == "value":
            self._value_start(ch)
        elif frame.kind == "call" and expect == "key":
            if ch == ")":
                self._close_frame()
            elif ch in _NAME_CHARS and not ch.isdigit():
                s.token, s.token_kind = ch, "key"
            else:
                self._to_opaque()
        elif frame.kind == "call" and expect == "after_key":
            self._keyword_done(ch)
        elif frame.kind == "dict" and expect == "key":
            if ch == "}":
                self._close_frame()
            elif ch in _QUOTES:
                self._append(", " if frame.count else "")
                frame.count += 1
                self._string_start(ch, "", new=True)
            else:
                self._to_opaque()
        elif expect == "after_value":
            self._after_value(ch)
        elif frame.kind == "dict" and expect == "after_key":
            if ch == ":":
                self._end_string_json()
                frame.expect = "value"
                self._append(": ")
            elif not self._concatenated(ch):
                self._to_opaque()
        else:
            self._to_opaque()

    def _after_value(self, ch: str) -> None:
        s = self.s
        frame = s.frames[-1]
        if ch == ",":
            self._end_string_json()
            frame.expect = "key" if frame.kind in ("call", "dict") else "value"
        elif ch == _FRAME_CLOSERS[frame.kind]:
            self._close_frame()
        elif not self._concatenated(ch):
            self._to_opaque()

    def _concatenated(self, ch: str) -> bool:
        """Whether ``ch`` opens a string (or its prefix) joined to the one just closed."""
        s = self.s
        if not s.string_open:
            return False
        if ch in _QUOTES:
            self._string_start(ch, "", new=False)
        elif ch in _NAME_CHARS:
            s.token, s.token_kind = ch, "prefix"
        else:
            return False
        return True

    def _close_frame(self) -> None:
        s = self.s
        self._end_string_json()
        frame = s.frames.pop()
        if frame.kind != "tuple":
            self._append("]" if frame.kind == "list" else "}")
        else:
            s.open_tuples -= 1
            if frame.count == 1 and frame.expect == "after_value":
                s.settled -= len(s.unsent[frame.opener])
                s.unsent[frame.opener] = ""  # ``(x)`` is just x
            else:
                self._append("]")
        if s.frames:
            self._value_done()
            return
        settled = "".join(s.unsent)
        s.finished.append(PendingCall(s.call_name, settled, s.unsent_start))
        s.level, s.call_text = "after_item", []
        s.unsent, s.unsent_start, s.settled = [], 0, 0

    def _value_done(self) -> None:
        frame = self.s.frames[-1]
        at_key = frame.kind == "dict" and frame.expect in ("key", "after_key")
        frame.expect = "after_key" if at_key else "after_value"

    def _end_string_json(self) -> None:
        s = self.s
        if s.string_open:
            s.string_open = False
            self._append('"')

    def _keyword_done(self, ch: str) -> None:
        """After a keyword name: ``=`` starts its value; anything else is for ``ast``."""
        s = self.s
        frame = s.frames[-1]
        name = s.token
        if ch in _SPACES or ch in "\r\n":
            frame.expect = "after_key"
            s.token_kind = ""
            return
        if ch != "=" or keyword.iskeyword(name) or name in frame.names:
            self._to_opaque()
            return
        frame.names.add(name)
        self._append((", " if frame.count else "") + json.dumps(name) + ": ")
        frame.count += 1
        frame.expect = "value"
        s.token, s.token_kind = "", ""

    def _value_start(self, ch: str) -> None:
        s = self.s
        frame = s.frames[-1]
        if frame.kind in ("list", "tuple"):
            if ch == _FRAME_CLOSERS[frame.kind]:
                self._close_frame()
                return
            self._append(", " if frame.count else "")
            frame.count += 1
        if ch in _QUOTES:
            self._string_start(ch, "", new=True)
        elif ch in _NUMBER_START:
            s.token, s.token_kind = ch, "number"
        elif ch in _NAME_CHARS:
            s.token, s.token_kind = ch, "word"
        elif ch in "[{":
            self._append(ch)
            s.frames.append(Frame("list" if ch == "[" else "dict", "value" if ch == "[" else "key"))
        elif ch == "(":
            self._append("[")
            s.frames.append(Frame("tuple", "value", opener=len(s.unsent) - 1))
            s.open_tuples += 1
        else:
            self._to_opaque()

    def _token(self, ch: str) -> None:
        """A name, number or string prefix in progress; its end decides what it was."""
        s = self.s
        token, kind = s.token, s.token_kind
        if kind == "number":
            if ch in _NAME_CHARS or ch == "." or (ch in "+-" and token[-1] in "eE"):
                s.token += ch
                return
            number = _number_json(token)
            if number is None:
                self._to_opaque()
                return
            self._append(number)
        elif ch in _NAME_CHARS:
            s.token += ch
            return
        elif kind == "key":
            self._keyword_done(ch)
            return
        elif ch in _QUOTES and token in ("r", "R", "u", "U"):
            s.token, s.token_kind = "", ""
            self._string_start(ch, token, new=kind == "word")
            return
        elif kind == "word" and token in _JSON_WORDS:
            self._append(_JSON_WORDS[token])
        else:
            self._to_opaque()
            return
        s.token, s.token_kind = "", ""
        self._value_done()
        self._structure(ch)

    def _string_start(self, quote: str, prefix: str, *, new: bool) -> None:
        s = self.s
        s.quote, s.raw, s.string_open = quote, prefix in ("r", "R"), False
        if new:
            self._append('"')

    def _string(self, ch: str) -> None:
        """A character inside a string literal: decoded and JSON-escaped as it settles."""
        s = self.s
        if s.escape:
            self._escape(ch)
        elif ch == "\\":
            self._flush_held()
            s.escape = "\\"
        elif ch == s.quote:
            self._flush_held()
            s.quote, s.string_open = "", True
            self._value_done()
        elif ch in "\r\n":
            s.dead = True  # a line break ends a one-line string: no closing repairs it
        elif ch.isspace():
            s.held.append(_json_chars(ch))  # vLLM strips it while it ends the text
        elif ch == ",":
            self._flush_held()
            s.held = [","]  # and drops one comma before that
        else:
            self._flush_held()
            self._append(_json_chars(ch))

    def _flush_held(self) -> None:
        s = self.s
        if s.held:
            self._append("".join(s.held))
            s.held = []

    def _escape(self, ch: str) -> None:
        """The character after a backslash and those of a longer escape sequence."""
        s = self.s
        sequence = s.escape + ch
        if s.raw:
            if ch.isspace() or ch == ",":
                self._to_opaque()
            else:
                s.escape = ""
                self._append(_json_chars(sequence))
            return
        kind = sequence[1]
        if len(sequence) == 2 and kind in _SIMPLE_ESCAPES:
            s.escape = ""
            self._append(_json_chars(_SIMPLE_ESCAPES[kind]))
        elif kind in _OCTAL:
            if ch in _OCTAL and len(sequence) <= 4:
                s.escape = sequence
                if len(sequence) == 4:
                    s.escape = ""
                    self._append(_json_chars(chr(int(sequence[1:], 8))))
                return
            s.escape = ""
            self._append(_json_chars(chr(int(sequence[1:-1], 8))))
            self._string(ch)
        elif kind in _HEX_ESCAPE_DIGITS:
            digits = _HEX_ESCAPE_DIGITS[kind]
            if len(sequence) == 2:
                s.escape = sequence
            elif ch not in _HEX:
                s.dead = True
            elif len(sequence) < digits + 2:
                s.escape = sequence
            elif int(sequence[2:], 16) > 0x10FFFF:
                s.dead = True
            else:
                s.escape = ""
                self._append(_json_chars(chr(int(sequence[2:], 16))))
        elif kind == "N":
            self._named_escape(sequence, ch)
        elif ch.isspace() or ch == ",":
            self._to_opaque()  # stripped from the end, it would leave a lone backslash
        else:
            s.escape = ""
            self._append(_json_chars(sequence))

    def _named_escape(self, sequence: str, ch: str) -> None:
        s = self.s
        if len(sequence) == 2:
            s.escape = sequence
        elif len(sequence) == 3 and ch != "{":
            s.dead = True
        elif ch != "}":
            s.escape = sequence
            if len(sequence) > _NUMBER_LIMIT:
                s.dead = True
        else:
            try:
                decoded = unicodedata.lookup(sequence[3:-1])
            except KeyError:
                s.dead = True
                return
            s.escape = ""
            self._append(_json_chars(decoded))


# ------------------------------------------------------------------ the family

TokenText = Callable[[int], str]


def _stream(
    token_text: TokenText, request: Request, kept: object
) -> tuple[PythonicStream, PythonicState]:
    state = reuse(kept, PythonicState)
    return PythonicStream(request.id_seed, state, token_text), state


def _token_text(_: str, vocab: Vocabulary) -> TokenText:
    return vocab.token_text


FAMILY = Family(
    title="Pythonic calls (Llama 3.2/4, ToolACE)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("pythonic",),
            engine_based=False,
            states=(PythonicState,),
            prepare=_token_text,
            one_shot=lambda _, request: PythonicTools(),
            stream=_stream,
            golden=("C5",),
        ),
    ),
)
