"""MiniCPM5 tool calls (``minicpm5``): ``<function name="N"><param name="K">V</param>
...</function>`` blocks in the text (parsers/families/minicpm5_xml.py reads one).

vLLM 0.33.0's parser first rewrites tokenizer byte markers (``Ġ`` a space, ``Ċ`` a
newline) and tag names run into their attribute (``<functionname=``, ``<paramname=``).

* One-shot: every block (``<function`` to the first ``</function>``) that reads as a
  call of a request's tool is one; the rest is content, stripped and cut after the
  last ``</think>``. With no ``<function`` at all the content is the output so cut.
* Streamed, vLLM reads the whole text again on every chunk from where it last stopped:
  text before a block goes out as content (even the start of a block whose ``<function``
  is not whole yet), then one block per chunk once it is closed (a call, or its text as
  content); while a block is open, its call's name as soon as its tag names a request's
  tool, then its arguments as the whole params read so far (the last ``}`` held back).
  This stream does the same, reading each character a bounded number of times: what it
  keeps is the text, where vLLM stopped, the closed blocks not sent yet and the open
  block's scanners.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from parsers.families.minicpm5_xml import (
    CLOSE,
    DUMP_ERRORS,
    OPEN,
    MissingNames,
    ParamScan,
    TagScan,
    ToolMaps,
    add_argument,
    next_param,
    next_tag,
    param_value,
    read_block,
    scan_missing,
)
from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import hunyuan_tool_call_id, opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, ToolSpec

THINK_END = "</think>"
# Tag names run into their attribute, and what vLLM writes for them.
_COLLAPSED = (("<functionname=", "<function name="), ("<paramname=", "<param name="))


def normalized(text: str) -> str:
    """vLLM's rewrite of an output before it reads it."""
    text = text.replace("\u0120", " ").replace("\u010a", "\n")
    for collapsed, spaced in _COLLAPSED:
        text = text.replace(collapsed, spaced)
    return text


def visible(text: str) -> str:
    """What follows the last ``</think>`` (left-stripped), unless nothing does."""
    if THINK_END not in text:
        return text
    after = text.rsplit(THINK_END, 1)[-1].lstrip()
    return after or text


def _pending(text: GrowingText) -> str:
    """The text's end that may be the start of a tag run into its attribute (``<param``,
    ``<functionname``): a later chunk may give it its space back."""
    tail = text[max(0, len(text) - 13) :]
    at = tail.rfind("<")
    if at >= 0 and any(collapsed.startswith(tail[at:]) for collapsed, _ in _COLLAPSED):
        return tail[at:]
    return ""


def blocks(text: str) -> list[tuple[int, int]]:
    """Where each block is: ``<function`` to the first ``</function>`` after it."""
    found = []
    at = text.find(OPEN)
    while at >= 0:
        closing = text.find(CLOSE, at + len(OPEN))
        if closing < 0:
            break
        found.append((at, closing + len(CLOSE)))
        at = text.find(OPEN, closing + len(CLOSE))
    return found


class MiniCPM5Tools:
    """One-shot: the calls of every block, the rest as content."""

    supports_required_and_named = True

    def __init__(self, tools: tuple[ToolSpec, ...]) -> None:
        self.tools = ToolMaps.of(tools)

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        text = normalized(content)
        if OPEN not in text:
            return ExtractedToolCalls(False, [], visible(text))
        calls: list[FunctionCall] = []
        parts: list[str] = []
        last = 0
        try:
            for start, end in blocks(text):
                parts.append(text[last:start])
                found = read_block(text[start:end], self.tools)
                if found is None:
                    parts.append(text[start:end])
                else:
                    arguments = json.dumps(found.arguments, ensure_ascii=False)
                    # vLLM's one-shot ids here are ``call_`` and hex (Hunyuan's format).
                    call_id = hunyuan_tool_call_id(id_seed, len(calls))
                    calls.append(FunctionCall(found.name, arguments, call_id))
                last = end
        except DUMP_ERRORS:
            return ExtractedToolCalls(False, [], text)
        parts.append(text[last:])
        if calls:
            return ExtractedToolCalls(True, calls, None)
        return ExtractedToolCalls(False, [], visible("".join(parts).strip()))


# ------------------------------------------------------------------ streaming


class OpenBlock(Struct):
    """The scanners of the block open at the read position (``origin``), vLLM's partial
    reading of it: its name tag, a param without a name, its whole params so far."""

    origin: int = -1
    name: TagScan = field(default_factory=TagScan)
    missing: MissingNames = field(default_factory=MissingNames)
    params: ParamScan = field(default_factory=ParamScan)
    seen: set[str] = field(default_factory=set)
    arguments: list[str] = field(default_factory=list)  # each key's JSON member
    failed: bool = False  # a param JSON cannot write: vLLM fails every later reading
    # How many members went out; ``synced``: what went out is exactly those members
    # (``{`` and them), so the next piece is the new members alone.
    sent: int = 0
    synced: bool = True

    def json(self, count: int | None = None, closed: bool = True) -> str:
        members = self.arguments if count is None else self.arguments[:count]
        return "{" + ", ".join(members) + ("}" if closed else "")


class MiniCPM5State(Struct, tag="minicpm5"):
    """Where a streamed output stands; plain data, so it snapshots.

    ``text``: the output so far as vLLM rewrites it; ``read``: where vLLM's reading
    stopped; ``closed``: blocks closed and not read yet (start, end); ``search`` and
    ``open_at``/``close_from``: where the search for the next block resumes. ``calls``:
    calls opened; ``named``: the open call's name went out; ``streamed``: each call's
    arguments sent; ``last_arguments``: the last call's arguments as read (JSON) for the
    last chunk's remainder; ``stuck``: a block JSON cannot write stops the stream, as
    vLLM's parser fails on it every chunk.
    """

    text: GrowingText = field(default_factory=GrowingText)
    has_open: bool = False
    read: int = 0
    closed: list[tuple[int, int]] = field(default_factory=list)
    search: int = 0
    open_at: int = -1
    close_from: int = 0
    calls: int = 0
    named: bool = False
    streamed: list[str] = field(default_factory=list)
    last_arguments: str | None = None
    last_in_block: bool = False  # the last reading is the open block's members
    stuck: bool = False
    block: OpenBlock = field(default_factory=OpenBlock)


def _args_diff(sent: str, arguments: str, complete: bool) -> str | None:
    """vLLM's next arguments piece: what the reading adds to what was sent, the
    closing ``}`` held until the block is closed."""
    if sent == "{}":
        sent = ""
    target = arguments if complete or not arguments.endswith("}") else arguments[:-1]
    if not sent:
        return target or None
    if target == sent:
        return None
    if target.startswith(sent):
        return target[len(sent) :] or None
    if sent.endswith("}") and target.startswith(sent[:-1]):
        return target[len(sent) - 1 :] or None
    return None


class MiniCPM5Stream:
    """MiniCPM5 calls streamed as vLLM streams them (one reading per chunk)."""

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, tools: tuple[ToolSpec, ...], state: MiniCPM5State) -> None:
        self.id_seed = id_seed
        self.tools = ToolMaps.of(tools)
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        self._append(text)
        if s.stuck:
            return None
        total = len(s.text)
        if not s.has_open:
            if s.read >= total:
                return None
            content = s.text[s.read :]
            s.read = total
            return Delta(content=content)
        self._find_blocks()
        while s.closed:
            start, end = s.closed[0]
            if end <= s.read:
                s.closed.pop(0)
                continue
            if start > s.read:
                gap = s.text[s.read : start]
                s.read = start
                return Delta(content=gap)
            delta = self._closed_block(start, end)
            if s.stuck:
                return None
            s.closed.pop(0)
            s.read = end
            return delta
        if s.read >= total:
            if not text and s.calls and not s.named:
                return Delta(content="")
            return None
        at = s.text.find(OPEN, s.read)
        if at > s.read:
            gap = s.text[s.read : at]
            s.read = at
            return Delta(content=gap)
        if at < 0:
            tail = s.text[max(s.read, total - len(OPEN) + 1) :]
            if any(tail.endswith(OPEN[:k]) for k in range(1, len(OPEN))):
                return None
            content = s.text[s.read :]
            s.read = total
            return Delta(content=content)
        return self._open_block()

    def finish(self) -> Delta | None:
        """Nothing: vLLM's server asks this parser for nothing more."""
        return None

    def remaining_arguments(self) -> str:
        s = self.s
        self._settle()
        if s.last_arguments is None:
            return ""
        sent = s.streamed[-1] if s.streamed else ""
        return s.last_arguments[len(sent) :] if s.last_arguments.startswith(sent) else ""

    # -------------------------------------------------------------- the text

    def _append(self, text: str) -> None:
        """Add a chunk's text as vLLM rewrites the whole: a tag name run into its
        attribute across chunks gets its space back in the text already kept."""
        s = self.s
        body = s.text
        piece = text.replace("\u0120", " ").replace("\u010a", "\n")
        pending = _pending(body)
        if pending and piece:
            for collapsed, _ in _COLLAPSED:
                if (pending + piece).startswith(collapsed):
                    piece = body.drop_last(len(pending)) + piece
                    self._rewound(len(body))
                    break
        for collapsed, spaced in _COLLAPSED:
            piece = piece.replace(collapsed, spaced)
        before = len(body)
        body.append(piece)
        if not s.has_open:
            s.has_open = body.find(OPEN, max(0, before - len(OPEN) + 1)) >= 0

    def _rewound(self, size: int) -> None:
        """The text was cut back to ``size``: searches past it resume there, and the open
        block is read again from its start only if its scanners read past it (they stop
        before a possible tag start, so only a block opened there)."""
        s = self.s
        s.search = min(s.search, size)
        s.close_from = min(s.close_from, size)
        if s.open_at >= size:
            s.open_at = -1
        block = s.block
        params = block.params
        if max(block.origin, block.name.pos, block.missing.pos, params.tag.pos) <= size and (
            params.close_from <= size
        ):
            return  # its scanners stopped before the cut (held text is read late)
        self._settle()
        s.block = OpenBlock()

    def _settle(self) -> None:
        """Write out what the open block's reading stands for: what went out of its
        arguments, and the last reading (kept as members while the block reads)."""
        s = self.s
        block = s.block
        if s.last_in_block:
            s.last_arguments, s.last_in_block = block.json(), False
        if block.synced and block.sent and s.named and block.origin == s.read:
            s.streamed[-1] = block.json(block.sent, closed=False)
            block.synced = False

    def _find_blocks(self) -> None:
        """Record the blocks closed since the last chunk."""
        s = self.s
        text = s.text
        while True:
            if s.open_at < 0:
                at = text.find(OPEN, s.search)
                if at < 0:
                    s.search = max(s.search, len(text) - len(OPEN) + 1)
                    return
                s.open_at, s.close_from = at, at + len(OPEN)
            closing = text.find(CLOSE, s.close_from)
            if closing < 0:
                s.close_from = max(s.close_from, len(text) - len(CLOSE) + 1)
                return
            end = closing + len(CLOSE)
            s.closed.append((s.open_at, end))
            s.open_at, s.search = -1, end

    # -------------------------------------------------------------- blocks

    def _closed_block(self, start: int, end: int) -> Delta:
        """A closed block read whole: its call (or the rest of its arguments), or its text."""
        s = self.s
        self._settle()
        block = s.text[start:end]
        found = read_block(block, self.tools)
        if found is None:
            return Delta(content=block)
        try:
            arguments = json.dumps(found.arguments, ensure_ascii=False)
        except DUMP_ERRORS:
            s.stuck = True
            return Delta()
        s.last_arguments = arguments
        if not s.named:
            call = opening_call_delta(self.id_seed, s.calls, found.name, arguments)
            s.calls += 1
            s.streamed.append(arguments)
            return Delta(tool_calls=[call])
        s.named = False
        index = s.calls - 1
        piece = _args_diff(s.streamed[index], arguments, complete=True)
        if not piece:
            return Delta(content="")
        s.streamed[index] += piece
        return Delta(tool_calls=[DeltaToolCall(index=index, arguments=piece)])

    def _restart_block(self) -> None:
        """Read the block open at the read position from its start; where some of its
        call's arguments went out already (read again after a rewind), the next piece
        is measured against them."""
        s = self.s
        self._settle()
        block = s.block = OpenBlock(origin=s.read)
        block.synced = not (s.named and s.streamed and s.streamed[-1])
        block.name.pos = block.missing.pos = block.params.tag.pos = block.origin

    def _open_block(self) -> Delta | None:
        """The block open at the read position, read as far as the text goes."""
        s = self.s
        if s.block.origin != s.read:
            self._restart_block()
        block = s.block
        text = s.text
        # A tag start that may still get its space back is read once it is settled:
        # nothing in it can end a tag or a param.
        end = len(text) - len(_pending(text))
        if scan_missing(block.missing, text, end):
            return None
        if not next_tag(block.name, text, end, OPEN, tight=False, origin=block.origin):
            return None
        name = text[block.name.name_start : block.name.name_end].strip()
        if name not in self.tools.names:
            return None
        if not s.named:
            s.named = True
            s.calls += 1
            s.streamed.append("")
            s.last_arguments = "{}"
            return Delta(tool_calls=[opening_call_delta(self.id_seed, s.calls - 1, name)])
        if block.failed or not self._read_params(name, text, end):
            return None
        count = len(block.arguments)
        if count == block.sent:
            return None  # the same reading as last time: nothing more to send
        index = s.calls - 1
        s.last_in_block = True
        if block.synced:
            piece = ("{" if not block.sent else ", ") + ", ".join(block.arguments[block.sent :])
        else:
            piece = _args_diff(s.streamed[index], block.json(), complete=False) or ""
            s.streamed[index] += piece
        block.sent = count
        if not piece:
            return None
        return Delta(tool_calls=[DeltaToolCall(index=index, arguments=piece)])

    def _read_params(self, name: str, text: GrowingText, end: int) -> bool:
        """Read the params closed since; whether any reads (False: none, or failed)."""
        block = self.s.block
        seen = block.seen
        while (found := next_param(block.params, text, end, block.origin)) is not None:
            key, raw = found
            if not key or key in seen:
                continue
            added: dict[str, Any] = {}
            try:
                add_argument(self.tools, name, key, param_value(raw), added, seen)
                block.arguments += [
                    f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
                    for k, v in added.items()
                ]
            except DUMP_ERRORS:
                block.failed = True
                return False
        return bool(block.arguments)


# ------------------------------------------------------------------ the family


def _stream(_: None, request: Request, kept: object) -> tuple[MiniCPM5Stream, MiniCPM5State]:
    state = reuse(kept, MiniCPM5State)
    return MiniCPM5Stream(request.id_seed, request.options.tools or (), state), state


FAMILY = Family(
    title="MiniCPM5 (`<function name=...><param name=...>` XML calls)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("minicpm5",),
            engine_based=False,
            states=(MiniCPM5State,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: MiniCPM5Tools(request.options.tools or ()),
            stream=_stream,
            golden=("M4",),
        ),
    ),
)
