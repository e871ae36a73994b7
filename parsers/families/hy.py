"""Hunyuan HY-V3 and HY-V4's reasoning (``hy_v3``, ``hy_v4``): one format, two switches.

Both write reasoning in ``<think>`` ... ``</think>`` tokens and read it as ``deepseek_r1``
does (the template opens ``<think>`` in the prompt, so text before ``</think>`` is
reasoning when the output has no ``<think>`` of its own). Whether a request thinks is
its ``reasoning_effort`` as the parser's template kwargs carry it (the request's own,
else ``chat_template_kwargs.reasoning_effort``): ``no_think`` turns it off and the whole
output is content. Unset, HY-V3 does not think and HY-V4 does (its template's default
effort is ``high``). Their tool parsers are parsers/families/hy_tools.py.
"""

from __future__ import annotations

from collections.abc import Callable

from parsers.families.deepseek import _think_if_asked, _think_if_tokens, _think_stream_if_asked
from parsers.families.hy_tools import HyTools, HyToolState, HyToolStream, HyV3Tools, HyV3ToolStream
from parsers.families.think import ThinkTagReasoning, ThinkTagStreamState
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import ParseOptions, Vocabulary

NO_THINK = "no_think"


def _effort_switch(default: str) -> Callable[[ParseOptions], bool]:
    """Thinking unless the effort (``default`` when unset or empty) is ``no_think``."""

    def thinking(options: ParseOptions) -> bool:
        effort = options.chat_template_kwargs.get("reasoning_effort") or default
        return effort != NO_THINK

    return thinking


def _declared(
    name: str, default: str, needs: tuple[str, ...], golden: tuple[str, ...]
) -> Reasoning[ThinkTagReasoning | None]:
    """``needs``: HY-V3's parser refuses a tokenizer without the think tokens, HY-V4's
    only a request that thinks (read here without reasoning)."""
    return Reasoning(
        names=(name,),
        engine_based=False,
        needs=needs,
        states=(ThinkTagStreamState,),
        thinking=_effort_switch(default),
        prepare=_think_if_tokens,
        one_shot=_think_if_asked,
        stream=_think_stream_if_asked,
        golden=golden,
    )


def _open_id(_: str, vocab: Vocabulary) -> int | None:
    return vocab.id_of("<tool_calls>")


def _tools_stream(
    open_id: int | None, request: Request, kept: object
) -> tuple[HyToolStream, HyToolState]:
    state = reuse(kept, HyToolState)
    return HyToolStream(request.options, request.id_seed, open_id, state), state


def _v3_tools_stream(
    open_id: int | None, request: Request, kept: object
) -> tuple[HyToolStream, HyToolState]:
    state = reuse(kept, HyToolState)
    return HyV3ToolStream(request.options, request.id_seed, open_id, state), state


FAMILY = Family(
    title="Hunyuan HY-V3, HY-V4",
    tokenizer="model directory",
    reasoning=(
        _declared("hy_v3", NO_THINK, ("<think>", "</think>"), ("U3", "U6")),
        _declared("hy_v4", "high", (), ("U4", "U5")),
    ),
    tools=(
        Tools(
            names=("hy_v4",),
            engine_based=False,
            needs=("<tool_calls>", "</tool_calls>"),
            states=(HyToolState,),
            prepare=_open_id,
            one_shot=lambda _, request: HyTools(request.options),
            stream=_tools_stream,
            golden=("U5",),
        ),
        Tools(
            names=("hy_v3",),
            engine_based=False,
            needs=("<tool_calls>", "</tool_calls>"),
            states=(HyToolState,),
            prepare=_open_id,
            one_shot=lambda _, request: HyV3Tools(request.options),
            stream=_v3_tools_stream,
            golden=("U6",),
        ),
    ),
)
