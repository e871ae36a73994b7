"""Ling 3 (GLM-4.7's format, thinking on by default) on GLM's synthetic tokenizer."""

from __future__ import annotations

from recorder.common import (
    Config,
    _parsers,
    engine_family_scenarios,
)

# The tokenizer is GLM's (recorder/families/glm.py declares its config.json).
CONFIGS = [
    Config(
        "W1",
        _parsers("ling3", "ling3"),
        "glm45",
        engine_family_scenarios("glm", "ling3"),
        eos="<|endoftext|>",
        served="ling3",
    ),
]
