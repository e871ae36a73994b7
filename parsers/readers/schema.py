"""Coercing string argument values to the types a tool's JSON schema declares.

Parsers that read arguments as text (qwen3_coder's XML parameters) get strings;
vLLM converts each to the first schema type it parses as, in a fixed priority.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string",
    "enum": "string", "int": "integer", "int32": "integer", "int64": "integer",
    "uint": "integer", "uint32": "integer", "uint64": "integer", "long": "integer",
    "short": "integer", "unsigned": "integer", "float": "number", "float32": "number",
    "float64": "number", "double": "number", "bool": "boolean", "dict": "object",
    "arr": "array", "list": "array", "sequence": "array",
}  # fmt: skip
_PRIORITY = ("null", "integer", "number", "boolean", "object", "array", "string")
_ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))  # fmt: skip


def _enum_type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _ENUM_TYPES if isinstance(value, kind)), "string")


def schema_types(schema: Any) -> list[str]:
    """Every type a schema allows, from ``type``, ``enum`` and ``anyOf``/``oneOf``/``allOf``."""
    if not isinstance(schema, dict):
        return ["string"]
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        types.update(_enum_type(value) for value in enum)
    for key in ("anyOf", "oneOf", "allOf"):
        choices = schema.get(key)
        if isinstance(choices, list):
            for choice in choices:
                types.update(schema_types(choice))
    return list(types) if types else ["string"]


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in a parsed value; iterative, as the nesting is the model's."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return True


def _loads(text: str) -> Any:
    """``json.loads``, with nesting too deep to parse read as not JSON (ValueError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def coerce_string(value: str, types: list[str]) -> Any:
    """The first type of the schema that ``value`` reads as; else JSON, else the string."""
    allowed = {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for candidate in _PRIORITY:
        if candidate not in allowed:
            continue
        if candidate == "null":
            if value.lower() == "null":
                return None
        elif candidate == "string":
            return value
        elif candidate == "integer":
            try:
                return int(value)
            except ValueError:
                pass
        elif candidate == "number":
            try:
                return int(value)
            except ValueError:
                pass
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                return number if number != int(number) else int(number)
        elif candidate == "boolean":
            lowered = value.lower().strip()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0"):
                return False
        else:
            try:
                parsed = _loads(value)
            except ValueError:
                continue
            if _finite(parsed):
                return parsed
    try:
        parsed = _loads(value)
    except ValueError:
        return value
    return parsed if _finite(parsed) else value


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    if isinstance(value, str):
        coerced = coerce_string(value, schema_types(schema))
        return coerced, coerced is not value
    if isinstance(value, dict):
        nested = schema.get("properties")
        return value, isinstance(nested, dict) and _coerce_object(value, nested)
    if isinstance(value, list):
        items = schema.get("items")
        changed = False
        if isinstance(items, dict):
            for i, item in enumerate(value):
                coerced, item_changed = _coerce(item, items)
                if item_changed:
                    value[i] = coerced
                    changed = True
        return value, changed
    coerced = coerce_string(json.dumps(value, ensure_ascii=False), schema_types(schema))
    if type(coerced) is not type(value) or coerced != value:
        return coerced, True
    return value, False


def coerce_value(value: Any, schema: dict[str, Any]) -> Any:
    """One argument value typed by its property schema (strings parsed, nested values walked)."""
    return _coerce(value, schema)[0]


def _coerce_object(args: dict[str, Any], properties: dict[str, Any]) -> bool:
    changed = False
    for key, value in args.items():
        schema = properties.get(key)
        if isinstance(schema, dict):
            coerced, value_changed = _coerce(value, schema)
            if value_changed:
                args[key] = coerced
                changed = True
    return changed


def coerce_arguments(arguments: str, properties: dict[str, Any]) -> str:
    """Re-type a JSON object of arguments per ``properties``; unchanged text if nothing moved."""
    if not properties:
        return arguments
    try:
        args = _loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(args, dict) or not _coerce_object(args, properties):
        return arguments
    return json.dumps(args, ensure_ascii=False)
