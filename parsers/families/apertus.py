"""Apertus tool calls (``apertus``): ``<|tools_prefix|>[{"name": {args}}, ...]<|tools_suffix|>``.

The block is a JSON array of one-member objects, each naming a function and holding its
arguments. vLLM 0.33.0 reads it with its own parser, reproduced here:

* One-shot: the text from the first ``<|tools_prefix|>`` to the next ``<|tools_suffix|>``
  (or the end) is decoded as JSON (partially, if it does not decode whole); every
  non-empty object is a call, its first member's value dumped as the arguments. The
  content is the text before the block, then any text after its JSON, then the text
  after the suffix, each stripped and joined by newlines.
* Streamed: a chunk ending in a proper prefix of either marker holds that back until the
  next chunk (for good, at the end). Text is content until the first prefix. From then on,
  per chunk: outside a block, the chunk minus the markers is content; inside, only the
  text before a prefix in the chunk goes out, and, once the block is done (its suffix in
  the chunk, or its JSON complete), the text after it in the chunk. The block is read
  again each chunk: each new element's name, then its arguments' dump as it grows, its
  trailing ``}"] ,`` held back until the block is done; a dump that no longer extends
  what was sent shortens what counts as sent (the next piece repeats from there).

The block is read once, incrementally (parsers/families/apertus_reader.py), not again
per chunk; a second block sends no calls (docs/parity.md, apertus-second-block).
"""

from __future__ import annotations

import json
from typing import Any

import partial_json_parser
from msgspec import Struct
from partial_json_parser.core.options import Allow

from parsers.families.apertus_reader import DEAD, DONE, BlockReader, BlockState, ElementDump
from parsers.family import Family, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.readers.partialjson import common_length
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

PREFIX = "<|tools_prefix|>"
SUFFIX = "<|tools_suffix|>"
_TAIL = max(len(PREFIX), len(SUFFIX)) - 1
# What vLLM's one-shot reading swallows (its ``except Exception``): the output is content.
_SWALLOWED = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    AssertionError,
    RecursionError,
    partial_json_parser.core.exceptions.MalformedJSON,
)


# ---------------------------------------------------------------------------- one-shot


def _decode(text: str) -> tuple[Any, str]:
    """The block's JSON and the text after it: decoded whole from its first non-blank
    character, else read partially (as partial_json_parser reads it)."""
    stripped = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
        return value, stripped[end:]
    except json.JSONDecodeError:
        pass
    try:
        return partial_json_parser.loads(text, Allow.ALL), ""
    except json.JSONDecodeError as exc:
        if "Extra data" not in exc.msg:
            raise
        return json.JSONDecoder().raw_decode(text)[0], ""


def _joined(content: str, more: str) -> str:
    return (content + "\n" + more).strip() if more else content


def extract_calls(output: str) -> ExtractedToolCalls:
    start = output.find(PREFIX)
    if start < 0:
        return ExtractedToolCalls(False, [], output)
    body = start + len(PREFIX)
    end = output.find(SUFFIX, body)
    block, after = (output[body:end], end + len(SUFFIX)) if end >= 0 else (output[body:], -1)
    try:
        value, trailing = _decode(block)
        items = value if isinstance(value, list) else [value] if value else []
        calls = [
            FunctionCall(name, json.dumps(arguments, ensure_ascii=False))
            for item in items
            if isinstance(item, dict) and item
            for name, arguments in [next(iter(item.items()))]
        ]
    except _SWALLOWED:
        return ExtractedToolCalls(False, [], output)
    content = output[:start].strip()
    if trailing.strip():
        content = _joined(content, trailing.replace(SUFFIX, "").strip())
    if after >= 0:
        content = _joined(content, output[after:].replace(SUFFIX, "").strip())
    return ExtractedToolCalls(True, calls, content or None)


class ApertusTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


# ---------------------------------------------------------------------------- streaming


class ApertusState(Struct, tag="apertus"):
    """Where the stream stands; plain data, so it snapshots.

    ``held``: the end of the text held back as a possible marker; ``tail``: the text's
    last characters (a marker may straddle chunks); where the last prefix and suffix
    start; the block after the last prefix; the call being streamed (vLLM's
    ``current_tool_id``) and whether its name went out.
    """

    held: str = ""
    length: int = 0
    tail: str = ""
    seen_prefix: bool = False
    prefix_at: int = -1
    suffix_at: int = -1
    block: BlockState | None = None
    calls_allowed: bool = True
    current: int = -1
    name_sent: bool = False


def _hold(held: str, text: str) -> tuple[str, str]:
    """vLLM's buffering: what goes out of ``held + text`` now, and what is held back
    (a proper prefix of a marker at the end)."""
    text = held + text
    if "<" not in text[-_TAIL - 1 :]:
        return text, ""  # every marker and each start of one holds a "<"
    for tag in (PREFIX, SUFFIX):
        if text.endswith(tag):
            return text, ""
        for size in range(len(tag) - 1, 0, -1):
            if text.endswith(tag[:size]):
                return text[:-size], text[-size:]
    return text, ""


def _span(dump: ElementDump, end: str, start: int, stop: int) -> str:
    """``(head + end)[start:stop]``: the head's part sliced in place."""
    size = len(dump.head)
    own = dump.head[start : min(stop, size)] if start < size else ""
    return own + (end[max(start - size, 0) : stop - size] if stop > size else "")


class ApertusStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: ApertusState) -> None:
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if "<" in text or "<" in s.tail:
            recent = s.held + text  # the text's end: what this chunk may still send
            released, s.held = _hold(s.held, text)
            self._scan(text)
        else:
            # Every marker, and each start of one held back, holds a "<" (and what is
            # held is the tail's end): this chunk neither completes nor holds one.
            recent = released = text
            self._feed(text)
            s.length += len(text)
            s.tail = (s.tail + text)[-_TAIL:]
        if not released:
            return None
        if not s.seen_prefix:
            return Delta(content=released)
        block = s.block
        inside = s.prefix_at > s.suffix_at
        completed = inside and block is not None and block.phase == DONE
        inside = inside and not completed
        finished = SUFFIX in released or completed
        if not inside and not finished:
            content = released.replace(PREFIX, "").replace(SUFFIX, "")
            return Delta(content=content) if content else None
        content = ""
        if PREFIX in released:
            content = released.split(PREFIX, 1)[0].replace(SUFFIX, "")
        if completed:
            assert block is not None
            end = s.prefix_at + len(PREFIX) + block.end
            start = max(end, s.length - len(released))
            if start < s.length:
                content += recent[len(recent) - (s.length - start) :].replace(SUFFIX, "")
        elif finished:
            content += released.rsplit(SUFFIX, 1)[-1]
        calls = self._calls(final=not inside)
        # vLLM builds this delta with ``tool_calls=None`` when it has no call pieces, which
        # its message type refuses: the chunk then sends nothing, content included.
        return Delta(content=content or None, tool_calls=calls) if calls else None

    def finish(self) -> Delta | None:
        return None  # held text stays held, as in vLLM

    def remaining_arguments(self) -> str:
        return ""

    # ------------------------------------------------------------------ the text

    def _scan(self, text: str) -> None:
        """Find the markers this chunk completes and feed the block what lies inside."""
        s = self.s
        window = s.tail + text
        base = s.length - len(s.tail)  # the window's place in the text
        fed = 0  # the chunk's characters handled
        at = 0
        while True:
            found = [(window.find(tag, at), tag) for tag in (PREFIX, SUFFIX)]
            hits = [(where, tag) for where, tag in found if where >= 0]
            if not hits:
                break
            where, tag = min(hits)
            at = where + 1
            if where + len(tag) <= len(s.tail):
                continue  # found in an earlier chunk
            self._feed(text[fed : max(where - len(s.tail), fed)])
            fed = where + len(tag) - len(s.tail)
            if tag == SUFFIX:
                s.suffix_at = base + where
                continue
            if s.current >= 0:
                s.calls_allowed = False
            s.seen_prefix, s.prefix_at, s.block = True, base + where, BlockState()
        self._feed(text[fed:])
        s.length += len(text)
        s.tail = window[-_TAIL:]

    def _feed(self, text: str) -> None:
        s = self.s
        if text and s.block is not None and s.prefix_at > s.suffix_at:
            BlockReader(s.block).feed(text)

    # ------------------------------------------------------------------ the calls

    def _calls(self, final: bool) -> list[DeltaToolCall]:
        """vLLM's reading of the block: names and argument pieces it sends now."""
        s = self.s
        block = s.block
        calls: list[DeltaToolCall] = []
        if block is None or block.phase == DEAD or not s.calls_allowed:
            return calls
        if s.suffix_at > s.prefix_at and block.phase == DONE and block.junk and block.lead_ws:
            return calls  # the text before the suffix does not decode (vLLM's raw_decode)
        latest = block.count(final) - 1
        while s.current < latest:
            if s.current >= 0:
                self._call(block.elements[s.current - block.first], True, calls)
            s.current += 1
            s.name_sent = False
        if s.current >= 0:
            self._call(block.elements[s.current - block.first], final, calls)
            del block.elements[: s.current - block.first]
            block.first = s.current
        return calls

    def _call(self, dump: ElementDump, final: bool, calls: list[DeltaToolCall]) -> None:
        s = self.s
        index = s.current
        name = dump.named(final)
        if name is None:
            return
        if not s.name_sent:
            s.name_sent = True
            calls.append(opening_call_delta(self.id_seed, index, name, ""))
        if dump.null:
            return
        length, end = dump.arguments(final)
        head = len(dump.head)
        sent = dump.sent + len(dump.over)
        if length <= dump.sent:
            common = length
        elif not dump.over:
            common = dump.sent
        else:
            seen = _span(dump, end, dump.sent, min(sent, length))
            common = dump.sent + common_length(dump.over, seen)
        if common == sent == length:
            return
        if common < sent:
            # Not an extension of what was sent: vLLM counts only the common part as sent.
            dump.sent, dump.over = min(common, head), end[: max(common - head, 0)]
            return
        calls.append(DeltaToolCall(index=index, arguments=_span(dump, end, sent, length)))
        dump.sent, dump.over = min(length, head), end[: max(length - head, 0)]


def _stream(_: None, request: Request, kept: object) -> tuple[ApertusStream, ApertusState]:
    state = reuse(kept, ApertusState)
    return ApertusStream(request.id_seed, state), state


FAMILY = Family(
    title="Apertus",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("apertus",),
            engine_based=False,
            states=(ApertusState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: ApertusTools(),
            stream=_stream,
            golden=("T6",),
        ),
    ),
)
