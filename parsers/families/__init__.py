"""Every model family the server serves: one line each, its module's declaration
(parsers/family.py says what a declaration holds; parsers/registry.py serves them)."""

from __future__ import annotations

import functools
import operator
from typing import Any

from parsers.families import (
    apertus,
    beam,
    cohere_command,
    deepseek,
    dots,
    dsml,
    ernie45,
    functiongemma,
    gemma4,
    gigachat3,
    glm,
    granite,
    granite4,
    granite_fc,
    granite_phrases,
    granite_thinking,
    harmony,
    hermes,
    hf,
    hunyuan_a13b,
    hy,
    inkling,
    internlm,
    jamba,
    k2_horizon,
    kimi_k2,
    kimi_k3,
    lfm2,
    llama3_json,
    llama4_pythonic,
    minicpm5,
    minicpmv,
    minimax,
    minimax_m3,
    mistral_json,
    muse,
    nemotron,
    olmo3,
    phi4_mini,
    plamo3,
    poolside,
    pythonic,
    qwen3,
    qwen3_coder,
    seed_oss,
    step3,
    step3p5,
    xlam,
)
from parsers.family import Family

FAMILIES: tuple[Family, ...] = (
    qwen3.FAMILY,
    hermes.FAMILY,
    qwen3_coder.FAMILY,
    deepseek.FAMILY,
    dsml.FAMILY,
    llama3_json.FAMILY,
    llama4_pythonic.FAMILY,
    pythonic.FAMILY,
    xlam.FAMILY,
    harmony.FAMILY,
    minimax.FAMILY,
    mistral_json.FAMILY,
    kimi_k2.FAMILY,
    glm.FAMILY,
    seed_oss.FAMILY,
    step3p5.FAMILY,
    granite4.FAMILY,
    granite_phrases.FAMILY,
    inkling.FAMILY,
    poolside.FAMILY,
    nemotron.FAMILY,
    phi4_mini.FAMILY,
    olmo3.FAMILY,
    minimax_m3.FAMILY,
    k2_horizon.FAMILY,
    ernie45.FAMILY,
    step3.FAMILY,
    muse.FAMILY,
    gigachat3.FAMILY,
    gemma4.FAMILY,
    granite_thinking.FAMILY,
    granite.FAMILY,
    cohere_command.FAMILY,
    granite_fc.FAMILY,
    hunyuan_a13b.FAMILY,
    hy.FAMILY,
    dots.FAMILY,
    internlm.FAMILY,
    functiongemma.FAMILY,
    plamo3.FAMILY,
    minicpmv.FAMILY,
    minicpm5.FAMILY,
    kimi_k3.FAMILY,
    apertus.FAMILY,
    lfm2.FAMILY,
    jamba.FAMILY,
    hf.FAMILY,
    beam.FAMILY,
)


def _union(kinds: list[type]) -> Any:
    """The types as one union (``A | B | ...``), each once, in declaration order."""
    return functools.reduce(operator.or_, dict.fromkeys(kinds))


# What streams keep between chunks, for ChatStreamState's fields (snapshots decode them
# by their tags).
REASONING_STATES = _union([s for f in FAMILIES for p in f.reasoning for s in p.states])
TOOL_STATES = _union([s for f in FAMILIES for p in f.tools for s in p.states])
WHOLE_STATES = _union([s for f in FAMILIES if f.whole is not None for s in f.whole.states])
