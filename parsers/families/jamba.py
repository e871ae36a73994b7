"""Jamba tool calls (``jamba``): a JSON array of calls between ``<tool_calls>`` and
``</tool_calls>``: ``<tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>``.

vLLM 0.33.0 reads them with a legacy parser, reproduced here:

* One-shot: the array between the first ``<tool_calls>`` and the ``</tool_calls>`` after
  it is the calls, each call's arguments re-serialized (``json.dumps``); the text before
  the marker is the content (None when empty or one space). An array that does not read,
  a call without a name or arguments, or no closing marker leave the whole output
  content.
* Streamed: text is content until ``<tool_calls>`` is in the output; from then on the
  array after the last ``<tool_calls>`` (up to the next ``</tool_calls>``) is read again
  each chunk with ``partial-json-parser``, and each chunk takes one step: start the
  next call once the array holds it (first sending what the call before it still
  lacks: its arguments' dump with what was sent removed), send the call's name once
  its string is whole, or send its arguments. The first arguments sent run up to the
  end of the chunk's own text within their dump (the whole dump once the array is
  complete; nothing while neither holds); later chunks send the middle that two
  successive dumps do not share (vLLM's ``extract_intermediate_diff``: the common
  suffix is taken first, up to an alphanumeric character). A chunk that is the
  ``<tool_calls>`` token alone sends nothing, and text after the marker is never
  content (the part of the marker's chunk before it included).

vLLM reads the whole array again each chunk. Here the calls before the current one are
complete JSON objects (a scan of the array checks it once, as it grows), so only the
current call and what follows it are read again; where the array is anything else, it
is read whole, as vLLM reads it. A chunk that only lengthens an open string of the
arguments is not read at all (``StringMode``), and once the array is closed and a step
reads what the step before it read, later chunks repeat that step without reading.
Other readings cost the text read again: they are bounded as ``internlm``'s are
(``REREAD_PER_CHAR``; docs/parity.md, jamba-reread-budget).
"""

from __future__ import annotations

import json
import re
from typing import Any

import partial_json_parser
from msgspec import Struct, field
from partial_json_parser.core.options import Allow

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.readers.partialjson import common_length
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    Vocabulary,
)

START = "<tool_calls>"
END = "</tool_calls>"
# Reading the calls again may cost this many characters per character of output, plus a
# start; past it the steps send nothing more (docs/parity.md, jamba-reread-budget).
REREAD_PER_CHAR = 8
REREAD_FREE = 1 << 16
# What vLLM's stream swallows (its ``except Exception``): the chunk then sends nothing.
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
_NAMED = Allow.ALL
_UNNAMED = Allow.ALL & ~Allow.STR


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def extract_calls(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring)."""
    start = text.find(START)
    if start < 0:
        return ExtractedToolCalls(False, [], text)
    end = text.find(END, start + len(START))
    if end < 0:
        return ExtractedToolCalls(False, [], text)
    try:
        calls = [
            FunctionCall(_name(call["name"]), _dump(call["arguments"]))
            for call in json.loads(text[start + len(START) : end])
        ]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return ExtractedToolCalls(False, [], text)
    content = text[:start]
    return ExtractedToolCalls(True, calls, content if content not in ("", " ") else None)


def _name(name: Any) -> str:
    """A call's name as vLLM's message types take it: a string, nothing else."""
    if not isinstance(name, str):
        raise TypeError("a call's name must be a string")
    return name


def _middle(new: str, old: str) -> str:
    """What ``new`` adds in the middle of ``old``, as vLLM's ``extract_intermediate_diff``
    finds it: their common suffix first (it stops at an alphanumeric character), then
    the common prefix of ``new`` and ``old`` without that suffix."""
    size = min(len(new), len(old))
    suffix = 0
    while suffix < size and new[-1 - suffix] == old[-1 - suffix] and not new[-1 - suffix].isalnum():
        suffix += 1
    prefix = common_length(new, old[: len(old) - suffix])
    diff = new[: len(new) - suffix]
    return diff[prefix:] if prefix <= len(diff) else diff


class JambaTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


class ArrayScan(Struct):
    """The array read once as it grows, to know where its calls start and whether those
    before the current one are complete JSON objects: ``phase`` is what may come next
    (``open``: ``[``; ``first``: a call or ``]``; ``next``: ``,`` or ``]``; ``item``: a
    call; ``call``: inside one; ``closed``: white space; ``broken``: anything else was
    read, and the array is read whole)."""

    phase: str = "open"
    pos: int = 0  # read up to here (in the region)
    starts: list[int] = field(default_factory=list)
    depth: int = 0
    in_string: bool = False
    escape: bool = False


_WS = " \t\r\n"
_STRUCTURE = re.compile(r'["\\{}\[\]]')
# Text that only lengthens an open string as vLLM reads it: no quote, backslash, marker
# start or control character.
_NOT_PLAIN = re.compile(r'["\\<\x00-\x1f]')
_MARK = "\ue000"  # stands for the open string's end in one reading on entry
# How far back the arguments' dump is kept in string mode: the common suffix vLLM finds
# may reach into it (a run of punctuation); past that the call is read again.
_TAIL = 256


class StringMode(Struct):
    """The current call's arguments while its text ends inside one of their strings and
    only lengthens it: the dump up to the string's visible end (``head``, its last
    characters ``tail``), what follows it (``closer``), and the string's trailing white
    space, which partial_json_parser strips until more text follows."""

    head: GrowingText
    tail: str
    closer: str
    space: GrowingText = field(default_factory=GrowingText)

    def dump(self) -> str:
        return self.head.text() + self.closer


class JambaState(Struct, tag="jamba"):
    """Where the stream stands: the text after the first ``<tool_calls>`` (``held``),
    where the array after the last one starts (``region``) and ends (``end``: -1 until
    ``</tool_calls>``), the scan of that array, and vLLM's parser state: the current
    call, whether its name went out, the arguments sent per call, and what the last
    step read of the current call (its index, its arguments' dump and, for the last
    chunk, the arguments as vLLM's server compares them)."""

    tail: str = ""  # the last characters before ``<tool_calls>`` appeared
    started: bool = False
    held: GrowingText = field(default_factory=GrowingText)
    region: int = 0
    searched: int = 0  # no ``<tool_calls>`` starts in ``held`` before this
    end: int = -1
    end_searched: int = 0
    scan: ArrayScan = field(default_factory=ArrayScan)
    current: int = -1
    named: bool = False
    streamed: list[GrowingText] = field(default_factory=list)
    read: int = -1  # the call the last step read (-1: none)
    read_dump: str | None = None  # its arguments' dump (None: no arguments)
    read_truthy: bool = False
    read_expected: str = ""  # its arguments as vLLM's server compares them at the end
    repeat: str = ""  # the array is closed and every step repeats: "none" or "empty"
    string: StringMode | None = None  # the arguments read as their open string grows
    reread: int = 0
    starved: bool = False


class JambaStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, start_id: int | None, id_seed: str, state: JambaState) -> None:
        self.start_id = start_id
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if not s.started:
            seen = s.tail + text
            at = seen.find(START)
            if at < 0:
                s.tail = seen[-(len(START) - 1) :]
                return Delta(content=text)
            s.started, s.tail = True, ""
            s.held.append(seen[at + len(START) :])
            s.searched = 0
        else:
            s.held.append(text)
        self._find_markers()
        if token_ids is not None and len(token_ids) == 1 and token_ids[0] == self.start_id:
            return None
        if s.starved:
            return None
        if s.repeat:
            return self._repeat()
        if s.string is not None:
            if s.end < 0 and not _NOT_PLAIN.search(text):
                delta = self._lengthen(text)
                if delta is not None:
                    return delta
            self._leave_string()
        try:
            delta = self._step(text)
        except _SWALLOWED:
            return None
        if delta is not None and s.named and not _NOT_PLAIN.search(text):
            self._enter_string()
        return delta

    # ------------------------------------------------------------------ the region

    def _find_markers(self) -> None:
        """Move the region to after the last ``<tool_calls>`` and find its end."""
        s = self.s
        held = s.held
        while True:
            at = held.find(START, s.searched)
            if at < 0:
                break
            s.region = s.searched = at + len(START)
            s.end, s.end_searched = -1, s.region
            s.scan, s.repeat = ArrayScan(), ""
            self._leave_string()
        s.searched = max(s.searched, len(held) - len(START) + 1)
        if s.end < 0:
            at = held.find(END, s.end_searched)
            if at >= 0:
                s.end = at
            else:
                s.end_searched = max(s.end_searched, len(held) - len(END) + 1)
        self._scan()

    def _region_end(self) -> int:
        s = self.s
        return s.end if s.end >= 0 else len(s.held)

    def _scan(self) -> None:
        """Scan the array's new text (up to where it may still be ``</tool_calls>``)."""
        s = self.s
        scan = s.scan
        limit = s.end - s.region if s.end >= 0 else len(s.held) - s.region
        if scan.phase == "broken" or scan.pos >= limit:
            return
        text = s.held[s.region + scan.pos : s.region + limit]
        base, i = scan.pos, 0
        while i < len(text) and scan.phase != "broken":
            if scan.phase == "call":
                i = self._call(text, i, base)
                continue
            ch = text[i]
            i += 1
            if ch in _WS:
                continue
            if scan.phase == "open" and ch == "[":
                scan.phase = "first"
            elif scan.phase in ("first", "item") and ch == "{":
                scan.phase, scan.depth = "call", 1
                scan.in_string = scan.escape = False
                scan.starts.append(base + i - 1)
            elif scan.phase in ("first", "next") and ch == "]":
                scan.phase = "closed"
            elif scan.phase == "next" and ch == ",":
                scan.phase = "item"
            elif s.end < 0 and END.startswith(text[i - 1 :]):
                i -= 1  # it may still be ``</tool_calls>``: read once it is whole or not
                break
            else:
                scan.phase = "broken"
        scan.pos = base + i

    def _call(self, text: str, i: int, base: int) -> int:
        """Read an open call from ``i``; at its closing brace it must read as a JSON
        object (else the array is read whole from then on)."""
        scan = self.s.scan
        while i < len(text):
            if scan.escape:
                scan.escape, i = False, i + 1
                continue
            found = _STRUCTURE.search(text, i)
            if found is None:
                return len(text)
            ch, i = found.group(), found.end()
            if scan.in_string:
                if ch == "\\":
                    scan.escape = True
                elif ch == '"':
                    scan.in_string = False
            elif ch == '"':
                scan.in_string = True
            elif ch in "{[":
                scan.depth += 1
            elif ch in "}]":
                scan.depth -= 1
                if scan.depth == 0:
                    scan.phase = "next" if ch == "}" and self._is_object(base + i) else "broken"
                    return i
        return i

    def _is_object(self, end: int) -> bool:
        s = self.s
        start = s.scan.starts[-1]
        if not self._spend(end - start):
            return False
        try:
            return isinstance(json.loads(s.held[s.region + start : s.region + end]), dict)
        except (ValueError, RecursionError):
            return False

    # ------------------------------------------------------------------ a step

    def _spend(self, cost: int) -> bool:
        """Count characters read again; False (and the stream starved) past the budget."""
        s = self.s
        if s.reread + cost > REREAD_PER_CHAR * len(s.held) + REREAD_FREE:
            s.starved = True
            return False
        s.reread += cost
        return True

    def _read_text(self) -> tuple[str, bool] | None:
        """What a step reads (None: the budget is spent), and whether it is the array
        from the current call on, with ``[`` in front (the calls before it are complete
        objects: the array reads as them and this), or the whole array."""
        s = self.s
        end = self._region_end()
        scan = s.scan
        if 0 <= s.current < len(scan.starts) and scan.phase != "broken":
            start = s.region + scan.starts[s.current]
            if not self._spend(end - start):
                return None
            return "[" + s.held[start:end], True
        if not self._spend(end - s.region):
            return None
        return s.held[s.region : end], False

    def _reading(self, flags: Allow) -> tuple[int, Any] | None:
        """The array's length and its current call as vLLM reads them (None: the budget
        is spent), with Python's indexing as vLLM's."""
        read = self._read_text()
        if read is None:
            return None
        text, from_current = read
        array = partial_json_parser.loads(text, flags)
        if from_current:
            return self.s.current + len(array), array[0]
        current = array[self.s.current] if len(array) > 0 else {}
        return len(array), current

    def _complete(self) -> bool:
        read = self._read_text()
        if read is None:
            return False
        try:
            json.loads(read[0])
        except (ValueError, RecursionError):
            return False
        return True

    def _step(self, text: str) -> Delta | None:
        s = self.s
        reading = self._reading(_NAMED if s.named else _UNNAMED)
        if reading is None:
            return None
        length, current = reading
        if length == 0:
            return None
        if length > s.current + 1:
            return self._next_call(length, current)
        if not s.named:
            delta = self._name(current)
            self._keep(current)
            self._settle("none" if delta is None else "")
            return delta
        cur = current.get("arguments")
        before = s.read_dump if s.read_truthy else None
        if not cur:
            self._keep(current)
            self._settle("none")
            return None
        dump = _dump(cur)
        if before is None:
            at = dump.find(text.replace("'", '"'))
            if at >= 0:
                piece = dump[: at + len(text)]
            elif self._complete():
                piece = dump
            else:
                return None
        else:
            piece = _middle(dump, before)
        self._send(piece)
        self._keep(current)
        self._settle("empty" if dump == before else "")
        return self._piece(piece)

    # ------------------------------------------------------------------ string mode

    def _enter_string(self) -> None:
        """After an arguments step whose chunk only lengthened a string the call's text
        ends in: where that string's end lies in the arguments' dump, from one reading
        with a mark there (only where the dump holds it once, as the step's dump)."""
        s = self.s
        scan = s.scan
        held_end = len(s.held)
        if not (
            s.end < 0
            and s.read_truthy
            and s.read_dump is not None
            and scan.phase == "call"
            and scan.in_string
            and not scan.escape
            and scan.pos == held_end - s.region
            and s.current < len(scan.starts)
            and not s.held[held_end - 1].isspace()
        ):
            return
        read = self._read_text()
        if read is None or not read[1] or _MARK in read[0]:
            return
        try:
            call = partial_json_parser.loads(read[0] + _MARK, _NAMED)[0]
            marked = _dump(call.get("arguments"))
        except _SWALLOWED:
            return
        if marked[:1] not in ("{", "[") or marked.count(_MARK) != 1:
            return
        head, closer = marked.split(_MARK)
        if head + closer != s.read_dump:
            return
        s.string = StringMode(GrowingText([head], len(head)), head[-_TAIL:], closer)

    def _lengthen(self, text: str) -> Delta | None:
        """A chunk that only lengthens the open string: the middle vLLM's next reading
        adds, found from the dump's end (None: that end is not kept far enough back)."""
        s = self.s
        mode = s.string
        assert mode is not None
        visible = text.rstrip()
        if not visible:
            mode.space.append(text)
            return self._sent_piece("")
        added = mode.space.text() + visible
        tail = mode.tail
        grown = tail + added
        # The common suffix past the closer: equal characters that are not alphanumeric.
        same = 0
        while same < len(tail) and grown[-1 - same] == tail[-1 - same]:
            if grown[-1 - same].isalnum():
                break
            same += 1
        if same == len(tail) and len(tail) < len(mode.head):
            return None
        mode.head.append(added)
        mode.tail = grown[-_TAIL:]
        mode.space = GrowingText([text[len(visible) :]], len(text) - len(visible))
        start = len(tail) - same
        return self._sent_piece(grown[start : start + len(added)])

    def _sent_piece(self, piece: str) -> Delta:
        self._send(piece)
        return self._piece(piece)

    def _leave_string(self) -> None:
        """Back to reading the call: the last reading's dump is the kept one."""
        s = self.s
        if s.string is not None:
            s.read_dump = s.read_expected = s.string.dump()
            s.string = None

    def _next_call(self, length: int, current: Any) -> Delta | None:
        """Start the next call: first what the current one's dump adds to what was sent."""
        s = self.s
        delta = None
        if s.current >= 0:
            arguments = current.get("arguments")
            if arguments:
                piece = _dump(arguments).replace(s.streamed[s.current].text(), "")
                self._send(piece)
                delta = self._piece(piece)
        s.current, s.named = length - 1, False
        s.streamed.append(GrowingText())
        return delta

    def _name(self, current: Any) -> Delta | None:
        name = current.get("name")
        if not name:
            return None
        call = opening_call_delta(self.id_seed, self.s.current, _name(name))
        self.s.named = True
        return Delta(tool_calls=[call])

    def _send(self, piece: str) -> None:
        s = self.s
        s.streamed[s.current].append(piece)

    def _piece(self, piece: str) -> Delta:
        return Delta(tool_calls=[DeltaToolCall(index=self.s.current, arguments=piece)])

    def _keep(self, current: Any) -> None:
        """What the step read of the current call, for the next step and the last chunk."""
        s = self.s
        s.read = s.current
        arguments = current.get("arguments", {})
        has = "arguments" in current
        s.read_truthy = bool(arguments) and has
        s.read_dump = _dump(arguments) if has else None
        s.read_expected = arguments if isinstance(arguments, str) else _dump(arguments)

    def _settle(self, repeat: str) -> None:
        """Once the array is closed, a step that read what the one before it read is
        what every later step does."""
        if self.s.end >= 0 and repeat:
            self.s.repeat = repeat

    def _repeat(self) -> Delta | None:
        if self.s.repeat == "empty":
            return self._piece("")
        return None

    # ------------------------------------------------------------------ the end

    def remaining_arguments(self) -> str:
        """What vLLM's server adds to a last chunk that carries a call piece: the rest
        of the arguments the last step read, where they extend what was sent."""
        s = self.s
        if s.read < 0 or s.starved:
            return ""
        self._leave_string()
        sent = s.streamed[s.read].text() if s.read < len(s.streamed) else ""
        if not s.read_expected.startswith(sent):
            return ""
        return s.read_expected[len(sent) :]

    def finish(self) -> Delta | None:
        """Past the re-read budget, the last chunk settles the calls from the current
        one on as one token per chunk would have: a name not sent, and the rest of
        complete arguments where it extends what was sent."""
        s = self.s
        if not s.starved:
            return None
        s.starved = False
        try:
            array = partial_json_parser.loads(s.held[s.region : self._region_end()], _NAMED)
        except _SWALLOWED:
            return None
        if not isinstance(array, list):
            return None
        calls: list[DeltaToolCall] = []
        for index in range(max(s.current, 0), len(array)):
            call = array[index]
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                break
            if index > s.current or not s.named:
                calls.append(opening_call_delta(self.id_seed, index, call["name"]))
            while len(s.streamed) <= index:
                s.streamed.append(GrowingText())
            if not call.get("arguments") or (index + 1 == len(array) and s.end < 0):
                continue
            dump = _dump(call["arguments"])
            sent = s.streamed[index].text()
            if dump.startswith(sent) and dump != sent:
                calls.append(DeltaToolCall(index=index, arguments=dump[len(sent) :]))
        return Delta(tool_calls=calls) if calls else None


def _stream(start_id: int | None, request: Request, kept: object) -> tuple[JambaStream, JambaState]:
    state = reuse(kept, JambaState)
    return JambaStream(start_id, request.id_seed, state), state


def _prepare(name: str, vocab: Vocabulary) -> int | None:
    return vocab.id_of(START)


FAMILY = Family(
    title="Jamba (a JSON array of calls between `<tool_calls>` and `</tool_calls>`)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("jamba",),
            engine_based=False,
            needs=(START, END),
            states=(JambaState,),
            prepare=_prepare,
            one_shot=lambda _, request: JambaTools(),
            stream=_stream,
            golden=("T3",),
        ),
    ),
)
