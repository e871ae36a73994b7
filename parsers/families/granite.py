"""Granite 3.0/3.1's tool calls (``granite``), declared on the marker engine.

Granite writes its calls as one JSON array after a marker, with no closing marker::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]   # 3.0
    <tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]     # 3.1

``<|tool_call|>`` counts by id where the tokenizer has it; ``<tool_call>`` is read as
text. The engine splits the array into a call per element (its ``body_array`` mode); a
call's name is its body's ``"name"`` and its arguments the ``"arguments"`` object,
streamed as Inkling's ``args`` are (parsers/families/member_calls.py). The array's ``]``
ends the calls and what follows is content; a marker not followed by an array leaves
the rest of the output content.
"""

from __future__ import annotations

from typing import ClassVar

from msgspec import field

from parsers.engine.arrays import ArrayEngineState
from parsers.engine.core import CONTENT, STATE_EVENTS, TOOL_ARGS, Format, Grammar, Transition
from parsers.engine.tools import EngineToolState, tool_builders
from parsers.families.inkling_args import ArgsReading
from parsers.families.member_calls import MemberSlot, MemberTools
from parsers.family import Family, Tools
from parsers.types import Vocabulary

TOOL_TOKEN = "<|tool_call|>"
TOOL_STRING = "<tool_call>"

# Terminals: the marker as a token (3.0) and as text (3.1).
TOKEN_MARKER = "TOOL_TOKEN"
TEXT_MARKER = "TOOL_STRING"

GRANITE_FORMAT = Format(
    {
        (CONTENT, TOKEN_MARKER): Transition(TOOL_ARGS, ()),
        (CONTENT, TEXT_MARKER): Transition(TOOL_ARGS, ()),
    },
    STATE_EVENTS,
    frozenset({TOOL_ARGS}),
    body_array=True,
)
_LITERALS = {TOKEN_MARKER: TOOL_TOKEN, TEXT_MARKER: TOOL_STRING}


class GraniteGrammar:
    """Granite's grammar for one tokenizer."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.grammar = Grammar(
            _LITERALS,
            {TOKEN_MARKER: TOOL_TOKEN},
            vocab.special_tokens - set(_LITERALS.values()),
            dict(vocab.token_ids),
            vocab.token_text,
            markup=GRANITE_FORMAT,
        )


class ArgumentsReading(ArgsReading):
    """The reading of a call body's ``arguments`` object."""

    member: ClassVar[str] = "arguments"


class GraniteSlot(MemberSlot):
    reading: ArgumentsReading = field(default_factory=ArgumentsReading)


class GraniteToolState(EngineToolState[GraniteSlot], tag="granite_array"):
    engine: ArrayEngineState = field(default_factory=lambda: ArrayEngineState(CONTENT))


class GraniteTools(MemberTools[GraniteSlot, GraniteToolState]):
    """Granite's tool calls, streamed or one-shot, as vLLM's engine parser emits them
    (forced calls read as the request's JSON, as vLLM's granite parser declares)."""

    supports_required_and_named = True


_tools, _tools_stream = tool_builders(GraniteTools)


FAMILY = Family(
    title="Granite 3.0, 3.1 (a JSON array of calls after `<|tool_call|>` or `<tool_call>`)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("granite",),
            engine_based=True,
            states=(GraniteToolState,),
            prepare=lambda name, vocab: GraniteGrammar(vocab),
            one_shot=_tools,
            stream=_tools_stream,
            golden=("A3",),
        ),
    ),
)
