"""Seed-OSS: Qwen3-Coder's format with every marker spelled ``seed:``."""

from __future__ import annotations

from recorder.common import (
    Config,
    Scenario,
    _parsers,
    engine_family_scenarios,
)

SEED_TAGS = {
    "<think>": "<seed:think>",
    "</think>": "</seed:think>",
    "<tool_call>": "<seed:tool_call>",
    "</tool_call>": "</seed:tool_call>",
}


def seed_spelled(text: str) -> str:
    """Seed-OSS spells Qwen3's markers with a ``seed:`` prefix."""
    for qwen3, seed in SEED_TAGS.items():
        text = text.replace(qwen3, seed)
    return text


def seed_scenarios(served: str) -> list[Scenario]:
    """The engine-family scenarios in Qwen3-Coder's format, every marker respelled."""
    scenarios = engine_family_scenarios("qwen3_xml", served)
    for scenario in scenarios:
        scenario.outputs = [seed_spelled(output) for output in scenario.outputs]
    return scenarios


SYNTHETIC = {"seed_oss": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}}


CONFIGS = [
    Config(
        "Y1",
        _parsers("seed_oss", "seed_oss"),
        "seed_oss",
        seed_scenarios("seed"),
        eos="<seed:eos>",
        served="seed",
    ),
]
