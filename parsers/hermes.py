"""Hermes tool calls (``hermes``, ``qwen3_json``): ``<tool_call>{json}</tool_call>``."""

from __future__ import annotations

import json
import re

from parsers.types import ExtractedToolCalls, FunctionCall

TOOL_START = "<tool_call>"
_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


class HermesTools:
    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        """Every tagged call, or none at all when any of them is not valid JSON.

        Arguments are re-serialized; content is the text before the first tag.
        """
        if TOOL_START not in content:
            return ExtractedToolCalls(False, [], content)
        try:
            calls = []
            for closed, unclosed in _CALL_RE.findall(content):
                call = json.loads(closed or unclosed)
                arguments = json.dumps(call["arguments"], ensure_ascii=False)
                calls.append(FunctionCall(call["name"], arguments))
        except (ValueError, KeyError, TypeError):
            return ExtractedToolCalls(False, [], content)
        if not all(isinstance(call.name, str) for call in calls):
            return ExtractedToolCalls(False, [], content)
        before = content[: content.find(TOOL_START)]
        return ExtractedToolCalls(True, calls, before or None)
