"""What docs/parity.md claims about chunking, and how tests chunk a stream and fold it."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from parsers.types import Delta

# After engine reasoning ends (qwen3, and Kimi K2's and GLM's likewise), these make
# vLLM's stream (and ours, which reproduces it) depend on the chunking: docs/parity.md,
# qwen3-switch-chunk. The switches are what ends each parser's reasoning.
_SWITCHES = {
    "qwen3": ("</think>", "<tool_call>"),
    "kimi_k2": ("</think>", "<|tool_calls_section_begin|>"),
    "glm45": ("</think>", "<tool_call>"),
    "glm47": ("</think>", "<tool_call>"),
    # Inkling: the first block that renders as content (its markers read by their text).
    "inkling": (
        "<|content_text|>",
        "<|content_invoke_tool_json|>",
        "<|content_invoke_tool_text|>",
        "<|content_tool_error|>",
        "<|content_model_end_sampling|>",
    ),
    "nemotron_v3": ("</think>", "<tool_call>"),
    "granite_thinking_parser": ("</think>", "<tool_call>"),
    # PLaMo 3: its end marker, its calls block, or the turn's end (markers read as text).
    "plamo3": (
        "<|plamo:end_think:plamo|>",
        "<|plamo:begin_tool_requests:plamo|>",
        "<|plamo:tag|>",
    ),
    "minicpmv": ("</think>", "<tool_call>"),
    # MiMo and Step-3.5: Qwen3's engine under another configuration (docs/parity.md).
    "mimo": ("</think>", "<tool_call>"),
    "step3p5": ("</think>", "<tool_call>"),
}
_STRAY = ("<think>", "</think>", "<|im_end|>")
# Reasoning read as text chunk by chunk (docs/parity.md, olmo3-text-markers), or each
# chunk on its own with its calls (ernie45-chunk-reading, step3-steps), and Glimmer's
# reasoning spans: no chunking claim at all.
_TEXT_MARKERS = frozenset({"olmo3", "ernie45", "step3", "muse_glimmer"})
# Cohere's filter holds text back by what the buffer ends with (a backslash in an action
# block, a citation's first characters), so a cut decides what is sent (docs/parity.md,
# cohere-held-text): no chunking claim either.
_HELD_TEXT = frozenset({"cohere_command3", "cohere_command4"})
# Kimi K2 takes the switching chunk's ids from its last section opener: a second one in
# that chunk changes what the tool parser reads.
# Inkling's engine consumes its closers, model-message markers and openers in that chunk.
_MORE_STRAY = {
    "kimi_k2": ("<|tool_calls_section_begin|>",),
    "inkling": ("<|end_message|>", "<|message_model|>", "<|content_"),
    "plamo3": ("<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>", "<|plamo:tag|>"),
    # MiniCPM-V's engine drops its reserved markers in the switching chunk.
    "minicpmv": ("<reserved_", "<|reserved_"),
}


# Muse Spark, reasoning or tools alike (docs/parity.md, muse-framing): claimed only for
# outputs framed as the model frames them, each header `` to=NAME<|message|>`` opening the
# output or after ``<|start|>assistant`` right after a closed message.
_MUSE_FRAMED = re.compile(
    r"(?: to=[A-Za-z0-9_.\-]+<\|message\|>[^<]*(?:<(?!\|)[^<]*)*<\|eo[mt]\|>(?=<\|start\|>|$))"
    r"(?:<\|start\|>assistant to=[A-Za-z0-9_.\-]+<\|message\|>[^<]*(?:<(?!\|)[^<]*)*"
    r"(?:<\|eo[mt]\|>)?)*"
)


# Kimi K3 (docs/parity.md, kimi-k3-late-opener): vLLM restarts its reasoning or answer at a
# think or response opener, re-sending what followed unless it repeats what was sent, so
# only an output whose openers come where the model writes them is claimed.
def _k3_claimed(output: str, with_reasoning: bool) -> bool:
    if with_reasoning:
        head, _, output = output.removeprefix("<|open|>think<|sep|>").partition(
            "<|close|>think<|sep|>"
        )
        if "<|open|>" in head:
            return False
    output = output.removeprefix("<|open|>response<|sep|>")
    return "<|open|>think" not in output and "<|open|>response" not in output


# Tool parsers that read each chunk on its own as vLLM's do (docs/parity.md,
# gigachat3-opener-chunk, internlm-chunk-reading, functiongemma-chunk-reading,
# minicpm5-chunk-reading, apertus-chunk-reading, lfm2-chunk-reading, jamba-chunk-reading).
_CHUNKED_TOOLS = frozenset(
    {"gigachat3", "internlm", "functiongemma", "minicpm5", "apertus", "lfm2", "jamba"}
)


# Laguna (docs/parity.md, poolside-open-call): a call the output leaves open gets its
# closers from vLLM's server only when the last chunk carries a piece of it. The calls
# are followed tag by tag as vLLM's reader takes them; a value's text is skipped to its
# ``</arg_value>`` (a string value streams up to it, any other waits for it).
def _poolside_open_call(output: str) -> bool:
    """Whether the output ends inside a named ``poolside_v1`` call."""
    at = 0
    while (start := output.find("<tool_call>", at)) != -1:
        at = start + len("<tool_call>")
        ends = [output.find(tag, at) for tag in ("\n", "<arg_key>", "</tool_call>")]
        if max(ends) == -1:
            return False  # never named: no call
        cut = min(end for end in ends if end != -1)
        if not output[at:cut].strip() and output.startswith("</tool_call>", cut):
            at = cut + len("</tool_call>")
            continue
        at = cut + 1 if output[cut] == "\n" else cut
        while True:
            end, key = output.find("</tool_call>", at), output.find("<arg_key>", at)
            if end != -1 and (key == -1 or end < key):
                at = end + len("</tool_call>")
                break
            if key == -1:
                return True
            at = key + len("<arg_key>")
            for tag in ("</arg_key>", "<arg_value>", "</arg_value>"):
                found = output.find(tag, at)
                if found == -1:
                    return True
                at = found + len(tag)
    return False


def chunking_invariant(
    reasoning_parser: str | None, output: str, tool_parser: str | None = None
) -> bool:
    """Whether every chunking of ``output`` is claimed to assemble the same message."""
    if (
        reasoning_parser in _TEXT_MARKERS
        or reasoning_parser in _HELD_TEXT
        or tool_parser in _CHUNKED_TOOLS
    ):
        return False
    if "muse" in (reasoning_parser, tool_parser):
        return _MUSE_FRAMED.fullmatch(output) is not None
    if "kimi_k3" in (reasoning_parser, tool_parser):
        return _k3_claimed(output, reasoning_parser == "kimi_k3")
    if tool_parser == "poolside_v1" and _poolside_open_call(output):
        return False
    switches = _SWITCHES.get(reasoning_parser or "")
    if switches is None:
        return True
    ends = [(at, switch) for switch in switches if (at := output.find(switch)) >= 0]
    if not ends:
        return True
    at, switch = min(ends)
    rest = output[at + len(switch) :]
    stray = _STRAY + _MORE_STRAY.get(reasoning_parser or "", ())
    return not any(marker in rest for marker in stray)


@dataclass
class Assembled:
    """A stream's deltas folded together, as a client folds them."""

    content: str = ""
    reasoning: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict)

    def add(self, delta: Delta | None) -> None:
        if delta is None:
            return
        self.content += delta.content or ""
        self.reasoning += delta.reasoning or ""
        for call in delta.tool_calls:
            name, arguments = self.calls.setdefault(call.index, ["", ""])
            self.calls[call.index] = [name or call.name or "", arguments + (call.arguments or "")]


def chunked(ids: list[int], cuts: Sequence[int]) -> list[list[int]]:
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in itertools.pairwise(bounds) if b > a]
