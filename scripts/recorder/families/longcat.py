"""LongCat's call tags (Qwen3's vocabulary with them added)."""

from __future__ import annotations

from recorder.common import (
    Config,
    _parsers,
    engine_family_scenarios,
)

# It also stands in for Step-5's vocabulary.
SYNTHETIC = {"longcat": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}}


CONFIGS = [
    Config(
        "Q1",
        _parsers("deepseek_r1", "longcat"),
        "longcat",
        engine_family_scenarios("longcat", "longcat"),
        eos="<|im_end|>",
        served="longcat",
    ),
]
