"""MiniMax M3's call arguments: namespaced elements read into a JSON object.

Every tag of an ``<invoke>`` body carries the ``]<]minimax[>[`` namespace::

    ]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<items>]<]minimax[>[<item>book]<]minimax[>[</item>]<]minimax[>[</items>

An element holding elements is an object, or a list where its schema says array (the
template writes list members as ``<item>``); a name repeated among siblings collects its
values into a list; text beside child elements is kept under ``$text`` (more ``$`` in
front while a child has that name). Text values are typed by their schema, an empty
element of a container type is an empty container. The body is read once, when its
``<invoke>`` closes, each element converted as it closes (no recursion: an element
nested deeper than vLLM's limit is malformed). Reading stops at the first malformed or
unterminated element, keeping the parameters before it.
"""

from __future__ import annotations

import json
from typing import Any

from parsers.readers.schema import coerce_string, schema_types

NAMESPACE = "]<]minimax[>["
ELEMENT_START = NAMESPACE + "<"
ELEMENT_END_START = NAMESPACE + "</"
MIXED_TEXT_FIELD = "$text"
MAX_ELEMENT_DEPTH = 128


def container(schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The first ``array`` or ``object`` alternative of a schema, depth first through
    ``anyOf`` / ``oneOf`` (walked with a stack: the nesting is the request's)."""
    pending: list[Any] = [schema]
    while pending:
        current = pending.pop()
        if not isinstance(current, dict):
            continue
        declared = current.get("type")
        for kind in ("array", "object"):
            if declared == kind or (isinstance(declared, list) and kind in declared):
                return kind, current
        if declared is None:
            if "items" in current:
                return "array", current
            if "properties" in current or "additionalProperties" in current:
                return "object", current
        choices = [choice for key in ("anyOf", "oneOf") for choice in (current.get(key) or ())]
        pending.extend(reversed(choices))
    return None


class _Element:
    """An element being read: its name, closing tag, schema, text pieces and its
    children's converted values."""

    __slots__ = ("children", "close", "container", "name", "schema", "text")

    def __init__(self, name: str, schema: Any) -> None:
        self.name = name
        self.close = f"{ELEMENT_END_START}{name}>"
        self.schema: dict[str, Any] | None = schema if isinstance(schema, dict) else None
        self.container = container(self.schema) if self.schema is not None else None
        self.text: list[str] = []
        self.children: list[tuple[str, Any]] = []

    def child_schema(self, name: str) -> Any:
        """A child's schema: the array's items, else the object's property (or its
        ``additionalProperties``)."""
        if self.container is not None and self.container[0] == "array":
            return self.container[1].get("items")
        holder = self.container[1] if self.container is not None else {}
        properties = holder.get("properties") or {}
        return properties.get(name, holder.get("additionalProperties"))

    def value(self) -> Any:
        """Its text typed by its schema, or its children as a list (an array schema) or an
        object (mixed text under a free ``$`` name)."""
        body = "".join(self.text)
        if not self.children:
            return _typed(body, self.schema, self.container)
        if body.strip():
            names = {name for name, _ in self.children}
            field = MIXED_TEXT_FIELD
            while field in names:
                field = "$" + field
            schema = self.child_schema(field)
            schema = schema if isinstance(schema, dict) else None
            typed = _typed(body, schema, container(schema) if schema is not None else None)
            self.children.append((field, typed))
        if self.container is not None and self.container[0] == "array":
            return [value for _, value in self.children]
        return collect(self.children)


def collect(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Named values as an object; a repeated name's values become a list, in order."""
    result: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, value in pairs:
        if name not in result:
            result[name] = value
        elif name in repeated:
            result[name].append(value)
        else:
            result[name] = [result[name], value]
            repeated.add(name)
    return result


def _typed(text: str, schema: dict[str, Any] | None, shape: tuple[str, Any] | None) -> Any:
    """An element's text as its schema types it (an empty container element is empty)."""
    if schema is None:
        return text
    types = schema_types(schema)
    if shape is not None and "string" not in types and not text.strip():
        return [] if shape[0] == "array" else {}
    return coerce_string(text, types)


def _head(raw: str, pos: int, parent: _Element) -> tuple[_Element, int] | None:
    """The child of ``parent`` whose opening tag starts at ``pos``, and where its body starts."""
    name_start = pos + len(ELEMENT_START)
    name_end = raw.find(">", name_start)
    if name_end <= name_start:
        return None
    name = raw[name_start:name_end]
    if name.startswith("/") or not name.strip():
        return None
    return _Element(name, parent.child_schema(name)), name_end + 1


def _element(raw: str, pos: int, top: _Element) -> tuple[str, Any, int] | None:
    """The parameter at ``pos`` (its name, converted value, and where it ends); None if
    it is malformed or unterminated."""
    head = _head(raw, pos, top)
    if head is None:
        return None
    open_elements, pos = [head[0]], head[1]
    while True:
        current = open_elements[-1]
        marker = raw.find(NAMESPACE, pos)
        if marker < 0:
            return None
        current.text.append(raw[pos:marker])
        if raw.startswith(current.close, marker):
            pos = marker + len(current.close)
            open_elements.pop()
            if not open_elements:
                return current.name, current.value(), pos
            open_elements[-1].children.append((current.name, current.value()))
            continue
        if not raw.startswith(ELEMENT_START, marker) or len(open_elements) >= MAX_ELEMENT_DEPTH:
            return None
        head = _head(raw, marker, current)
        if head is None:
            return None
        open_elements.append(head[0])
        pos = head[1]


def read_arguments(raw: str, properties: dict[str, Any]) -> str:
    """An ``<invoke>`` body's arguments as vLLM's converter writes them (JSON text), its
    elements typed by the tool's ``properties``."""
    top = _Element("", {"properties": properties})
    params: list[tuple[str, Any]] = []
    pos, size = 0, len(raw)
    while True:
        while pos < size and raw[pos].isspace():
            pos += 1
        if not raw.startswith(ELEMENT_START, pos):
            break
        element = _element(raw, pos, top)
        if element is None:
            break
        name, value, pos = element
        params.append((name, value))
    return json.dumps(collect(params), ensure_ascii=False)
