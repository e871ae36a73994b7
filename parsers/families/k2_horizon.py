"""K2 Horizon's reasoning (``k2_horizon``): a think block chosen by the reasoning effort;
its calls are k2_horizon_tools.py.

``chat_template_kwargs.reasoning_effort`` picks the block: ``high`` (the default)
``<ifm|think>…</ifm|think>``, ``medium`` ``<ifm|think_fast>…``, ``low``
``<ifm|think_faster>…``. The output is reasoning from its start (an opener the model
writes itself is dropped) to the block's closer, or to a ``<ifm|tool_calls>`` section,
which stays in the content. As vLLM 0.33.0 streams it, the reasoning is text held back
only while its tail may still grow into the closer or the section opener, and what
follows goes on as content; one-shot, an output with neither marker is all content.
vLLM refuses a request whose effort is none of the three; here it reads as ``high``.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from parsers.families.k2_horizon_tools import (
    K2HorizonTools,
    K2HorizonToolState,
    K2HorizonToolStream,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import Delta, ParseOptions, Vocabulary

TOOL_CALLS = "<ifm|tool_calls>"
BLOCKS = {
    "high": ("<ifm|think>", "</ifm|think>"),
    "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
    "low": ("<ifm|think_faster>", "</ifm|think_faster>"),
}


def _overlap(text: str, marker: str) -> int:
    """The length of the longest end of ``text`` that begins ``marker`` (not all of it)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


class K2HorizonState(Struct, tag="k2_horizon"):
    """Text not yet sent (a tail that may become a marker), whether the opener may
    still come, and whether reasoning ended."""

    held: str = ""
    at_start: bool = True
    finished: bool = False


class K2HorizonReasoning:
    """``k2_horizon`` reasoning, one-shot and streamed."""

    engine_based = False

    def __init__(
        self, vocab: Vocabulary, options: ParseOptions, state: K2HorizonState | None = None
    ) -> None:
        effort = options.chat_template_kwargs.get("reasoning_effort", "high")
        self.start, self.end = BLOCKS.get(effort if isinstance(effort, str) else "", BLOCKS["high"])
        self.start_id = vocab.id_of(self.start)
        self.end_id = vocab.id_of(self.end)
        self.tools_id = vocab.id_of(TOOL_CALLS)
        self.state = state if state is not None else K2HorizonState()

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        for token_id in reversed(prompt_token_ids):
            if token_id == self.start_id:
                return False
            if token_id in (self.end_id, self.tools_id):
                return True
        return False

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        output = text.removeprefix(self.start)
        if self.end in output:
            reasoning, _, content = output.partition(self.end)
            return reasoning, content or None
        at = output.find(TOOL_CALLS)
        if at != -1:
            return output[:at], output[at:]
        return "", output or None

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        if state.finished:
            return Delta(content=text) if text else None
        held = state.held + text
        if state.at_start:
            if self.start.startswith(held) and held != self.start:
                state.held = held
                return None
            held = held.removeprefix(self.start)
            state.at_start = False
        end = held.find(self.end)
        tools = held.find(TOOL_CALLS)
        if end != -1:
            reasoning, content = held[:end], held[end + len(self.end) :]
        elif tools != -1:
            reasoning, content = held[:tools], held[tools:]
        else:
            cut = len(held) - max(_overlap(held, self.end), _overlap(held, TOOL_CALLS))
            state.held = held[cut:]
            return Delta(reasoning=held[:cut]) if cut else None
        state.held, state.finished = "", True
        return Delta(reasoning=reasoning, content=content or None)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.finished or self.end_id in token_ids

    def content_ids(self, token_ids: list[int]) -> list[int]:
        if self.end_id in token_ids:
            return token_ids[token_ids.index(self.end_id) + 1 :]
        if self.tools_id is not None and self.tools_id in token_ids:
            return token_ids[token_ids.index(self.tools_id) :]
        return token_ids if self.state.finished else []

    def finish(self) -> Delta | None:
        return None


def _vocabulary(_: str, vocab: Vocabulary) -> Vocabulary:
    return vocab


def _stream(
    vocab: Vocabulary, request: Request, kept: object
) -> tuple[K2HorizonReasoning, K2HorizonState]:
    state = reuse(kept, K2HorizonState)
    return K2HorizonReasoning(vocab, request.options, state), state


def _tools_stream(
    _: Vocabulary, request: Request, kept: object
) -> tuple[K2HorizonToolStream, K2HorizonToolState]:
    state = reuse(kept, K2HorizonToolState)
    return K2HorizonToolStream(request.options, request.id_seed, state), state


FAMILY = Family(
    title="K2 Horizon",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("k2_horizon",),
            engine_based=False,
            needs=tuple(marker for block in BLOCKS.values() for marker in block),
            states=(K2HorizonState,),
            prepare=_vocabulary,
            one_shot=lambda vocab, request: K2HorizonReasoning(vocab, request.options),
            stream=_stream,
            golden=("W5", "K4"),
        ),
    ),
    tools=(
        Tools(
            names=("k2_horizon",),
            engine_based=True,  # vLLM's parser says so: it decides how none reads
            states=(K2HorizonToolState,),
            prepare=_vocabulary,
            one_shot=lambda _, request: K2HorizonTools(request.options),
            stream=_tools_stream,
            golden=("K4",),
        ),
    ),
)
