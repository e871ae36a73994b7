"""dots tool calls (``dots``): blocks of ``<invoke>`` calls, or one JSON call, in
``<dots_function_call>`` ... ``</dots_function_call>`` spelled as text.

vLLM 0.33.0 reads:

* one-shot: every block in turn; a body opening with ``<invoke`` is its
  ``<invoke name=N>`` ... ``</invoke>`` calls, each ``<parameter name=K>V</parameter>``
  converted by the tool's schema (``null``; strings; ``int``/``float`` where they
  parse; booleans as ``true``/``1``; else JSON where it parses); any other body is one
  JSON object with ``name`` and ``arguments`` (or ``parameters``). Calls to tools the
  request does not declare are dropped, a body that does not parse is skipped. With
  a call, content is the text before the first block (stripped); without, the output.
* streamed: text outside blocks is content (a possible opening held back, the
  closing marker's text taken out, and only while the chunk's reading ends outside a
  block); a JSON body goes out as soon as it is a whole object of a declared tool (its
  name, then its arguments), an ``<invoke>`` block when it closes; a block with no call
  goes out as its stripped text. Text held at the end is lost, as in vLLM.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ToolSpec

START = "<dots_function_call>"
END = "</dots_function_call>"
_ERRORS = (ValueError, TypeError, RecursionError)

# ------------------------------------------------------------------ reading a block


def _name(raw: str) -> str:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _tagged(text: str, tag: str) -> list[tuple[str, str]]:
    """``<TAG\\s+name\\s*=\\s*N>BODY</TAG>`` elements, left to right, as vLLM's
    pattern finds them: the name runs to the next ``>``, the body to the next closer."""
    opener, closer = f"<{tag}", f"</{tag}>"
    found: list[tuple[str, str]] = []
    at = text.find(opener)
    while at >= 0:
        cursor = at + len(opener)
        spaced = cursor
        while spaced < len(text) and text[spaced].isspace():
            spaced += 1
        equals = spaced + len("name")
        while equals < len(text) and text[equals].isspace():
            equals += 1
        if spaced > cursor and text.startswith("name", spaced) and text.startswith("=", equals):
            name_end = text.find(">", equals + 1)
            if name_end < 0:
                break  # no later element can close its name either
            end = text.find(closer, name_end + 1)
            if end < 0:
                break
            if name_end > equals + 1:
                found.append((text[equals + 1 : name_end], text[name_end + 1 : end]))
                at = text.find(opener, end + len(closer))
                continue
        at = text.find(opener, at + 1)
    return found


def _param_type(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """vLLM's type of a parameter schema: ``type``, a local ``$ref``, or the first
    non-null alternative of ``anyOf``/``oneOf``/``allOf`` (ten levels at most)."""
    if not isinstance(schema, dict) or depth > 10:
        return None
    if "type" in schema:
        return schema["type"]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _param_type(defs.get(ref.rsplit("/", 1)[-1]), defs, depth + 1)
    for keyword in ("anyOf", "oneOf", "allOf"):
        alternatives = schema.get(keyword)
        if not isinstance(alternatives, list):
            continue
        for alternative in alternatives:
            if isinstance(alternative, dict) and alternative.get("type") == "null":
                continue
            resolved = _param_type(alternative, defs, depth + 1)
            if resolved is not None:
                return resolved
    return None


def _converted(value: str, kind: Any) -> Any:
    """A parameter's text as the schema's type reads it (vLLM's conversion)."""
    if value.lower() == "null":
        return None
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), "string")
    kind = (kind if isinstance(kind, str) else str(kind)).lower()
    if kind in ("string", "str", "text"):
        return value
    try:
        if kind in ("integer", "int"):
            return int(value)
        if kind in ("number", "float"):
            number = float(value)
            return int(number) if number.is_integer() else number
    except (TypeError, ValueError):
        return value
    if kind in ("boolean", "bool"):
        return value.lower() in ("true", "1")
    try:
        return json.loads(value)
    except _ERRORS:
        return value


def _schema(name: str, tools: tuple[ToolSpec, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    for tool in tools:
        if tool.name != name:
            continue
        schema = tool.parameters
        if not isinstance(schema, dict):
            break
        properties, defs = schema.get("properties", {}), schema.get("$defs", {})
        return (
            properties if isinstance(properties, dict) else {},
            defs if isinstance(defs, dict) else {},
        )
    return {}, {}


def parse_block(body: str, tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """A block's calls as vLLM reads them; raises ValueError/TypeError when it cannot."""
    body = body.strip()
    if not body.startswith("<invoke"):
        parsed = json.loads(body)
        if not isinstance(parsed, dict):
            raise TypeError("a dots JSON call is an object")
        return [parsed]
    calls = []
    for raw_name, inner in _tagged(body, "invoke"):
        name = _name(raw_name)
        properties, defs = _schema(name, tools)
        arguments: dict[str, Any] = {}
        for raw_key, value in _tagged(inner, "parameter"):
            key = _name(raw_key)
            kind = _param_type(properties[key], defs) if key in properties else None
            arguments[key] = _converted(value.strip(), kind or "string")
        calls.append({"name": name, "arguments": arguments})
    return calls


def validated(parsed: dict[str, Any], tools: tuple[ToolSpec, ...]) -> tuple[str, str] | None:
    """A call of a declared tool with object arguments: its name and arguments' JSON."""
    name = parsed.get("name")
    if not isinstance(name, str) or name not in {tool.name for tool in tools}:
        return None
    arguments = parsed.get("arguments", parsed.get("parameters", {})) or {}
    if not isinstance(arguments, dict):
        return None
    return name, json.dumps(arguments, ensure_ascii=False)


def _blocks(text: str) -> list[str]:
    """The bodies of ``text``'s blocks, each to the first closing marker after it."""
    bodies = []
    at = text.find(START)
    while at >= 0:
        end = text.find(END, at + len(START))
        if end < 0:
            break
        bodies.append(text[at + len(START) : end])
        at = text.find(START, end + len(END))
    return bodies


class DotsTools:
    supports_required_and_named = False

    def __init__(self, tools: tuple[ToolSpec, ...]) -> None:
        self.tools = tools

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        first = content.find(START)
        if first < 0:
            return ExtractedToolCalls(False, [], content)
        calls = []
        for body in _blocks(content):
            try:
                parsed_calls = parse_block(body, self.tools)
                found = [validated(parsed, self.tools) for parsed in parsed_calls]
            except _ERRORS:
                continue
            calls += [FunctionCall(name, arguments) for name, arguments in filter(None, found)]
        if not calls:
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(True, calls, content[:first].strip() or None)


# ------------------------------------------------------------------ streaming


def _overlap(text: str) -> int:
    """How many of ``text``'s last characters begin ``START`` (short of all of it)."""
    for size in range(min(len(START) - 1, len(text)), 0, -1):
        if text.endswith(START[:size]):
            return size
    return 0


class DotsState(Struct, tag="dots"):
    """Where a streamed output stands; plain data, so it snapshots.

    Outside a block: ``held``, a possible opening ending the text. In a block: its
    text so far, where the search for the closing resumes, and how far the text reads
    as one JSON object (``json``: ``start`` before its ``{``, ``open`` inside it,
    ``ended`` after its ``}`` with only spaces since, ``read`` once that text was read,
    ``never`` when it cannot be one). ``calls``: calls opened; ``named``: the open
    block's call went out; ``streamed``: the arguments sent for the last call.
    """

    held: str = ""
    in_block: bool = False
    body: GrowingText = field(default_factory=GrowingText)
    end_from: int = 0
    json: str = "start"
    depth: int = 0
    in_string: bool = False
    escaped: bool = False
    calls: int = 0
    named: bool = False
    streamed: str = ""


class _Chunk:
    """What one chunk sends: content parts and call pieces."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: list[DeltaToolCall] = []


class DotsStream:
    """dots calls streamed as vLLM streams them, reading each character once."""

    engine_based = False
    supports_required_and_named = False

    def __init__(self, id_seed: str, tools: tuple[ToolSpec, ...], state: DotsState) -> None:
        self.id_seed = id_seed
        self.tools = tools
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        chunk = _Chunk()
        rest = text
        while True:
            if not s.in_block:
                buffer, s.held = s.held + rest, ""
                at = buffer.find(START)
                if at < 0:
                    keep = _overlap(buffer)
                    chunk.parts.append(buffer[: len(buffer) - keep])
                    s.held = buffer[len(buffer) - keep :]
                    chunk.parts = [part.replace(END, "") for part in chunk.parts]
                    break
                if at:
                    chunk.parts.append(buffer[:at])
                self._open()
                rest = buffer[at + len(START) :]
            rest = self._in_block(rest, chunk)
            if s.in_block or not rest:
                break
        content = "".join(chunk.parts)
        if not content and not chunk.calls:
            return None
        return Delta(content=content or None, tool_calls=chunk.calls)

    def finish(self) -> Delta | None:
        """Nothing: vLLM's server never asks for the held text."""
        return None

    def remaining_arguments(self) -> str:
        return ""

    def _open(self) -> None:
        s = self.s
        s.in_block, s.body, s.end_from = True, GrowingText(), 0
        s.json, s.depth, s.in_string, s.escaped = "start", 0, False, False

    def _in_block(self, text: str, chunk: _Chunk) -> str:
        """Add ``text`` to the open block; what follows its closing, if it closes."""
        s = self.s
        before = len(s.body)
        s.body.append(text)
        end = s.body.find(END, s.end_from)
        if end < 0:
            s.end_from = max(0, len(s.body) - len(END) + 1)
            self._scan(text)
            if s.json == "ended":
                self._complete_json(chunk)
            return ""
        body = s.body[:end]
        after = text[end + len(END) - before :]
        s.in_block, s.body = False, GrowingText()
        self._close(body, chunk)
        s.named = False
        return after

    def _scan(self, text: str) -> None:
        """Follow the block's text as one JSON object: where it starts and ends."""
        s = self.s
        for ch in text:
            if s.json in ("never", "read"):
                if s.json == "read" and not ch.isspace():
                    s.json = "never"
                if s.json == "never":
                    return
            elif s.json == "ended":
                if not ch.isspace():
                    s.json = "never"
                    return
            elif s.json == "start":
                if ch == "{":
                    s.json, s.depth = "open", 1
                elif not ch.isspace():
                    s.json = "never"  # no object: vLLM sends nothing for it
                    return
            elif s.in_string:
                if s.escaped:
                    s.escaped = False
                elif ch == "\\":
                    s.escaped = True
                elif ch == '"':
                    s.in_string = False
            elif ch == '"':
                s.in_string = True
            elif ch in "{[":
                s.depth += 1
            elif ch in "}]":
                s.depth -= 1
                if s.depth == 0:
                    s.json = "ended"

    def _complete_json(self, chunk: _Chunk) -> None:
        """The block's text just became a whole object: its call, if it is one."""
        s = self.s
        s.json = "read"  # later spaces keep the reading; anything else ends it
        try:
            parsed = json.loads(s.body.text())
        except _ERRORS:
            s.json = "never"
            return
        found = validated(parsed, self.tools) if isinstance(parsed, dict) else None
        if found is None:
            return
        name, arguments = found
        if not s.named:
            chunk.calls.append(opening_call_delta(self.id_seed, s.calls, name, ""))
            s.calls, s.named, s.streamed = s.calls + 1, True, ""
        self._extend(arguments, chunk)

    def _extend(self, arguments: str, chunk: _Chunk) -> None:
        s = self.s
        if arguments.startswith(s.streamed) and len(arguments) > len(s.streamed):
            piece = arguments[len(s.streamed) :]
            chunk.calls.append(DeltaToolCall(index=s.calls - 1, arguments=piece))
        s.streamed = arguments

    def _close(self, body: str, chunk: _Chunk) -> None:
        """A closed block: its calls, or its text as content."""
        s = self.s
        try:
            parsed_calls = parse_block(body, self.tools)
            if not parsed_calls:
                raise ValueError("a block without an invoke")
        except _ERRORS:
            chunk.parts.append(body.strip())
            return
        found = [call for p in parsed_calls if (call := validated(p, self.tools))]
        had = s.named
        if s.named and found:
            self._extend(found.pop(0)[1], chunk)
        for name, arguments in found:
            chunk.calls.append(opening_call_delta(self.id_seed, s.calls, name, arguments))
            s.calls, s.streamed = s.calls + 1, arguments
        if not found and not had:
            chunk.parts.append(body.strip())


# ------------------------------------------------------------------ the family


def _stream(_: None, request: Request, kept: object) -> tuple[DotsStream, DotsState]:
    state = reuse(kept, DotsState)
    return DotsStream(request.id_seed, request.options.tools or (), state), state


FAMILY = Family(
    title="dots (`<dots_function_call>` blocks of `<invoke>` calls or JSON)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("dots",),
            engine_based=False,
            states=(DotsState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: DotsTools(request.options.tools or ()),
            stream=_stream,
            golden=("B3",),
        ),
    ),
)
