"""OpenAI chat messages to the conversation a chat template reads, as vLLM builds it.

Text parts are joined by newlines for a template that reads a string, or kept as
``{"type": "text", "text": ...}`` parts for one that loops over parts; an assistant's
tool-call arguments become objects (templates print them with ``tojson``; none, or
anything but a JSON object, is ``{}``); reasoning is given under both names templates
use; a tool result's text parts are one string; a ``task`` marker is kept, and a
developer message carries its ``tools`` (or null); a system message loses Claude Code's
billing header line.
"""

from __future__ import annotations

import json
from typing import Any

from app.render.template import ContentFormat
from app.wire.errors import InvalidBody, InvalidParameter


def conversation(
    messages: list[dict[str, Any]], content_format: ContentFormat
) -> list[dict[str, Any]]:
    """The template's messages for the request's."""
    return [_message(message, content_format) for message in messages]


def _texts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):  # vLLM's request schema refuses it
        raise InvalidBody(
            "1 validation error:\n  a message's content must be a string or a list of "
            "content parts",
            "body.messages",
        )
    texts = []
    for part in content:
        if not isinstance(part, dict):
            raise InvalidParameter("content parts must be objects.", "messages")
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "refusal":
            texts.append(str(part.get("refusal", "")))
        else:
            raise InvalidParameter(
                f"content parts of type {kind!r} are not supported by this server "
                "(text only: it renders no images, audio or video).",
                "messages",
            )
    return texts


_BILLING_HEADER = "x-anthropic-billing-header"


def _without_billing_header(texts: list[str]) -> list[str]:
    """A system text's first line that is Claude Code's billing header goes (it changes
    every request, so it would defeat the prefix cache), as vLLM drops it."""
    kept = []
    for text in texts:
        if text.startswith(_BILLING_HEADER):
            text = text.partition("\n")[2]
            if not text:
                continue
        kept.append(text)
    return kept


def _message(message: dict[str, Any], content_format: ContentFormat) -> dict[str, Any]:
    role = message.get("role")
    if not isinstance(role, str):  # vLLM's request schema refuses it
        raise InvalidBody(
            "1 validation error:\n  every message needs a role, a string", "body.messages"
        )
    texts = _texts(message.get("content"))
    if role == "system":
        texts = _without_billing_header(texts)
    content: Any
    if content_format == "openai":
        content = [{"type": "text", "text": text} for text in texts]
    else:
        content = "\n".join(texts)
    result: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None:
            result["tool_calls"] = [_call(call) for call in calls]
            if not result["tool_calls"]:
                del result["tool_calls"]
        reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = message.get("reasoning_content")
        if reasoning is not None:
            result["reasoning"] = result["reasoning_content"] = reasoning
    elif role == "tool":
        if "tool_call_id" in message:
            result["tool_call_id"] = message["tool_call_id"]
        if isinstance(content, list):
            result["content"] = "\n".join(texts)
    if isinstance(message.get("name"), str):
        result["name"] = message["name"]
    if isinstance(message.get("task"), str):  # a DeepSeek-V4 task marker
        result["task"] = message["task"]
    if role == "developer":  # a developer message may bring its own tools
        result["tools"] = message.get("tools")
    return result


def _call(call: object) -> dict[str, Any]:
    """A tool call as templates read it: arguments an object (invalid JSON, or JSON
    that is not an object, becomes ``{}`` so the conversation can go on)."""
    if not isinstance(call, dict):
        raise InvalidParameter("assistant tool_calls entries must be objects.", "tool_calls")
    function = call.get("function")
    if call.get("type", "function") != "function" or not isinstance(function, dict):
        raise InvalidParameter(
            "chat completions only support assistant tool_calls of type 'function'.",
            "tool_calls",
        )
    if not isinstance(function.get("name"), str):  # vLLM's request schema refuses it
        raise InvalidBody(
            "1 validation error:\n  an assistant tool call's function needs a name",
            "body.messages",
        )
    copied: dict[str, Any] = dict(function)
    arguments = copied.get("arguments")
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments else {}
        except ValueError:
            parsed = {}
    copied["arguments"] = parsed if isinstance(parsed, dict) else {}
    return {**call, "function": copied}
