"""GLM-4.5 on a synthetic tokenizer."""

from __future__ import annotations

from recorder.common import (
    Config,
    _parsers,
    engine_family_scenarios,
)

SYNTHETIC = {"glm45": {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"}}


CONFIGS = [
    Config(
        "Z1",
        _parsers("glm45", "glm45"),
        "glm45",
        engine_family_scenarios("glm", "glm"),
        eos="<|endoftext|>",
        served="glm",
    ),
]
