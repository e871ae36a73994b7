"""xLAM tool calls: a bare JSON array of ``{"name", "arguments"}`` objects.

The array may stand alone, follow a ``</think>``, or sit in a fenced code block,
``[TOOL_CALLS]`` line or ``<tool_call>`` tags.
"""

from __future__ import annotations

import json
import re
from typing import Any

from parsers.ids import xlam_tool_call_id
from parsers.types import ExtractedToolCalls, FunctionCall

_AFTER_THINK = re.compile(r"</think>([\s\S]*)")
_BLOCKS = (
    re.compile(r"```(?:json)?\s*([\s\S]*?)```"),
    re.compile(r"\[TOOL_CALLS\]([\s\S]*?)(?=\n|$)"),
    re.compile(r"<tool_call>([\s\S]*?)</tool_call>"),
)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def split_calls(output: str) -> tuple[str | None, str | None]:
    """``(content, calls_json)``: where the call array is, and the text around it."""
    after_think = _AFTER_THINK.search(output)
    if after_think:
        content = output[: after_think.start() + len("</think>")].strip()
        thinking = after_think.group(1).strip()
        if _is_json(thinking):
            return content, thinking
        for pattern in _BLOCKS:
            for block in pattern.findall(thinking):
                if _is_json(block):
                    return content, block
    for pattern in _BLOCKS:
        for block in pattern.findall(output):
            if _is_json(block):
                return pattern.sub("", output).strip(), block
    if output.strip().startswith("["):
        if _is_json(output):
            return None, output
        if "{" in output and "name" in output and "arguments" in output:
            return None, output
    return output, None


class XlamTools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        text, calls_json = split_calls(content)
        if not calls_json:
            return ExtractedToolCalls(False, [], text)
        try:
            data: Any = json.loads(calls_json)
        except ValueError:
            return ExtractedToolCalls(False, [], content)
        if not isinstance(data, list):
            return ExtractedToolCalls(False, [], text or content)
        calls = []
        for index, entry in enumerate(data):
            if not isinstance(entry, dict) or "name" not in entry or "arguments" not in entry:
                continue
            arguments = entry["arguments"]
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments, ensure_ascii=False)
            # xLAM numbers its ids by position in the array, invalid entries included.
            calls.append(FunctionCall(entry["name"], arguments, xlam_tool_call_id(id_seed, index)))
        if not all(isinstance(c.name, str) and isinstance(c.arguments, str) for c in calls):
            return ExtractedToolCalls(False, [], content)
        return ExtractedToolCalls(bool(calls), calls, text)
