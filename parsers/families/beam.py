"""Beam: vLLM's ``beam`` reasoning and tool-call parsers (``BeamParser``), which read a
message by the tokenizer configuration's ``response_template`` exactly as ``hf`` does
(parsers/families/hf.py). What Beam adds in vLLM is a grammar derived from the template
that constrains generation (render side, a request's structured output); derendering
reads the output alike. ``beam`` combines only with ``beam`` (not with ``hf``), as in vLLM.
"""

from __future__ import annotations

from parsers.families.hf import (
    Prepared,
    TemplateStreamState,
    build_stream,
    check_sides,
    prepare_template,
)
from parsers.family import Family, Whole


def _check(prepared: Prepared, reasoning: bool, tools: bool) -> None:
    check_sides(prepared, reasoning, tools, "beam")


FAMILY = Family(
    title="Beam (read by its tokenizer's `response_template`)",
    tokenizer="model directory whose tokenizer_config.json has a response_template",
    whole=Whole(
        reasoning=("beam",),
        tools=("beam",),
        states=(TemplateStreamState,),
        prepare=prepare_template,
        build=build_stream,
        check=_check,
        golden=("X3", "X4"),
    ),
)
