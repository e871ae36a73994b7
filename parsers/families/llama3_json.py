"""Llama 3 JSON tool calls (``llama3_json``): ``<|python_tag|>{"name": ..., "parameters": ...}``.

Several calls are separated by ``; ``. One-shot, every ``{`` that starts a JSON
object with a name and arguments (or parameters) is a call. Streamed, the output
so far is read as partial JSON with ``partial-json-parser``, as vLLM does: a
call's name once complete, then its arguments as their JSON grows (holding back
what a later character could still change). While the current call's text is
regular JSON, that reading is kept incrementally (``parsers.readers.partialjson``) and a step
costs the chunk. A key twice or a number over 64 characters mutes the call's
arguments (sent by the step that starts the next call, or by ``finish``: see
docs/parity.md, llama3-json-unread-arguments); a control character in a string ends
the call's stream, as every later reading fails. A call whose text leaves it
otherwise (malformed, an odd separator) is read again on each step, as vLLM does,
with the older fast paths (inside a string value, while containers only open, or
when nothing can come of it).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import partial_json_parser
from msgspec import Struct, field
from partial_json_parser.core.options import Allow

from parsers.family import Family, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.readers.jsonscan import WS, JsonScanner, JsonScanState
from parsers.readers.partialjson import (
    CallReader,
    CallReading,
    Irregular,
    Unreadable,
    common_length,
    dump_content,
    string_units,
)
from parsers.types import (
    ANY_TEXT,
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    PlainText,
)

BOT_TOKEN = "<|python_tag|>"
# What partial_json_parser and json raise on text that does not parse (the parser's own
# assertions and stack pops included): the output so far is then no call yet.
_UNPARSABLE = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    AssertionError,
    RecursionError,
    partial_json_parser.core.exceptions.MalformedJSON,
)
_OBJECT_START = re.compile(r"\{")
_SEPARATOR = "; "


class Llama3JsonTools:
    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Every JSON object in the output is a call, or none is (any bad one spoils all)."""
        if BOT_TOKEN not in content and "{" not in content:
            return ExtractedToolCalls(False, [], content)
        decoder = json.JSONDecoder()
        end = -1
        calls = []
        for match in _OBJECT_START.finditer(content):
            start = match.start()
            if start <= end:
                continue
            try:
                obj, end = decoder.raw_decode(content, start)
                name = obj["name"]
                arguments = obj["arguments"] if "arguments" in obj else obj["parameters"]
                if not isinstance(name, str):
                    raise TypeError("a call's name must be a string")
                calls.append(FunctionCall(name, json.dumps(arguments, ensure_ascii=False)))
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                return ExtractedToolCalls(False, [], content)
        if calls:
            return ExtractedToolCalls(True, calls, None)
        return ExtractedToolCalls(False, [], content)


def _loads_partial(text: str, flags: Allow) -> tuple[Any, int]:
    """Parse a possibly unfinished object; with more after it, just the first one."""
    try:
        return partial_json_parser.loads(text, flags), len(text)
    except json.JSONDecodeError as exc:
        if "Extra data" in exc.msg:
            return json.JSONDecoder().raw_decode(text)
        raise


def _complete(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _with_arguments(call: Any) -> Any:
    """A call as vLLM reads it: its ``parameters`` are its ``arguments``."""
    if "parameters" in call:
        call["arguments"] = call["parameters"]
    return call


def _as_read(call: Any) -> Any:
    return call


def _skip_space(text: str, at: int) -> int:
    """Past the white space at ``at`` (vLLM's ``consume_space``)."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at


@dataclass(frozen=True)
class JsonCallsDialect:
    """How a family spells a run of JSON calls that vLLM streams with this reading.

    ``opener`` opens the run (optional where ``bare`` lets a ``{`` open it too);
    ``holds_opener`` sends nothing while the output may still become the opener;
    ``first`` and ``after`` give where the first call starts and where the next one
    starts after a call's end; ``arguments`` reads a call as vLLM does; ``incremental``:
    the call may be read incrementally (``parsers.readers.partialjson``, which takes
    ``parameters`` for ``arguments``), else it is read again each step within the
    stream's budget. ``skips_space``: ``first`` skips white space after the opener (kept
    once found, so a run of it is read once).
    """

    opener: str
    bare: bool
    holds_opener: bool
    first: Callable[[str], int]
    after: Callable[[str, int], int]
    arguments: Callable[[Any], Any]
    incremental: bool
    skips_space: bool = False

    def opens(self, text: str) -> bool:
        return text.startswith(self.opener) or (self.bare and text.startswith("{"))


LLAMA3 = JsonCallsDialect(
    opener=BOT_TOKEN,
    bare=True,
    holds_opener=False,
    first=lambda text: len(BOT_TOKEN) if text.startswith(BOT_TOKEN) else 0,
    after=lambda text, end: end + len(_SEPARATOR),
    arguments=_with_arguments,
    incremental=True,
)


# Characters partial_json_parser tracks; a separator holding one changes how the text
# after it reads from every call before it.
_STRUCTURAL = frozenset('"[]{}')


def _split_at_mark(
    text: str, mark: str, read: Callable[[Any], Any] = _with_arguments
) -> tuple[str, str] | None:
    """The call's arguments read with ``mark`` appended, dumped and split around it:
    what the dump holds before the open end and the closers after it (None unless the
    mark lands exactly once)."""
    marked = read(_loads_partial(text + mark, Allow.ALL)[0])
    marked_dump = json.dumps(marked.get("arguments"), ensure_ascii=False)
    if marked_dump.count(mark) != 1:
        return None
    head, closer = marked_dump.split(mark)
    return head, closer


class Llama3JsonState(Struct, tag="llama3_json"):
    text: str = ""
    passthrough: bool = False
    current: int = -1
    name_sent: bool = False
    streamed: list[str] = field(default_factory=list)  # per call: the arguments sent
    previous: Any = None  # the current call as parsed by the last step that read it
    window: int = -1  # where reading starts: the current call, or the first one
    window_index: int = 0  # the index of the call that starts there
    last_start: int = -1  # where the call before the current one starts
    finished: list[Any] = field(default_factory=list)  # calls before the window
    named: list[int] = field(default_factory=list)  # calls whose name was sent
    # Inside a string value of the current call's arguments (see ``_in_string``): the
    # scanner over the call text, None when the call is read again each step.
    scan: JsonScanState | None = None
    head_len: int = 0  # length of the arguments' dump up to the string's settled part
    unsent: str = ""  # that dump from what was sent on (when sent reaches no further)
    closer: str = ""  # the dump after the string's content: its quote and the closers
    raw_tail: str = ""  # the string's raw text after its settled part
    tail_dump: str = ""  # how that raw text dumped at the last step
    # The current call's text scanned as JSON (see ``_idle``), for the call ``scan_call``.
    call_scan: JsonScanState | None = None
    scan_call: int = -1
    scanned: int = 0  # where in ``text`` the scan stopped
    name_seen: bool = False  # the call's text holds '"name' or a backslash
    spoiled: bool = False  # the call's JSON broke where no later text can mend it
    # Opening containers only (see ``_enter_nest``): the dump up to the newest opening,
    # from what was sent on, and the key being read. The scan is ``call_scan``.
    nesting: bool = False
    nest_unsent: str = ""
    nest_key: str = ""
    # The current call read incrementally (see ``_read_step``), and the call it was
    # tried for (once: after it leaves, that call is read again each step).
    reading: CallReading | None = None
    read_call: int = -1
    reread: int = 0  # characters read again by ``_calls`` so far (see REREAD_PER_CHAR)


# Reading the calls again with partial_json_parser (vLLM does it every chunk; here only
# where the text leaves what is read incrementally) may cost this many characters per
# character of output, plus a start: past it the stream's steps send no more and
# ``finish`` settles its calls, so even malformed output costs linear time in all.
REREAD_PER_CHAR = 8
REREAD_FREE = 1 << 16
# Below this nesting a reading never meets the recursion limit (no stack walk needed).
_SHALLOW = 100
# Whether json fails at a nesting and stack depth (keys: what, nesting, frames).
_DEEP: dict[tuple[str, int, int], bool] = {}


def _nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nested_list(depth: int) -> list[Any]:
    nested: list[Any] = []
    for _ in range(depth - 1):
        nested = [nested]
    return nested


# Frames a reading adds to the caller's before json's own nesting count (with room).
_FRAME_MARGIN = 40


def _frames() -> int:
    """How deep the stack is here (what ``json`` counts against the recursion limit)."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


# Containers a reading may drop at its end (a key cut off, a last item trimmed).
_DEPTH_MARGIN = 8
# What partial_json_parser reads as part of a number (and may cut off its end), and quote.
_NUMBER_CHARS = frozenset('"0123456789.-+eE')
_IN_STRING = frozenset({"string", "escape", "unicode"})
_MARK = "\ue000"  # stands for the string's unsettled end in one dump on entry


def _spoils(phase: str, char: str) -> bool:
    """Whether ``char``, breaking the JSON in ``phase``, breaks it for partial_json_parser
    too, whatever follows.

    Right after a member or item that is not a number, a character other than a quote or
    whitespace (which that parser may take for a key's start or strip) stays in every
    text it completes, or in the part it parses strictly: every later reading fails.
    """
    after_item = phase in ("obj_next", "arr_next")
    return after_item and char not in _NUMBER_CHARS and not char.isspace()


# How a step read the current call, for ``remaining_arguments``: not at all (or it moved
# on to the next call), again with partial_json_parser (``previous``), again only for
# that (a muted call's name step: strings cut; openings only: whole), inside a string
# value, or by the incremental reading.
_NOT_READ, _READ_AGAIN, _READ_NAMED, _READ_NESTED = "", "again", "named", "nested"
_READ_IN_STRING, _READ_INCREMENTALLY = "in string", "incrementally"


def _rest(sent: str, settled: int, unsent: str, end: str) -> str:
    """The rest after ``sent`` of a dump kept as a settled head of length ``settled``
    (``unsent``: its part after ``sent``) and an ``end``; empty unless the dump extends
    ``sent``."""
    if len(sent) <= settled:
        return unsent + end
    over = len(sent) - settled
    if over > len(end) or not sent.startswith(end[:over], settled):
        return ""
    return end[over:]


class Llama3JsonStream:
    """Streamed calls, reading from the current call on.

    vLLM reads every call again on every chunk. A call before the current one is
    complete JSON, so it reads the same each time, and when the separators between
    calls hold none of the characters partial_json_parser tracks, text after the
    current call's start reads the same from any earlier call: so only the call
    before the current one is read again (whether the text spoils it), and the
    current one with what follows. After an odd separator, every call is read from
    the first one on, as vLLM does.
    """

    engine_based = False
    supports_required_and_named = False

    def __init__(
        self,
        id_seed: str,
        state: Llama3JsonState | None = None,
        dialect: JsonCallsDialect = LLAMA3,
    ) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else Llama3JsonState()
        self.dialect = dialect
        # How the last step read the current call (see ``remaining_arguments``): the
        # chunk's own business, never kept between chunks.
        self._read_by = _NOT_READ

    def finish(self) -> Delta | None:
        """Settle the complete calls the stream's steps left out, from the final text.

        vLLM takes one step per chunk (start a call, name it, send argument text) and
        jumps to the newest call when several appear at once, so a coarse chunking loses
        names and arguments. Here every complete call of the final text gets what one
        step per token would have sent it: its name, and the rest of its arguments
        unless they are empty (vLLM never streams ``{}``). An open call (the output cut
        short) gets its name once that is complete, and no more of its arguments: vLLM's
        steps stop at what two readings agree on, and the last one adds only what
        ``remaining_arguments`` gives.
        """
        s = self.s
        if s.passthrough or not self.dialect.opens(s.text):
            return None
        if self._read_open():
            return None
        calls: list[DeltaToolCall] = []
        for index, (call, start, complete) in enumerate(self._final_calls()):
            name = call.get("name")
            if index not in s.named and not complete:
                # An open call's name counts once its string is closed.
                name = self._closed_name(start)
            if not isinstance(name, str) or not name:
                break
            if index not in s.named:
                calls.append(opening_call_delta(self.id_seed, index, name))
                s.named.append(index)
            if index == len(s.streamed):
                s.streamed.append("")
            arguments = call.get("arguments")
            if not complete or not arguments:
                continue
            text = json.dumps(arguments, ensure_ascii=False)
            sent = s.streamed[index]
            if text.startswith(sent) and text != sent:
                piece = text[len(sent) :]
                calls.append(DeltaToolCall(index=index, arguments=piece))
                self._sent(index, piece)
        return Delta(tool_calls=calls) if calls else None

    def _read_open(self) -> bool:
        """Whether the steps read the current call incrementally and it is still open,
        or closed by a step that sent the rest of its arguments: every call before it
        was settled by the step that moved past it, so nothing is left to settle.

        Not so for arguments that are a JSON string: a step that names the call as it
        closes sends no arguments, and the last chunk adds the string's text unquoted
        (``remaining_arguments``), where one step per token would have sent its dump;
        so that call is settled from the final text as any other."""
        s = self.s
        if s.scan is not None or s.nesting:
            return True
        r = s.reading
        if r is None or s.read_call != s.current or r.muted or r.dead or r.max_depth > _SHALLOW:
            return False
        # As ``_rest_of_reading`` tells a string; a text sent unquoted that does not open
        # with a quote is no prefix of the dump, so settling would add nothing to it.
        sent = s.streamed[s.current]
        return not (r.done and (sent[:1] or r.unsent[:1] or r.volatile[:1]) == '"')

    def _final_calls(self) -> list[tuple[dict[str, Any], int, bool]]:
        """The calls of the final text, as far as they parse: each with where it starts
        (-1 for the calls before the window) and whether its JSON is complete."""
        s = self.s
        text = s.text
        if s.last_start >= 0:
            try:
                _loads_partial(text[s.last_start :], Allow.ALL)
            except _UNPARSABLE:
                return []
        start = self._window()
        calls = [(call, -1, True) for call in s.finished]
        while start < len(text):
            try:
                obj, end = _loads_partial(text[start:], Allow.ALL)
            except _UNPARSABLE:
                break
            if not isinstance(obj, dict):
                break
            complete = _complete(text[start : start + end])
            calls.append((self.dialect.arguments(obj), start, complete))
            start = self.dialect.after(text, start + end)
        return calls

    def _closed_name(self, start: int) -> Any:
        """The name of the open call at ``start`` as a step reads it before the name is
        sent: an unfinished string is no name yet."""
        try:
            call = _loads_partial(self.s.text[start:], Allow.ALL & ~Allow.STR)[0]
        except _UNPARSABLE:
            return None
        return call.get("name") if isinstance(call, dict) else None

    def _window(self) -> int:
        s = self.s
        if s.window >= 0:
            return s.window
        first = self.dialect.first(s.text)
        if self.dialect.skips_space and first < len(s.text):
            s.window = first  # settled once text follows the space (the same call, index 0)
        return first

    def remaining_arguments(self) -> str:
        """What vLLM's server adds to the last chunk when its step sent a call piece: the
        rest of the current call's arguments as that step read them, where they extend
        what was sent (``json.dumps`` of the reading, a string value as it is, ``{}``
        when it has none yet). A step that moved on to a new call compares a reading
        of the call before with what was sent for it, so it adds nothing.
        """
        s = self.s
        read_by, self._read_by = self._read_by, _NOT_READ
        if read_by == _NOT_READ or s.current < 0 or not s.name_sent:
            return ""
        sent = s.streamed[s.current]
        rest: str | None = None
        if read_by == _READ_IN_STRING:
            rest = _rest(sent, s.head_len, s.unsent, s.tail_dump + s.closer)
        elif read_by == _READ_INCREMENTALLY:
            rest = self._rest_of_reading(sent)
        if rest is None:
            if read_by == _READ_AGAIN:
                call = s.previous
            else:
                flags = Allow.ALL if read_by != _READ_NAMED else Allow.ALL & ~Allow.STR
                try:
                    read = _loads_partial(s.text[self._window() :], flags)[0]
                    call = self.dialect.arguments(read)
                except _UNPARSABLE:
                    return ""
            arguments = call.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            expected: str = arguments
            rest = expected[len(sent) :] if expected.startswith(sent) else ""
        self._sent(s.current, rest)
        return rest

    def _rest_of_reading(self, sent: str) -> str | None:
        """``remaining_arguments`` from the incremental reading (None: read the call
        again, for a string value whose text vLLM sends unquoted)."""
        r = self.s.reading
        assert r is not None
        if not r.args_kept:
            return "{}"[len(sent) :] if "{}".startswith(sent) else ""
        first = sent[:1] or r.unsent[:1] or r.volatile[:1]
        if first == '"':
            return None
        return _rest(sent, r.settled_len, r.unsent, r.volatile)

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Any text is content alone (``ReadsPlain``) once the output did not open with a
        call: it never reads one then."""
        if not self.s.passthrough:
            return None
        self._read_by = _NOT_READ  # as ``stream`` sets it
        return ANY_TEXT

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        self._read_by = _NOT_READ
        if s.passthrough:
            return Delta(content=text)
        whole, s.text = s.text, ""  # the only reference: += grows it in place
        whole += text
        s.text = whole
        dialect = self.dialect
        if not dialect.opens(s.text):
            # Output that does not open with a call never becomes one.
            opener = dialect.opener
            if dialect.holds_opener and len(s.text) < len(opener) and opener.startswith(s.text):
                return None
            if s.text and not dialect.opener.startswith(s.text):
                s.passthrough, s.text = True, ""
            return Delta(content=text)
        try:
            again, delta = (
                self._read_step(len(s.text) - len(text)) if self._reading() else (True, None)
            )
            if again:
                delta = self._in_string(text) if s.scan is not None else None
                if s.nesting:
                    delta = self._in_nest()
                if s.scan is None and not s.nesting and not self._idle():
                    delta = self._calls_within_budget()
        except _UNPARSABLE:
            return None
        for call in delta.tool_calls if delta is not None else ():
            if call.name is not None:
                s.named.append(call.index)
        return delta

    def _calls_within_budget(self) -> Delta | None:
        """``_calls``, while what the stream has read again stays within its budget
        (docs/parity.md, llama3-json-reread-budget)."""
        s = self.s
        cost = len(s.text) - self._window()
        if s.reread + cost > REREAD_PER_CHAR * len(s.text) + REREAD_FREE:
            return None
        s.reread += cost
        return self._calls()

    def _sent(self, index: int, piece: str) -> None:
        """``piece`` of call ``index``'s arguments is sent (appended in place, not copied)."""
        streamed = self.s.streamed
        grown, streamed[index] = streamed[index], ""
        grown += piece
        streamed[index] = grown

    def _read_before(self, end: int, flags: Allow = Allow.ALL) -> None:
        """Read the current call as the step before did (``end``: where this step's text
        starts): what reading it again from now on compares with."""
        s = self.s
        read = _loads_partial(s.text[self._window() : end], flags)[0]
        s.previous = self.dialect.arguments(read)

    def _reading(self) -> bool:
        """Whether this step reads the current call incrementally (starting if it may)."""
        s = self.s
        if s.reading is not None:
            return True
        if not self.dialect.incremental:
            return False
        if s.current < 0 or s.name_sent or s.read_call == s.current or s.scan is not None:
            return False
        start = self._window()
        if s.nesting or s.window_index != s.current or not s.text.startswith("{", start):
            return False
        s.read_call, s.reading = s.current, CallReading(pos=start)
        return True

    def _read_step(self, before: int) -> tuple[bool, Delta | None]:
        """One step from the incremental reading: what reading the call again would send.

        While the call's text is regular (``parsers.readers.partialjson``) and followed by nothing
        but the start of ``"; {"``, the reading is known without partial_json_parser: the
        name once its string closes, the arguments' dump as a settled head, a volatile
        end and closers, so a step costs the chunk. Where the next call starts, the step
        reads as before (once per call). Otherwise the reading leaves for good (True
        first): the call is read again on this and every later step.
        """
        s = self.s
        r = s.reading
        assert r is not None
        reader = CallReader(r)
        named = s.name_sent  # the flags of this step's reading
        limit = sys.getrecursionlimit()
        if r.dead:
            return False, self._name_unread_call()
        if r.max_depth > limit + _DEPTH_MARGIN:
            return False, None  # every reading fails from now on
        try:
            reader.read(s.text)
            if r.done:
                rest = s.text[r.end :]
                if rest.startswith("; {"):
                    s.reading = None
                    return False, self._calls()
                if not _SEPARATOR.startswith(rest):
                    raise Irregular
            if r.muted:
                return False, self._muted_step()
            if not s.name_sent and r.name and not r.done and reader.in_argument_string():
                raise Irregular  # that reading (strings dropped) is not this one
        except Irregular as exc:
            if not isinstance(exc, Unreadable) and not r.muted:
                self._leave_reading(before)
                return True, None
            return False, self._stop()
        complete = r.done
        truthy = reader.arguments_truthy()
        if r.max_depth > limit + _DEPTH_MARGIN:
            return False, None
        if r.max_depth > _SHALLOW and r.max_depth + _frames() + _FRAME_MARGIN >= limit:
            # Near the recursion limit the reading may fail: ask json at the depth the
            # reading would (these calls mirror ``_calls``'), once per nesting and stack.
            frames = _frames()
            key = ("loads", r.max_depth, frames)
            if key not in _DEEP:
                try:
                    _loads_partial(_nested_text(r.max_depth), Allow.ALL)
                    _DEEP[key] = False
                except RecursionError:
                    _DEEP[key] = True
            if complete:
                key = ("complete", r.max_depth, frames)
                if key not in _DEEP:
                    _DEEP[key] = not _complete(_nested_text(r.max_depth))
                complete = not _DEEP[key]
            depths = []
            if s.name_sent and truthy:
                depths.append(r.args_max_depth)
                if not complete and r.truthy:
                    depths.append(r.read_args_depth)
            failed = _DEEP[("loads", r.max_depth, frames)]
            for depth in depths:
                key = ("dumps", depth, frames)
                if key not in _DEEP:
                    try:
                        json.dumps(_nested_list(depth), ensure_ascii=False)
                        _DEEP[key] = False
                    except RecursionError:
                        _DEEP[key] = True
                failed = failed or _DEEP[key]
            if failed:
                return False, None  # as the reading's own failure: nothing changes
        if not s.name_sent and not r.name:
            r.read_named = False
            return False, None
        added = "".join(r.pieces)
        r.pieces.clear()
        old_len = r.settled_len
        r.settled_len += len(added)
        sent = len(s.streamed[s.current])
        unsent = r.unsent + added if sent <= old_len else added[sent - old_len :]
        volatile = reader.volatile()
        delta = None
        if not s.name_sent:
            assert r.name
            delta = Delta(tool_calls=[opening_call_delta(self.id_seed, s.current, r.name)])
            s.name_sent = True
        elif truthy:
            ahead = unsent + volatile[max(0, sent - r.settled_len) :]
            piece: str | None = None
            if complete:
                piece = ahead
            elif r.truthy:
                grown = added + volatile
                if grown != r.volatile:
                    common = old_len + common_length(r.volatile, grown)
                    piece = ahead[: max(0, common - sent)]
            if piece is not None:
                delta = Delta(tool_calls=[DeltaToolCall(index=s.current, arguments=piece)])
                self._sent(s.current, piece)
                unsent = unsent[len(piece) :]
        r.read_named, r.read_args_depth = named, r.args_max_depth
        r.unsent, r.volatile, r.truthy = unsent, volatile, truthy
        self._read_by = _READ_INCREMENTALLY
        return False, delta

    def _stop(self) -> Delta | None:
        """No later step of the current call sends its arguments (``finish`` settles
        them): after a control character in a string every reading fails; a muted
        call's arguments wait for ``finish``."""
        s = self.s
        assert s.reading is not None
        s.reading.dead = True
        return self._name_unread_call()

    def _name_unread_call(self) -> Delta | None:
        """The name of a call no longer read incrementally, while none was sent.

        A reading of the whole call may still name it (it drops an open string, or
        reads past odd text such as an escape after a number once the escape's string
        closes), so the call is read again at each step until named, within the
        stream's re-read budget (docs/parity.md, llama3-json-reread-budget).
        """
        s = self.s
        if s.name_sent:
            return None
        current = s.current
        delta = self._calls_within_budget()
        if s.current != current:
            s.reading = None  # that reading moved on to the next call
        return delta

    def _muted_step(self) -> Delta | None:
        """A step of a muted call: its name once complete; the arguments wait for the
        step that reads the next call, or the final settle (docs/parity.md,
        llama3-json-unread-arguments)."""
        s = self.s
        r = s.reading
        assert r is not None
        if s.name_sent or not r.name:
            return None
        s.name_sent = True
        self._read_by = _READ_NAMED
        return Delta(tool_calls=[opening_call_delta(self.id_seed, s.current, r.name)])

    def _leave_reading(self, before: int) -> None:
        """Read the call again from now on, against the last step's reading."""
        s = self.s
        r = s.reading
        assert r is not None
        s.reading = None
        if s.name_sent:
            self._read_before(before, Allow.ALL if r.read_named else Allow.ALL & ~Allow.STR)

    def _calls(self) -> Delta | None:
        s = self.s
        current = s.text
        flags = Allow.ALL if s.name_sent else Allow.ALL & ~Allow.STR
        calls: list[Any] = []  # from the call at the window on
        starts: list[int] = []
        ends: list[int] = []
        complete: list[bool] = []
        start = self._window()
        try:
            if s.last_start >= 0:
                # The calls before are read with all the text after them: what spoils
                # the reading of the last of them spoils the step.
                _loads_partial(current[s.last_start :], flags)
            while start < len(current):
                obj, end = _loads_partial(current[start:], flags)
                complete.append(_complete(current[start : start + end]))
                starts.append(start)
                ends.append(start + end)
                start = self.dialect.after(current, start + end)
                both = "parameters" in obj and "arguments" in obj
                if both and self.dialect.arguments is _with_arguments:
                    raise ValueError("a call has both parameters and arguments")
                calls.append(self.dialect.arguments(obj))
        except partial_json_parser.core.exceptions.MalformedJSON:
            return None
        if not calls:
            return None
        at = s.current - s.window_index  # the current call's place in ``calls``
        call: dict[str, Any] = calls[at] if at < len(calls) else {}
        if len(calls) > at + 1:
            # A new call started: finish the current one and move to the next. (vLLM
            # jumps to the newest call and may send these arguments unnamed, losing
            # calls when one chunk holds several; here calls go one at a time.)
            finished: list[DeltaToolCall] = []
            if s.current >= 0:
                name = call.get("name")
                if not s.name_sent and name:
                    finished.append(opening_call_delta(self.id_seed, s.current, name))
                arguments = call.get("arguments")
                if arguments:
                    text = json.dumps(arguments, ensure_ascii=False)
                    tail = text[len(s.streamed[s.current]) :]
                    self._sent(s.current, tail)
                    finished.append(DeltaToolCall(index=s.current, arguments=tail))
                self._advance(call, starts[at], ends[at], starts[at + 1])
            s.current += 1
            s.name_sent = False
            s.streamed.append("")
            self._read_by = _NOT_READ
            return Delta(tool_calls=finished) if finished else None
        delta = None
        if not s.name_sent:
            name = call.get("name")
            if name:
                delta = Delta(tool_calls=[opening_call_delta(self.id_seed, s.current, name)])
                s.name_sent = True
        else:
            arguments = call.get("arguments")
            if arguments:
                sent = len(s.streamed[s.current])
                text = json.dumps(arguments, ensure_ascii=False)
                before = s.previous.get("arguments")
                piece: str | None = None
                if complete[at]:
                    piece = text[sent:]
                elif before:
                    before_text = json.dumps(before, ensure_ascii=False)
                    if text != before_text:
                        piece = text[sent : common_length(before_text, text)]
                if piece is not None:
                    delta = Delta(tool_calls=[DeltaToolCall(index=s.current, arguments=piece)])
                    self._sent(s.current, piece)
        s.previous = call
        self._read_by = _READ_AGAIN
        if s.name_sent and s.window_index == s.current:
            self._enter_string(call, starts[at])
            self._enter_nest(call, starts[at])
        return delta

    def _idle(self) -> bool:
        """Whether this step surely sends nothing and changes nothing, without reading.

        While the current call's first JSON value is unfinished, the reading holds one
        call. Before its name is sent, that call has no name unless its text holds
        '"name' or an escape (the reading it leaves is never used: the step that sends
        the name reads again). Nested deeper than the recursion limit, ``json.loads``
        fails on the reading, so the step sends nothing, as in vLLM; so it does once the
        call's JSON is spoiled (``_spoils``) after its name was sent.
        """
        s = self.s
        if s.current < 0 or s.window_index != s.current:
            return False
        if s.scan_call != s.current or s.call_scan is None:
            s.call_scan, s.scan_call, s.scanned = JsonScanState(), s.current, self._window()
            s.name_seen = s.spoiled = False
        added = s.text[s.scanned :]
        scanner = JsonScanner(s.call_scan)
        for char in added:
            phase = scanner.s.phase
            if phase == "error":
                break
            scanner.feed(char)
            if scanner.s.phase == "error":
                s.spoiled = _spoils(phase, char)
        if "\\" in added or '"name' in s.text[max(0, s.scanned - 4) :]:
            s.name_seen = True
        s.scanned = len(s.text)
        if scanner.s.phase in ("done", "error"):
            return s.spoiled and s.name_sent
        if not s.name_sent and not s.name_seen:
            return True
        return len(scanner.s.stack) > sys.getrecursionlimit() + _DEPTH_MARGIN

    def _enter_string(self, call: dict[str, Any], start: int) -> None:
        """Keep reading the current call incrementally if it ends inside a string value.

        While the call's text grows inside a valid string, every reading is the one
        before with that string longer: the dump of the arguments is a fixed head, the
        string's content and a fixed closer, so a step costs what the chunk adds.
        Entering costs one pass over the call, like the reading it follows.
        """
        s = self.s
        arguments = call.get("arguments")
        # ``_idle`` scanned the call up to here: a cheap test before the pass.
        scanned = s.call_scan if s.scan_call == s.current and s.scanned == len(s.text) else None
        if scanned is not None and (scanned.phase not in _IN_STRING or scanned.is_key):
            return
        if not isinstance(arguments, dict | list):
            return
        dump = json.dumps(arguments, ensure_ascii=False)
        if not dump.rstrip("]}").endswith('"'):
            return
        scanner = JsonScanner()
        opened = -1
        for index, char in enumerate(s.text[start:]):
            inside = scanner.s.phase in _IN_STRING
            scanner.feed(char)
            if not inside and scanner.s.phase in _IN_STRING:
                opened = start + index + 1
        if scanner.s.phase not in _IN_STRING or scanner.s.is_key:
            return
        raw = s.text[opened:]
        cut, end = string_units(raw)
        split = _split_at_mark(s.text[start : opened + cut], _MARK, self.dialect.arguments)
        if split is None:
            return
        head, closer = split
        tail_dump = dump_content(raw[cut:end])
        sent = s.streamed[s.current]
        # Argument text the reading now contradicts (a key given twice) is read again:
        # the last chunk then adds nothing (``remaining_arguments``).
        if head + tail_dump + closer != dump or not head.startswith(sent):
            return
        s.scan, s.head_len, s.unsent, s.closer = scanner.s, len(head), head[len(sent) :], closer
        s.raw_tail, s.tail_dump = raw[cut:], tail_dump

    def _enter_nest(self, call: dict[str, Any], start: int) -> None:
        """Keep reading the call incrementally while its text only opens containers.

        Right after an opening, and while only keys and openings follow, each reading is
        the one before with a chain of containers in the newest one, each the only
        member or item of its parent: the dump is a fixed head, that chain's openings and
        keys, its closers and a fixed closer, so two steps differ right after the shorter
        chain (a closer against an opening or key).
        """
        s = self.s
        scanned = s.call_scan if s.scan_call == s.current and s.scanned == len(s.text) else None
        if scanned is None or scanned.phase not in ("first_item", "first_key"):
            return
        arguments = call.get("arguments")
        # Empty arguments send nothing on the next step (vLLM's test of the last reading).
        if not arguments or not isinstance(arguments, dict | list) or s.scan is not None:
            return
        probe = '"\ue000"' if scanned.phase == "first_item" else '"\ue000": 0'
        split = _split_at_mark(s.text[start:], probe, self.dialect.arguments)
        if split is None:
            return
        head, closer = split
        sent = len(s.streamed[s.current])
        if head + closer != json.dumps(arguments, ensure_ascii=False) or sent > len(head):
            return
        s.nesting, s.nest_unsent, s.nest_key = True, head[sent:], ""

    def _in_nest(self) -> Delta | None:
        """One step while the call only opens containers, or leave (read again)."""
        s = self.s
        assert s.call_scan is not None
        scanner = JsonScanner(s.call_scan)
        added = s.text[s.scanned :]
        grown = ""
        for char in added:
            phase, parent = scanner.s.phase, scanner.s.stack[-1]
            if char in WS or (phase == "string" and char not in '\\"'):
                pass
            elif phase in ("first_item", "value") and char in "[{":
                grown += char if parent == "[" else f'"{s.nest_key}": {char}'
            elif (phase, char) in (("first_key", '"'), ("string", '"'), ("colon", ":")):
                pass
            else:
                self._leave_nest()
                return None
            scanner.feed(char)
            if scanner.s.phase == "error":
                self._leave_nest()
                return None
            if phase == "first_key":
                s.nest_key = ""
            elif phase == "string" and scanner.s.phase == "string":
                s.nest_key += char
        if len(scanner.s.stack) + _frames() + _FRAME_MARGIN >= sys.getrecursionlimit():
            self._leave_nest()
            return None
        s.scanned = len(s.text)
        if not grown:
            return None
        piece, s.nest_unsent = s.nest_unsent, grown
        self._sent(s.current, piece)
        self._read_by = _READ_NESTED
        return Delta(tool_calls=[DeltaToolCall(index=s.current, arguments=piece)])

    def _leave_nest(self) -> None:
        """The step reads the call again, against the reading before this chunk."""
        s = self.s
        s.nesting = False
        s.call_scan, s.scan_call = None, -1
        self._read_before(s.scanned)

    def _in_string(self, text: str) -> Delta | None:
        """One step inside the current call's string value, or leave it.

        The reading grows only in the string's end, so the dumps of two steps differ
        only after the settled head: their common prefix is the head and that of the
        two ends (an end never holds a bare quote, and the closer starts with one).
        """
        s = self.s
        assert s.scan is not None
        scanner = JsonScanner(s.scan)
        # Only a quote can close the string: without one, the chunk is fed at once.
        for part in text if '"' in text else (text,):
            scanner.feed(part)
            if scanner.s.phase not in _IN_STRING:
                break
        if scanner.s.phase not in _IN_STRING:
            # Leave: the step reads the call again, against the reading before this chunk.
            s.scan = None
            self._read_before(len(s.text) - len(text))
            return None
        raw = s.raw_tail + text
        cut, end = string_units(raw)
        settled = dump_content(raw[:cut])
        new_end = settled + dump_content(raw[cut:end])
        old_end = s.tail_dump
        sent = len(s.streamed[s.current])
        # The head with this step's settled text, from what was sent on.
        ahead = s.unsent + settled if sent <= s.head_len else settled[sent - s.head_len :]
        delta = None
        if new_end != old_end:
            common = common_length(old_end + '"', new_end + '"')
            if sent <= s.head_len:
                piece = s.unsent + new_end[:common]
            else:
                piece = new_end[sent - s.head_len : common]
            delta = Delta(tool_calls=[DeltaToolCall(index=s.current, arguments=piece)])
            self._sent(s.current, piece)
            ahead = ahead[len(piece) :]
        s.unsent = ahead
        s.head_len += len(settled)
        s.raw_tail, s.tail_dump = raw[cut:], new_end[len(settled) :]
        self._read_by = _READ_IN_STRING
        return delta

    def _advance(self, call: dict[str, Any], start: int, end: int, next_start: int) -> None:
        """Move the window past the current call, unless its separator is an odd one."""
        s = self.s
        separator = s.text[end:next_start]
        if s.window_index != s.current or _STRUCTURAL.intersection(separator):
            # Read from the first call on from now on.
            first = self.dialect.first(s.text)
            s.window, s.window_index, s.last_start = first, 0, -1
            s.finished.clear()
            return
        s.finished.append(call)
        s.window, s.window_index, s.last_start = next_start, s.current + 1, start


# ------------------------------------------------------------------ the family


def _stream(_: None, request: Request, kept: object) -> tuple[Llama3JsonStream, Llama3JsonState]:
    state = reuse(kept, Llama3JsonState)
    return Llama3JsonStream(request.id_seed, state), state


# vLLM registers one class under both names: Llama 4's JSON calls are Llama 3's, and
# it refuses a tokenizer without <|python_tag|> (Llama 4's own) as we do.
FAMILY = Family(
    title="Llama 3.1-3.3 and Llama 4 JSON calls",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("llama3_json",),
            aliases={"llama4_json": "llama3_json"},
            engine_based=False,
            needs=(BOT_TOKEN,),
            states=(Llama3JsonState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: Llama3JsonTools(),
            stream=_stream,
            golden=("L1", "L3"),
        ),
    ),
)
