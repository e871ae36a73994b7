"""Kimi K2 on a synthetic tokenizer."""

from __future__ import annotations

from recorder.common import (
    Config,
    _parsers,
    engine_family_scenarios,
)

SYNTHETIC = {"kimi_k2": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2"}}
# Kimi's model type also makes vLLM number its fallback tool-call ids ``functions.NAME:N``.


CONFIGS = [
    Config(
        "K1",
        _parsers("kimi_k2", "kimi_k2"),
        "kimi_k2",
        engine_family_scenarios("kimi", "kimi"),
        eos="<|im_end|>",
        served="kimi",
    ),
]
