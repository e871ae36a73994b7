"""Hunyuan-A13B's parsers (``hunyuan_a13b``): markers spelled in ordinary tokens.

A13B writes ``<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>``, its calls as a
JSON list of ``{"name", "arguments"}`` objects in ``<tool_calls>...</tool_calls>``.

* Reasoning, one-shot: vLLM's two patterns, read with ``str.find`` (``extract_a13b``).
* Reasoning, streamed: vLLM follows the markers by token id, one token at a time, with
  ids fixed to A13B's vocabulary (cl100k's first ranks, which Llama 3's share): a run of
  tokens that may still become a marker is held; a complete ``<think>\\n`` opens
  reasoning, a complete ``\\n</think>\\n<answer>\\n`` ends it (both dropped); a broken
  run goes out with the token that broke it. Held text left at the end is lost.
* Calls, one-shot: the first ``<tool_calls>`` block outside ``<think>...</think>``
  whose text is JSON; a list gives the calls, its text before the block the content.
* Calls, streamed: vLLM runs xLAM's streaming code on the text after reasoning once
  it opens with ``[`` (after whitespace and an optional ``<tool_calls>``); ours is
  xLAM's stream (parsers/families/xlam.py) fed that text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from msgspec import Struct

from parsers.families.xlam import (
    _EXACT,
    SourceView,
    XlamState,
    XlamStream,
    _feed_view,
    _loads,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.ids import hunyuan_tool_call_id
from parsers.types import Delta, ExtractedToolCalls, FunctionCall, Vocabulary

THINK_OPEN = "<think>\n"
ANSWER_OPEN = "\n</think>\n<answer>\n"
ANSWER_CLOSE = "\n</answer>"

# The id runs vLLM follows (A13B's ids: "<th" "ink" ">\n", "</" "think" ">\n" "<"
# "answer" ">\n"...), each with its shorter twin ("<think>\n\n"; no leading "\n").
_THINK_START = (14023, 771, 397)
_THINK_START_FAST = (14023, 771, 1363)
_ANSWER_START = (198, 524, 27963, 397, 27, 9399, 397)
_ANSWER_START_FAST = (524, 27963, 397, 27, 9399, 397)
_ANSWER_END = (198, 524, 9399, 29)
_MARKER_IDS = frozenset(_THINK_START + _THINK_START_FAST + _ANSWER_START + _ANSWER_END)

_IDLE, _THINK, _ANSWER = 0, 1, 2
_RUNS = {
    _IDLE: (_THINK_START, _THINK_START_FAST),
    _THINK: (_ANSWER_START, _ANSWER_START_FAST),
    _ANSWER: (_ANSWER_END, ()),
}


def extract_a13b(text: str) -> tuple[str | None, str | None]:
    """vLLM's one-shot split: ``(?:<think>\\n(.*?)ANSWER_OPEN)?(.*?)ANSWER_CLOSE`` at the
    start, else ``<think>\\n(.*?)ANSWER_OPEN(.*)`` anywhere, else all content."""
    close = text.find(ANSWER_CLOSE)
    if close >= 0:
        if text.startswith(THINK_OPEN):
            answer = text.find(ANSWER_OPEN, len(THINK_OPEN))
            if answer >= 0:
                after = answer + len(ANSWER_OPEN)
                end = text.find(ANSWER_CLOSE, after)
                if end >= 0:
                    return text[len(THINK_OPEN) : answer] or None, text[after:end] or None
        return None, text[:close] or None
    opening = text.find(THINK_OPEN)
    if opening >= 0:
        answer = text.find(ANSWER_OPEN, opening + len(THINK_OPEN))
        if answer >= 0:
            reasoning = text[opening + len(THINK_OPEN) : answer]
            return reasoning or None, text[answer + len(ANSWER_OPEN) :] or None
    return None, text


class A13bReasoningState(Struct, tag="a13b_reasoning"):
    phase: int = _IDLE
    matched: int = 0  # tokens of the current run matched so far
    held: str = ""  # their text


class A13bReasoning:
    """A13B's reasoning, one-shot and streamed (the module docstring)."""

    engine_based = False

    def __init__(self, vocab: Vocabulary, state: A13bReasoningState | None = None) -> None:
        self.vocab = vocab
        self.state = state if state is not None else A13bReasoningState()
        self._after: list[int] = []  # the chunk's ids after reasoning ended

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        return extract_a13b(text)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return False  # the state starts idle whatever the prompt holds

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.phase == _ANSWER

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return self._after

    def finish(self) -> Delta | None:
        return None  # held text is lost, as in vLLM

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        """The chunk read a token at a time, as vLLM reads one-token chunks: reasoning or
        content by phase, and after the end of reasoning, the rest as content."""
        self._after = []
        texts = _token_texts(self.vocab, text, token_ids)
        if texts is None:  # the chunk's text cannot be cut by token: read it as one
            texts, token_ids = [text], [-1]
        reasoning: list[str] = []
        content: list[str] = []
        for at, (token_id, piece) in enumerate(zip(token_ids, texts, strict=True)):
            out = self._step(token_id, piece)
            if out is not None:
                (reasoning if self.state.phase == _THINK else content).append(out)
            if self.state.phase == _ANSWER:
                # What follows goes on as content (to the tool parser, if any).
                self._after = list(token_ids[at + 1 :])
                rest = "".join(texts[at + 1 :])
                if rest:
                    content.append(rest)
                break
        if not reasoning and not content:
            return None
        return Delta(
            content="".join(content) if content else None,
            reasoning="".join(reasoning) if reasoning else None,
        )

    def _step(self, token_id: int, piece: str) -> str | None:
        """One token: held while it continues the phase's run, else sent with what was
        held (vLLM's index into the shorter run past its end counts as a break)."""
        state = self.state
        runs = _RUNS[state.phase]
        at = state.matched
        if not any(at < len(run) and run[at] == token_id for run in runs):
            out = state.held + piece
            state.held, state.matched = "", 0
            return out
        state.held += piece
        state.matched = at + 1
        fast = runs[1]
        done = len(fast) if at < len(fast) and fast[at] == token_id else len(runs[0])
        if state.matched == done:
            state.phase = (state.phase + 1) % 3
            state.held, state.matched = "", 0
        return None


def _token_texts(vocab: Vocabulary, text: str, token_ids: Sequence[int]) -> list[str] | None:
    """Each token's share of the chunk's text: marker tokens their own (ASCII) text,
    the runs between them what lies between; None when the text does not fit."""
    if len(token_ids) == 1:
        return [text]
    own_texts = [vocab.token_text(token_id) for token_id in token_ids]
    if "".join(own_texts) == text:
        return own_texts
    texts: list[str] = []
    pos, pending = 0, 0  # pending: other tokens since the last marker
    for token_id in token_ids:
        if token_id not in _MARKER_IDS:
            texts.append("")
            pending += 1
            continue
        own = vocab.token_text(token_id)
        at = text.find(own, pos) if pending else (pos if text.startswith(own, pos) else -1)
        if at < 0:
            return None
        if pending:
            texts[-pending] = text[pos:at]
        texts.append(own)
        pos, pending = at + len(own), 0
    if pending:
        texts[-pending] = text[pos:]
    elif pos != len(text):
        return None
    return texts


# ---------------------------------------------------------------------------- calls

_BLOCK_OPEN, _BLOCK_CLOSE = "<tool_calls>", "</tool_calls>"
_THINK_TAG, _THINK_END_TAG = "<think>", "</think>"


def _think_spans(text: str) -> list[tuple[int, int]]:
    """``<think>(.*?)</think>`` as finditer finds them: ``(start, end)`` in order."""
    spans, pos = [], 0
    while (start := text.find(_THINK_TAG, pos)) >= 0:
        end = text.find(_THINK_END_TAG, start + len(_THINK_TAG))
        if end < 0:
            break
        pos = end + len(_THINK_END_TAG)
        spans.append((start, pos))
    return spans


def split_block(text: str) -> tuple[str, str] | None:
    """``(content before, block text)`` of the first ``<tool_calls>`` block that lies
    outside every think span and holds JSON (stripped), as vLLM's loop finds it."""
    spans = _think_spans(text)
    span, pos = 0, 0
    while (start := text.find(_BLOCK_OPEN, pos)) >= 0:
        close = text.find(_BLOCK_CLOSE, start + len(_BLOCK_OPEN))
        if close < 0:
            return None
        pos = close + len(_BLOCK_CLOSE)
        while span < len(spans) and spans[span][1] <= start:
            span += 1
        inside = span < len(spans) and spans[span][0] < start and pos < spans[span][1]
        body = text[start + len(_BLOCK_OPEN) : close].strip()
        if not inside and _loads(body)[0]:
            return text[:start], body
    return None


class A13bTools:
    """A13B's calls read whole (the module docstring)."""

    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        found = split_block(content)
        if found is None:
            return ExtractedToolCalls(False, [], content)
        before, body = found
        data = _loads(body)[1]
        if not isinstance(data, list):
            return ExtractedToolCalls(False, [], before or content)
        calls: list[FunctionCall] = []
        for entry in data:
            if not isinstance(entry, dict) or "name" not in entry or "arguments" not in entry:
                continue
            name, arguments = entry["name"], entry["arguments"]
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments, ensure_ascii=False)
            if not isinstance(name, str) or not isinstance(arguments, str):
                return ExtractedToolCalls(False, [], content)  # vLLM's call type refuses it
            calls.append(FunctionCall(name, arguments, hunyuan_tool_call_id(id_seed, len(calls))))
        blank = not before.strip()
        return ExtractedToolCalls(bool(calls), calls, None if blank else before)


# How the text after reasoning opens: not yet known, a call list, or plain content.
_UNDECIDED, _LIST, _PLAIN = 0, 1, 2


class A13bToolState(XlamState, tag="a13b_tools"):
    opening: int = _UNDECIDED
    look: int = 0  # where the opening is read from next
    tagged: bool = False  # the <tool_calls> before the list was read
    bracket: SourceView | None = None  # the text from the list's "["


class A13bToolStream(XlamStream):
    """A13B's streamed calls: xLAM's steps over the text, once it opens a list.

    vLLM sends the text before the ``[`` (whitespace, ``<tool_calls>``) as content as it
    arrives, so a chunk that brings the ``[`` with it sends less of it; ours holds it
    until the text shows how it opens: dropped before a list, else sent as content
    (docs/parity.md).
    """

    def __init__(self, id_seed: str, state: A13bToolState | None = None) -> None:
        super().__init__(id_seed, state if state is not None else A13bToolState())

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.state_
        whole, s.text = s.text, ""
        whole += text
        s.text = whole
        if s.opening == _UNDECIDED:
            self._open()
        if s.opening == _UNDECIDED:
            return Delta(content="")  # held: vLLM sends it as content
        if s.opening == _PLAIN:
            return Delta(content=self._release(len(s.text)))
        self._update()
        return self._step(s.bracket)

    @property
    def state_(self) -> A13bToolState:
        s = self.s
        assert isinstance(s, A13bToolState)
        return s

    def _open(self) -> None:
        """Read on how the text opens: whitespace, maybe ``<tool_calls>``, then ``[``."""
        s = self.state_
        text, pos = s.text, s.look
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos == len(text):
                break
            if text[pos] == "[":
                s.opening, s.bracket, s.hold_from = _LIST, SourceView(pos, _EXACT), 0
                break
            rest = text[pos : pos + len(_BLOCK_OPEN)]
            if s.tagged or not _BLOCK_OPEN.startswith(rest):
                s.opening = _PLAIN
                break
            if rest != _BLOCK_OPEN:
                break  # the tag may still complete
            s.tagged, pos = True, pos + len(_BLOCK_OPEN)
        s.look = pos

    def _update(self) -> None:
        s = self.state_
        if s.whole is None:
            s.whole = SourceView(0)
        _feed_view(s.whole, s.text, len(s.text))
        if s.bracket is not None:
            _feed_view(s.bracket, s.text, len(s.text))

    def _view(self) -> tuple[SourceView | None, bool]:
        s = self.state_
        return s.bracket, s.opening == _LIST

    def _search(self, calls: SourceView | None) -> SourceView:
        whole = self.s.whole
        assert whole is not None
        return whole

    def finish(self) -> Delta | None:
        s = self.state_
        if s.opening == _LIST:
            return super().finish()
        held = self._release(len(s.text))
        return Delta(content=held) if held else None


# ---------------------------------------------------------------------------- the family


def _reasoning_stream(
    vocab: Vocabulary, request: Request, kept: object
) -> tuple[A13bReasoning, A13bReasoningState]:
    state = reuse(kept, A13bReasoningState)
    return A13bReasoning(vocab, state), state


def _tools_stream(_: None, request: Request, kept: object) -> tuple[A13bToolStream, A13bToolState]:
    state = reuse(kept, A13bToolState)
    return A13bToolStream(request.id_seed, state), state


FAMILY = Family(
    title="Hunyuan-A13B",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("hunyuan_a13b",),
            engine_based=False,
            states=(A13bReasoningState,),
            prepare=lambda name, vocab: vocab,
            one_shot=lambda vocab, request: A13bReasoning(vocab),
            stream=_reasoning_stream,
            golden=("U1",),
        ),
    ),
    tools=(
        Tools(
            names=("hunyuan_a13b",),
            engine_based=False,
            states=(A13bToolState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: A13bTools(),
            stream=_tools_stream,
            golden=("U1", "U2"),
        ),
    ),
)
