"""Muse's ATEM calls and the tails its streams hold back, as vLLM 0.33.0 reads them.

A call is ``<atem:invoke name="NAME">`` ... ``</atem:invoke>``, its arguments
``<atem:parameter name="KEY">VALUE</atem:parameter>``. vLLM's patterns take the first
``name="..."`` (non-empty, after a non-word character) before the tag's ``>``, a value
up to the first closing tag, and read a value as JSON where it is JSON (else the
string; a parameter the tool declares a string stays the string). A call is sent only
once its closing tag is in: ``InvokeScanner`` finds them a piece at a time, holding
only the call being read.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.growing_text import GrowingText
from parsers.types import FunctionCall, ParseOptions

INVOKE_OPEN = "<atem:invoke"
INVOKE_CLOSE = "</atem:invoke>"
PARAM_OPEN = "<atem:parameter"
PARAM_CLOSE = "</atem:parameter>"
NAME_ATTR = 'name="'

# Longer tails than this are not held back: a recipient name or a run of partial
# markers past it is far outside what a model writes, and reading it whole per chunk
# would cost the tail's length each time.
TAIL_WINDOW = 256
_MARKERS = ("<|eom|>", "<|eot|>", "<|start|>", "<|message|>")
_SPACES = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


class CallFailed(Exception):
    """An argument vLLM's reader raises on (nesting too deep for its JSON decoder)."""


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def find_tag(text: str, tag: str, start: int) -> int:
    """The first ``tag`` at or after ``start`` not followed by a word character."""
    at = text.find(tag, start)
    while at >= 0:
        after = at + len(tag)
        if after >= len(text) or not _is_word(text[after]):
            return at
        at = text.find(tag, at + 1)
    return -1


def tag_name(text: str, after: int) -> tuple[str, int] | int:
    """``[^>]*?\\bname="([^"]+)"`` from ``after``: the value and its closing quote; else
    where an opener may next succeed (the tag's ``>``: openers before it fail the same
    way), or -1 when none after it can."""
    gt = text.find(">", after)
    stop = gt if gt >= 0 else len(text)
    at = text.find(NAME_ATTR, after, stop)
    while at >= 0:
        if not _is_word(text[at - 1]):
            quote = text.find('"', at + len(NAME_ATTR))
            if quote < 0:
                return -1
            if quote > at + len(NAME_ATTR):
                return text[at + len(NAME_ATTR) : quote], quote
        at = text.find(NAME_ATTR, at + 1, stop)
    return gt


def _named(text: str, tag: str, at: int) -> tuple[int, str, int] | None:
    """The first ``tag`` from ``at`` with a name: where it is, the name, its quote."""
    while at >= 0:
        named = tag_name(text, at + len(tag))
        if not isinstance(named, int):
            return at, named[0], named[1]
        at = find_tag(text, tag, named) if named >= 0 else -1
    return None


def _parameters(invoke: str) -> list[tuple[str, str]]:
    """Every ``<atem:parameter name="KEY">VALUE</atem:parameter>`` of one call, in order."""
    found: list[tuple[str, str]] = []
    named = _named(invoke, PARAM_OPEN, find_tag(invoke, PARAM_OPEN, 0))
    while named is not None:
        _, key, quote = named
        gt = invoke.find(">", quote + 1)
        close = invoke.find(PARAM_CLOSE, gt + 1) if gt >= 0 else -1
        if close < 0:
            break  # a later opener has no closing tag after it either
        found.append((key, invoke[gt + 1 : close]))
        named = _named(invoke, PARAM_OPEN, find_tag(invoke, PARAM_OPEN, close + len(PARAM_CLOSE)))
    return found


def _decode(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw
    except RecursionError as error:
        raise CallFailed from error


class CallReader:
    """What a request tells the reader: its tools' names and string parameters."""

    def __init__(self, options: ParseOptions, keep_strings: bool) -> None:
        tools = options.tools or ()
        self.names = {tool.name for tool in tools if tool.name}
        self.strings: dict[str, set[str]] = {}
        if keep_strings:
            for tool in tools:
                if tool.name and isinstance(tool.parameters, dict):
                    self.strings[tool.name] = {
                        key
                        for key, schema in tool.properties().items()
                        if isinstance(schema, dict) and schema.get("type") == "string"
                    }

    def call(self, invoke: str) -> FunctionCall | None:
        """One complete ``<atem:invoke ...>...</atem:invoke>`` as vLLM builds its call
        (None without a name); ``CallFailed`` where vLLM's reader raises."""
        named = _named(invoke, INVOKE_OPEN, 0)
        if named is None:
            return None
        name = self._registered(named[1])
        strings = self.strings.get(name, set())
        args: dict[str, Any] = {}
        for key, raw in _parameters(invoke):
            args[key] = raw if key in strings else _decode(raw)
        try:
            return FunctionCall(name, json.dumps(args, ensure_ascii=False))
        except RecursionError as error:
            raise CallFailed from error

    def _registered(self, emitted: str) -> str:
        """``get_weather.get_weather`` for a tool registered as ``get_weather``."""
        if not self.names or emitted in self.names:
            return emitted
        head, dot, tail = emitted.partition(".")
        if dot and head == tail and head in self.names:
            return head
        return emitted


class InvokeScanner(Struct):
    """Complete calls found in text read a piece at a time (vLLM's non-overlapping
    ``<atem:invoke\\b.*?</atem:invoke>``). ``text`` holds what is not read yet: from
    the open call's start, or the last characters that may begin one."""

    text: GrowingText = field(default_factory=GrowingText)
    open: bool = False
    searched: int = 0
    found: int = 0

    def feed(self, piece: str) -> list[str]:
        """Read ``piece``; the calls it completed, whole."""
        text = self.text
        text.append(piece)
        done: list[str] = []
        while True:
            if not self.open:
                at = text.find(INVOKE_OPEN, self.searched)
                while at >= 0 and at + len(INVOKE_OPEN) < len(text):
                    if not _is_word(text[at + len(INVOKE_OPEN)]):
                        break
                    at = text.find(INVOKE_OPEN, at + 1)
                if at < 0:
                    self._keep(max(len(text) - len(INVOKE_OPEN), 0))
                    return done
                self._keep(at)
                if len(self.text) == len(INVOKE_OPEN):
                    return done  # the character after it decides
                self.open = True
                self.searched = len(INVOKE_OPEN)
                text = self.text
            close = text.find(INVOKE_CLOSE, self.searched)
            if close < 0:
                self.searched = max(len(text) - len(INVOKE_CLOSE) + 1, len(INVOKE_OPEN))
                return done
            end = close + len(INVOKE_CLOSE)
            done.append(text[:end])
            self.found += 1
            self.open = False
            self._keep(end)
            text = self.text

    def _keep(self, start: int) -> None:
        """Forget the text before ``start``."""
        if start > 0:
            kept = self.text[start:]
            self.text = GrowingText([kept] if kept else [], len(kept))
        self.searched = 0


def reasoning_hold(tail: str) -> int:
    """How many characters at the end of a growing body the reasoning parser holds
    back: partial markers and a header starting (`` t``, `` to``, `` to=NAME``), in
    turn until neither is left (vLLM's ``_trim_open_body``)."""
    body = tail
    while True:
        trimmed = body
        for marker in _MARKERS:
            cut = next(
                (
                    k
                    for k in range(min(len(marker) - 1, len(trimmed)), 0, -1)
                    if trimmed.endswith(marker[:k])
                ),
                0,
            )
            if cut:
                trimmed = trimmed[:-cut]
                break
        trimmed = trimmed[: _header_tail(trimmed)]
        if trimmed == body:
            return len(tail) - len(body)
        body = trimmed


def _header_tail(text: str) -> int:
    """Where ``[\\s](?:t|to|to=[^\\s<]*)$`` starts in ``text`` (its length if nowhere);
    ``$`` also matches before a final newline."""
    stop = len(text) - 1 if text.endswith("\n") else len(text)
    word = stop
    while word > 0 and text[word - 1] not in _SPACES:
        word -= 1
    candidate = text[word:stop]
    if word > 0 and (
        candidate in ("t", "to") or (candidate.startswith("to=") and "<" not in candidate)
    ):
        return word - 1
    return len(text)


def tool_hold(tail: str) -> int:
    """How many characters at the end of a growing body the tool parser holds back:
    a header starting (spaces then ``to=NAME``), else a partial marker
    (vLLM's ``_safe_open_body``)."""
    name = len(tail) - 1 if tail.endswith("\n") else len(tail)
    while name > 0 and tail[name - 1] in _NAME_CHARS:
        name -= 1
    if name >= 3 and tail[name - 3 : name] == "to=":
        spaces = name - 3
        while spaces > 0 and tail[spaces - 1] in _SPACES and tail[spaces - 1] != "\n":
            spaces -= 1
        if spaces < name - 3:
            return len(tail) - spaces
    for overlap in range(min(len(tail), len(_MARKERS[-1]) - 1), 0, -1):
        if any(marker.startswith(tail[-overlap:]) for marker in _MARKERS):
            return overlap
    return 0
