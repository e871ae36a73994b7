"""Step-5 and Step-3.5 (Qwen3-Coder's call format)."""

from __future__ import annotations

from recorder.common import (
    Config,
    _parsers,
    engine_family_scenarios,
)

CONFIGS = [
    Config(
        "Q2",
        _parsers("step5", "step5"),
        "longcat",
        engine_family_scenarios("qwen3_xml", "step5"),
        eos="<|im_end|>",
        served="step5",
    ),
    Config(
        "Q3",
        _parsers("step3p5", "step3p5"),
        "longcat",
        engine_family_scenarios("qwen3_xml", "step3p5"),
        eos="<|im_end|>",
        served="step3p5",
    ),
]
