"""How each family's output spells tool calls, and a malformed call body in each spelling."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# --- tool-call formats ------------------------------------------------------------


def _value(value: Any) -> tuple[str, str]:
    """A DSML parameter's text and its ``string`` attribute."""
    if isinstance(value, str):
        return value, "true"
    return json.dumps(value, ensure_ascii=False), "false"


@dataclass(frozen=True)
class Dsml:
    """One DSML dialect: the V3.2, V4 and V4.1 markup differ only in their tags."""

    block: str
    invoke: str
    parameter: str

    def calls(self, calls: list[tuple[str, Any]]) -> str:
        text = f"<｜DSML｜{self.block}>\n"
        for name, args in calls:
            text += f'<｜DSML｜{self.invoke} name="{name}">\n'
            if isinstance(args, str):  # raw (malformed) parameter markup
                text += args
            else:
                for key, value in args.items():
                    body, is_string = _value(value)
                    text += (
                        f'<｜DSML｜{self.parameter} name="{key}" string="{is_string}">'
                        f"{body}</｜DSML｜{self.parameter}>\n"
                    )
            text += f"</｜DSML｜{self.invoke}>\n"
        return text + f"</｜DSML｜{self.block}>"


def _json_args(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def v3_calls(calls: list[tuple[str, Any]]) -> str:
    """DeepSeek-V3: a type, the name, then the arguments in a fenced JSON block."""
    body = "".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{_json_args(args)}\n```"
        "<｜tool▁call▁end｜>"
        for name, args in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def v31_calls(calls: list[tuple[str, Any]]) -> str:
    """DeepSeek-V3.1: the name, then plain JSON arguments."""
    body = "".join(
        f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{_json_args(args)}<｜tool▁call▁end｜>"
        for name, args in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def minimax_calls(calls: list[tuple[str, Any]]) -> str:
    """MiniMax M2: ``<invoke>`` blocks of ``<parameter>`` tags in a ``<minimax:tool_call>``."""
    text = "<minimax:tool_call>\n"
    for name, args in calls:
        text += f'<invoke name="{name}">\n'
        if isinstance(args, str):  # raw (malformed) parameter markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f'<parameter name="{key}">{body}</parameter>\n'
        text += "</invoke>\n"
    return text + "</minimax:tool_call>"


def kimi_calls(calls: list[tuple[str, Any]]) -> str:
    """Kimi K2: a section of calls, each headed by its id ``functions.NAME:INDEX``."""
    body = "".join(
        f"<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>"
        f"{_json_args(args)}<|tool_call_end|>"
        for index, (name, args) in enumerate(calls)
    )
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


def glm_calls(calls: list[tuple[str, Any]]) -> str:
    """GLM-4.5/4.7: the name, then key/value tag pairs (values as text)."""
    texts = []
    for name, args in calls:
        text = f"<tool_call>{name}\n"
        if isinstance(args, str):  # raw (malformed) pair markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"<arg_key>{key}</arg_key>\n<arg_value>{body}</arg_value>\n"
        texts.append(text + "</tool_call>")
    return "\n".join(texts)


def longcat_calls(calls: list[tuple[str, Any]]) -> str:
    """LongCat-Flash: Hermes' JSON calls between ``<longcat_tool_call>`` tags."""
    return "".join(
        "<longcat_tool_call>\n"
        + (args if isinstance(args, str) else json.dumps({"name": name, "arguments": args}))
        + "\n</longcat_tool_call>"
        for name, args in calls
    )


def qwen3_xml_calls(calls: list[tuple[str, Any]]) -> str:
    """Qwen3-Coder's XML calls (Nemotron 3, Step and Seed-OSS write them too):
    ``<function=NAME>`` with ``<parameter=KEY>`` lines per value."""
    texts = []
    for name, args in calls:
        text = f"<tool_call>\n<function={name}>\n"
        if isinstance(args, str):  # raw (malformed) parameter markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"<parameter={key}>\n{body}\n</parameter>\n"
        texts.append(text + "</function>\n</tool_call>")
    return "\n".join(texts)


def ernie_calls(calls: list[tuple[str, Any]]) -> str:
    """ERNIE-4.5: Hermes' JSON calls, each on its own lines between ``<tool_call>`` tags."""
    return "\n".join(
        "<tool_call>\n"
        + (args if isinstance(args, str) else json.dumps({"name": name, "arguments": args}))
        + "\n</tool_call>"
        for name, args in calls
    )


def step3_calls(calls: list[tuple[str, Any]], kind: str = "function") -> str:
    """Step-3: ``steptml`` invokes, each in its call markers, in one block."""
    texts = []
    for name, args in calls:
        text = f'<｜tool_call_begin｜>{kind}<｜tool_sep｜><steptml:invoke name="{name}">\n'
        if isinstance(args, str):  # raw (malformed) parameter markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f'<steptml:parameter name="{key}">{body}</steptml:parameter>\n'
        texts.append(text + "</steptml:invoke><｜tool_call_end｜>")
    return "<｜tool_calls_begin｜>" + "".join(texts) + "<｜tool_calls_end｜>"


def hy_calls(calls: list[tuple[str, Any]]) -> str:
    """HY-V4: ``<tool_call>NAME`` then ``<arg_key>K</arg_key><arg_value>V</arg_value>``
    pairs (values as text), all in ``<tool_calls>``."""
    texts = []
    for name, args in calls:
        text = f"<tool_call>{name}"
        if isinstance(args, str):  # raw (malformed) pair markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"<arg_key>{key}</arg_key><arg_value>{body}</arg_value>"
        texts.append(text + "</tool_call>")
    return "<tool_calls>" + "".join(texts) + "</tool_calls>"


M3_NAMESPACE = "]<]minimax[>["


def minimax_m3_calls(calls: list[tuple[str, Any]]) -> str:
    """MiniMax M3: M2's ``<invoke>`` blocks with every tag namespaced and each parameter
    an element named after it."""
    ns = M3_NAMESPACE
    text = f"{ns}<tool_call>\n"
    for name, args in calls:
        text += f'{ns}<invoke name="{name}">\n'
        if isinstance(args, str):  # raw (malformed) element markup
            text += args
        else:
            for key, value in args.items():
                body = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text += f"{ns}<{key}>{body}{ns}</{key}>\n"
        text += f"{ns}</invoke>\n"
    return text + f"{ns}</tool_call>"


def hy_v3_calls(calls: list[tuple[str, Any]]) -> str:
    """HY-V3: HY-V4's markup with ``<tool_sep>`` after the name and a newline between a
    key and its value."""
    text = hy_calls(calls)
    for name, _ in calls:
        text = text.replace(f"<tool_call>{name}", f"<tool_call>{name}<tool_sep>", 1)
    return text.replace("</arg_key><arg_value>", "</arg_key>\n<arg_value>")


def plamo3_calls(calls: list[tuple[str, Any]]) -> str:
    """PLaMo 3: a requests block of requests, each a name block then a JSON arguments
    block (``<|plamo:constrain|>json<|plamo:msg|>`` before the JSON)."""
    begin, end = "<|plamo:begin_", "<|plamo:end_"
    body = "".join(
        f"{begin}tool_request:plamo|>{begin}tool_name:plamo|>{name}{end}tool_name:plamo|>"
        f"{begin}tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
        f"{_json_args(args)}{end}tool_arguments:plamo|>{end}tool_request:plamo|>"
        for name, args in calls
    )
    return f"{begin}tool_requests:plamo|>{body}{end}tool_requests:plamo|>"


FORMATS: dict[str, Callable[[list[tuple[str, Any]]], str]] = {
    "v3": v3_calls,
    "v31": v31_calls,
    "v32": Dsml("function_calls", "invoke", "parameter").calls,
    "v4": Dsml("tool_calls", "invoke", "parameter").calls,
    "v41": Dsml(" calls", " invoke", " parameter").calls,
    "minimax": minimax_calls,
    "kimi": kimi_calls,
    "glm": glm_calls,
    "longcat": longcat_calls,
    "qwen3_xml": qwen3_xml_calls,
    "ernie": ernie_calls,
    "step3": step3_calls,
    "minimax_m3": minimax_m3_calls,
    "hy": hy_calls,
    "hy_v3": hy_v3_calls,
    "plamo3": plamo3_calls,
}


MALFORMED = {
    "v3": '{"city": "Paris", "unit": }',
    "v31": '{"city": "Paris", "unit": }',
    "v32": '<｜DSML｜parameter name="days" string="false">[1, 2</｜DSML｜parameter>\n',
    "v4": '<｜DSML｜parameter name="days" string="false">[1, 2</｜DSML｜parameter>\n',
    "v41": '<｜DSML｜ parameter name="days" string="false">[1, 2</｜DSML｜ parameter>\n',
    "minimax": '<parameter name="days">[1, 2</parameter>\n<parameter name=>x</parameter>\n',
    "kimi": '{"city": "Paris", "unit": }',
    "glm": "<arg_key>days</arg_key>\n<arg_value>[1, 2</arg_value>\n",
    "longcat": '{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}',
    "qwen3_xml": "<parameter=days>\n[1, 2\n</parameter>\n<parameter=>x</parameter>\n",
    "ernie": '{"name": "get_weather", "arguments": {"city": "Paris", "unit": }}',
    "step3": (
        '<steptml:parameter name="days">[1, 2\n<steptml:parameter name=>x</steptml:parameter>\n'
    ),
    "minimax_m3": f"{M3_NAMESPACE}<days>[1, 2{M3_NAMESPACE}</days>\n"
    f"{M3_NAMESPACE}<>x{M3_NAMESPACE}</>\n{M3_NAMESPACE}<unit>celsius{M3_NAMESPACE}</unit>\n",
    "hy": (
        "<arg_key>days</arg_key><arg_value>[1, 2</arg_value><arg_key>city</arg_key>\n<arg_value>x"
    ),
    "hy_v3": "<arg_key>days</arg_key>\n<arg_value>[1, 2</arg_value>\n<arg_key>unit</arg_key>",
    "plamo3": '{"city": "Paris", "unit": }',
}
