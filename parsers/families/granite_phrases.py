"""Granite 3.2's reasoning (``granite``): plain-text phrases, no marker tokens.

Granite 3.2 writes::

    Here is my thought process: ...reasoning... Here is my response: ...answer...

(``Here's`` in place of ``Here is`` too). One-shot, vLLM finds the phrases anywhere
in the output; streamed, only an output that opens with the first phrase reasons,
everything else is content. Its stream never ends reasoning, so a tool parser beside
it never sees a streamed chunk (vLLM's parser has no way to say reasoning ended).

vLLM's stream re-reads the whole output on every chunk and slices the chunk by
offsets that are right only when a chunk holds little more than one phrase's token:
larger chunks leak the first phrase's tail into reasoning or lose reasoning text
before the second phrase (docs/parity.md, ``granite-phrase-chunks``). This one reads
each character once and sends what one token per chunk sends: text that may still
become a phrase is held, a phrase is dropped, and at the end held text goes only if
it holds no ``Here`` (vLLM drops a held partial phrase).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from parsers.family import Family, Reasoning, Request, reuse
from parsers.types import Delta

THINK_PHRASES = ("Here's my thought process:", "Here is my thought process:")
RESPONSE_PHRASES = ("Here's my response:", "Here is my response:")
_HERE = "Here"


def _first(text: str, phrases: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest of ``phrases`` in ``text`` from ``start``, and which it is."""
    found = [(at, phrase) for phrase in phrases if (at := text.find(phrase, start)) >= 0]
    return min(found) if found else None


def _partial_tail(text: str) -> int:
    """Where the longest end of ``text`` that may grow into a response phrase starts."""
    longest = max(len(phrase) for phrase in RESPONSE_PHRASES) - 1
    for size in range(min(longest, len(text)), 0, -1):
        tail = text[len(text) - size :]
        if any(phrase.startswith(tail) for phrase in RESPONSE_PHRASES):
            return len(text) - size
    return len(text)


class GraniteReasoning:
    """One-shot: the first thought phrase anywhere, then the first response phrase."""

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return False

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        think = _first(text, THINK_PHRASES)
        if think is None:
            return None, text
        start = think[0] + len(think[1])
        response = _first(text, RESPONSE_PHRASES, start)
        if response is None:
            return None, text
        content = text[response[0] + len(response[1]) :]
        return text[start : response[0]], content or None


_OPENING, _REASONING, _CONTENT = 0, 1, 2


class GraniteReasoningState(Struct, tag="granite_phrases"):
    """Where the stream is (the opening phrase, reasoning, content) and the text held
    as a phrase it may still become."""

    phase: int = _OPENING
    held: str = ""


class GraniteReasoningStream:
    """Streamed reasoning that never ends (as vLLM's): reasoning, then content."""

    engine_based = False

    def __init__(self, state: GraniteReasoningState | None = None) -> None:
        self.s = state if state is not None else GraniteReasoningState()

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return False

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return False

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return []

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        s = self.s
        if s.phase == _CONTENT:
            return Delta(content=text) if text else None
        buffer, s.held = s.held + text, ""
        if s.phase == _OPENING:
            if any(phrase.startswith(buffer) for phrase in THINK_PHRASES):
                s.held = buffer
                return None
            opening = next((p for p in THINK_PHRASES if buffer.startswith(p)), None)
            if opening is None:
                s.phase = _CONTENT
                return Delta(content=buffer)
            s.phase = _REASONING
            buffer = buffer[len(opening) :]
        response = _first(buffer, RESPONSE_PHRASES)
        if response is not None:
            s.phase = _CONTENT
            reasoning, content = buffer[: response[0]], buffer[response[0] + len(response[1]) :]
            if reasoning or content:
                return Delta(reasoning=reasoning or None, content=content or None)
            return None
        held_from = _partial_tail(buffer)
        s.held = buffer[held_from:]
        return Delta(reasoning=buffer[:held_from]) if held_from else None

    def finish(self) -> Delta | None:
        """Held text that is no phrase yet goes as reasoning; a partial phrase is dropped."""
        s = self.s
        if s.phase != _REASONING or not s.held or _HERE in s.held:
            return None
        held, s.held = s.held, ""
        return Delta(reasoning=held)


# ---------------------------------------------------------------------------- the family


def _stream(
    _: None, request: Request, kept: object
) -> tuple[GraniteReasoningStream, GraniteReasoningState]:
    state = reuse(kept, GraniteReasoningState)
    return GraniteReasoningStream(state), state


FAMILY = Family(
    title="Granite 3.2 (reasoning in phrases)",
    tokenizer="any (the phrases are plain text)",
    reasoning=(
        Reasoning(
            names=("granite",),
            engine_based=False,
            states=(GraniteReasoningState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: GraniteReasoning(),
            stream=_stream,
            golden=("F2", "F3"),
        ),
    ),
)
