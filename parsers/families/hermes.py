"""Hermes tool calls (``hermes``, ``qwen3_json``): ``<tool_call>{json}</tool_call>``.

LongCat-Flash (``longcat``) writes the same calls between ``<longcat_tool_call>`` tags:
one format, two spellings of its tags (``CallTags``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import msgspec
from msgspec import Struct, field

from parsers.family import Family, Request, Tools, reuse
from parsers.growing_text import Text
from parsers.ids import opening_call_delta
from parsers.readers.jsonscan import JsonScanner, JsonScanState
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall, PlainText


class CallTags:
    """The tags around a call, and vLLM's pattern for the calls between them: each
    closed call, or an unclosed one running to the end of the text."""

    __slots__ = ("calls", "end", "plain", "start")

    def __init__(self, start: str, end: str) -> None:
        self.start = start
        self.end = end
        # Content no tag can start in (``HermesStream.plain_text``).
        self.plain = PlainText(frozenset(), frozenset(start[0]))
        opening, closing = re.escape(start), re.escape(end)
        self.calls = re.compile(f"{opening}(.*?){closing}|{opening}(.*)", re.DOTALL)


HERMES_TAGS = CallTags("<tool_call>", "</tool_call>")
LONGCAT_TAGS = CallTags("<longcat_tool_call>", "</longcat_tool_call>")


class HermesTools:
    supports_required_and_named = False

    def __init__(self, tags: CallTags = HERMES_TAGS) -> None:
        self.tags = tags

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Every tagged call, or none at all when any of them is not valid JSON.

        Arguments are re-serialized; content is the text before the first tag.
        """
        start = self.tags.start
        if start not in content:
            return ExtractedToolCalls(False, [], content)
        try:
            calls = []
            for closed, unclosed in self.tags.calls.findall(content):
                call = json.loads(closed or unclosed)
                arguments = json.dumps(call["arguments"], ensure_ascii=False)
                calls.append(FunctionCall(call["name"], arguments))
        except (ValueError, KeyError, TypeError, RecursionError):
            # Nesting too deep to parse is malformed output: content, not a server error.
            return ExtractedToolCalls(False, [], content)
        if not all(isinstance(call.name, str) for call in calls):
            return ExtractedToolCalls(False, [], content)
        before = content[: content.find(start)]
        return ExtractedToolCalls(True, calls, before or None)


# ---------------------------------------------------------------------------- streaming


def _tag_overlap(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with: tried
    from where ``tag``'s first character stands in the last ``len(tag) - 1``
    characters, the earliest (longest) first."""
    size = len(text)
    at = text.find(tag[0], max(0, size - len(tag) + 1))
    while at >= 0:
        if tag.startswith(text[at:]):
            return size - at
        at = text.find(tag[0], at + 1)
    return 0


class KeyMatch(Struct):
    """Incremental search for ``"key"\\s*:\\s*`` (and, for names, a ``"value"``).

    Only the last candidate can still be undecided, so each character is looked at
    a bounded number of times however the text arrives.
    """

    search_from: int = 0
    start: int = -1
    pos: int = 0
    phase: str = "key"
    value_start: int = -1
    value_end: int = -1

    def advance(
        self,
        text: Text,
        key: str,
        want_value: bool,
        *,
        empty_is_match: bool = False,
        base: int = 0,
        limit: int | None = None,
    ) -> None:
        """Scan on into ``text``; ``empty_is_match`` stops at an empty ``""`` value too.

        Positions count from the start of the whole text, of which ``text`` holds what
        follows ``base`` (the caller drops what the match no longer needs, ``needed``);
        only the whole text's first ``limit`` characters are read.
        """
        needle = f'"{key}"'
        end = base + len(text) if limit is None else limit
        while self.phase not in ("found", "done"):
            if self.start < 0:
                found = text.find(needle, self.search_from - base, end - base)
                if found < 0:
                    self.search_from = max(self.search_from, end - len(needle) + 1)
                    return
                found += base
                self.start, self.pos, self.phase = found, found + len(needle), "colon"
            if not self._step(text, base, end, want_value, empty_is_match):
                return

    def needed(self) -> int:
        """Where the text this match may still read starts."""
        return self.search_from if self.start < 0 else self.start

    def _step(
        self, text: Text, base: int, end: int, want_value: bool, empty_is_match: bool
    ) -> bool:
        """Scan the candidate forward; False when the text runs out first."""
        while self.pos < end:
            ch = text[self.pos - base]
            if self.phase == "colon":
                if ch == ":":
                    self.phase = "after_colon"
                elif not ch.isspace():
                    return self._fail()
            elif self.phase == "after_colon":
                if not ch.isspace():
                    if not want_value:
                        self.value_start, self.phase = self.pos, "found"
                        return True
                    if ch != '"':
                        return self._fail()
                    self.phase, self.value_start = "value", self.pos + 1
            elif self.phase == "value" and ch == '"':
                if self.pos == self.value_start and not empty_is_match:
                    return self._fail()
                self.value_end, self.phase = self.pos, "done"
                return True
            self.pos += 1
        return False

    def _fail(self) -> bool:
        self.search_from, self.start, self.phase = self.start + 1, -1, "key"
        return True


class HermesRegion(Struct):
    """One ``<tool_call>`` region: the part of its text still needed, and its views.

    Positions count from the region's start; ``text`` holds what follows ``base``
    (what the key matches may still read and the arguments not yet sent), so a delta
    costs what it adds, not the region's length.
    """

    text: str = ""
    base: int = 0
    closed: bool = False
    fed: int = 0
    last_solid: int = -1  # the last non-whitespace character fed, and the one before it
    solid_before: int = -1
    last_solid_char: str = ""
    json: JsonScanState = field(default_factory=JsonScanState)
    name: KeyMatch = field(default_factory=KeyMatch)
    arguments: KeyMatch = field(default_factory=KeyMatch)


class HermesCall(Struct):
    name: str | None = None
    streamed: int = 0  # length of the argument text sent so far
    has_arguments: bool = False


class HermesState(Struct, tag="hermes"):
    mode: str = "content"
    pending: str = ""
    regions: list[HermesRegion] = field(default_factory=list)
    calls: list[HermesCall] = field(default_factory=list)
    done_regions: int = 0

    def for_snapshot(self) -> HermesState:
        """A copy without the regions and calls that are done: no step reads them again
        (only their count, ``done_regions``), so a snapshot does not grow with calls."""
        done = self.done_regions
        return msgspec.structs.replace(self, regions=self.regions[done:], calls=self.calls[done:])

    def restored(self, history_tokens: int) -> bool:
        """Put stand-ins back for the done regions and calls a snapshot left out; False
        when there cannot be that many (each region takes a token at least)."""
        done = self.done_regions
        if not 0 <= done <= history_tokens:
            return False
        self.regions[:0] = [_DONE_REGION] * done
        self.calls[:0] = [_DONE_CALL] * done
        return True


# What stands in, once restored, for a region and a call that are done (never read again).
_DONE_REGION = HermesRegion(closed=True)
_DONE_CALL = HermesCall()


class HermesStream:
    """Hermes tool calls as vLLM streams them, without rescanning the text.

    vLLM re-reads the whole output on every delta; the emitted deltas depend only on
    what changed, so this keeps the open region's scanners and the unsent content
    tail instead: content before the first ``<tool_call>`` (a possible partial tag
    held back), then per region the name once it is complete and the raw argument
    text as it grows, with the region's closing brace held until the JSON completes.
    """

    def __init__(
        self, id_seed: str, state: HermesState | None = None, tags: CallTags = HERMES_TAGS
    ) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else HermesState()
        self.tags = tags

    engine_based = False
    supports_required_and_named = False

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Content with nothing held, where text no tag can start in is content alone
        (``stream``'s own test); it stays so until a tag starts."""
        s = self.s
        return self.tags.plain if s.mode == "content" and not s.pending else None

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.mode == "content" and not s.pending and self.tags.start[0] not in text:
            # Plain content (no region was ever opened): no tag can start in it.
            return Delta(content=text) if text else None
        content = self._consume(text)
        deltas: list[DeltaToolCall] = []
        for i in range(s.done_regions, len(s.regions)):
            if not self._region_deltas(i, deltas):
                break
        if content or deltas:
            return Delta(content=content or None, tool_calls=deltas)
        return None

    def finish(self) -> Delta | None:
        """Text held back as a possible ``<tool_call>`` start is content after all.

        (vLLM drops it.)
        """
        s = self.s
        if s.mode != "content" or not s.pending:
            return None
        content, s.pending = s.pending, ""
        return Delta(content=content)

    def remaining_arguments(self) -> str:
        """Nothing: arguments stream as they arrive.

        (vLLM appends ``{}`` to a call that has no arguments when the last chunk
        happens to carry a tool-call delta, which makes it depend on chunking.)
        """
        return ""

    def _consume(self, text: str) -> str:
        """Route new text into content, regions and the gaps between them."""
        s = self.s
        tool_start, tool_end = self.tags.start, self.tags.end
        if s.mode == "content" and not s.pending and tool_start[0] not in text:
            return text  # plain content: no tag can start in it
        content = ""
        while text:
            if s.mode == "region":
                region = s.regions[-1]
                searched = max(0, len(region.text) - len(tool_end) + 1)
                held, region.text = region.text, ""  # the only reference: += grows it in place
                held += text
                region.text = held
                end = held.find(tool_end, searched)
                if end < 0:
                    return content
                text = region.text[end + len(tool_end) :]
                region.text = region.text[:end]
                region.closed = True
                s.mode, s.pending = "between", ""
                continue
            buffer = s.pending + text
            start = buffer.find(tool_start)
            if start < 0:
                keep = _tag_overlap(buffer, tool_start)
                if s.mode == "content":
                    content += buffer[: len(buffer) - keep]
                s.pending = buffer[len(buffer) - keep :]
                return content
            if s.mode == "content":
                content += buffer[:start]
            s.mode, s.pending = "region", ""
            s.regions.append(HermesRegion())
            text = buffer[start + len(tool_start) :]
        return content

    def _region_deltas(self, index: int, deltas: list[DeltaToolCall]) -> bool:
        """Add region ``index``'s new deltas; False if it blocks later regions."""
        s = self.s
        region = s.regions[index]
        if index >= len(s.calls):
            s.calls.append(HermesCall())
        call = s.calls[index]
        text, base = region.text, region.base
        limit = base + len(text)  # the end of the text that is surely the region's
        if not region.closed:
            limit -= _tag_overlap(text, self.tags.end)
        _feed(region, text[region.fed - base : limit - base])
        scanner = JsonScanner(region.json)
        complete = region.closed or scanner.complete
        # Malformed JSON never completes before its region closes, so its last brace
        # is held back as the closed region's would be (vLLM streams it, or not,
        # depending on the chunking).
        drop_brace = complete or scanner.failed
        region.name.advance(text, "name", want_value=True, base=base, limit=limit)
        region.arguments.advance(text, "arguments", want_value=False, base=base, limit=limit)
        if call.name is None:
            if region.name.phase != "done":
                _trim(region, call)
                return False
            call.name = text[region.name.value_start - base : region.name.value_end - base]
            deltas.append(opening_call_delta(self.id_seed, index, call.name))
        if region.arguments.phase == "found":
            start = region.arguments.value_start
            stop = max(region.last_solid + 1, start)
            if drop_brace and stop > start and region.last_solid_char == "}":
                # The brace that closes the call object is not part of the arguments.
                stop = max(start, region.solid_before + 1)
            if stop - start > call.streamed:
                diff = text[start + call.streamed - base : stop - base]
                call.streamed = stop - start
                call.has_arguments = True
                deltas.append(DeltaToolCall(index=index, arguments=diff))
        if region.closed and index == s.done_regions:
            s.done_regions += 1
            region.text, region.base = "", limit
        else:
            _trim(region, call)
        return True


def _feed(region: HermesRegion, text: str) -> None:
    """Read newly settled region text: the JSON scanner and the last solid characters."""
    JsonScanner(region.json).feed(text)
    last = _last_solid(text, len(text))
    if last >= 0:
        before = _last_solid(text, last)
        region.solid_before = region.fed + before if before >= 0 else region.last_solid
        region.last_solid, region.last_solid_char = region.fed + last, text[last]
    region.fed += len(text)


def _last_solid(text: str, end: int) -> int:
    """Index of the last non-whitespace character before ``end``, or -1."""
    for index in range(end - 1, -1, -1):
        if not text[index].isspace():
            return index
    return -1


def _trim(region: HermesRegion, call: HermesCall) -> None:
    """Drop the text nothing will read again."""
    keep = region.fed
    if call.name is None:
        keep = min(keep, region.name.needed())
    if region.arguments.phase == "found":
        keep = min(keep, region.arguments.value_start + call.streamed)
    else:
        keep = min(keep, region.arguments.needed())
    if keep > region.base:
        region.text = region.text[keep - region.base :]
        region.base = keep


# ------------------------------------------------------------------ the family


def _stream(tags: CallTags, request: Request, kept: object) -> tuple[HermesStream, HermesState]:
    state = reuse(kept, HermesState)
    return HermesStream(request.id_seed, state, tags), state


FAMILY = Family(
    title="Hermes JSON calls (Qwen3, Qwen2.5, Hermes, LongCat-Flash)",
    tokenizer="any (the calls are text between <tool_call> or <longcat_tool_call> tags)",
    tools=(
        Tools(
            names=("hermes",),
            aliases={"qwen3_json": "hermes"},
            engine_based=False,
            states=(HermesState,),
            prepare=lambda name, vocab: HERMES_TAGS,
            one_shot=lambda tags, request: HermesTools(tags),
            stream=_stream,
            call_tags=lambda tags: (tags.start, tags.end),
            golden=("C1", "C2"),
        ),
        Tools(
            names=("longcat",),
            engine_based=False,
            states=(HermesState,),
            prepare=lambda name, vocab: LONGCAT_TAGS,
            one_shot=lambda tags, request: HermesTools(tags),
            stream=_stream,
            call_tags=lambda tags: (tags.start, tags.end),
            golden=("Q1",),
        ),
    ),
)
