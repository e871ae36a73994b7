"""xLAM tool calls: a bare JSON array of ``{"name", "arguments"}`` objects.

The array may stand alone, follow a ``</think>``, or sit in a fenced code block,
``[TOOL_CALLS]`` line or ``<tool_call>`` tags.
"""

from __future__ import annotations

import json
import re
from typing import Any

from msgspec import Struct, field

from parsers.ids import xlam_tool_call_id
from parsers.types import Delta, DeltaToolCall, ExtractedToolCalls, FunctionCall

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


# ---------------------------------------------------------------------------- streaming

_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]+)"')
_EMPTY_ARGS_RE = re.compile(r'"name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*\{\s*\}')
_ARGS_RE = re.compile(
    r'"name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*(\{(?:[^{}]|(?:\{[^{}]*\}))*\})'
)
_FENCED_RE = re.compile(r"```(?:json)?\s*([\s\S]*?)(?:```|$)")


class XlamSent(Struct):
    name: bool = False
    prefix: bool = False
    arguments: str = ""


# Text that can start a call block; until one shows up (or the output opens with
# "["), xLAM output is plain content.
_TRIGGERS = ("</think>", "```", "[TOOL_CALLS]", "<tool_call>")
_TRIGGER_TAIL = max(len(t) for t in _TRIGGERS) - 1


class XlamState(Struct, tag="xlam"):
    text: str = ""
    plain: bool = True
    tail: str = ""
    lead: str = ""
    current: int = -1
    sent: list[XlamSent] = field(default_factory=list)
    parsed: Any = None  # the last complete call array seen


class XlamStream:
    """xLAM calls as vLLM 0.33.0 streams them, one step of one call per delta.

    vLLM re-reads the whole output on each delta. Until something that can start a
    call block appears, the answer is known to be plain content and costs O(delta);
    after that this re-reads the output as vLLM does (see docs/parity.md).
    """

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: XlamState | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else XlamState()

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        """The last call's arguments not streamed yet.

        (vLLM appends all of them again, since it never records what it streamed for
        xLAM: the arguments are duplicated whenever the last chunk carries a tool-call
        delta.)
        """
        s = self.s
        if not s.parsed or not isinstance(s.parsed[-1], dict):
            return ""
        arguments = s.parsed[-1].get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        index = len(s.parsed) - 1
        sent = s.sent[index].arguments if index < len(s.sent) else ""
        return arguments[len(sent) :] if arguments.startswith(sent) else ""

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        s.text += text
        if s.plain:
            window = s.tail + text
            s.lead = s.lead or text.lstrip()[:1]
            if s.lead != "[" and not any(trigger in window for trigger in _TRIGGERS):
                s.tail = window[-_TRIGGER_TAIL:]
                return Delta(content=text)
            s.plain = False
        current = s.text
        stripped = current.strip()
        _, calls_json = split_calls(current)
        maybe_block = (
            "```json" in current
            or "```\n[" in current
            or "[TOOL_CALLS]" in current
            or "<tool_call>" in current
        )
        is_block = (
            stripped.startswith(("[", "<tool_call>", "[TOOL_CALLS]"))
            or "</think>[" in current
            or calls_json is not None
            or (maybe_block and '"name"' in current and '"arguments"' in current)
        )
        if not is_block:
            return Delta(content=text)
        try:
            return self._step(current, calls_json, maybe_block)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return Delta(content=text)

    def _step(self, current: str, calls_json: str | None, maybe_block: bool) -> Delta | None:
        s = self.s
        try:
            parsed = json.loads(calls_json if calls_json else current)
            if isinstance(parsed, list):
                s.parsed = parsed
        except ValueError:
            pass
        search = calls_json if calls_json else current
        if not calls_json and maybe_block:
            fenced = _FENCED_RE.search(current)
            if fenced:
                candidate = fenced.group(1).strip()
                if (
                    candidate.startswith("[")
                    and '"name"' in candidate
                    and '"arguments"' in candidate
                ):
                    search = candidate
        names = list(_NAME_RE.finditer(search))
        count = len(names)
        if count == 0:
            return None
        while len(s.sent) < count:
            s.sent.append(XlamSent())
        index = s.current
        if (index == -1 or index < count - 1) and not s.sent[index + 1].name:
            index = s.current = index + 1
            s.sent[index].name = True
            return Delta(
                tool_calls=[
                    DeltaToolCall(
                        id=xlam_tool_call_id(self.id_seed, index),
                        type="function",
                        index=index,
                        name=names[index].group(1),
                    )
                ]
            )
        if not 0 <= index < count:
            return None
        sent = s.sent[index]
        empty = _EMPTY_ARGS_RE.search(search)
        if empty and empty.start() > 0 and not sent.prefix:
            sent.prefix, sent.arguments = True, "{}"
            if index < count - 1:
                s.current += 1
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments="{}")])
        matches = list(_ARGS_RE.finditer(search))
        if index >= len(matches):
            return None
        arguments = matches[index].group(1)
        if count > 1:
            try:
                tools = json.loads(search)
                if isinstance(tools, list) and index < len(tools):
                    value = tools[index].get("arguments", "{}")
                    arguments = (
                        json.dumps(value, ensure_ascii=False)
                        if isinstance(value, dict)
                        else str(value)
                    )
            except (ValueError, KeyError, IndexError):
                pass
        if not sent.prefix and arguments.startswith("{"):
            sent.prefix, sent.arguments = True, "{"
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments="{")])
        if arguments.startswith(sent.arguments) and arguments[len(sent.arguments) :]:
            piece = arguments[len(sent.arguments) :]
            sent.arguments = arguments
            return Delta(tool_calls=[DeltaToolCall(index=index, arguments=piece)])
        if arguments.endswith("}") and arguments == sent.arguments and index < count - 1:
            s.current += 1
        return None
