"""Pythonic tool calls: the whole output is ``[f(a=1), g(b="x")]``."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from msgspec import Struct, field

from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

_CALL_LIST = re.compile(
    r"\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*"
    r"([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]",
    re.DOTALL,
)
_JSON_NAMES = {"null": None, "true": True, "false": False}


class NotALiteral(ValueError):
    """A call argument that has no JSON value."""


def literal(node: ast.expr) -> Any:
    """The JSON value of a literal argument expression."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return node.value
        raise NotALiteral("constant without a JSON value")
    if isinstance(node, ast.Dict):
        keys = [key.value for key in node.keys if isinstance(key, ast.Constant)]
        if len(keys) != len(node.keys):
            raise NotALiteral("dict keys must be literals")
        return {key: literal(value) for key, value in zip(keys, node.values, strict=True)}
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [literal(item) for item in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = literal(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise NotALiteral("arguments must be literals")


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


class PythonicTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if _CALL_LIST.match(content) is None:
            return ExtractedToolCalls(False, [], content)
        try:
            module = ast.parse(content)
            value = getattr(module.body[0], "value", None)
            if not isinstance(value, ast.List) or not all(
                isinstance(e, ast.Call) for e in value.elts
            ):
                raise NotALiteral("the output must be a list of calls")
            calls = [to_call(e) for e in value.elts]  # type: ignore[arg-type]
        except (SyntaxError, ValueError, IndexError, RecursionError, TypeError):
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(True, calls, None)


# ---------------------------------------------------------------------------- streaming

_CLOSERS = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}
# How far back from a cut end ``finish`` looks for a prefix that parses.
_SETTLE_WINDOW = 32


def _escaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def close_partial_call_list(text: str) -> tuple[str, str] | None:
    """Close a partial ``[f(a=1), g(`` so it parses: ``(closed_text, added_suffix)``.

    None when the text stops where no completion is meaningful yet (mid name,
    mid key, after ``=``). Raises ValueError on mismatched brackets.
    """
    stack: list[str] = []
    for index, ch in enumerate(text):
        if stack and stack[-1] in "'\"":
            if ch == stack[-1] and not _escaped(text, index):
                stack.pop()
            continue
        if ch in "[({":
            stack.append(ch)
        elif ch in "])}":
            if not stack or _CLOSERS[stack.pop()] != ch:
                raise NotALiteral("mismatched brackets")
        elif ch in "'\"":
            stack.append(ch)
    text = text.rstrip()
    if text.endswith(("=", ":")):
        return None
    if stack and stack[-1] == "{":
        before = text[: text.rfind("{")]
        if before.count(":") <= before.count(","):
            return None
    if stack and stack[-1] == "(":
        before = text[: text.rfind("(")]
        if before.count("=") <= before.count(","):
            return None
    text = text.removesuffix(",")
    if stack and stack[-1] == "[" and not text.endswith(("[", ")")):
        return None
    added = "".join(_CLOSERS[ch] for ch in reversed(stack))
    candidate = text + added
    try:
        module = ast.parse(candidate)
    except SyntaxError:
        return None
    if not module.body:
        return None
    if "}" in added and any(isinstance(node, ast.Set) for node in ast.walk(module)):
        return None
    return candidate, added


class PythonicState(Struct, tag="pythonic"):
    text: str = ""
    passthrough: bool = False
    current: int = -1
    streamed: list[str] = field(default_factory=list)
    called: bool = False


class PythonicStream:
    """Pythonic calls as vLLM streams them: the list so far, closed and parsed.

    The call list is re-parsed on each delta (as vLLM does), so a delta costs
    O(length of the call list); text that does not start with ``[`` passes
    through as content at O(delta).
    """

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: PythonicState | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else PythonicState()

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.passthrough:
            return Delta(content=text)
        s.text += text
        if not s.text.startswith("["):
            # Output that does not open a call list never becomes one.
            s.passthrough, s.text = bool(s.text), ""
            return Delta(content=text)
        try:
            return self._calls()
        except (SyntaxError, ValueError, IndexError, RecursionError, TypeError):
            return None

    def finish(self) -> Delta | None:
        """Settle what a cut output leaves open, the same way for every chunking.

        A list cut mid-string (``g(b='x\\u20``) or mid-name (``[f(a=1), g``) stops
        parsing, so vLLM emits the calls so far or not depending on the chunking.
        The longest prefix that still parses settles it (within a few characters
        of the end, else up to the last closed call).
        """
        s = self.s
        if s.passthrough or not s.text.startswith("["):
            return None
        text = s.text
        last_call = text.rfind(")") + 1
        cuts = [*range(len(text), max(len(text) - _SETTLE_WINDOW, last_call), -1), last_call]
        try:
            for cut in cuts:
                if cut > 0 and close_partial_call_list(text[:cut]) is not None:
                    s.text = text[:cut]
                    return self._calls()
        except (SyntaxError, ValueError, IndexError, RecursionError, TypeError):
            return None
        finally:
            s.text = text
        return None

    def remaining_arguments(self) -> str:
        s = self.s
        if not s.called:
            return ""
        sent = s.streamed[0] if s.streamed else ""
        return "{}"[len(sent) :] if "{}".startswith(sent) else ""

    def _calls(self) -> Delta | None:
        s = self.s
        closed = close_partial_call_list(s.text)
        if closed is None:
            return None
        valid, added = closed
        value = getattr(ast.parse(valid).body[0], "value", None)
        if not isinstance(value, ast.List) or not all(isinstance(e, ast.Call) for e in value.elts):
            raise NotALiteral("the output must be a list of calls")
        calls = [to_call(e) for e in value.elts]  # type: ignore[arg-type]
        deltas: list[DeltaToolCall] = []
        for index, call in enumerate(calls):
            if index < s.current:
                continue
            s.current = index
            if len(s.streamed) == index:
                s.streamed.append("")
            complete = index < len(calls) - 1 or ")]" not in added
            if complete:
                s.current += 1
            withheld = "" if complete else added[:-2]
            if not complete and added[-2] == ")":
                withheld += "}"
            withheld = withheld.replace("'", '"')
            arguments = call.arguments
            if withheld:
                if not arguments.endswith(withheld):
                    raise NotALiteral("arguments do not end with the withheld suffix")
                arguments = arguments[: -len(withheld)]
            sent = s.streamed[index]
            if not sent:
                deltas.append(opening_call_delta(self.id_seed, index, call.name, arguments))
                s.streamed[index] += arguments
            elif arguments[len(sent) :]:
                piece = arguments[len(sent) :]
                deltas.append(DeltaToolCall(index=index, arguments=piece))
                s.streamed[index] += piece
        if deltas:
            s.called = True
            return Delta(tool_calls=deltas)
        if not added and s.current > 0:
            return Delta(content="")
        return None
