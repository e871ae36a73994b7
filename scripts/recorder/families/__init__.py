"""Every recorded configuration, one module per family: a module gives ``CONFIGS`` and,
where it records on a synthetic tokenizer, ``SYNTHETIC`` (the family's config.json for vLLM,
or None for the oracle's Qwen3 one)."""

from __future__ import annotations

from typing import Any

from recorder.common import Config
from recorder.families import (
    deepseek,
    ernie,
    glm,
    gptoss,
    granite,
    holo2,
    inkling,
    internlm,
    kimi,
    llama,
    longcat,
    minimax,
    mistral,
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
    ernie,
    step3,
    internlm,
)
CONFIGS: dict[str, Config] = {
    config.name: config for family in FAMILIES for config in family.CONFIGS
}
SYNTHETIC: dict[str, dict[str, Any] | None] = {
    name: shape for family in FAMILIES for name, shape in getattr(family, "SYNTHETIC", {}).items()
}
