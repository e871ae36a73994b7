"""The text repairs vLLM 0.33.0's ``lfm2`` parser makes before reading pythonic calls.

LFM2 writes calls that Python does not parse as they are: raw line breaks and tabs
inside string arguments, zero-padded integers (``month=07``), parameters named after
keywords (``from=1``), shell commands nesting the quotes of their own string. vLLM
rewrites the text so it parses, in this order: control characters inside strings
escaped, leading zeros dropped, and (one-shot, or streamed once the call's end is in)
a broken string closed at the only closing quote that parses, then keyword parameters
renamed (their names restored in the decoded arguments). Each pass reads the text once
and leaves text that already parses alone; the quote repair tries ``ast.parse`` per
candidate, so it runs on text up to ``REQUOTE_LIMIT`` characters with at most
``REQUOTE_CANDIDATES`` closing quotes to try (docs/parity.md, lfm2-reread-budget).
"""

from __future__ import annotations

import ast
import keyword
import warnings
from typing import Any

QUOTES = frozenset("'\"")
_CONTROLS = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x00": "\\x00"}
# What may follow a string's closing quote (after white space) for it to close there.
_FOLLOWERS = frozenset(",)]}:")
_RENAMED = "_pyreservedkw_"
REQUOTE_LIMIT = 16_384
REQUOTE_CANDIDATES = 64  # closing quotes tried at most (each costs a parse)
# What ``ast.parse`` can raise on hostile text, besides SyntaxError (a ValueError).
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, TypeError, IndexError)


def parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text)


def escape_controls(text: str) -> str:
    """Line breaks, tabs and NULs inside quoted strings written as escapes."""
    out: list[str] = []
    quote = ""
    i, size = 0, len(text)
    while i < size:
        ch = text[i]
        if not quote:
            quote = ch if ch in QUOTES else ""
            out.append(ch)
        elif ch == "\\" and i + 1 < size:
            out.append(text[i : i + 2])
            i += 2
            continue
        elif ch == quote:
            quote = ""
            out.append(ch)
        else:
            out.append(_CONTROLS.get(ch, ch))
        i += 1
    return "".join(out)


def _name_end(text: str, i: int) -> int:
    while i < len(text) and (text[i].isalnum() or text[i] == "_"):
        i += 1
    return i


def _string_end(text: str, i: int, quote: str) -> int:
    """Past the quote closing the string whose content starts at ``i`` (or the end)."""
    size = len(text)
    while i < size:
        if text[i] == "\\" and i + 1 < size:
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    return size


def drop_leading_zeros(text: str) -> str:
    """Zero-padded decimal integers outside strings (``07``, ``0_7``) as Python reads them."""
    out: list[str] = []
    i, size = 0, len(text)
    while i < size:
        ch = text[i]
        if ch in QUOTES:
            end = _string_end(text, i + 1, ch)
        elif ch.isalpha() or ch == "_":
            end = _name_end(text, i)
        elif ch.isdigit():
            end = i
            while end < size and (text[end].isdigit() or text[end] == "_"):
                end += 1
            digits = text[i:end].replace("_", "")
            follower = text[end] if end < size else ""
            padded = digits[0] == "0" and digits.strip("0")
            if (
                padded
                and (i == 0 or text[i - 1] != ".")
                and follower not in (".", "e", "E", "j", "J")
            ):
                out.append(str(int(digits)))
                i = end
                continue
        else:
            end = i + 1
        out.append(text[i:end])
        i = end
    return "".join(out)


def rename_keywords(text: str) -> tuple[str, bool]:
    """Keyword-named parameters (``from=``, after ``(`` or ``,``) renamed so they parse."""
    out: list[str] = []
    changed = False
    last = ""  # the last character outside white space (a name's last)
    i, size = 0, len(text)
    while i < size:
        ch = text[i]
        if ch in QUOTES:
            end = _string_end(text, i + 1, ch)
            out.append(text[i:end])
            last, i = ch, end
            continue
        if ch.isalpha() or ch == "_":
            end = _name_end(text, i)
            name = text[i:end]
            after = end
            while after < size and text[after].isspace():
                after += 1
            is_parameter = (
                last in ("(", ",")
                and after < size
                and text[after] == "="
                and text[after + 1 : after + 2] != "="
            )
            if is_parameter and keyword.iskeyword(name):
                name += _RENAMED
                changed = True
            out.append(name)
            last, i = name[-1], end
            continue
        out.append(ch)
        if not ch.isspace():
            last = ch
        i += 1
    return "".join(out), changed


def restore_keywords(arguments: dict[str, Any]) -> dict[str, Any]:
    restored = {}
    for key, value in arguments.items():
        stem = key[: -len(_RENAMED)] if key.endswith(_RENAMED) else ""
        restored[stem if stem and keyword.iskeyword(stem) else key] = value
    return restored


def _closes(text: str, quote_at: int) -> bool:
    """Whether what follows the quote at ``quote_at`` (after white space) lets it close."""
    k = quote_at + 1
    while k < len(text) and text[k].isspace():
        k += 1
    return k < len(text) and text[k] in _FOLLOWERS


def _next_quote(text: str, i: int, quote: str) -> int:
    """The next unescaped ``quote`` from ``i`` (backslashes skip a character), or -1."""
    size = len(text)
    while i < size:
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i
        else:
            i += 1
    return -1


def broken_string(text: str) -> bool:
    """Whether a string's first closing quote cannot close it (a quote at the very end
    counts: what follows it is not known yet). vLLM sends no call piece then."""
    i, size = 0, len(text)
    while i < size:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch not in QUOTES:
            i += 1
            continue
        close = _next_quote(text, i + 1, ch)
        if close < 0:
            return False
        if not _closes(text, close):
            return True
        i = close + 1
    return False


def _escaped(text: str, i: int) -> bool:
    backslashes = 0
    while i - backslashes - 1 >= 0 and text[i - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def requote(text: str) -> tuple[str, bool]:
    """The first broken string closed at the only closing quote with which the text
    parses (its inner quotes escaped); the text unchanged when none or several do."""
    if len(text) > REQUOTE_LIMIT:
        return text, False
    i, size = 0, len(text)
    while i < size:
        ch = text[i]
        if ch not in QUOTES:
            i += 1
            continue
        quotes = []
        j = _next_quote(text, i + 1, ch)
        while j >= 0:
            quotes.append(j)
            j = _next_quote(text, j + 1, ch)
        if not quotes:
            return text, False
        if _closes(text, quotes[0]):
            i = quotes[0] + 1
            continue
        closers = [q for q in quotes if _closes(text, q)]
        if len(closers) > REQUOTE_CANDIDATES:
            return text, False
        winners = []
        for close in closers:
            inner = "".join(
                "\\" + c if c == ch and not _escaped(text, k) else c
                for k, c in enumerate(text[i + 1 : close], i + 1)
            )
            candidate = text[:i] + ch + inner + ch + text[close + 1 :]
            try:
                parse(escape_controls(candidate))
            except PARSE_ERRORS:
                continue
            winners.append(candidate)
        return (winners[0], True) if len(winners) == 1 else (text, False)
    return text, False


class Unbalanced(ValueError):
    """A closing bracket that no open one matches: the text is no call list."""


_CLOSERS = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}


def close_text(text: str) -> tuple[str, str] | None:
    """vLLM's completion of a partial call list: the text with its open brackets and
    string closed, and what was added; None where it is too incomplete to read."""
    stack: list[str] = []
    for i, ch in enumerate(text):
        if stack and stack[-1] in QUOTES:
            if ch == stack[-1] and not _escaped(text, i):
                stack.pop()
            continue
        if ch in "[({" or ch in QUOTES:
            stack.append(ch)
        elif ch in "])}" and (not stack or _CLOSERS[stack.pop()] != ch):
            raise Unbalanced(ch)
    text = text.rstrip()
    if text.endswith(("=", ":")):
        return None
    top = stack[-1] if stack else ""
    if top == "{":
        before = text[: text.rfind("{")]
        if before.count(":") <= before.count(","):
            return None
    if top == "(":
        before = text[: text.rfind("(")]
        if before.count("=") <= before.count(","):
            return None
    if text.endswith(","):
        text = text[:-1]
    if top == "[" and not text.endswith(("[", ")")):
        return None
    added = "".join(_CLOSERS[opener] for opener in reversed(stack))
    try:
        module = parse(text + added)
    except SyntaxError:
        return None
    if not module.body:
        return None
    if "}" in added and any(isinstance(node, ast.Set) for node in ast.walk(module)):
        return None
    return text + added, added
