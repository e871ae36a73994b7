"""A tokenizer's ``response_template``, read once at start-up (vLLM's ``hf`` and ``beam``).

The template (``tokenizer_config.json``'s ``response_template``) names the regions of
an assistant message: each field's opener and closer (literals or a pattern), what its
text is (``text``, ``json``), and how a tool call's value is shaped (``transform``).
vLLM validates it when the server starts and refuses what it cannot serve; this does
the same, and also refuses what this server does not read, each with a message that
says which field and why (``ParserUnavailable``):

- ``start_anchor_pattern`` (a literal ``start_anchor`` is read);
- content kinds other than ``text``, ``json`` and ``xml-inline`` (``kv-lines``, ``int``,
  ``float``, ``bool``), and an ``xml-inline`` value parser other than ``text`` or ``json``;
- patterns outside the regular subset of parsers/families/template_patterns.py;
- a field's closer that ends with a start anchor (vLLM completes such a closer at the
  end of the output; no template we know of has one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from parsers.families.template_patterns import (
    Pattern,
    PatternError,
    compile_pattern,
    literal_pattern,
)
from parsers.family import ParserUnavailable

THINKING = "thinking"
CONTENT = "content"
TOOLS = "tool_calls"
_SERVED = frozenset({THINKING, CONTENT, TOOLS})
_TEMPLATE_KEYS = frozenset(
    {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
)
_FIELD_KEYS = frozenset(
    {
        "open",
        "open_pattern",
        "close",
        "close_pattern",
        "content",
        "content_args",
        "repeats",
        "join",
        "optional",
        "transform",
        "transform_each",
    }
)
_KNOWN_CONTENT = frozenset({"text", "int", "float", "bool", "json", "xml-inline", "kv-lines"})
_READ_CONTENT = frozenset({"text", "json", "xml-inline"})
_XML_ARGS = frozenset({"tag_pattern", "value_parser", "merge_duplicates"})
_JSON_ARGS = frozenset({"unquoted_keys", "string_delims", "allow_non_json", "strip"})


@dataclass(frozen=True, slots=True)
class Field:
    """One region: its delimiters (None: opened implicitly, or closed only by the end),
    what its text is, and its transform."""

    name: str
    opener: Pattern | None
    closer: Pattern | None
    content: str
    content_args: Mapping[str, Any]
    transform: Any
    transform_each: bool
    # ``xml-inline``: the compiled ``tag_pattern`` each key and value is read with.
    tag: Pattern | None = None


@dataclass(frozen=True, slots=True)
class Template:
    """The fields in declaration order (ties between delimiters go to the first), the
    implicit field, and the literals the assistant message starts after."""

    fields: tuple[Field, ...]
    implicit: str | None
    anchors: tuple[str, ...]

    def field(self, name: str) -> Field:
        for entry in self.fields:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return any(entry.name == name for entry in self.fields)


def read_template(spec: object) -> Template:
    """The template as served (vLLM's streaming form: a ``content`` sink added when
    every field has an opener), or ParserUnavailable saying what is wrong with it."""
    if spec is None:
        raise ParserUnavailable(
            "requires `response_template` metadata in the tokenizer configuration "
            "(tokenizer_config.json), describing the model's output markup"
        )
    try:
        return _read(spec)
    except (PatternError, ValueError, TypeError) as exc:
        raise ParserUnavailable(f"Invalid response_template metadata: {exc}") from None


def _read(spec: object) -> Template:
    if not isinstance(spec, dict):
        raise ValueError(f"response_template must be a dict, got {type(spec).__name__}")
    if spec.get("version", 1) != 1:
        raise ValueError(f"Unsupported response_template version: {spec.get('version')}")
    if unknown := set(spec) - _TEMPLATE_KEYS:
        raise ValueError(f"Unknown keys in response_template: {sorted(unknown)}")
    defaults = spec.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ValueError("response_template.defaults must be a dict")
    raw_fields = spec.get("fields", {})
    if not isinstance(raw_fields, dict) or not raw_fields:
        raise ValueError("response_template.fields must be a non-empty dict")
    if unsupported := sorted((set(raw_fields) - _SERVED) | (set(defaults) - {"role"})):
        raise ValueError(
            f"response_template contains unsupported semantic fields: {unsupported}. "
            f"Supported fields are: {sorted(_SERVED)}"
        )
    if "start_anchor_pattern" in spec:
        if "start_anchor" in spec:
            raise ValueError("cannot specify both 'start_anchor' and 'start_anchor_pattern'")
        raise ValueError("start_anchor_pattern is not read by this server; give start_anchor")
    if "start_anchor" not in spec:
        raise ValueError("response_template must define 'start_anchor' or 'start_anchor_pattern'.")
    anchors = _literals("response_template", spec["start_anchor"], "start_anchor")
    fields = [_field(name, raw) for name, raw in raw_fields.items()]
    if CONTENT not in raw_fields and all(f.opener is not None for f in fields):
        fields.append(Field(CONTENT, None, None, "text", {}, None, False))
    implicit = [f.name for f in fields if f.opener is None]
    if len(implicit) > 1:
        raise ValueError(
            "At most one field may omit 'open'/'open_pattern'. Found: " + ", ".join(implicit)
        )
    for f in fields:
        closer = f.closer
        if closer is not None and closer.literal:
            for literal in _closer_literals(raw_fields.get(f.name, {})):
                if any(literal.endswith(a) and literal != a for a in anchors):
                    raise ValueError(
                        f"Field {f.name!r}: a closer ending with a start anchor is not read "
                        "by this server"
                    )
    return Template(tuple(fields), implicit[0] if implicit else None, tuple(anchors))


def _closer_literals(raw: dict[str, Any]) -> list[str]:
    close = raw.get("close")
    if isinstance(close, str):
        return [close]
    return list(close) if isinstance(close, list) else []


def _literals(scope: str, raw: object, key: str) -> list[str]:
    if isinstance(raw, str):
        literals = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(s, str) for s in raw):
        literals = list(dict.fromkeys(raw))
    else:
        raise ValueError(f"{scope}: '{key}' must be a string or a non-empty list of strings")
    if any(s == "" for s in literals):
        raise ValueError(f"{scope}: '{key}' literals cannot be empty strings")
    return literals


def _delimiter(
    scope: str, raw: dict[str, Any], literal_key: str, pattern_key: str
) -> Pattern | None:
    if literal_key in raw and pattern_key in raw:
        raise ValueError(f"{scope}: cannot specify both '{literal_key}' and '{pattern_key}'")
    if literal_key in raw:
        return literal_pattern(_literals(scope, raw[literal_key], literal_key))
    if pattern_key in raw:
        if not isinstance(raw[pattern_key], str):
            raise ValueError(f"{scope}: '{pattern_key}' must be a string")
        try:
            return compile_pattern(raw[pattern_key])
        except PatternError as exc:
            raise ValueError(f"{scope}: {pattern_key} {exc}") from None
    return None


def _field(name: str, raw: object) -> Field:
    scope = f"Field '{name}'"
    if not isinstance(raw, dict):
        raise ValueError(f"{scope} must be a dict")
    if unknown := set(raw) - _FIELD_KEYS:
        raise ValueError(f"{scope}: unknown keys {sorted(unknown)}")
    content = raw.get("content", "text")
    if content not in _KNOWN_CONTENT:
        raise ValueError(f"{scope}: unknown content parser {content!r}")
    opener = _delimiter(scope, raw, "open", "open_pattern")
    closer = _delimiter(scope, raw, "close", "close_pattern")
    join = raw.get("join")
    if join is not None and not raw.get("repeats", False):
        raise ValueError(f"{scope}: 'join' requires 'repeats': true")
    if join is not None and name not in (THINKING, CONTENT):
        raise ValueError(f"{scope}: 'join' is not read by this server")
    transform = raw.get("transform")
    transform_each = raw.get("transform_each", False)
    if not isinstance(transform_each, bool):
        raise ValueError(f"{scope}: transform_each must be a bool")
    if transform_each and transform is None:
        raise ValueError(f"{scope}: transform_each is set but no transform was provided")
    if transform is None:
        groups = (opener.groups if opener else ()) + (closer.groups if closer else ())
        if groups:
            raise ValueError(f"{scope}: named group(s) {sorted(groups)} but no 'transform'")
    else:
        _check_transform(scope, transform)
    if name in (THINKING, CONTENT) and (content != "text" or transform is not None or join):
        raise ValueError(
            f"response_template field {name!r} uses semantics that cannot be streamed by "
            "the OpenAI serving adapter"
        )
    if content not in _READ_CONTENT:
        raise ValueError(f"{scope}: content {content!r} is not read by this server")
    args = raw.get("content_args", {})
    if not isinstance(args, dict):
        raise ValueError(f"{scope}: content_args must be a dict")
    if content == "json":
        if unknown := set(args) - _JSON_ARGS:
            raise ValueError(f"{scope}: json content_args {sorted(unknown)} are not read")
        delims = args.get("string_delims", [])
        if not isinstance(delims, list) or not all(
            isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) and x for x in d)
            for d in delims
        ):
            raise ValueError(f"{scope}: string_delims must be [[open, close], ...] of strings")
    tag = _xml_tag(scope, args) if content == "xml-inline" else None
    return Field(name, opener, closer, content, args, transform, transform_each, tag)


def _xml_tag(scope: str, args: dict[str, Any]) -> Pattern:
    """An ``xml-inline`` field's tag pattern, with a ``key`` group, and its value parser."""
    if unknown := set(args) - _XML_ARGS:
        raise ValueError(f"{scope}: xml-inline content_args {sorted(unknown)} are not read")
    source = args.get("tag_pattern")
    if not isinstance(source, str):
        raise ValueError(f"{scope}: xml-inline: 'tag_pattern' content_arg is required")
    try:
        tag = compile_pattern(source)
    except PatternError as exc:
        raise ValueError(f"{scope}: tag_pattern {exc}") from None
    if "key" not in tag.groups:
        raise ValueError(f"{scope}: xml-inline: tag_pattern must have a named group 'key'")
    parser = args.get("value_parser")
    if parser is not None and (
        not isinstance(parser, dict)
        or parser.get("name", "text") not in ("text", "json")
        or not isinstance(parser.get("args", {}), dict)
    ):
        raise ValueError(f"{scope}: xml-inline value_parser other than text or json is not read")
    return tag


def _check_transform(scope: str, transform: object) -> None:
    """Each string is a whole ``{placeholder}`` or plain text (vLLM refuses a mix);
    iterative, so a template's nesting costs no recursion."""
    pending = [transform]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str) and not _whole_placeholder(item) and _has_placeholder(item):
            raise ValueError(
                f"{scope}: transform string {item!r} mixes a {{placeholder}} with literal text"
            )


def _placeholder_name(text: str) -> bool:
    parts = text.split(".")
    return all(part and all(ch.isalnum() or ch == "_" for ch in part) for part in parts)


def _whole_placeholder(text: str) -> bool:
    return text.startswith("{") and text.endswith("}") and _placeholder_name(text[1:-1])


def _has_placeholder(text: str) -> bool:
    at = text.find("{")
    while at >= 0:
        end = text.find("}", at + 1)
        if end < 0:
            return False
        inner = text[at + 1 : end]
        if "{" not in inner and _placeholder_name(inner):
            return True
        at = text.find("{", at + 1)
    return False


def placeholder(text: str) -> str | None:
    """The dotted path of a whole-string ``{placeholder}``, else None."""
    return text[1:-1] if _whole_placeholder(text) else None
