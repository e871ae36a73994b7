"""Phi-4-mini JSON tool calls (``phi4_mini_json``): ``functools[{...}, ...]`` in plain text.

vLLM 0.33.0's parser reads a whole output only. It takes the text between the first
``functools[`` and the first ``]`` after it as the members of a JSON array of
``{"name", "arguments"}`` (or ``"parameters"``) objects, so a ``]`` inside the
arguments cuts the array short. What it finds:

* no ``functools[ ... ]``: no calls, the output is the content;
* the array is no JSON: calls were made, none of them readable, and no content;
* a member that is not an object with a string ``name`` and ``arguments`` or
  ``parameters``: no calls, the output is the content;
* otherwise every member is a call (arguments re-serialized) and there is no content,
  not even the text before ``functools``.

Streamed, it sends nothing at all once the tool parser reads the output: no content,
no calls. Ours does the same.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct

from parsers.family import Family, Request, Tools, reuse
from parsers.types import Delta, ExtractedToolCalls, FunctionCall

OPENER = "functools["


def _call(member: Any) -> FunctionCall | None:
    """One array member as vLLM builds its call, or None where vLLM's build fails."""
    if not isinstance(member, dict) or "name" not in member:
        return None
    key = "arguments" if "arguments" in member else "parameters"
    if key not in member or not isinstance(member["name"], str):
        return None
    return FunctionCall(member["name"], json.dumps(member[key], ensure_ascii=False))


def extract_phi4_mini(text: str) -> ExtractedToolCalls:
    """vLLM's one-shot reading (the module docstring says what it finds)."""
    start = text.find(OPENER)
    end = text.find("]", start + len(OPENER)) if start >= 0 else -1
    if end < 0:
        return ExtractedToolCalls(False, [], text)
    try:
        members = json.loads("[" + text[start + len(OPENER) : end] + "]")
    except json.JSONDecodeError:
        return ExtractedToolCalls(True, [], None)
    except (ValueError, RecursionError):  # an integer too long, nesting too deep
        return ExtractedToolCalls(False, [], text)
    calls = []
    for member in members:
        try:
            call = _call(member)
        except RecursionError:
            call = None
        if call is None:
            return ExtractedToolCalls(False, [], text)
        calls.append(call)
    return ExtractedToolCalls(True, calls, None)


class Phi4MiniTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_phi4_mini(content)


class Phi4MiniState(Struct, tag="phi4_mini_json"):
    """Nothing: the stream sends nothing, whatever it reads."""


class Phi4MiniStream:
    """The tool side of a stream: silent, as vLLM's."""

    engine_based = False
    supports_required_and_named = True

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        return None

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        return ""


def _stream(_: None, request: Request, kept: object) -> tuple[Phi4MiniStream, Phi4MiniState]:
    return Phi4MiniStream(), reuse(kept, Phi4MiniState)


FAMILY = Family(
    title="Phi-4-mini (JSON calls after functools)",
    tokenizer="model directory",
    tools=(
        Tools(
            names=("phi4_mini_json",),
            engine_based=False,
            states=(Phi4MiniState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: Phi4MiniTools(),
            stream=_stream,
            golden=("P1",),
        ),
    ),
)
