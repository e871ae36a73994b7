"""granite-20b-functioncalling's calls (``granite-20b-fc``): ``<function_call> {"name": ...,
"arguments": {...}}``, each call opened by its own ``<function_call>``.

One-shot, as vLLM 0.33.0: the text after each opener (and its white space) up to the
next opener starts with one JSON object holding ``name`` and ``arguments``; one that
does not spoils them all (the output stays content). Content is what precedes the first
opener. Streamed, vLLM reads calls as its ``llama3_json`` does, from an output that opens
with ``<function_call>`` (while the output may still become the opener it sends
nothing); after a call it skips white space, the opener's length of text whatever it
holds, and white space again. ``parameters`` is no name for the arguments here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from parsers.families.llama3_json import (
    JsonCallsDialect,
    Llama3JsonState,
    Llama3JsonStream,
    _as_read,
    _skip_space,
)
from parsers.family import Family, Request, Tools, reuse
from parsers.types import ExtractedToolCalls, FunctionCall

OPENER = "<function_call>"
_OPENERS = re.compile(r"<function_call>\s*")


def _after(text: str, end: int) -> int:
    return _skip_space(text, _skip_space(text, end) + len(OPENER))


GRANITE_FC = JsonCallsDialect(
    opener=OPENER,
    bare=False,
    holds_opener=True,
    first=lambda text: _skip_space(text, len(OPENER)),
    after=_after,
    arguments=_as_read,
    incremental=False,
    skips_space=True,
)


class GraniteFcTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        if OPENER not in content:
            return ExtractedToolCalls(False, [], content)
        openers = list(_OPENERS.finditer(content))
        decoder = json.JSONDecoder()
        calls = []
        try:
            for i, opener in enumerate(openers):
                end = openers[i + 1].start() if i + 1 < len(openers) else len(content)
                call: Any = decoder.raw_decode(content[opener.end() : end])[0]
                name = call["name"]
                if not isinstance(name, str):
                    raise TypeError("a call's name must be a string")
                arguments = json.dumps(call["arguments"], ensure_ascii=False)
                calls.append(FunctionCall(name, arguments))
        except (ValueError, KeyError, TypeError, IndexError, RecursionError):
            return ExtractedToolCalls(False, [], content)
        before = content[: content.find(OPENER)]
        return ExtractedToolCalls(True, calls, before or None)


class GraniteFcState(Llama3JsonState, tag="granite_20b_fc"):
    """llama3_json's reading state, tagged as this family's."""


class GraniteFcStream(Llama3JsonStream):
    """llama3_json's reading in this dialect; ``required`` and named ``tool_choice``
    take vLLM's JSON path (the parser has no structural tag of its own)."""

    supports_required_and_named = True


def _stream(_: None, request: Request, kept: object) -> tuple[GraniteFcStream, GraniteFcState]:
    state = reuse(kept, GraniteFcState)
    return GraniteFcStream(request.id_seed, state, GRANITE_FC), state


FAMILY = Family(
    title="Granite 20B function calling",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("granite-20b-fc",),
            engine_based=False,
            states=(GraniteFcState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: GraniteFcTools(),
            stream=_stream,
            golden=("H4",),
        ),
    ),
)
