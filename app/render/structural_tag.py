"""The structural tag vLLM puts in ``structured_outputs`` to force tool calls.

For ``tool_choice: "required"`` or a named function, vLLM's tool parser constrains the
output to calls in the model's format: with Hermes-style tags, each callable tool is a
tag that opens ``<tool_call>{"name": "NAME", "arguments": `` (with or without a newline
after the tag) and closes ``}</tool_call>``, its arguments free JSON unless the tool is
``strict``. Calls repeat with no separator, at least one; a named function, or
``parallel_tool_calls: false``, stops after the first. ``auto`` gets a tag only when a
tool is strict: text, or calls once a call's opening tag is written. The tag is sent as
the JSON text xgrammar's models dump to, field for field; it replaces any response
format (``auto`` with a strict tool and a response format, which vLLM combines into one
grammar, is left unconstrained here: README).
"""

from __future__ import annotations

import json
from typing import Any

_ARGUMENTS = '", "arguments": '


def _schema_format(function: dict[str, Any]) -> dict[str, Any]:
    strict = function.get("strict") is True
    parameters = function.get("parameters")
    return {
        "type": "json_schema",
        "json_schema": (parameters if parameters is not None else True) if strict else True,
        "style": "json",
        "any_order": False,
        "max_whitespace_cnt": None,
        "excludes": [],
    }


def forced_calls(
    tools: list[dict[str, Any]],
    choice: str | dict[str, Any] | None,
    parallel: bool | None,
    tags: tuple[str, str],
) -> str | None:
    """The structural tag's JSON for the request's tool_choice, or None when vLLM adds
    none (``auto`` without a strict tool, ``none``)."""
    if choice == "auto":
        if not any(tool["function"].get("strict") is True for tool in tools):
            return None
        listed, trigger = tools, True
    elif choice == "required":
        listed, trigger = tools, False
    elif isinstance(choice, dict):
        name = choice["function"]["name"]
        listed, trigger = [t for t in tools if t["function"]["name"] == name], False
    else:
        return None
    start, end = tags
    shapes = ((start + '\n{"name": "', "}\n" + end), (start + '{"name": "', "}" + end))
    entries = [
        {
            "type": "tag",
            "begin": begin + tool["function"]["name"] + _ARGUMENTS,
            "content": _schema_format(tool["function"]),
            "end": close,
        }
        for tool in listed
        for begin, close in shapes
    ]
    single = isinstance(choice, dict) or parallel is False
    calls: dict[str, Any]
    if trigger:  # text, or calls once the opening tag is written
        calls = {"type": "triggered_tags", "triggers": [start], "tags": entries}
        calls |= {"at_least_one": False, "stop_after_first": single, "excludes": []}
    else:
        calls = {"type": "tags_with_separator", "tags": entries, "separator": ""}
        calls |= {"at_least_one": True, "stop_after_first": single}
    return json.dumps({"type": "structural_tag", "format": calls})
