"""Pythonic tool calls: the whole output is ``[f(a=1), g(b="x")]``."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from parsers.types import ExtractedToolCalls, FunctionCall

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
