"""Every recorded configuration, one module per family: a module gives ``CONFIGS`` and,
where it records on a synthetic tokenizer, ``SYNTHETIC`` (the family's config.json for vLLM,
or None for the oracle's Qwen3 one)."""

from __future__ import annotations

from typing import Any

from recorder.common import Config
from recorder.families import (
    beam,
    cohere,
    deepseek,
    dots,
    ernie,
    gemma4,
    gigachat3,
    glm,
    gptoss,
    granite,
    granite_array,
    granite_fc,
    granite_thinking,
    hf,
    holo2,
    hunyuan,
    inkling,
    internlm,
    k2_horizon,
    kimi,
    ling3,
    llama,
    longcat,
    mimo,
    minimax,
    minimax_m3,
    mistral,
    muse,
    nemotron,
    olmo3,
    phi4,
    poolside,
    seed_oss,
    step,
    step3,
)

FAMILIES = (
    deepseek,
    holo2,
    kimi,
    glm,
    longcat,
    step,
    seed_oss,
    granite,
    inkling,
    poolside,
    nemotron,
    phi4,
    olmo3,
    gptoss,
    minimax,
    llama,
    mistral,
    ling3,
    minimax_m3,
    mimo,
    k2_horizon,
    ernie,
    step3,
    muse,
    gigachat3,
    gemma4,
    granite_thinking,
    granite_array,
    cohere,
    granite_fc,
    hunyuan,
    dots,
    internlm,
    hf,
    beam,
)
CONFIGS: dict[str, Config] = {
    config.name: config for family in FAMILIES for config in family.CONFIGS
}
SYNTHETIC: dict[str, dict[str, Any] | None] = {
    name: shape for family in FAMILIES for name, shape in getattr(family, "SYNTHETIC", {}).items()
}
