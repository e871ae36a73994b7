"""ERNIE-4.5 thinking models (``ernie45``): ``<think>`` reasoning, an answer that may
sit between ``<response>`` tags, and Hermes-shaped ``<tool_call>{json}</tool_call>`` calls.

vLLM 0.33.0 reads both sides with legacy (chunk by chunk) parsers, reproduced here:

* Reasoning, one-shot: as ``deepseek_r1``'s, then content between a ``<response>`` and the
  last ``</response>`` (both present, in order) is all the content.
* Reasoning, streamed: a chunk of one marker token alone (``<think>``, ``</think>``,
  ``<response>``, ``</response>``) sends nothing; the chunk holding ``</think>`` splits
  there, its content losing leading newlines and the response tags' outsides.
* Calls, one-shot: every ``<tool_call>`` whose first non-space is ``{`` and whose object
  ends, spaces aside, right before a ``</tool_call>`` (the earliest such); content is the
  text before the first ``<tool_call>``, trailing newlines cut. One call whose JSON fails
  makes the whole output content.
* Calls, streamed: text joins a buffer until a ``</tool_call>`` closes it; then the first
  call in it goes out whole, with the content before it. Text with no ``<tool_call>`` in
  the buffer goes out as content (response tags and some newlines dropped) until a call
  has been sent, and is dropped after. A closed call that does not read leaves the
  parser sending nothing more for the stream.

The newline checks look for the tokenizer's ``<0x0A>`` token (ERNIE's byte token for a
line feed); a vocabulary without one never matches them, as in vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from msgspec import Struct, field

from parsers.families.think import THINK_END, THINK_START, ThinkTagReasoning
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.growing_text import GrowingText
from parsers.ids import opening_call_delta
from parsers.types import Delta, ExtractedToolCalls, FunctionCall, Vocabulary

RESPONSE_START = "<response>"
RESPONSE_END = "</response>"
CALL_START = "<tool_call>"
CALL_END = "</tool_call>"
NEWLINE = "<0x0A>"
# What vLLM's pattern reads as ``\s``: Python's whitespace but the four separators.
_NOT_SPACE = frozenset("\x1c\x1d\x1e\x1f")


class ErnieMarkers:
    """The marker ids vLLM looks up; any but the think tokens may be missing (None)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.think_end = vocab.id_of(THINK_END)
        self.response_start = vocab.id_of(RESPONSE_START)
        self.response_end = vocab.id_of(RESPONSE_END)
        self.newline = vocab.id_of(NEWLINE)


def _space(char: str) -> bool:
    return char.isspace() and char not in _NOT_SPACE


def _response_only(content: str, start: int, end: int) -> str:
    """``content`` from after its ``<response>`` at ``start`` (if any), cut at ``end``
    (if any) counted, as vLLM counts it, in the text before the first cut."""
    if start != -1:
        content = content[start + len(RESPONSE_START) :]
    if end != -1:
        content = content[:end]
    return content


# --------------------------------------------------------------------------- reasoning


class ErnieReasoning(ThinkTagReasoning):
    """One-shot reasoning: the think-tag split, then the ``<response>`` block's inside."""

    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        self.markers = ErnieMarkers(vocab)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        reasoning, content = super().extract(text, prompt_token_ids)
        if content:
            start, end = content.find(RESPONSE_START), content.rfind(RESPONSE_END)
            if start != -1 and end != -1 and start < end:
                content = content[start + len(RESPONSE_START) : end]
        return reasoning, content or None


class ErnieReasoningStream:
    """Streamed reasoning: each chunk read on its own (nothing is kept between them)."""

    engine_based = False

    def __init__(self, parser: ErnieReasoning) -> None:
        self.parser = parser
        markers = parser.markers
        self.alone = (parser.start_id, parser.end_id, markers.response_start, markers.response_end)

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        if len(token_ids) == 1 and token_ids[0] in self.alone:
            return None
        if self.parser.end_id not in token_ids:
            return Delta(reasoning=text)
        # The marker's text is looked for as vLLM does (a miss cuts at -1).
        end = text.find(THINK_END)
        content = text[end + len(THINK_END) :].lstrip("\n")
        start, last = content.find(RESPONSE_START), content.rfind(RESPONSE_END)
        content = _response_only(content, start, last)
        return Delta(reasoning=text[:end], content=content or None)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.parser.is_reasoning_end(prompt_token_ids)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.parser.end_id in token_ids

    def content_ids(self, token_ids: list[int]) -> list[int]:
        end_id = self.parser.end_id
        if end_id not in token_ids[:-1]:
            return []
        return token_ids[token_ids.index(end_id) + 1 :]

    def finish(self) -> Delta | None:
        return None


# ------------------------------------------------------------------------------- calls


def _call_bodies(text: str) -> Iterator[str]:
    """The JSON of each call vLLM's pattern finds, left to right, in one linear pass.

    A ``<tool_call>`` starts a call when ``{`` is its first non-space; the call runs to
    the earliest ``</tool_call>`` that a ``}`` and only spaces precede. When one start
    finds no such end, no later start can, so the search stops there.
    """
    at = 0
    while (opening := text.find(CALL_START, at)) >= 0:
        body = opening + len(CALL_START)
        while body < len(text) and _space(text[body]):
            body += 1
        if not text.startswith("{", body):
            at = opening + 1
            continue
        closing = text.find(CALL_END, body + 1)
        while closing >= 0:
            last = closing - 1
            while last > body and _space(text[last]):
                last -= 1
            if last > body and text[last] == "}":
                break
            closing = text.find(CALL_END, closing + 1)
        if closing < 0:
            return
        yield text[body : last + 1]
        at = closing + len(CALL_END)


def _read_call(body: str) -> FunctionCall | None:
    """A call's name and re-serialized arguments; None when vLLM's reading fails."""
    try:
        call = json.loads(body)
        arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
    name = call.get("name", "")
    return FunctionCall(name, arguments) if isinstance(name, str) else None


def extract_calls(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring): all calls, or none at all."""
    opening = text.find(CALL_START)
    if opening < 0:
        return ExtractedToolCalls(False, [], text)
    calls = []
    for body in _call_bodies(text):
        call = _read_call(body)
        if call is None:
            return ExtractedToolCalls(False, [], text)
        calls.append(call)
    return ExtractedToolCalls(True, calls, text[:opening].rstrip("\n") or None)


class ErnieTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_calls(content)


class ErnieToolState(Struct, tag="ernie45"):
    """The unread text (``buffer`` from ``offset``; no ``</tool_call>`` starts before
    ``searched``), calls sent (-1: none yet, as vLLM counts), whether a closed call
    failed to read (nothing more is sent), and the facts of the ids read so far."""

    buffer: GrowingText = field(default_factory=GrowingText)
    offset: int = 0
    searched: int = 0
    tool_index: int = -1
    stuck: bool = False
    newlines_only: bool = True
    last_id: int | None = None


class ErnieToolStream:
    engine_based = False
    supports_required_and_named = True

    def __init__(self, markers: ErnieMarkers, id_seed: str, state: ErnieToolState) -> None:
        self.markers = markers
        self.id_seed = id_seed
        self.state = state
        self.after_marker = (markers.think_end, markers.response_start, markers.response_end)

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.state
        ids = token_ids or []
        delta = None if s.stuck else self._step(text, ids)
        newline = self.markers.newline
        s.newlines_only = s.newlines_only and all(token == newline for token in ids)
        if ids:
            s.last_id = ids[-1]
        return delta

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        """Nothing once a call went out whole; ``{}`` once a closed call failed to read
        (vLLM expects arguments of the call it counted and finds none streamed), which
        no delta carries, as nothing goes out after it."""
        return "{}" if self.state.stuck else ""

    def _step(self, text: str, ids: list[int]) -> Delta | None:
        s = self.state
        s.buffer.append(text)
        buffer = s.buffer
        start = buffer.find(CALL_START, s.offset)
        if start < 0:
            unread = "" if s.tool_index > 0 else buffer[s.offset :]
            self._drop(len(buffer))
            return Delta(content=self._plain(unread, ids) or None)
        end = buffer.find(CALL_END, s.searched)
        if end < 0:
            s.searched = max(s.offset, len(buffer) - len(CALL_END) + 1)
            before = buffer[s.offset : start]
            self._drop(start)
            return Delta(content=before.rstrip("\n") or None)
        closed = buffer[s.offset : end + len(CALL_END)]
        call = _read_call(next(_call_bodies(closed), ""))
        if call is None:
            s.stuck = True
            s.buffer, s.offset, s.searched = GrowingText(), 0, 0
            return None
        s.tool_index = max(s.tool_index, 0) + 1
        self._drop(end + len(CALL_END))
        before = closed[: closed.find(CALL_START)].rstrip("\n")
        opening = opening_call_delta(self.id_seed, s.tool_index - 1, call.name, call.arguments)
        return Delta(content=before or None, tool_calls=[opening])

    def _plain(self, text: str, ids: list[int]) -> str:
        """Text with no call in sight, as vLLM sends it: the opening newlines, the
        response tags and the newline after a marker dropped."""
        s, markers = self.state, self.markers
        if s.tool_index == -1 and s.newlines_only:
            text = text.strip("\n")
        if markers.response_start is not None and markers.response_start in ids:
            # Cut after the tag even when the text lacks it (at -1), as vLLM does.
            text = text.lstrip("\n")
            text = text[text.find(RESPONSE_START) + len(RESPONSE_START) :]
            text = _response_only(text, -1, text.rfind(RESPONSE_END))
        elif markers.response_end is not None and markers.response_end in ids:
            text = text[: text.rfind(RESPONSE_END)]
        after_marker = s.last_id is not None and s.last_id in self.after_marker
        if after_marker and ids and ids[0] == markers.newline:
            text = text.lstrip("\n")
        return text

    def _drop(self, position: int) -> None:
        """Forget the buffer before ``position``, copying what stays only when most of
        the buffer goes (so each character is copied a bounded number of times)."""
        s = self.state
        s.offset = position
        s.searched = max(s.searched, position)
        if position * 2 >= len(s.buffer):
            rest = s.buffer[position:]
            s.buffer = GrowingText()
            s.buffer.append(rest)
            s.searched -= position
            s.offset = 0


# ------------------------------------------------------------------------------ family


def _tool_stream(
    markers: ErnieMarkers, request: Request, kept: object
) -> tuple[ErnieToolStream, ErnieToolState]:
    state = reuse(kept, ErnieToolState)
    return ErnieToolStream(markers, request.id_seed, state), state


FAMILY = Family(
    title="ERNIE-4.5 thinking",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("ernie45",),
            engine_based=False,
            needs=(THINK_START, THINK_END),
            states=(),
            prepare=lambda name, vocab: ErnieReasoning(vocab),
            one_shot=lambda parser, request: parser,
            stream=lambda parser, request, kept: (ErnieReasoningStream(parser), None),
            golden=("E1", "E2"),
        ),
    ),
    tools=(
        Tools(
            names=("ernie45",),
            engine_based=False,
            states=(ErnieToolState,),
            prepare=lambda name, vocab: ErnieMarkers(vocab),
            one_shot=lambda markers, request: ErnieTools(),
            stream=_tool_stream,
            golden=("E1", "E5"),
        ),
    ),
)
