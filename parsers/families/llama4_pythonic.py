"""Llama 4 pythonic tool calls (``llama4_pythonic``): pythonic calls in Llama 4's markers.

Llama 4 may wrap its call list in ``<|python_start|>`` ... ``<|python_end|>``. Those
are special tokens, but not among the tokenizer's declared special tokens, so they
reach the parser as text even when special tokens are skipped. vLLM 0.33.0 reads the
list as ``pythonic`` does, after these changes, kept here:

* one-shot: an output opening with ``<|python_start|>`` loses it and every
  ``<|python_end|>``; what is left is parsed (or returned as content) as pythonic;
* streamed: the text so far is a call list if it opens with ``[`` or with
  ``<|python_start|>`` (dropped before parsing); a ``<|python_end|>`` that ends the
  text so far is left out of that chunk's reading (read again if more text follows).

The list itself is read by the pythonic scanner (parsers/families/pythonic.py), fed the text
vLLM would parse; this module only decides what that text is.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct, field

from parsers.families.pythonic import PythonicState, PythonicStream, PythonicTools
from parsers.family import Family, Request, Tools, reuse
from parsers.types import Delta, ExtractedToolCalls, Vocabulary

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"


class Llama4PythonicTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if content.startswith(PYTHON_START):
            content = content[len(PYTHON_START) :].replace(PYTHON_END, "")
        return PythonicTools().extract(content, id_seed)


class Llama4PythonicState(Struct, tag="llama4_pythonic"):
    """Where a streamed output stands; plain data, so it snapshots.

    ``phase``: ``start`` while the text so far is empty or a proper prefix of
    ``<|python_start|>`` (held back: vLLM sends it as content, then reads the calls
    after the marker if it completes, so the message would depend on how the marker
    was chunked; the held text goes out as content once it cannot be the marker, or
    at the end), ``list`` once the pythonic scanner reads it, ``content`` for an
    output that is no call list, ``silent`` for one that opened with the marker but
    whose rest can never parse.
    """

    phase: str = "start"
    head: str = ""  # the text so far, while ``start``
    opened: bool = False  # the output opened with <|python_start|>
    end_held: bool = False  # the text so far ends with <|python_end|>, not yet read
    line_start: bool = True  # after the marker, no indentation on the line so far
    pythonic: PythonicState = field(default_factory=PythonicState)


class Llama4PythonicStream:
    """Pythonic calls streamed as vLLM's Llama 4 parser streams them."""

    engine_based = False
    supports_required_and_named = True

    def __init__(
        self,
        id_seed: str,
        state: Llama4PythonicState | None = None,
        token_text: Callable[[int], str] | None = None,
    ) -> None:
        self.s = state if state is not None else Llama4PythonicState()
        self.pythonic = PythonicStream(id_seed, self.s.pythonic, token_text)

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.phase == "start":
            return self._start(text, token_ids)
        if s.phase == "content":
            return Delta(content=text)
        if s.phase == "silent":
            return None
        return self._read(text, token_ids)

    def finish(self) -> Delta | None:
        s = self.s
        if s.phase == "start":
            held, s.head, s.phase = s.head, "", "content"
            return Delta(content=held) if held else None
        return self.pythonic.finish() if s.phase == "list" else None

    def remaining_arguments(self) -> str:
        return self.pythonic.remaining_arguments() if self.s.phase == "list" else ""

    def _start(self, text: str, token_ids: list[int] | None) -> Delta | None:
        s = self.s
        head = s.head + text
        if not s.head and head.startswith("["):
            s.phase, s.head = "list", ""
            return self._read(text, token_ids)
        if head.startswith(PYTHON_START):
            s.phase, s.head, s.opened = "list", "", True
            return self._read(head[len(PYTHON_START) :], token_ids)
        if not head:
            return Delta(content=text)
        if PYTHON_START.startswith(head) and len(head) < len(PYTHON_START):
            s.head = head  # held back (docs/parity.md llama4-marker-prefix)
            return None
        s.phase, s.head = "content", ""
        return Delta(content=head)

    def _read(self, text: str, token_ids: list[int] | None) -> Delta | None:
        """Feed the scanner; a ``<|python_end|>`` ending the text waits for what follows."""
        s = self.s
        if s.end_held:
            text = PYTHON_END + text
        s.end_held = text.endswith(PYTHON_END)
        if s.end_held:
            text = text[: -len(PYTHON_END)]
        if s.opened and not s.pythonic.started:
            text = self._skip_blank_lines(text)
            if not text:
                return None
        return self.pythonic.stream(text, token_ids)

    def _skip_blank_lines(self, text: str) -> str:
        """The text from the list's ``[`` on, once the marker's rest reaches it.

        Python skips blank lines before the list, so vLLM's parse does too; anything
        else first (indentation, prose) never parses as a list, chunk after chunk.
        (A comment line first would parse; no model writes one, and it reads as prose.)
        """
        s = self.s
        for at, ch in enumerate(text):
            if ch in "\r\n\f":  # a form feed resets Python's indentation too
                s.line_start = True
            elif ch in " \t":
                s.line_start = False
            else:
                if ch != "[" or not s.line_start:
                    s.phase = "silent"
                    return ""
                return text[at:]
        return ""


# ------------------------------------------------------------------ the family

TokenText = Callable[[int], str]


def _stream(
    token_text: TokenText, request: Request, kept: object
) -> tuple[Llama4PythonicStream, Llama4PythonicState]:
    state = reuse(kept, Llama4PythonicState)
    return Llama4PythonicStream(request.id_seed, state, token_text), state


def _token_text(_: str, vocab: Vocabulary) -> TokenText:
    return vocab.token_text


FAMILY = Family(
    title="Llama 4 pythonic calls (<|python_start|>)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("llama4_pythonic",),
            engine_based=False,
            states=(Llama4PythonicState,),
            prepare=_token_text,
            one_shot=lambda _, request: Llama4PythonicTools(),
            stream=_stream,
            golden=("L2",),
        ),
    ),
)
