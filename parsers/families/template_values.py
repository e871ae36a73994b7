"""A closed tool-call region of a response template read into calls, as vLLM reads it.

The region's text is parsed by its content kind (``json``, with the template's dialect
knobs: ``unquoted_keys``, ``string_delims``, ``allow_non_json``; or ``text``), shaped by
the field's ``transform`` (``{name}`` and the other captures of its opener, ``{content}``
the parsed text), string arguments coerced to the tool's schema, and split into
``(name, arguments)`` pairs. A region that fails any step is malformed: vLLM logs it and
drops its calls. Every step is linear in the region's text; JSON nested too deep to read
counts as malformed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from parsers.families.response_template import Field, placeholder
from parsers.families.template_patterns import Pattern, search_all

_SENTINEL_OPEN, _SENTINEL_CLOSE = "\x01", "\x02"
# A bare identifier key after ``{`` or ``,`` (one class, then a literal: linear).
_BARE_KEY = re.compile(r"(?<=[{,])(\w+):")
_SENTINEL = re.compile("\x01([0-9]+)\x02")


class Malformed(ValueError):
    """The region cannot be read into a value (vLLM's ``region_malformed``)."""


def region_value(body: str, field: Field, captures: dict[str, str]) -> Any:
    """The field's value for its region text, or Malformed."""
    try:
        value = _content(body, field)
        if field.transform is None:
            return value
        if field.transform_each:
            if not isinstance(value, list):
                raise Malformed("transform_each requires a list")
            out = []
            for item in value:
                if not isinstance(item, dict):
                    raise Malformed("transform_each requires dict elements")
                out.append(_apply(field.transform, {**captures, **item}))
            return out
        return _apply(field.transform, {**captures, "content": value})
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise Malformed(str(exc)) from None


def _content(body: str, field: Field) -> Any:
    args = field.content_args
    if field.content == "text":
        return _text(body, args)
    if field.tag is not None:
        return _xml_inline(body, field.tag, args)
    return _json(body, args)


def _text(text: str, args: Any) -> str:
    return text.strip() if args.get("strip", True) else text


def _xml_inline(text: str, tag: Pattern, args: Any) -> dict[str, Any]:
    """Each tag's key and value (parsed by the value parser), a repeated key's values
    kept as a list with ``merge_duplicates`` (else the last wins)."""
    parser = args.get("value_parser")
    merge = args.get("merge_duplicates", False)
    has_value = "value" in tag.groups
    out: dict[str, Any] = {}
    for _, groups in search_all(tag, text):
        key = groups.get("key")
        if key is None:
            raise Malformed("xml-inline: the tag_pattern's 'key' group took no part")
        raw = groups.get("value") if has_value else ""
        value: Any = raw
        if parser is not None and raw is not None:
            name, parser_args = parser.get("name", "text"), parser.get("args", {})
            value = _text(raw, parser_args) if name == "text" else _json(raw, parser_args)
        if key in out and merge:
            if not isinstance(out[key], list):
                out[key] = [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out


def _json(text: str, args: Any) -> Any:
    delims: list[list[str]] = args.get("string_delims", [])
    if delims and (_SENTINEL_OPEN in text or _SENTINEL_CLOSE in text):
        raise Malformed("json: input contains reserved sentinel characters")
    working = text
    captured: list[str] = []
    for opener, closer in delims:
        working = _extract_strings(working, opener, closer, captured)
    if args.get("unquoted_keys", False):
        working = _BARE_KEY.sub(r'"\1":', working)
    if captured:
        working = _SENTINEL.sub(lambda m: json.dumps(captured[int(m[1])]), working)
    try:
        return json.loads(working)
    except (json.JSONDecodeError, RecursionError):
        if args.get("allow_non_json"):
            return _text(text, args)
        raise Malformed("json parser could not parse region as JSON") from None


def _extract_strings(text: str, opener: str, closer: str, captured: list[str]) -> str:
    """Each ``opener...closer`` (the nearest closer) replaced by a numbered sentinel, its
    text kept: what vLLM's non-greedy substitution does, in one forward pass."""
    out: list[str] = []
    at = 0
    while True:
        start = text.find(opener, at)
        if start < 0:
            break
        end = text.find(closer, start + len(opener))
        if end < 0:
            break
        out.append(text[at:start])
        out.append(f"{_SENTINEL_OPEN}{len(captured)}{_SENTINEL_CLOSE}")
        captured.append(text[start + len(opener) : end])
        at = end + len(closer)
    out.append(text[at:])
    return "".join(out)


def _apply(transform: Any, scope: dict[str, Any]) -> Any:
    """The transform with each whole-string placeholder replaced by its value; the
    template's nesting is the server's configuration, not the model's."""
    if isinstance(transform, dict):
        return {key: _apply(value, scope) for key, value in transform.items()}
    if isinstance(transform, list):
        return [_apply(value, scope) for value in transform]
    if not isinstance(transform, str):
        return transform
    path = placeholder(transform)
    if path is None:
        return transform
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(f"transform placeholder {path!r} is not defined")
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"transform placeholder {path!r} cannot be resolved")
        value = value[key]
    return value


def coerce_calls(value: Any, properties_of: dict[str, dict[str, Any]]) -> Any:
    """String arguments read as their schema's type, in place (vLLM's
    ``_coerce_tool_calls``)."""
    for item in value if isinstance(value, list) else [value]:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            continue
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            continue
        properties = properties_of.get(name)
        if not properties:
            continue
        for key, argument in arguments.items():
            types = _schema_types(properties.get(key)) if key in properties else ()
            if not types:
                continue
            if isinstance(argument, str):
                arguments[key] = _coerce(argument, types)
            elif isinstance(argument, list) and "array" not in types:
                arguments[key] = [_coerce(a, types) if isinstance(a, str) else a for a in argument]
    return value


def _schema_types(schema: Any) -> tuple[str, ...]:
    """The types a property schema names, its ``anyOf``/``oneOf`` choices' after (the
    schema is the request's: one nested too deep to read names none)."""
    try:
        return tuple(_types(schema))
    except RecursionError:
        return ()


def _types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else []
    if isinstance(declared, list):
        types.extend(t for t in declared if isinstance(t, str))
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            types.extend(_types(choice))
    if schema.get("nullable") and "null" not in types:
        types.append("null")
    return types


def _coerce(raw: str, types: tuple[str, ...]) -> Any:
    for kind in types:
        try:
            if kind == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)
                    if not number.is_integer():
                        continue
                    return int(number)
            if kind == "number":
                number = float(raw)
                if math.isnan(number) or math.isinf(number):
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if kind == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if kind == "null" and raw.strip() in ("null", "None"):
                return None
            if kind in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if kind == "object" else list):
                    return decoded
        except (ValueError, OverflowError, RecursionError):
            continue
    return raw


def tool_calls(value: Any) -> list[tuple[str, str]]:
    """``(name, arguments)`` of each call in a region's value, or nothing when any call
    is incomplete (vLLM drops the region's calls then)."""
    calls: list[tuple[str, str]] = []
    for item in value if isinstance(value, list) else [value]:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            return []
        name = function.get("name")
        arguments = function.get("arguments")
        if not isinstance(name, str) or not name or arguments is None:
            return []
        if not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (RecursionError, ValueError):
                return []
        calls.append((name, arguments))
    return calls
