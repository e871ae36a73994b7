"""Holo2's reasoning with DeepSeek V3.1's calls."""

from __future__ import annotations

from recorder.common import (
    V4,
    Config,
    _parsers,
    tool_scenarios,
)

CONFIGS = [
    Config("N1", _parsers("holo2", "deepseek_v31"), V4, tool_scenarios("v31", False)),
]
