"""xLAM tool calls: a bare JSON array of ``{"name", "arguments"}`` objects.

The array may stand alone, follow a ``</think>``, or sit in a fenced code block,
``[TOOL_CALLS]`` line or ``<tool_call>`` tags.

Model output is untrusted, so nothing here uses a pattern that can rescan: blocks are
found with ``str.find`` left to right, and the stream keeps incremental views of every
text vLLM would search, each character read a bounded number of times.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.ids import xlam_tool_call_id
from parsers.readers.jsonscan import JsonScanner, JsonScanState
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

_THINK_END = "</think>"

# Deeper JSON counts as invalid: json.loads' own limit depends on the caller's stack
# depth, so a fixed bound keeps the answer the same wherever it is computed.
_MAX_DEPTH = 512

# Block kinds in the order vLLM tries their patterns.
_FENCE, _TOOL_CALLS, _TAGS = 0, 1, 2
_OPENERS = ("```", "[TOOL_CALLS]", "<tool_call>")
_CLOSERS = ("```", "\n", "</tool_call>")


def _depth_ok(value: Any) -> bool:
    """Whether a parsed value nests at most ``_MAX_DEPTH`` containers (no recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if not isinstance(item, (dict, list)):
            continue
        if depth > _MAX_DEPTH:
            return False
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


# What JSON text can start with, after JSON whitespace: anything else is rejected
# here, without the cost of an exception (hostile output can hold many such blocks).
_VALUE_START = re.compile(r'[ \t\n\r]*[-\[{"0-9tfnNI]')


def _loads(text: str) -> tuple[bool, Any]:
    """``json.loads`` that never raises: ``(False, None)`` for anything it rejects."""
    if _VALUE_START.match(text) is None:
        return False, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False, None
    return _depth_ok(value), value


def _blocks(text: str, kind: int) -> Iterator[tuple[int, int, int, int]]:
    """``(start, end, group start, group end)`` of each block, as the kind's pattern
    finds them with findall, in one left-to-right pass.

    An opening with no closing after it ends the search: every later opening would
    need a closing after it too.
    """
    opener, closer = _OPENERS[kind], _CLOSERS[kind]
    pos = 0
    while (start := text.find(opener, pos)) >= 0:
        after = start + len(opener)
        close = text.find(closer, after)
        if kind == _TOOL_CALLS:
            close = len(text) if close < 0 else close
            yield start, close, after, close
            if close == len(text):
                return
            pos = close
            continue
        if close < 0:
            return
        if kind == _FENCE:
            after = _fence_group_start(text, after, close)
        yield start, close + len(closer), after, close
        pos = close + len(closer)


def _fence_group_start(text: str, after: int, close: int) -> int:
    """Where a fenced block's group starts: past an optional ``json`` and whitespace."""
    if text.startswith("json", after) and after + 4 <= close:
        after += 4
    while after < close and text[after].isspace():
        after += 1
    return after


def _first_json_block(text: str) -> tuple[int, str] | None:
    """``(kind, block)`` of the first block that is JSON, trying the kinds in order."""
    for kind in (_FENCE, _TOOL_CALLS, _TAGS):
        for _, _, start, end in _blocks(text, kind):
            block = text[start:end]
            if _loads(block)[0]:
                return kind, block
    return None


def split_calls(output: str) -> tuple[str | None, str | None]:
    """``(content, calls_json)``: where the call array is, and the text around it."""
    think = output.find(_THINK_END)
    if think >= 0:
        content = output[: think + len(_THINK_END)].strip()
        thinking = output[think + len(_THINK_END) :].strip()
        if _loads(thinking)[0]:
            return content, thinking
        found = _first_json_block(thinking)
        if found is not None:
            return content, found[1]
    found = _first_json_block(output)
    if found is not None:
        kind, block = found
        kept, pos = [], 0
        for start, end, _, _ in _blocks(output, kind):
            kept.append(output[pos:start])
            pos = end
        kept.append(output[pos:])
        return "".join(kept).strip(), block
    if output.strip().startswith("["):
        if _loads(output)[0]:
            return None, output
        if "{" in output and "name" in output and "arguments" in output:
            return None, output
    return output, None


class XlamTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        text, calls_json = split_calls(content)
        if not calls_json:
            return ExtractedToolCalls(False, [], text)
        ok, data = _loads(calls_json)
        if not ok:
            return ExtractedToolCalls(False, [], content)
        if not isinstance(data, list):
            return ExtractedToolCalls(False, [], text or content)
        calls = []
        for index, entry in enumerate(data):
            if not isinstance(entry, dict) or "name" not in entry or "arguments" not in entry:
                continue
            arguments = entry["arguments"]
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments, ensure_ascii=False)
            # xLAM numbers its ids by position in the array, invalid entries included.
            calls.append(FunctionCall(entry["name"], arguments, xlam_tool_call_id(id_seed, index)))
        if not all(isinstance(c.name, str) and isinstance(c.arguments, str) for c in calls):
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(bool(calls), calls, text)


# ------------------------------------------------------------------ incremental matching
#
# vLLM searches the call text with three patterns, by finditer, on every delta:
#   name:  "name"\s*:\s*"([^"]+)"
#   empty: "name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*\{\s*\}
#   args:  "name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})
# Each attempt at a position is deterministic, so each is an automaton over phases. An
# attempt still running at the end of the text counts as failed for vLLM, which then
# tries from the next position: a ``MatchLink`` per running attempt, each followed by
# the link searching from just after its start, holds both outcomes. A finished attempt
# settles its link (a match drops the links after it; a failure hands over to the next
# link), so each character is read by as many links as attempts overlap it, which the
# patterns keep to a few.

_NAME, _EMPTY, _ARGS = 0, 1, 2
_NAME_KEY = '"name"'
_ARGUMENTS_KEY = '"arguments"'

# Phases of an attempt.
_IN_NAME_KEY = 0
_BEFORE_COLON = 1
_BEFORE_NAME = 2
_NAME_FIRST = 3
_NAME_REST = 4
_BEFORE_COMMA = 5
_BEFORE_ARGS_KEY = 6
_IN_ARGS_KEY = 7
_BEFORE_ARGS_COLON = 8
_BEFORE_BRACE = 9
_EMPTY_BODY = 10
_ARGS_BODY = 11
_ARGS_INNER = 12

_LIVE, _FAILED, _MATCHED = 0, 1, 2
_SEARCHING = -1  # a link with no running attempt
_QUOTE_OR_BRACE = re.compile(r'["{}]')


class MatchLink(Struct, array_like=True):
    """Matches found since this link's search began, and its running attempt."""

    matches: list[int] = field(default_factory=list)  # (start, group start, group end)...
    start: int = _SEARCHING
    phase: int = 0
    matched: int = 0  # chars of a key literal matched so far
    mark: int = 0  # where the name or the arguments group began


def _advance(link: MatchLink, kind: int, ch: str, pos: int) -> int:
    """Move a running attempt over ``ch`` at ``pos``; records a match when one ends."""
    phase = link.phase
    if phase == _NAME_REST:
        if ch != '"':
            return _LIVE
        if kind == _NAME:
            link.matches += (link.start, link.mark, pos)
            return _MATCHED
        link.phase = _BEFORE_COMMA
        return _LIVE
    if phase == _ARGS_BODY:
        if ch == "}":
            link.matches += (link.start, link.mark, pos + 1)
            return _MATCHED
        if ch == "{":
            link.phase = _ARGS_INNER
        return _LIVE
    if phase == _ARGS_INNER:
        if ch == "{":
            return _FAILED
        if ch == "}":
            link.phase = _ARGS_BODY
        return _LIVE
    if phase in (_IN_NAME_KEY, _IN_ARGS_KEY):
        key = _NAME_KEY if phase == _IN_NAME_KEY else _ARGUMENTS_KEY
        if ch != key[link.matched]:
            return _FAILED
        link.matched += 1
        if link.matched == len(key):
            link.phase = _BEFORE_COLON if phase == _IN_NAME_KEY else _BEFORE_ARGS_COLON
        return _LIVE
    if phase == _NAME_FIRST:
        if ch == '"':
            return _FAILED
        link.phase, link.mark = _NAME_REST, pos
        return _LIVE
    if ch.isspace():
        return _LIVE
    if phase == _BEFORE_COLON and ch == ":":
        link.phase = _BEFORE_NAME
    elif phase == _BEFORE_NAME and ch == '"':
        link.phase = _NAME_FIRST
    elif phase == _BEFORE_COMMA and ch == ",":
        link.phase = _BEFORE_ARGS_KEY
    elif phase == _BEFORE_ARGS_KEY and ch == '"':
        link.phase, link.matched = _IN_ARGS_KEY, 1
    elif phase == _BEFORE_ARGS_COLON and ch == ":":
        link.phase = _BEFORE_BRACE
    elif phase == _BEFORE_BRACE and ch == "{":
        link.phase, link.mark = (_EMPTY_BODY, pos) if kind == _EMPTY else (_ARGS_BODY, pos)
    elif phase == _EMPTY_BODY and ch == "}":
        link.matches += (link.start, pos, pos)
        return _MATCHED
    else:
        return _FAILED
    return _LIVE


def _feed_links(links: list[MatchLink], kind: int, text: str, start: int, end: int) -> None:
    """Advance a pattern's links over ``text[start:end]``."""
    pos = start
    while pos < end:
        if len(links) == 1:
            pos = text.find('"', pos, end)
            if pos < 0:
                return
        elif len(links) == 2 and links[0].phase in (_NAME_REST, _ARGS_BODY, _ARGS_INNER):
            # Only quotes (for the searching link) and braces can change anything.
            hit = _QUOTE_OR_BRACE.search(text, pos, end)
            if hit is None:
                return
            pos = hit.start()
        ch = text[pos]
        level = len(links) - 2
        # An attempt that fails inside "name" is never started: its follower would
        # read the same characters anyway.
        if ch == '"' and _NAME_KEY.startswith(text[pos : min(end, pos + len(_NAME_KEY))]):
            last = links[-1]
            last.start, last.phase, last.matched = pos, _IN_NAME_KEY, 1
            links.append(MatchLink())
        while level >= 0:
            link = links[level]
            outcome = _advance(link, kind, ch, pos)
            if outcome == _FAILED:
                follower = links.pop(level + 1)
                link.matches += follower.matches
                link.start, link.phase = follower.start, follower.phase
                link.matched, link.mark = follower.matched, follower.mark
            elif outcome == _MATCHED:
                del links[level + 1 :]
                link.start = _SEARCHING
            level -= 1
        pos += 1


def _count(links: list[MatchLink]) -> int:
    return sum(len(link.matches) for link in links) // 3


def _match(links: list[MatchLink], index: int) -> tuple[int, int, int]:
    """The ``index``-th match as vLLM's finditer sees it now."""
    for link in links:
        size = len(link.matches) // 3
        if index < size:
            at = 3 * index
            return link.matches[at], link.matches[at + 1], link.matches[at + 2]
        index -= size
    raise IndexError(index)


def _first_at_or_after(links: list[MatchLink], position: int) -> int:
    """Start of the first match starting at or after ``position``; -1 if none."""
    for link in links:
        matches = link.matches
        if not matches or matches[-3] < position:
            continue
        low, high = 0, len(matches) // 3 - 1
        while low < high:
            middle = (low + high) // 2
            if matches[3 * middle] < position:
                low = middle + 1
            else:
                high = middle
        return matches[3 * low]
    return -1


# ------------------------------------------------------------------ incremental JSON views

# How json.loads sees a view's text: exactly, stripped (vLLM strips it first), or with
# only trailing whitespace stripped (a [TOOL_CALLS] line at the end of stripped text).
_EXACT, _STRIPPED, _LEAD_EXACT = 0, 1, 2
_ODD_SPACE = re.compile(r"[^\S \t\n\r]")  # whitespace json.loads does not skip


class JsonProbe(Struct):
    """Whether a growing text is one JSON value, with where its solid text lies."""

    scan: JsonScanState = field(default_factory=JsonScanState)
    first_solid: int = -1
    last_solid: int = -1
    first_odd: int = -1
    last_odd: int = -1
    fraction: bool = False  # a '.', 'e' or 'E' seen: a bare number is no integer


class SourceView(Struct):
    """A text vLLM may search (the output, a block, the text after ``</think>``), fed as
    the output grows, with its three match chains once they are needed."""

    start: int
    mode: int = _EXACT
    end: int = -1  # where the text ends once closed; -1: it grows with the output
    fed: int = -1
    probe: JsonProbe = field(default_factory=JsonProbe)
    names: list[MatchLink] | None = None
    empties: list[MatchLink] = field(default_factory=list)
    args: list[MatchLink] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.fed < 0:
            self.fed = self.start


def _feed_view(view: SourceView, text: str, upto: int) -> None:
    """Feed ``text[view.fed:upto]`` to the probe and, if started, the match chains."""
    start = view.fed
    if upto <= start:
        return
    piece = text[start:upto]
    probe = view.probe
    solid = piece.lstrip()
    if solid:
        if probe.first_solid < 0:
            probe.first_solid = upto - len(solid)
        probe.last_solid = start + len(piece.rstrip()) - 1
    for odd in _ODD_SPACE.finditer(piece):
        if probe.first_odd < 0:
            probe.first_odd = start + odd.start()
        probe.last_odd = start + odd.start()
    if not probe.fraction and any(mark in piece for mark in ".eE"):
        probe.fraction = True
    JsonScanner(probe.scan).feed(piece)
    if view.names is not None:
        _feed_links(view.names, _NAME, text, start, upto)
        _feed_links(view.empties, _EMPTY, text, start, upto)
        _feed_links(view.args, _ARGS, text, start, upto)
    view.fed = upto


def _chains(view: SourceView, text: str) -> list[MatchLink]:
    """The view's name links, started (and caught up) on first use."""
    if view.names is None:
        view.names, view.empties, view.args = [MatchLink()], [MatchLink()], [MatchLink()]
        for links, kind in ((view.names, _NAME), (view.empties, _EMPTY), (view.args, _ARGS)):
            _feed_links(links, kind, text, view.start, view.fed)
    return view.names


def _complete(view: SourceView, held: int = 0) -> bool:
    """Whether json.loads would accept the view's text, short of what only parsing shows
    (depth, integer size); ``held``: chars the view has not been fed yet."""
    probe = view.probe
    if held or not JsonScanner(probe.scan).complete:
        return False
    if view.mode != _STRIPPED and 0 <= probe.first_odd < probe.first_solid:
        return False
    return not (view.mode == _EXACT and probe.last_odd > probe.last_solid)


def _parse_key(view: SourceView) -> str:
    return f"{view.start}:{view.mode}:{view.probe.last_solid}"


class XlamSent(Struct):
    name: bool = False
    prefix: bool = False
    arguments: str = ""
    checked: str = ""  # the span of the arguments last compared with `arguments`
    closed: bool = False  # ...and whether they were all sent


class BlockScan(Struct):
    """One block kind searched from ``pos``, as findall would, on growing text."""

    kind: int
    pos: int
    open_at: int = -1  # after the open block's opening marker; -1: none open
    close_from: int = 0  # where to look for its closing marker next
    found: SourceView | None = None  # the first closed block that is JSON: final
    line: SourceView | None = None  # the open [TOOL_CALLS] line


class Fence(Struct):
    """The first fenced block, searched even unclosed when no call JSON is found yet."""

    at: int = -1  # its opening marker; -1: none yet
    view: SourceView | None = None
    dead: bool = False  # its text does not start with "[": never a candidate
    closed: bool = False
    skip: int = 0  # before `at`: where to look for it; after: where its text may start
    keys: int = 0  # bit 1: '"name"' seen in it, bit 2: '"arguments"'


# Text that can start a call block; until one shows up (or the output opens with
# "["), xLAM output is plain content.
_TRIGGERS = ("</think>", "```", "[TOOL_CALLS]", "<tool_call>")
_TRIGGER_TAIL = max(len(t) for t in _TRIGGERS) - 1
_BLOCK_HINTS = ("```json", "```\n[", "[TOOL_CALLS]", "<tool_call>")
_SEEN_WORDS = ("</think>[", '"name"', '"arguments"', "{", "name", "arguments")
_WORD_TAIL = max(len(w) for w in _SEEN_WORDS + _BLOCK_HINTS) - 1


class XlamState(Struct, tag="xlam"):
    text: str = ""
    emitted: int = 0  # chars of text sent as content
    hold_from: int = -1  # where a possible call block starts; -1: none seen yet
    tail: str = ""
    lead: str = ""
    current: int = -1
    sent: list[XlamSent] = field(default_factory=list)
    # Incremental views, set up once a block may start (hold_from >= 0).
    seen: int = 0  # how far `text` was looked at for the words below
    block_hint: bool = False
    words: list[str] = field(default_factory=list)
    whole: SourceView | None = None
    think_at: int = -1  # just after the first "</think>"; -1: none yet
    thinking: SourceView | None = None
    think_scans: list[BlockScan] = field(default_factory=list)
    scans: list[BlockScan] = field(default_factory=list)
    fence: Fence = field(default_factory=Fence)
    # Whether a view's closed array or object parses, by view state (values are not
    # kept: only the last chunk needs one, and snapshots stay small and plain).
    parsed: dict[str, bool] = field(default_factory=dict)


def _new_scans(pos: int) -> list[BlockScan]:
    return [BlockScan(kind, pos, close_from=pos) for kind in (_FENCE, _TOOL_CALLS, _TAGS)]


class XlamStream:
    """xLAM calls as vLLM 0.33.0 streams them, one step of one call per delta.

    vLLM re-reads the whole output on each delta; this keeps what it would find there
    up to date as the output grows, so a delta costs O(delta) amortized. Until
    something that can start a call block appears, the answer is known to be plain
    content. Unlike vLLM, text from where a block may start is held back (sent as
    content at the end if no call came of it), so block text never leaks into content
    (see docs/parity.md).
    """

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: XlamState | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else XlamState()

    def finish(self) -> Delta | None:
        """Send whatever of the calls the stream has not sent yet.

        vLLM takes one step per chunk (a name, or an argument piece), so the calls a
        multi-token chunking leaves no steps for are lost. The final text settles
        them from the final text, whatever the chunking was.
        """
        s = self.s
        if s.hold_from < 0:
            return None
        deltas: list[DeltaToolCall] = []
        for index, (name, arguments) in enumerate(self._final_calls()):
            while len(s.sent) <= index:
                s.sent.append(XlamSent())
            sent = s.sent[index]
            if not sent.name:
                sent.name = True
                call_id = xlam_tool_call_id(self.id_seed, index)
                deltas.append(DeltaToolCall(id=call_id, type="function", index=index, name=name))
            if arguments is None or arguments == sent.arguments:
                continue
            if arguments.startswith(sent.arguments):
                deltas.append(
                    DeltaToolCall(index=index, arguments=arguments[len(sent.arguments) :])
                )
                sent.prefix, sent.arguments = True, arguments
        return Delta(tool_calls=deltas) if deltas else None

    def _final_calls(self) -> list[tuple[str, str | None]]:
        """``(name, arguments)`` of every call in the final text, as far as it shows:
        the parsed array if the text parses (with the arguments the patterns find, as
        the steps send them), else the calls the patterns find."""
        s = self.s
        calls_view, is_block = self._view()
        if not is_block:
            return []
        search = self._search(calls_view)
        names = _chains(search, s.text)
        written = []
        for index in range(_count(search.args)):
            _, first, last = _match(search.args, index)
            written.append(s.text[first:last])
        probed = calls_view if calls_view is not None else s.whole
        parsed = None
        if probed is not None and self._valid(probed):
            first, last = probed.probe.first_solid, probed.probe.last_solid
            parsed = _loads(s.text[first : last + 1])[1]
        if not isinstance(parsed, list):
            found: list[tuple[str, str | None]] = []
            for index in range(_count(names)):
                _, first, last = _match(names, index)
                found.append((s.text[first:last], written[index] if index < len(written) else None))
            return found
        calls: list[tuple[str, str | None]] = []
        for index, entry in enumerate(parsed):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                break
            value = entry.get("arguments")
            arguments = value if value is None or isinstance(value, str) else None
            if arguments is None and value is not None:
                # What a step would have sent for this call, else the value itself.
                as_written = written[index] if index < len(written) else None
                arguments = as_written or json.dumps(value, ensure_ascii=False)
            calls.append((entry["name"], arguments))
        return calls

    def remaining_arguments(self) -> str:
        """Nothing: ``finish`` settles every call.

        (vLLM appends the last call's whole arguments again, since it never records
        what it streamed for xLAM: they are duplicated whenever the last chunk carries
        a tool-call delta.)
        """
        return ""

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        whole, s.text = s.text, ""  # the only reference: += grows it in place
        whole += text
        s.text = whole
        if s.hold_from < 0:
            window = s.tail + text
            base = len(s.text) - len(window)
            starts = [base + window.find(t) for t in _TRIGGERS if t in window]
            if not s.lead and text.strip():
                s.lead = text.lstrip()[:1]
                if s.lead == "[":
                    starts.append(len(s.text) - len(text.lstrip()))
            if not starts:
                keep = _trigger_overlap(window)
                s.tail = window[-_TRIGGER_TAIL:]
                return Delta(content=self._release(len(s.text) - keep))
            s.hold_from = min(starts)
        release = self._release(s.hold_from)
        self._update()
        calls_view, is_block = self._view()
        step = self._step(calls_view) if is_block else None
        if release:
            step = step or Delta()
            step.content = release
        return step

    def _release(self, upto: int) -> str:
        """Content up to ``upto`` not sent yet."""
        s = self.s
        out = s.text[s.emitted : upto] if upto > s.emitted else ""
        s.emitted = max(s.emitted, upto)
        return out

    # ------------------------------------------------------------ keeping views current

    def _update(self) -> None:
        """Bring every view up to the end of the text (the first call catches up)."""
        s = self.s
        text = s.text
        size = len(text)
        window = text[max(0, s.seen - _WORD_TAIL) :]
        s.block_hint = s.block_hint or any(hint in window for hint in _BLOCK_HINTS)
        s.words += [w for w in _SEEN_WORDS if w not in s.words and w in window]
        if s.whole is None:
            s.whole = SourceView(0)
            s.scans = _new_scans(0)
        if s.think_at < 0:
            think = text.find(_THINK_END, max(0, s.seen - len(_THINK_END) + 1))
            if think >= 0:
                s.think_at = think + len(_THINK_END)
                s.thinking = SourceView(s.think_at, _STRIPPED)
                s.think_scans = _new_scans(s.think_at)
        s.seen = size
        _feed_view(s.whole, text, size)
        if s.thinking is not None:
            _feed_view(s.thinking, text, size)
        for scan in s.scans:
            _advance_scan(scan, text, _EXACT)
        for scan in s.think_scans:
            _advance_scan(scan, text, _LEAD_EXACT)
        _advance_fence(s.fence, text)

    def _valid(self, view: SourceView, held: int = 0) -> bool:
        """Whether json.loads accepts the view's text now (arrays and objects are parsed
        once, when they close)."""
        if not _complete(view, held):
            return False
        probe = view.probe
        text = self.s.text
        top = text[probe.first_solid]
        if top not in "[{":
            digits = probe.last_solid - probe.first_solid + (0 if top == "-" else 1)
            limit = sys.get_int_max_str_digits()
            is_number = top == "-" or top.isdigit()
            return not (is_number and not probe.fraction and limit and digits > limit)
        key = _parse_key(view)
        if key not in self.s.parsed:
            self.s.parsed[key] = _loads(text[probe.first_solid : probe.last_solid + 1])[0]
        return self.s.parsed[key]

    def _view(self) -> tuple[SourceView | None, bool]:
        """The view vLLM takes as call JSON (None: none), and whether the output is a
        call block at all."""
        s = self.s
        calls = self._calls_view()
        first = s.whole.probe.first_solid if s.whole is not None else -1
        lead = s.text[first : first + len("[TOOL_CALLS]")] if first >= 0 else ""
        is_block = (
            lead.startswith(("[", "<tool_call>", "[TOOL_CALLS]"))
            or "</think>[" in s.words
            or calls is not None
            or (s.block_hint and '"name"' in s.words and '"arguments"' in s.words)
        )
        return calls, is_block

    def _calls_view(self) -> SourceView | None:
        s = self.s
        if s.thinking is not None:
            if self._valid(s.thinking):
                return s.thinking
            found = self._scope_block(s.think_scans)
            if found is not None:
                return found
        found = self._scope_block(s.scans)
        if found is not None:
            return found
        whole = s.whole
        if whole is None or whole.probe.first_solid < 0 or s.text[whole.probe.first_solid] != "[":
            return None
        if self._valid(whole) or all(w in s.words for w in ("{", "name", "arguments")):
            return whole
        return None

    def _scope_block(self, scans: list[BlockScan]) -> SourceView | None:
        for scan in scans:
            if scan.found is not None:
                return scan.found
            if scan.line is not None and self._valid(scan.line):
                return scan.line
        return None

    def _search(self, calls: SourceView | None) -> SourceView:
        """Where vLLM looks for calls: the call JSON, a fenced array, or the output."""
        s = self.s
        if calls is not None:
            return calls
        fence = s.fence
        if s.block_hint and fence.view is not None and fence.keys == 3:
            return fence.view
        assert s.whole is not None
        return s.whole

    # ------------------------------------------------------------ one step per delta

    def _step(self, calls: SourceView | None) -> Delta | None:
        s = self.s
        text = s.text
        search = self._search(calls)
        names = _chains(search, text)
        count = _count(names)
        if count == 0:
            return None
        while len(s.sent) < count:
            s.sent.append(XlamSent())
        index = s.current
        if (index == -1 or index < count - 1) and not s.sent[index + 1].name:
            index = s.current = index + 1
            s.sent[index].name = True
            _, first, last = _match(names, index)
            call_id = xlam_tool_call_id(self.id_seed, index)
            return Delta(
                tool_calls=[
                    DeltaToolCall(id=call_id, type="function", index=index, name=text[first:last])
                ]
            )
        if not 0 <= index < count:
            return None
        sent = s.sent[index]
        # vLLM takes this shortcut when any call has empty arguments; only the call's
        # own empty arguments count here, so a later call's are not replaced by {}.
        own_start = _match(names, index)[0]
        empty = _first_at_or_after(search.empties, own_start)
        if index < count - 1 and empty >= _match(names, index + 1)[0]:
            empty = -1
        origin = search.probe.first_solid if search.mode == _STRIPPED else search.start
        if empty > origin and not sent.prefix:
            sent.prefix, sent.arguments, sent.checked = True, "{}", ""
            if index < count - 1:
                s.current += 1
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments="{}")])
        if index >= _count(search.args):
            return None
        # The arguments as written. (vLLM re-serializes them instead whenever the whole
        # text happens to parse at this chunk, which makes them depend on the chunking;
        # see docs/parity.md.)
        _, first, last = _match(search.args, index)
        source = f"{first}:{last}"
        if source == sent.checked:
            # Same arguments as last time: nothing new to send.
            if sent.closed and index < count - 1:
                s.current += 1
            return None
        arguments = text[first:last]
        if not sent.prefix:
            sent.prefix, sent.arguments, sent.checked = True, "{", ""
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments="{")])
        sent.checked = source
        if arguments.startswith(sent.arguments) and arguments[len(sent.arguments) :]:
            piece = arguments[len(sent.arguments) :]
            sent.arguments = arguments
            sent.closed = True
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments=piece)])
        sent.closed = arguments == sent.arguments
        if sent.closed and index < count - 1:
            s.current += 1
        return None

    def _held(self, view: SourceView) -> int:
        """Chars of the text the view has not been fed (the open fence's last backticks)."""
        if view.end >= 0:
            return 0
        return len(self.s.text) - view.fed


def _trigger_overlap(text: str) -> int:
    """Length of the longest suffix of ``text`` that may grow into a block trigger."""
    best = 0
    for trigger in _TRIGGERS:
        for size in range(min(len(trigger) - 1, len(text)), best, -1):
            if text.endswith(trigger[:size]):
                best = size
                break
    return best


def _advance_scan(scan: BlockScan, text: str, line_mode: int) -> None:
    """Find blocks of the scan's kind in the new text, as findall would."""
    if scan.found is not None:
        return
    opener, closer = _OPENERS[scan.kind], _CLOSERS[scan.kind]
    size = len(text)
    while True:
        line = scan.line
        if line is not None:
            close = text.find("\n", line.fed)
            _feed_view(line, text, size if close < 0 else close)
            if close < 0:
                return
            line.end = close
            scan.line = None
            if _closed_json(line, text):
                scan.found = line
                return
            scan.pos = close
            continue
        if scan.open_at >= 0:
            close = text.find(closer, scan.close_from)
            if close < 0:
                scan.close_from = max(scan.open_at, size - len(closer) + 1)
                return
            group = scan.open_at
            if scan.kind == _FENCE:
                group = _fence_group_start(text, group, close)
            block = SourceView(group, _EXACT, end=close)
            _feed_view(block, text, close)
            scan.open_at = -1
            if _closed_json(block, text):
                scan.found = block
                return
            scan.pos = close + len(closer)
            continue
        start = text.find(opener, scan.pos)
        if start < 0:
            scan.pos = max(scan.pos, size - len(opener) + 1)
            return
        after = start + len(opener)
        if scan.kind == _TOOL_CALLS:
            scan.line = SourceView(after, line_mode)
        else:
            scan.open_at = scan.close_from = after


def _closed_json(view: SourceView, text: str) -> bool:
    """Whether json.loads accepts a closed block's text (parsed once, here)."""
    return _complete(view) and _loads(text[view.start : view.end])[0]


def _advance_fence(fence: Fence, text: str) -> None:
    """Follow the first fenced block: where its text starts, what it holds, its end."""
    if fence.dead or fence.closed:
        return
    size = len(text)
    if fence.at < 0:
        fence.at = text.find("```", fence.skip)
        if fence.at < 0:
            fence.skip = max(0, size - 2)
            return
        fence.skip = -1
    if fence.view is None:
        if fence.skip < 0:  # not past "json" yet
            rest = text[fence.at + 3 : fence.at + 7]
            if rest != "json" and "json".startswith(rest):
                return  # "json" or not: the next chars decide
            fence.skip = fence.at + (7 if rest == "json" else 3)
        while fence.skip < size and text[fence.skip].isspace():
            fence.skip += 1
        if fence.skip >= size:
            return
        if text[fence.skip] != "[":
            fence.dead = True
            return
        fence.view = SourceView(fence.skip, _STRIPPED)
    view = fence.view
    close = text.find("```", max(view.start, view.fed - 2))
    # Backticks at the end may be the closing marker: they wait for the next chars.
    held = 2 if text.endswith("``") else 1 if text.endswith("`") else 0
    upto = close if close >= 0 else size - held
    window = text[max(view.start, view.fed - len(_ARGUMENTS_KEY) + 1) : upto]
    fence.keys |= (_NAME_KEY in window) | (_ARGUMENTS_KEY in window) << 1
    _feed_view(view, text, upto)
    if close >= 0:
        view.end = close
        fence.closed = True


# ------------------------------------------------------------------ the family


def _stream(_: None, request: Request, kept: object) -> tuple[XlamStream, XlamState]:
    state = reuse(kept, XlamState)
    return XlamStream(request.id_seed, state), state


FAMILY = Family(
    title="xLAM (JSON call lists)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("xlam",),
            engine_based=False,
            states=(XlamState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: XlamTools(),
            stream=_stream,
            golden=("C4",),
        ),
    ),
)
