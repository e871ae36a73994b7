"""What docs/parity.md claims about chunking, for tests that check it on any output."""

from __future__ import annotations

# After qwen3 reasoning ends, these make vLLM's stream (and ours, which reproduces it)
# depend on the chunking: docs/parity.md, qwen3-switch-chunk.
_SWITCHES = ("</think>", "<tool_call>")
_STRAY = ("<think>", "</think>", "<|im_end|>")


def chunking_invariant(reasoning_parser: str | None, output: str) -> bool:
    """Whether every chunking of ``output`` is claimed to assemble the same message."""
    if reasoning_parser != "qwen3":
        return True
    ends = [(at, switch) for switch in _SWITCHES if (at := output.find(switch)) >= 0]
    if not ends:
        return True
    at, switch = min(ends)
    rest = output[at + len(switch) :]
    return not any(marker in rest for marker in _STRAY)
