"""LFM2 tool calls (``lfm2``): pythonic calls between ``<|tool_call_start|>`` and
``<|tool_call_end|>``, read as vLLM 0.33.0 reads them.

* One-shot: the text after the first start marker, up to the next end marker (or the
  end), stripped, is a call list if it opens with ``[`` and ends with ``]`` and parses,
  as written or after the repairs of parsers/families/lfm2_repairs.py. Content is the
  text before the start and after the end marker (everything up to the last further end
  marker dropped: LFM2 echoes its calls), each stripped, joined by a newline.
* Streamed: text is content until the start marker; from then on, per chunk, the text
  before the marker in that chunk, then the text after the first end marker: held while
  it opens with ``[`` or ``<`` (a possible echo) until a further end marker, after which
  only the text past the last one counts. The call list is read again each chunk, as
  vLLM reads it: repaired, closed (``make_valid_python``'s heuristics) and parsed, each
  call's JSON sent as it grows; nothing while a string's first closing quote cannot
  close it (or ends the text).

Reading the list again costs its length per chunk: those readings are allowed
``REREAD_PER_CHAR`` characters per character of output plus ``REREAD_FREE`` (as
``internlm``'s; a chunk past the allowance is not read, its pieces go with a later chunk
the grown allowance covers), and a list is read again only while it is at most
``READ_LIMIT`` characters; the end marker's reading (once, kept) sends the rest
(docs/parity.md, lfm2-reread-budget).
"""

from __future__ import annotations

import ast
import json

from msgspec import Struct, field

from parsers.families.lfm2_repairs import (
    PARSE_ERRORS,
    Unbalanced,
    broken_string,
    close_text,
    drop_leading_zeros,
    escape_controls,
    parse,
    rename_keywords,
    requote,
    restore_keywords,
)
from parsers.families.pythonic import NotALiteral, parse_calls, to_call
from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

START = "<|tool_call_start|>"
END = "<|tool_call_end|>"
REREAD_PER_CHAR = 8
REREAD_FREE = 1 << 16
# A list longer than this is read only once its end marker is in (one reading costs a
# few passes over it in Python: this many characters take a few tens of ms).
READ_LIMIT = 16_384
_READ_ERRORS = (*PARSE_ERRORS, NotALiteral, Unbalanced, KeyError, AttributeError)


def _restored(calls: list[FunctionCall]) -> list[FunctionCall]:
    """Keyword-named parameters given their names back (vLLM re-dumps only those)."""
    for call in calls:
        arguments = json.loads(call.arguments)
        restored = restore_keywords(arguments)
        if restored != arguments:
            call.arguments = json.dumps(restored, ensure_ascii=False)
    return calls


# ---------------------------------------------------------------------------- one-shot


def _without_echo(text: str) -> str:
    last = text.rfind(END)
    return text[last + len(END) :] if last >= 0 else text


def _repaired_calls(text: str) -> list[FunctionCall]:
    """The calls of a whole list, repaired as vLLM repairs it (raises when none read)."""
    renamed = False
    try:
        module = parse(text)
    except (SyntaxError, ValueError):
        escaped = escape_controls(drop_leading_zeros(text))
        candidates = [escaped]
        requoted, changed = requote(escaped)
        if changed:
            candidates.append(escape_controls(requoted))
        spelled, renamed = rename_keywords(candidates[-1])
        if renamed:
            candidates.append(spelled)
        for candidate in candidates:
            try:
                module = parse(candidate)
                break
            except (SyntaxError, ValueError):
                continue
        else:
            raise
    value = getattr(module.body[0], "value", None)
    if not isinstance(value, ast.List) or not value.elts:
        raise NotALiteral("the output must be a list of calls")
    if not all(isinstance(item, ast.Call) for item in value.elts):
        raise NotALiteral("the output must be a list of calls")
    calls = [to_call(item) for item in value.elts]  # type: ignore[arg-type]
    return _restored(calls) if renamed else calls


def extract_calls(output: str) -> ExtractedToolCalls:
    start = output.find(START)
    if start < 0:
        return ExtractedToolCalls(False, [], output)
    end = output.find(END, start)
    before = output[:start].strip()
    if end < 0:
        text, content = output[start + len(START) :], before or None
    else:
        text = output[start + len(START) : end]
        after = _without_echo(output[end + len(END) :]).strip()
        content = "\n".join(part for part in (before, after) if part) or None
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return ExtractedToolCalls(False, [], output)
    try:
        calls = _repaired_calls(text)
    except _READ_ERRORS:
        return ExtractedToolCalls(False, [], output)
    return ExtractedToolCalls(True, calls, content)


class Lfm2Tools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


# ---------------------------------------------------------------------------- streaming


class Lfm2State(Struct, tag="lfm2"):
    """Where the stream stands; plain data, so it snapshots.

    The output so far, where its markers are (the first start, the first and last end
    anywhere, the first end after the start), the first character after the first end
    that is not white space, the trailing text sent (``text[sent_from:sent_to]``), and
    vLLM's call state: whether a call piece went out, the call being read, each call's
    arguments sent. ``final``: the list's reading once its end marker is in.
    """

    text: GrowingText = field(default_factory=GrowingText)
    start: int = -1
    end: int = -1
    last_end: int = -1
    tool_end: int = -1
    after_end: str = ""
    sent_from: int = 0
    sent_to: int = 0
    called: bool = False
    current: int = -1
    streamed: list[str] = field(default_factory=list)
    reread: int = 0
    final: list[FunctionCall] | None = None
    final_added: str = ""
    final_read: bool = False


class Lfm2Stream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: Lfm2State) -> None:
        self.id_seed = id_seed
        self.s = state

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        before = len(s.text)
        had_start, had_end = s.start >= 0, s.end >= 0 and s.end + len(END) <= before
        s.text.append(text)
        self._markers(before)
        if s.start < 0:
            return Delta(content=text)
        leading = "" if had_start else s.text[before : max(s.start, before)]
        trailing = self._trailing() if s.end >= 0 else ""
        if s.end >= 0 and s.called and had_end:
            return Delta(content=trailing)
        combined = leading + trailing
        reading = self._reading(s.end >= 0)
        deltas: list[DeltaToolCall] = []
        if reading is not None:
            try:
                self._deltas(*reading, deltas)
            except ValueError:
                reading = None
        if reading is None:
            return Delta(content=combined) if combined else None
        if deltas:
            s.called = True
        if deltas or combined:
            return Delta(content=combined or None, tool_calls=deltas)
        if not reading[1] and s.current > 0:
            return Delta(content="")
        return None

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        """vLLM's server adds the rest of ``{}`` to a last chunk carrying a call piece,
        against the first call's arguments sent (its stand-in reading is ``{}``)."""
        s = self.s
        if not s.called:
            return ""
        sent = s.streamed[0] if s.streamed else ""
        return "{}"[len(sent) :] if "{}".startswith(sent) else ""

    # ------------------------------------------------------------------ the text

    def _markers(self, before: int) -> None:
        """Find the markers this chunk completes (a marker may straddle chunks)."""
        s = self.s
        text = s.text
        if s.start < 0:
            s.start = text.find(START, max(0, before - len(START) + 1))
        at = max(0, before - len(END) + 1, s.last_end + 1)
        while (found := text.find(END, at)) >= 0:
            s.end = found if s.end < 0 else s.end
            s.last_end = found
            if s.start >= 0 and s.tool_end < 0 and found >= s.start + len(START):
                s.tool_end = found
            at = found + len(END)
        if s.end >= 0 and not s.after_end:
            rest = text[max(s.end + len(END), before) :].lstrip()
            s.after_end = rest[:1]

    def _trailing(self) -> str:
        """The text after the first end marker vLLM sends now (its echo suppression)."""
        s = self.s
        size = len(s.text)
        if s.last_end > s.end:
            start = s.last_end + len(END)
        elif s.after_end in ("[", "<"):
            start = -1  # a possible echo: what was sent stands
        else:
            start = s.end + len(END)
        if start < 0:
            return ""
        sent = s.sent_to - s.sent_from
        extends = start == s.sent_from or (
            size - start >= sent and s.text[start : start + sent] == s.text[s.sent_from : s.sent_to]
        )
        s.sent_from, s.sent_to = start, size
        return s.text[start + sent : size] if extends else ""

    # ------------------------------------------------------------------ the calls

    def _reading(self, has_end: bool) -> tuple[list[FunctionCall], str] | None:
        """The list as vLLM reads it this chunk: its calls and the closers it added
        (None: nothing to send but content)."""
        s = self.s
        if s.tool_end >= 0:
            if not s.final_read:
                s.final_read = True
                reading = self._read(s.text[s.start + len(START) : s.tool_end], has_end)
                s.final, s.final_added = reading if reading else (None, "")
            return None if s.final is None else (s.final, s.final_added)
        cost = len(s.text) - s.start - len(START)
        if cost > READ_LIMIT or s.reread + cost > REREAD_PER_CHAR * len(s.text) + REREAD_FREE:
            return None
        s.reread += cost
        return self._read(s.text[s.start + len(START) :], has_end)

    def _read(self, raw: str, has_end: bool) -> tuple[list[FunctionCall], str] | None:
        try:
            text = escape_controls(drop_leading_zeros(raw.lstrip()))
            if has_end:
                try:
                    parse(text)
                except (SyntaxError, ValueError):
                    requoted, changed = requote(text)
                    if changed:
                        text = escape_controls(requoted)
            text, renamed = rename_keywords(text)
            if broken_string(text):
                return None
            closed = close_text(text)
            if closed is None:
                return None
            calls = parse_calls(closed[0])
            return (_restored(calls) if renamed else calls), closed[1]
        except _READ_ERRORS:
            return None

    def _deltas(self, calls: list[FunctionCall], added: str, deltas: list[DeltaToolCall]) -> None:
        """vLLM's pieces of each call from the current one on: its JSON up to the
        closers vLLM added, past what was sent. Raises ValueError where the JSON does
        not end with those closers (vLLM's chunk then sends content only)."""
        s = self.s
        for index, call in enumerate(calls):
            if index < s.current:
                continue
            s.current = index
            if len(s.streamed) == index:
                s.streamed.append("")
            complete = index < len(calls) - 1 or ")]" not in added
            if complete:
                s.current += 1
            withheld = "" if complete else added[:-2] + ("}" if added[-2] == ")" else "")
            withheld = withheld.replace("'", '"')
            arguments = call.arguments
            if withheld:
                if not arguments.endswith(withheld):
                    raise ValueError("the arguments do not end with the withheld closers")
                arguments = arguments[: -len(withheld)]
            sent = s.streamed[index]
            if not sent:
                deltas.append(opening_call_delta(self.id_seed, index, call.name, arguments))
                s.streamed[index] = arguments
            elif arguments[len(sent) :]:
                deltas.append(DeltaToolCall(index=index, arguments=arguments[len(sent) :]))
                s.streamed[index] = sent + arguments[len(sent) :]


def _stream(_: None, request: Request, kept: object) -> tuple[Lfm2Stream, Lfm2State]:
    state = reuse(kept, Lfm2State)
    return Lfm2Stream(request.id_seed, state), state


FAMILY = Family(
    title="LFM2, LFM2.5",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("lfm2",),
            engine_based=False,
            states=(Lfm2State,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: Lfm2Tools(),
            stream=_stream,
            golden=("T5",),
        ),
    ),
)
