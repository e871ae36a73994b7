"""Hermes tool calls (``hermes``, ``qwen3_json``): ``<tool_call>{json}</tool_call>``."""

from __future__ import annotations

import json
import re

from msgspec import Struct, field

from parsers.ids import opening_call_delta
from parsers.jsonscan import JsonScanner, JsonScanState
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

TOOL_START = "<tool_call>"
_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


class HermesTools:
    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Every tagged call, or none at all when any of them is not valid JSON.

        Arguments are re-serialized; content is the text before the first tag.
        """
        if TOOL_START not in content:
            return ExtractedToolCalls(False, [], content)
        try:
            calls = []
            for closed, unclosed in _CALL_RE.findall(content):
                call = json.loads(closed or unclosed)
                arguments = json.dumps(call["arguments"], ensure_ascii=False)
                calls.append(FunctionCall(call["name"], arguments))
        except (ValueError, KeyError, TypeError, RecursionError):
            # Nesting too deep to parse is malformed output: content, not a server error.
            return ExtractedToolCalls(False, [], content)
        if not all(isinstance(call.name, str) for call in calls):
            return ExtractedToolCalls(False, [], content)
        before = content[: content.find(TOOL_START)]
        return ExtractedToolCalls(True, calls, before or None)


# ---------------------------------------------------------------------------- streaming

TOOL_END = "</tool_call>"


def _tag_overlap(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
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
        self, text: str, key: str, want_value: bool, *, empty_is_match: bool = False
    ) -> None:
        """Scan on into ``text``; ``empty_is_match`` stops at an empty ``""`` value too."""
        needle = f'"{key}"'
        while self.phase not in ("found", "done"):
            if self.start < 0:
                found = text.find(needle, self.search_from)
                if found < 0:
                    self.search_from = max(self.search_from, len(text) - len(needle) + 1)
                    return
                self.start, self.pos, self.phase = found, found + len(needle), "colon"
            if not self._step(text, want_value, empty_is_match):
                return

    def _step(self, text: str, want_value: bool, empty_is_match: bool) -> bool:
        """Scan the candidate forward; False when the text runs out first."""
        while self.pos < len(text):
            ch = text[self.pos]
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
    """One ``<tool_call>`` region: its text and the incremental views of it."""

    body: str = ""
    closed: bool = False
    fed: int = 0
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


class HermesStream:
    """Hermes tool calls as vLLM streams them, without rescanning the text.

    vLLM re-reads the whole output on every delta; the emitted deltas depend only on
    what changed, so this keeps the open region's scanners and the unsent content
    tail instead: content before the first ``<tool_call>`` (a possible partial tag
    held back), then per region the name once it is complete and the raw argument
    text as it grows, with the region's closing brace held until the JSON completes.
    """

    def __init__(self, id_seed: str, state: HermesState | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else HermesState()

    engine_based = False
    supports_required_and_named = False

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        content = self._consume(text)
        deltas: list[DeltaToolCall] = []
        s = self.s
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
        content = ""
        while text:
            if s.mode == "region":
                region = s.regions[-1]
                searched = max(0, len(region.body) - len(TOOL_END) + 1)
                region.body += text
                end = region.body.find(TOOL_END, searched)
                if end < 0:
                    return content
                text = region.body[end + len(TOOL_END) :]
                region.body = region.body[:end]
                region.closed = True
                s.mode, s.pending = "between", ""
                continue
            buffer = s.pending + text
            start = buffer.find(TOOL_START)
            if start < 0:
                keep = _tag_overlap(buffer, TOOL_START)
                if s.mode == "content":
                    content += buffer[: len(buffer) - keep]
                s.pending = buffer[len(buffer) - keep :]
                return content
            if s.mode == "content":
                content += buffer[:start]
            s.mode, s.pending = "region", ""
            s.regions.append(HermesRegion())
            text = buffer[start + len(TOOL_START) :]
        return content

    def _region_deltas(self, index: int, deltas: list[DeltaToolCall]) -> bool:
        """Add region ``index``'s new deltas; False if it blocks later regions."""
        s = self.s
        region = s.regions[index]
        if index >= len(s.calls):
            s.calls.append(HermesCall())
        call = s.calls[index]
        body = region.body
        if not region.closed:
            body = body[: len(body) - _tag_overlap(body, TOOL_END)]
            JsonScanner(region.json).feed(body[region.fed :])
            region.fed = len(body)
        end = len(body.rstrip())
        scanner = JsonScanner(region.json)
        complete = region.closed or scanner.complete
        # Malformed JSON never completes before its region closes, so its last brace
        # is held back as the closed region's would be (vLLM streams it, or not,
        # depending on the chunking).
        drop_brace = complete or scanner.failed
        if call.name is None:
            region.name.advance(body, "name", want_value=True)
            if region.name.phase != "done":
                return False
            call.name = body[region.name.value_start : region.name.value_end]
            deltas.append(opening_call_delta(self.id_seed, index, call.name))
        region.arguments.advance(body, "arguments", want_value=False)
        if region.arguments.phase == "found":
            start = region.arguments.value_start
            stop = max(end, start)
            if drop_brace and stop > start and body[stop - 1] == "}":
                # The brace that closes the call object is not part of the arguments.
                stop -= 1
                while stop > start and body[stop - 1].isspace():
                    stop -= 1
            if stop - start > call.streamed:
                diff = body[start + call.streamed : stop]
                call.streamed = stop - start
                call.has_arguments = True
                deltas.append(DeltaToolCall(index=index, arguments=diff))
        if region.closed and call.name is not None and index == s.done_regions:
            s.done_regions += 1
        return True
