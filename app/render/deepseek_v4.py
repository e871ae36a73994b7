"""DeepSeek-V4's prompt format, as vLLM 0.33.0 renders it (it ships no chat template).

vLLM picks this encoder for a model whose architecture is DeepSeek-V4's and writes the
prompt in Python: a BOS; in thinking mode a reasoning-effort preamble; the system text
with the request's tools (a JSON schema per line under DSML calling instructions) on the
first system message, or on one made for them; ``<｜User｜>`` before user and developer
text; tool results folded into the user turn after the calls, as ``<tool_result>``
blocks in the calls' order; earlier assistant turns with their reasoning and DSML calls
and an end-of-sentence; and ``<｜Assistant｜>`` with ``<think>`` (thinking) or
``</think>`` (chat) where the model answers. In thinking mode, unless the conversation
has tools or ``drop_thinking`` is off, turns before the last user message lose their
reasoning and developer messages. A message's ``task`` asks for one of DeepSeek's
classification outputs instead of an answer.

Switches are template kwargs, read as vLLM reads them: ``thinking`` or
``enable_thinking`` (thinking unless one is set and neither is true),
``reasoning_effort`` (``none`` is chat mode; ``max``; ``low``, ``minimal``, ``medium``
say nothing; anything else is the high preamble), ``drop_thinking`` and ``tools``.
Completions with a ``suffix`` become fill-in-the-middle prompts.

The work is one pass over the messages, and the text is at most a constant per message
more than the request holds (the tools' schemas once per message that carries them),
with the render deadline checked between messages.
"""

from __future__ import annotations

import json
import time
from typing import Any

from app.render.template import ContentFormat, RenderTimeout
from app.wire.errors import BadRequest

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
REMINDER = "<｜latest_reminder｜>"
THINK = "<think>"
END_THINK = "</think>"
DSML = "｜DSML｜"
FIM = ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")

# A message's task asks for a classification output: its token follows the message.
TASKS = {
    "action": "<｜action｜>",
    "query": "<｜query｜>",
    "authority": "<｜authority｜>",
    "domain": "<｜domain｜>",
    "title": "<｜title｜>",
    "read_url": "<｜read_url｜>",
}

EFFORT_PREAMBLES = {
    "low": "",
    "high": (
        "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
        "You MUST be very thorough in your thinking and comprehensively decompose the "
        "problem to resolve the root cause, rigorously stress-testing your logic against "
        "all potential paths, edge cases, and adversarial scenarios.\n"
        "Explicitly write out your entire deliberation process, documenting every "
        "intermediate step, considered alternative, and rejected hypothesis to ensure "
        "absolutely no assumption is left unchecked.\n\n"
    ),
    "max": (
        "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
        "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to "
        "chance: exhaustively decompose the problem into its most fundamental components, "
        "trace every causal chain to its root, and resolve the underlying cause rather "
        "than any surface symptom.\n"
        "Do not stop reasoning until you have independently verified the solution from "
        "multiple angles and are certain that no assumption remains unchecked and no "
        "error remains undiscovered.\n\n"
    ),
}
_LOW_EFFORTS = frozenset({"low", "minimal", "medium"})

TOOLS_PREAMBLE = f"""## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{DSML}tool_calls>" block like the following:

<{DSML}tool_calls>
<{DSML}invoke name="$TOOL_NAME">
<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>
...
</{DSML}invoke>
<{DSML}invoke name="$TOOL_NAME2">
...
</{DSML}invoke>
</{DSML}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {THINK}), you MUST output your complete reasoning inside {THINK}...{END_THINK} BEFORE any tool calls or final response.

Otherwise, output directly after {END_THINK} with tool calls or final response.

### Available Tool Schemas

"""  # noqa: E501 (the model's own words, one paragraph a line)
TOOLS_CLOSING = (
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
    "invoke tool calls.\n"
)

# Roles _drop_thinking keeps before the last user message.
_KEPT_ROLES = frozenset({"user", "system", "tool", "latest_reminder", "direct_search_results"})


class DeepseekV4Encoder:
    """Renders a conversation (vLLM's, content as parts) to DeepSeek-V4's prompt text."""

    content_format: ContentFormat = "openai"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def render(self, conversation: list[dict[str, Any]], kwargs: dict[str, Any]) -> str:
        """The prompt text for the conversation under the request's template kwargs."""
        thinking, effort = _modes(kwargs)
        messages = _with_tools(conversation, kwargs.get("tools"))
        messages = _sorted_results(_fold_tool_results(messages))
        drop = bool(kwargs.get("drop_thinking", True))
        if any(message.get("tools") for message in messages):
            drop = False  # a conversation with tools keeps its reasoning
        if thinking and drop:
            messages = _drop_thinking(messages)
        turn = _Turn(messages, thinking, drop, effort)
        deadline = time.monotonic() + self.timeout
        parts = [BOS]
        for index in range(len(messages)):
            if time.monotonic() > deadline:
                raise RenderTimeout(
                    f"rendering the prompt took longer than {self.timeout:g} s "
                    "(--render-timeout); the request is too large."
                )
            parts.append(turn.message(index))
        return "".join(parts)

    @staticmethod
    def fill_in_middle(prompt: str, suffix: str) -> str:
        """A completion's text and suffix as DeepSeek's fill-in-the-middle prompt."""
        return f"{FIM[0]}{prompt}{FIM[1]}{suffix}{FIM[2]}"


def _modes(kwargs: dict[str, Any]) -> tuple[bool, str | None]:
    """Thinking or chat, and the effort preamble's level, from the kwargs."""
    if "thinking" in kwargs or "enable_thinking" in kwargs:
        thinking = bool(kwargs.get("thinking")) or bool(kwargs.get("enable_thinking"))
    else:
        thinking = True
    effort = kwargs.get("reasoning_effort")
    if not isinstance(effort, str):
        return thinking, "high" if thinking else None
    if effort == "none":
        return False, None
    if effort == "max":
        return thinking, "max"
    return thinking, "low" if effort in _LOW_EFFORTS else "high"


def _with_tools(conversation: list[dict[str, Any]], tools: Any) -> list[dict[str, Any]]:
    """The request's tools go on the first system message, or on one made for them."""
    messages = list(conversation)
    if tools is None or (isinstance(tools, list | dict | str) and not tools):
        return messages
    if not isinstance(tools, list):
        raise BadRequest("the tools given to DeepSeek-V4's prompt encoder must be a list.")
    at = next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)
    if at is None:
        messages.insert(0, {"role": "system", "tools": tools})
    else:
        messages[at] = {**messages[at], "tools": tools}
    return messages


def _text(content: Any) -> str:
    """A message's content parts as one text, blank-line separated."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n\n".join(str(part.get("text", "")) for part in content)


def _fold_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results and consecutive user messages become one user message of blocks
    (``blocks``: text or ``(call id, result)``); after a user message with a task, a
    user message starts a new one (a task on a joined message is dropped, as vLLM's)."""
    folded: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        last = folded[-1] if folded else None
        joinable = last is not None and last.get("role") == "user" and "blocks" in last
        if role == "tool":
            call_id = message.get("tool_call_id")
            block = (call_id if isinstance(call_id, str) else "", _text(message.get("content")))
            if last is not None and joinable:
                last["blocks"].append(block)
            else:
                folded.append({"role": "user", "blocks": [block]})
        elif role == "user":
            text = _text(message.get("content", ""))
            if last is not None and joinable and last.get("task") is None:
                last["blocks"].append(text)
            else:
                user: dict[str, Any] = {"role": "user", "content": text, "blocks": [text]}
                if "task" in message:
                    user["task"] = message["task"]
                folded.append(user)
        else:
            folded.append(message)
    return folded


def _sorted_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each user turn's tool results in the order of the latest turn's calls."""
    order: dict[Any, int] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            order = {}
            for index, call in enumerate(message["tool_calls"]):
                call_id = call.get("id") or call.get("function", {}).get("id", "")
                if call_id and isinstance(call_id, str):
                    order[call_id] = index
        elif role == "user" and "blocks" in message and order:
            blocks = message["blocks"]
            results = [block for block in blocks if isinstance(block, tuple)]
            if len(results) > 1:
                ranked = iter(sorted(results, key=lambda block: order.get(block[0], 0)))
                message["blocks"] = [
                    next(ranked) if isinstance(block, tuple) else block for block in blocks
                ]
    return messages


def _last_user(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") in ("user", "developer"):
            return index
    return -1


def _drop_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Before the last user message: assistant turns lose their reasoning, developer
    and other messages go."""
    last_user = _last_user(messages)
    kept = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in _KEPT_ROLES or index >= last_user:
            kept.append(message)
        elif role == "assistant":
            kept.append({k: v for k, v in message.items() if k != "reasoning"})
    return kept


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except ValueError:  # a lone surrogate
        return json.dumps(value, ensure_ascii=True)


def _tools_section(tools: Any) -> str:
    if not isinstance(tools, list):
        raise BadRequest("a message's tools must be a list.")
    schemas = "\n".join(_json(_function(tool)) for tool in tools)
    return f"\n\n{TOOLS_PREAMBLE}{schemas}{TOOLS_CLOSING}"


def _function(tool: Any) -> Any:
    if not isinstance(tool, dict) or "function" not in tool:
        raise BadRequest("each tool given to DeepSeek-V4's prompt encoder needs a function.")
    return tool["function"]


def _calls(calls: list[dict[str, Any]]) -> str:
    """An assistant turn's tool calls as the DSML block the model writes."""
    invokes = []
    for call in calls:
        function = call.get("function") or {}
        arguments = function.get("arguments")  # an object: the conversation parsed it
        if not isinstance(arguments, dict):
            arguments = {}
        parameters = "\n".join(_parameter(key, value) for key, value in arguments.items())
        invokes.append(
            f'<{DSML}invoke name="{function.get("name")}">\n{parameters}\n</{DSML}invoke>'
        )
    joined = "\n".join(invokes)
    return f"\n\n<{DSML}tool_calls>\n{joined}\n</{DSML}tool_calls>"


def _parameter(name: str, value: Any) -> str:
    """One argument: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return f'<{DSML}parameter name="{name}" string="true">{value}</{DSML}parameter>'
    return f'<{DSML}parameter name="{name}" string="false">{_json(value)}</{DSML}parameter>'


class _Turn:
    """Renders message ``index`` of the prepared conversation with what follows it."""

    def __init__(
        self, messages: list[dict[str, Any]], thinking: bool, drop: bool, effort: str | None
    ) -> None:
        self.messages = messages
        self.thinking = thinking
        self.drop = drop
        self.effort = effort or "low"
        self.last_user = _last_user(messages)

    def message(self, index: int) -> str:
        message = self.messages[index]
        role = message.get("role")
        prompt = EFFORT_PREAMBLES[self.effort] if index == 0 and self.thinking else ""
        if role == "system":
            prompt += _text(message.get("content"))
            if message.get("tools"):
                prompt += _tools_section(message["tools"])
        elif role == "developer":
            content = _text(message.get("content"))
            if not content:
                raise BadRequest(f"Invalid message for role `{role}`: {message}")
            prompt += USER + content
            if message.get("tools"):
                prompt += _tools_section(message["tools"])
        elif role == "user":
            prompt += USER + "\n\n".join(
                f"<tool_result>{block[1]}</tool_result>" if isinstance(block, tuple) else block
                for block in message["blocks"]
            )
        elif role == "latest_reminder":
            prompt += REMINDER + _text(message.get("content"))
        elif role == "assistant":
            prompt += self._assistant(index, message)
        else:
            raise BadRequest(f"Invalid role: {role}")
        return prompt + self._opening(index, message)

    def _assistant(self, index: int, message: dict[str, Any]) -> str:
        calls = _calls(message["tool_calls"]) if message.get("tool_calls") else ""
        after_task = index > 0 and self.messages[index - 1].get("task") is not None
        thought = ""
        if self.thinking and not after_task and (not self.drop or index > self.last_user):
            reasoning = message.get("reasoning") or ""
            if not isinstance(reasoning, str):
                raise BadRequest("an assistant message's reasoning must be a string.")
            thought = reasoning + END_THINK
        return f"{thought}{_text(message.get('content'))}{calls}{EOS}"

    def _opening(self, index: int, message: dict[str, Any]) -> str:
        """What opens the model's next output after this message, if it is the model's
        turn next: a task's token, or the assistant's marker and thinking switch."""
        last = index + 1 == len(self.messages)
        following = None if last else self.messages[index + 1].get("role")
        if not last and following not in ("assistant", "latest_reminder"):
            return ""
        task = message.get("task")
        if task is not None:
            if task not in TASKS:
                raise BadRequest(f"Invalid task: '{task}'. Valid tasks are: {list(TASKS)}")
            if task != "action":
                return TASKS[task]
            return ASSISTANT + (THINK if self.thinking else END_THINK) + TASKS[task]
        role = message.get("role")
        if role in ("user", "developer") or (
            role == "system" and (last or following == "assistant")
        ):
            opens = self.thinking and (not self.drop or index >= self.last_user)
            return ASSISTANT + (THINK if opens else END_THINK)
        return ""
