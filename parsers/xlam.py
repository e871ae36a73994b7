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


def _trigger_overlap(text: str) -> int:
    """Length of the longest suffix of ``text`` that may grow into a block trigger."""
    best = 0
    for trigger in _TRIGGERS:
        for size in range(min(len(trigger) - 1, len(text)), best, -1):
            if text.endswith(trigger[:size]):
                best = size
                break
    return best


def _view(text: str) -> tuple[str | None, bool, bool]:
    """How vLLM sees the output so far: the call JSON it found, whether a block may be
    opening, and whether the output is a call block at all."""
    stripped = text.strip()
    _, calls_json = split_calls(text)
    maybe_block = (
        "```json" in text or "```\n[" in text or "[TOOL_CALLS]" in text or "<tool_call>" in text
    )
    is_block = (
        stripped.startswith(("[", "<tool_call>", "[TOOL_CALLS]"))
        or "</think>[" in text
        or calls_json is not None
        or (maybe_block and '"name"' in text and '"arguments"' in text)
    )
    return calls_json, maybe_block, is_block


def _search_text(text: str, calls_json: str | None, maybe_block: bool) -> str:
    """Where vLLM looks for calls: the found JSON, a fenced array, or the output."""
    if calls_json:
        return calls_json
    if maybe_block:
        fenced = _FENCED_RE.search(text)
        if fenced:
            candidate = fenced.group(1).strip()
            if candidate.startswith("[") and '"name"' in candidate and '"arguments"' in candidate:
                return candidate
    return text


def _call_index(text: str, position: int, names: list[re.Match[str]]) -> int:
    """Which call (by its name match) a match starting at ``position`` belongs to."""
    return sum(1 for name in names if name.start() <= position) - 1


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
    emitted: int = 0  # chars of text sent as content
    hold_from: int = -1  # where a possible call block starts; -1: none seen yet
    tail: str = ""
    lead: str = ""
    current: int = -1
    sent: list[XlamSent] = field(default_factory=list)
    parsed: Any = None  # the last complete call array seen


class XlamStream:
    """xLAM calls as vLLM 0.33.0 streams them, one step of one call per delta.

    vLLM re-reads the whole output on each delta. Until something that can start a
    call block appears, the answer is known to be plain content and costs O(delta);
    after that this re-reads the output as vLLM does. Unlike vLLM, text from where a
    block may start is held back (sent as content at the end if no call came of it),
    so block text never leaks into content (see docs/parity.md).
    """

    engine_based = False
    supports_required_and_named = True

    def __init__(self, id_seed: str, state: XlamState | None = None) -> None:
        self.id_seed = id_seed
        self.s = state if state is not None else XlamState()

    def finish(self) -> Delta | None:
        """Send whatever of the calls the stream has not sent yet.

        vLLM takes one step per chunk (a name, or an argument piece), so the calls a
        multi-token chunking leaves no steps for are lost. The final text settles
        them: the parsed array if it parses, else the calls whose arguments closed.
        """
        s = self.s
        if s.hold_from < 0:
            return None
        deltas: list[DeltaToolCall] = []
        for index, (name, arguments) in enumerate(self._final_calls()):
            while len(s.sent) <= index:
                s.sent.append(XlamSent())
            sent = s.sent[index]
            if not sent.name:
                sent.name = True
                call_id = xlam_tool_call_id(self.id_seed, index)
                deltas.append(DeltaToolCall(id=call_id, type="function", index=index, name=name))
            if arguments is None or arguments == sent.arguments:
                continue
            if arguments.startswith(sent.arguments):
                deltas.append(
                    DeltaToolCall(index=index, arguments=arguments[len(sent.arguments) :])
                )
                sent.prefix, sent.arguments = True, arguments
        return Delta(tool_calls=deltas) if deltas else None

    def _final_calls(self) -> list[tuple[str, str | None]]:
        """``(name, arguments)`` of every call in the final text, as far as it shows."""
        s = self.s
        if isinstance(s.parsed, list):
            calls: list[tuple[str, str | None]] = []
            for entry in s.parsed:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    return calls
                arguments = entry.get("arguments")
                if arguments is not None and not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                calls.append((entry["name"], arguments))
            return calls
        calls_json, maybe_block, is_block = _view(s.text)
        if not is_block:
            return []
        search = _search_text(s.text, calls_json, maybe_block)
        arguments = [m.group(1) for m in _ARGS_RE.finditer(search)]
        return [
            (m.group(1), arguments[i] if i < len(arguments) else None)
            for i, m in enumerate(_NAME_RE.finditer(search))
        ]

    def remaining_arguments(self) -> str:
        """Nothing: ``finish`` settles every call.

        (vLLM appends the last call's whole arguments again, since it never records
        what it streamed for xLAM: they are duplicated whenever the last chunk carries
        a tool-call delta.)
        """
        return ""

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        s.text += text
        if s.hold_from < 0:
            window = s.tail + text
            base = len(s.text) - len(window)
            starts = [base + window.find(t) for t in _TRIGGERS if t in window]
            if not s.lead and text.strip():
                s.lead = text.lstrip()[:1]
                if s.lead == "[":
                    starts.append(len(s.text) - len(text.lstrip()))
            if not starts:
                keep = _trigger_overlap(window)
                s.tail = window[-_TRIGGER_TAIL:]
                return Delta(content=self._release(len(s.text) - keep))
            s.hold_from = min(starts)
        release = self._release(s.hold_from)
        calls_json, maybe_block, is_block = _view(s.text)
        step = None
        if is_block:
            try:
                step = self._step(s.text, calls_json, maybe_block)
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                step = None
        if release:
            step = step or Delta()
            step.content = release
        return step

    def _release(self, upto: int) -> str:
        """Content up to ``upto`` not sent yet."""
        s = self.s
        out = s.text[s.emitted : upto] if upto > s.emitted else ""
        s.emitted = max(s.emitted, upto)
        return out

    def _step(self, current: str, calls_json: str | None, maybe_block: bool) -> Delta | None:
        s = self.s
        try:
            parsed = json.loads(calls_json if calls_json else current)
            if isinstance(parsed, list):
                s.parsed = parsed
        except ValueError:
            pass
        search = _search_text(current, calls_json, maybe_block)
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
        # vLLM takes this shortcut when any call has empty arguments; only the call's
        # own empty arguments count here, so a later call's are not replaced by {}.
        empties = list(_EMPTY_ARGS_RE.finditer(search))
        own = [m for m in empties if _NAME_RE.match(search, m.start()) is not None]
        empty = next((m for m in own if _call_index(search, m.start(), names) == index), None)
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
