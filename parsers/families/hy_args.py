"""HY's argument values: the text of an ``<arg_value>`` typed by the tool's schema.

vLLM's chain, per value: ``boolean`` (``true``/``false``, any case), ``integer``
(Python's ``int``), ``number`` (``float`` when the text holds ``.``, ``e`` or ``E``, else
``int``), JSON for any other named type, the text itself for ``string``, and otherwise
JSON, then a Python literal, then the text. Type names are normalized (``str``, ``int``,
``float``... and prefixes such as ``uint32``); a property with no type is a string.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from parsers.families.xlam import _loads
from parsers.types import ParseOptions

_ALIASES = {
    "str": "string",
    "text": "string",
    "varchar": "string",
    "char": "string",
    "enum": "string",
    "bool": "boolean",
    "binary": "boolean",
    "int": "integer",
    "float": "number",
    "double": "number",
    "list": "array",
    "dict": "object",
    "map": "object",
}
_INTEGER_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_NUMBER_PREFIXES = ("num", "float")
_SCALARS = frozenset({"string", "boolean", "integer", "number"})
# Longer text is no Python literal worth reading (and ast's cost would be the output's).
_LITERAL_LIMIT = 4096


class SchemaError(ValueError):
    """A schema vLLM's type lookup fails on (it then reads no call at all)."""


def _normalized(raw: Any) -> str:
    if not isinstance(raw, str):
        raise SchemaError("a type name that is not a string")
    exact = _ALIASES.get(raw)
    if exact is not None:
        return exact
    lower = raw.lower()
    if lower.startswith(_INTEGER_PREFIXES):
        return "integer"
    if lower.startswith(_NUMBER_PREFIXES):
        return "number"
    return raw


def value_types(options: ParseOptions, function: str, key: str) -> frozenset[str]:
    """The property's normalized types, ``null`` left out."""
    tool = options.tool(function)
    schema = tool.properties().get(key, {}) if tool is not None else {}
    if not isinstance(schema, dict):
        raise SchemaError("a property schema that is not an object")
    if "type" in schema:
        kind = schema["type"]
        choices: list[Any] = [{"type": t} for t in kind] if isinstance(kind, list) else [schema]
    elif "anyOf" in schema:
        choices = schema["anyOf"]
    elif "oneOf" in schema:
        choices = schema["oneOf"]
    else:
        choices = [{"type": "string"}]
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise SchemaError("a union that is not a list of schemas")
    return frozenset(_normalized(c.get("type", "string")) for c in choices) - {"null"}


def only_string(options: ParseOptions, function: str, key: str) -> bool:
    try:
        return value_types(options, function, key) == {"string"}
    except SchemaError:
        return False


def _integer(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _number(value: str) -> int | float | None:
    try:
        return float(value) if any(c in value for c in ".eE") else int(value)
    except ValueError:
        return None


def parse_value(value: str, types: frozenset[str]) -> Any:
    """vLLM's chain (the module docstring)."""
    if "boolean" in types and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if "integer" in types and (whole := _integer(value)) is not None:
        return whole
    if "number" in types and (number := _number(value)) is not None:
        return number
    if types - _SCALARS:
        ok, parsed = _loads(value)
        if ok:
            return parsed
    if "string" in types:
        return value
    ok, parsed = _loads(value)
    if ok:
        return parsed
    if len(value) <= _LITERAL_LIMIT:
        try:
            literal = ast.literal_eval(value)
            json.dumps(literal, ensure_ascii=False)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return value  # (a literal JSON cannot write, a set say, stays text)
        return literal
    return value
