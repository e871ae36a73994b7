"""FunctionGemma tool calls (``functiongemma``)::

    <start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

vLLM 0.33.0 reads them with a legacy parser, reproduced here (docs/parity.md,
functiongemma-chunk-reading):

* One-shot: every call ``tool_call_regex`` finds (the last one may run to the end of the
  text); each argument's value is its JSON where it reads as JSON, else the string. The
  stripped text before the first ``<start_function_call>`` is the content.
* Streamed: text that may still become either marker is held back (and never sent if
  the stream ends there); each chunk then reads the text before it plus its own, held
  text read twice. A chunk that brings a new ``<start_function_call>`` opens a call and
  sends nothing; inside a call, once ``call:NAME{`` is in, a chunk sends the name, and
  later chunks the arguments' JSON from the length already sent, cut by length only;
  a chunk that brings ``<end_function_call>`` sends the ended call's JSON (the call the
  pattern finds at its index) from that length; any other chunk is content.

vLLM searches the whole text again at every chunk; here each piece of text is read
once by parsers/families/functiongemma_args.py, so a chunk costs what it brings.
"""

from __future__ import annotations

from msgspec import Struct, field

from parsers.families.functiongemma_args import (
    CALL,
    EDGE,
    END,
    START,
    Arguments,
    Calls,
    Readable,
    Undo,
    View,
    read_arguments,
)
from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

_NAME_AT = len(START) + len(CALL)


def held_back(text: str) -> str:
    """What vLLM's stream holds back of ``text``: its end from the last ``<`` when that
    is a proper start of either marker."""
    at = text.rfind("<", max(0, len(text) - len(START) + 1))
    end = text[at:] if at >= 0 else ""
    if end and end not in (START, END) and (START.startswith(end) or END.startswith(end)):
        return end
    return ""


def extract_calls(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring)."""
    first = text.find(START)
    if first < 0:
        return ExtractedToolCalls(False, [], text)
    calls = Calls(searched=first)
    calls.advance(text)
    found = calls.all(len(text))
    if not found:
        return ExtractedToolCalls(False, [], text)
    read = [
        FunctionCall(text[name:brace], read_arguments(text[brace + 1 : end]))
        for name, brace, end in found
    ]
    return ExtractedToolCalls(True, read, text[:first].strip() or None)


class FunctionGemmaTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


class CallReading(Struct):
    """The call after the last ``<start_function_call>`` as vLLM's stream reads it: its
    first ``{`` after the marker (-1: none yet) and the arguments after it."""

    at: int
    searched: int
    is_call: bool | None = None  # whether ``call:`` follows the marker, once known
    brace: int = -1
    arguments: Arguments | None = None

    def advance(self, text: Readable, undo: Undo | None = None) -> None:
        head = self.at + len(START)
        if self.is_call is None and len(text) >= head + len(CALL):
            self.is_call = text[head : head + len(CALL)] == CALL
        if self.brace < 0:
            brace = text.find("{", self.searched)
            if brace < 0:
                self.searched = max(self.searched, len(text))
                return
            self.brace = brace
            self.arguments = Arguments(brace + 1, brace + 1)
        if self.arguments is not None:
            self.arguments.advance(text, undo)


class FunctionGemmaState(Struct, tag="functiongemma"):
    """Where the stream stands: the text held back, the markers counted so far, the
    text from the first ``<start_function_call>`` on (``kept``), the calls the pattern
    finds in it, the last call's reading, the current call's index and whether its name
    went out, the length of the arguments JSON sent for it, and the last ended call's
    arguments JSON (read once its end is kept)."""

    held: str = ""
    edge: str = ""  # the end of ``kept``
    starts: int = 0
    ends: int = 0
    kept: GrowingText = field(default_factory=GrowingText)
    opened: bool = False  # ``kept`` has begun
    calls: Calls = field(default_factory=Calls)
    call: CallReading | None = None
    index: int = -1
    named: bool = False
    sent: int = 0
    ended_index: int = -1
    ended: str = ""


class FunctionGemmaStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: FunctionGemmaState) -> None:
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        joined = s.held + text
        held = held_back(joined)
        out = joined[: len(joined) - len(held)]
        starts, ends = s.starts + joined.count(START), s.ends + joined.count(END)
        # Where ``joined`` starts in ``kept`` (it ends the text so far and what it adds).
        origin = len(s.kept) - len(s.held)
        tail, fresh = out, text
        if not s.opened:
            first = joined.find(START)
            origin = -first
            tail, fresh = (out[first:], joined[first:]) if first >= 0 else ("", "")
        delta = self._read(View(s.kept, tail, s.edge), out, starts, ends)
        s.held, s.starts, s.ends = held, starts, ends
        if fresh:
            s.opened = True
            last = joined.rfind(START)
            if last >= 0:
                at = origin + last
                s.call = CallReading(at, at + _NAME_AT)
            kept = View(s.kept, fresh, s.edge)
            s.calls.advance(kept)
            if s.call is not None:
                s.call.advance(kept)
            s.kept.append(fresh)
            s.edge = (s.edge + fresh)[-EDGE:]
        return delta

    def _read(self, view: View, out: str, starts: int, ends: int) -> Delta | None:
        """One chunk as vLLM's stream reads it (``view``: the text it reads)."""
        s = self.s
        if not starts:
            return Delta(content=out) if out else None
        if starts > s.starts and starts > ends:
            s.index += 1
            s.named, s.sent = False, 0
            return None
        if starts > ends:
            return self._inside(view)
        if ends > s.ends:
            return self._ended(view)
        return Delta(content=out) if out else None

    def _inside(self, view: View) -> Delta | None:
        s = self.s
        call = s.call
        if call is None:
            return None
        is_call = call.is_call
        if is_call is None:  # kept too short to tell: the view may tell
            is_call = view[call.at + len(START) : call.at + _NAME_AT] == CALL
        if not is_call:
            return None
        undo: Undo = []
        mark = (call.searched, call.is_call, call.brace, call.arguments)
        marks = call.arguments.mark() if call.arguments is not None else None
        call.advance(view, undo)
        try:
            if call.brace < 0:
                return None
            if not s.named:
                name = view[call.at + _NAME_AT : call.brace]
                if not name:
                    return None
                s.named = True
                return Delta(tool_calls=[opening_call_delta(self.id_seed, s.index, name)])
            arguments = call.arguments
            length = arguments.dump_length() if arguments is not None else 0
            if arguments is None or length <= s.sent:
                return None
            piece = arguments.dump_from(s.sent)
            s.sent = length
            return Delta(tool_calls=[DeltaToolCall(index=s.index, arguments=piece)])
        finally:
            call.searched, call.is_call, call.brace, call.arguments = mark
            if call.arguments is not None and marks is not None:
                call.arguments.rewind(marks, undo)

    def _ended(self, view: View) -> Delta | None:
        """The chunk that brings an ``<end_function_call>``: the arguments of the call the
        pattern finds at the current index, from the length sent."""
        s = self.s
        if s.index < 0:
            return None
        dump = self._ended_arguments(view)
        if dump is None or len(dump) <= s.sent:
            return None
        piece = dump[s.sent :]
        s.sent = len(dump)
        return Delta(tool_calls=[DeltaToolCall(index=s.index, arguments=piece)])

    def _ended_arguments(self, view: View) -> str | None:
        """The arguments JSON of the call at the current index (None: none found)."""
        s = self.s
        calls = s.calls
        if s.index < len(calls.found):
            if s.ended_index != s.index:
                _, brace, end = calls.found[s.index]
                s.ended_index, s.ended = s.index, read_arguments(s.kept[brace + 1 : end])
            return s.ended if s.ended != "{}" else None
        mark = calls.mark()
        calls.advance(view)
        try:
            if s.index >= len(calls.found):
                return None
            _, brace, end = calls.found[s.index]
            dump = read_arguments(view[brace + 1 : end])
            return dump if dump != "{}" else None
        finally:
            calls.rewind(mark)

    def finish(self) -> Delta | None:
        return None  # text held back at the end is lost, as in vLLM

    def remaining_arguments(self) -> str:
        """What vLLM's server adds to a last chunk that carries a call piece: ``{}`` for
        a current call that sent no arguments (it expects its ``{}``)."""
        return "{}" if self.s.index >= 0 and not self.s.sent else ""


def _stream(_: None, request: Request, kept: object) -> tuple[FunctionGemmaStream, object]:
    state = reuse(kept, FunctionGemmaState)
    return FunctionGemmaStream(request.id_seed, state), state


FAMILY = Family(
    title="FunctionGemma",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("functiongemma",),
            engine_based=False,
            states=(FunctionGemmaState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: FunctionGemmaTools(),
            stream=_stream,
            golden=("T1",),
        ),
    ),
)
