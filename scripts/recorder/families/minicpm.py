"""MiniCPM-V's reasoning (``minicpmv``, with Qwen3-Coder's calls) on a synthetic tokenizer:
Qwen3's vocabulary, ChatML turns and the reserved markers its parser drops; MiniCPM5's
XML calls (``minicpm5``) on Qwen3's vocabulary (its markup is read as text)."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    PLAN,
    QWEN3_EOS,
    SYSTEM,
    TIME,
    TOOLS,
    UNKNOWN,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
    engine_family_scenarios,
)
from recorder.formats import qwen3_xml_calls

MINICPMV = "minicpmv"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
# Literal escapes as MiniCPM-V writes them (a backslash and a letter), read back as newlines.
NL = "\\n"


def minicpmv_scenarios() -> list[Scenario]:
    """The engine-family list in Qwen3-Coder's markup, plus what MiniCPM-V adds: escaped
    newlines recovered outside code and LaTeX, the reserved markers dropped, and a
    ``<think>`` span dropped when thinking is off."""
    chat = _served(MINICPMV)
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}

    def answer(name: str, notes: str, output: str, **extra: Any) -> Scenario:
        return Scenario(name, notes, chat([ASK_SUM], **extra), [output])

    code = (
        f"Code:{NL}```python{NL}print('a{NL}b'){NL}```{NL}inline `x{NL}y` and $a{NL}b$, "
        f"$$x{NL}y$$, \\(p{NL}q\\) and \\[r{NL}s\\]{NL}end"
    )
    return [
        *engine_family_scenarios("qwen3_xml", MINICPMV),
        answer(
            "escaped_newlines",
            "literal \\n and \\r\\n in reasoning and answer become newlines",
            f"Step one.{NL}Step two.\\r\\nStep three.</think>Answer:{NL}- a{NL}- b\\rc",
        ),
        answer(
            "code_and_latex",
            "escapes inside code blocks, inline code and LaTeX stay as written",
            f"Plan.</think>{code}",
        ),
        answer(
            "backslash_runs",
            "doubled and tripled backslashes stay literal, a single one before n does not",
            "Think \\\\n and \\\\\\n.</think>a\\\\nb \\\\\\\\\\n c \\x \\",
        ),
        answer(
            "reasoning_ends_in_escape",
            "reasoning ending in a backslash, then an answer opening with n",
            f"Half an escape \\</think>n then {NL}two",
        ),
        answer(
            "reserved_markers",
            "reserved markers, as text and as tokens, dropped from reasoning and answer",
            "Plan<reserved_12> it<|reserved_13|>.</think>An<reserved_15>swer<|reserved_14|>.",
        ),
        answer(
            "thinking_off_stray_think",
            "thinking off: a <think> span in the answer is dropped, escapes recovered",
            f"Answer{NL}<think>hidden{NL}</think>line two<reserved_12>{NL}",
            **NO_THINKING,
        ),
        answer(
            "thinking_off_code",
            "thinking off: an answer of code and a trailing backtick",
            f"Run `a{NL}b`{NL}then ``",
            **NO_THINKING,
        ),
        Scenario(
            "cut_mid_escape",
            "an answer cut by length right after a backslash",
            chat([ASK_SUM]),
            [f"Plan.</think>One{NL}two\\"],
            finish="length",
        ),
        Scenario(
            "escaped_argument",
            "content with escapes, then a call whose value holds a literal \\n (kept)",
            chat(weather, **tools),
            [
                f"{PLAN}{NL}</think>Checking{NL}now."
                + qwen3_xml_calls([("get_weather", {"city": f"Paris{NL}France"})])
            ],
        ),
        Scenario(
            "hidden_reasoning",
            "include_reasoning false: escapes in the answer still recovered",
            chat([ASK_SUM], include_reasoning=False),
            [f"Reason{NL}more.</think>Answer{NL}here."],
        ),
        Scenario(
            "thinking_off_call",
            "thinking off: escaped content then a call",
            chat(weather, **tools, **NO_THINKING),
            [f"Let me{NL}check.{qwen3_xml_calls([WEATHER])}"],
        ),
        open_think_prompt(chat),
    ]


def open_think_prompt(chat: Any) -> Scenario:
    """Thinking off, yet the prompt ends in an open ``<think>`` (a continued message)."""
    return Scenario(
        "thinking_off_open_think_prompt",
        "thinking off, the prompt continues an assistant message opening <think>",
        chat(
            [ASK_SUM, {"role": "assistant", "content": "<think>\n"}],
            continue_final_message=True,
            add_generation_prompt=False,
            **NO_THINKING,
        ),
        [f"Plan{NL}it.</think>Answer{NL}here<reserved_13>."],
    )


def minicpmv_alone_scenarios() -> list[Scenario]:
    """The reasoning parser without a tool parser: what it leaves is content as it reads
    it (call markup included), with newlines recovered."""
    chat = _served(MINICPMV)
    weather = [SYSTEM, ASK_WEATHER]
    return [
        Scenario(
            "reason_answer",
            "reasoning then an answer with escapes",
            chat([ASK_SUM]),
            [f"Think{NL}twice.</think>17 × 23{NL}= **391**."],
        ),
        Scenario(
            "reasoning_only_length",
            "reasoning never closed, cut by length after a backslash",
            chat([ASK_SUM]),
            [f"Think{NL}twice \\"],
            finish="length",
        ),
        Scenario(
            "call_as_content",
            "call markup after reasoning stays content; escapes in it recovered",
            chat(weather),
            [f"{PLAN}</think>" + qwen3_xml_calls([("get_weather", {"city": f"Paris{NL}F"})])],
        ),
        Scenario(
            "thinking_off_stray_think",
            "thinking off: a <think> span stays in the answer (no parser reads it)",
            chat([ASK_SUM], **NO_THINKING),
            [f"Answer{NL}<think>hidden</think>two<reserved_14>"],
        ),
        Scenario(
            "reserved_in_reasoning",
            "reserved markers in reasoning dropped; code in the answer kept",
            chat([ASK_SUM]),
            [f"A<|reserved_12|>b<reserved_13>{NL}c</think>`x{NL}y`{NL}$z{NL}$"],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji around escapes",
            chat([ASK_SUM]),
            [f"東京{NL}🌤️</think>晴れ{NL}🗼"],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs",
            chat([ASK_SUM], n=2, logprobs=True, top_logprobs=2),
            [f"A{NL}b</think>391.", f"C</think>39{NL}1"],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "a usage-only final chunk",
            chat([ASK_SUM], stream_options={"include_usage": True}),
            [f"A{NL}</think>391{NL}"],
            usage_chunk=True,
            one_shot=False,
        ),
        open_think_prompt(chat),
    ]


MINICPM5 = "nemotron_v3"  # Qwen3's vocabulary and ChatML: the call markup is plain text
CUSTOMER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_customer_by_phone",
            "parameters": {
                "type": "object",
                "properties": {"phone_number": {"type": "string"}},
                "required": ["phone_number"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "toggle_roaming",
            "parameters": {
                "type": "object",
                "properties": {"line_id": {"type": "string"}, "enabled": {"type": "boolean"}},
                "required": ["line_id", "enabled"],
            },
        },
    },
]


def xml_call(name: str, args: dict[str, Any], quote: str = '"') -> str:
    """One MiniCPM5 call: ``<function name=N>`` with a ``<param name=K>`` per value."""
    params = "".join(
        f"<param name={quote}{key}{quote}>"
        f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}</param>"
        for key, value in args.items()
    )
    return f"<function name={quote}{name}{quote}>{params}</function>"


def minicpm5_scenarios() -> list[Scenario]:
    """MiniCPM5's tool parser alone: well-formed XML calls and the regex fallback, values
    typed by the schema, the wrappers and aliases it maps, blocks it refuses, and the
    usual request shapes."""
    chat = _served("minicpm5")
    weather = [SYSTEM, ASK_WEATHER]
    tools = {"tools": TOOLS}

    def call(name: str, notes: str, output: str, **extra: Any) -> Scenario:
        return Scenario(name, notes, chat(weather, **tools), [output], **extra)

    one = xml_call(*WEATHER)
    return [
        Scenario("plain_answer", "plain content", chat([ASK_SUM], **tools), ["17 × 23 = 391."]),
        call("one_call", "one call", one),
        call("two_calls", "two calls, newline between", f"{one}\n{xml_call(*TIME)}"),
        call("content_then_call", "text before the call", f"Let me check.\n{one}"),
        call("text_after_call", "text after the call", f"{one}\nDone."),
        call(
            "typed_values",
            "an integer parameter, single quotes, spaces around a value",
            xml_call("get_weather", {"city": " Paris ", "days": "3"}, quote="'"),
        ),
        call(
            "cdata_and_entities",
            "a CDATA value and an entity (XML decodes them)",
            '<function name="get_weather"><param name="city"><![CDATA[Paris <3]]></param>'
            '<param name="unit">cel&amp;sius</param></function>',
        ),
        call(
            "not_xml_fallback",
            "a value with a bare '<' and '&': the pattern fallback reads it",
            '<function name="get_weather"><param name="city"> Paris < Lyon & Co </param>'
            "</function>",
        ),
        call(
            "arguments_wrapper",
            "params inside an <arguments> element",
            '<function name="get_weather"><arguments><param name="city">Paris</param>'
            "</arguments></function>",
        ),
        call(
            "properties_wrapper",
            "an OpenAI-style properties wrapper, an extra key ignored",
            '<function name="get_weather"><param name="properties">'
            "{'city': 'Paris', 'days': 2, 'extra': 1}</param><param name=\"note\">x</param>"
            "</function>",
        ),
        call(
            "param_without_name",
            "a param without a name: the block stays text",
            '<function name="get_weather"><param>Paris</param></function>',
        ),
        call(
            "duplicate_param",
            "the same param twice: the block stays text",
            '<function name="get_weather"><param name="city">Paris</param>'
            '<param name="city">Lyon</param></function>',
        ),
        call("missing_required", "a required param missing", xml_call("get_weather", {"days": 2})),
        call("unknown_tool", "a tool the request lacks", xml_call(*UNKNOWN)),
        call(
            "collapsed_tags",
            "tag names run into their attribute (<functionname=, <paramname=)",
            '<functionname="get_weather"><paramname="city">Paris</paramname></function>'.replace(
                "</paramname>", "</param>"
            ),
        ),
        call(
            "set_literal",
            "a value that reads as a Python set (no JSON for it)",
            xml_call("get_weather", {"city": "Paris", "days": "{1, 2}"}),
        ),
        call(
            "think_then_call",
            "reasoning text closed by </think>, then a call",
            f"Plan.</think>\n{one}",
        ),
        call(
            "think_then_answer",
            "reasoning text closed by </think>, then an answer",
            "Plan.</think>\n\nSunny.",
        ),
        call(
            "function_prefix_text",
            "text that starts like a call tag but is not one",
            "Use <functions> here.",
        ),
        call("call_cut_length", "a call cut by length", one[:-20], finish="length"),
        call("cut_in_name", "a call cut inside its name tag", one[:12], finish="length"),
        Scenario(
            "alias",
            "an alias the parser maps to a declared tool",
            chat(weather, tools=CUSTOMER_TOOLS),
            [
                xml_call("get_details_by_phone", {"phone": "555-0100"})
                + xml_call("enable_roaming", {"line_id": "L1"})
            ],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required: a JSON list of {name, parameters}",
            chat(weather, **tools, tool_choice="required"),
            [json.dumps([{"name": WEATHER[0], "parameters": WEATHER[1]}])],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice: the output is the arguments alone",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [json.dumps(TIME[1])],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the markup is content",
            chat(weather, **tools, tool_choice="none"),
            [one],
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in text and a value",
            chat([ASK_JA], **tools),
            ["東京を調べます 🌤️\n" + xml_call("get_weather", {"city": "東京 🗼", "days": 2})],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            ["Sunny.", one],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [one],
            usage_chunk=True,
            one_shot=False,
        ),
    ]


SYNTHETIC: dict[str, dict[str, Any] | None] = {MINICPMV: None}


CONFIGS = [
    Config(
        "M4",
        _parsers(None, "minicpm5"),
        MINICPM5,
        minicpm5_scenarios(),
        eos=QWEN3_EOS,
        served="minicpm5",
    ),
    Config(
        "M5",
        _parsers("minicpmv", "qwen3_coder"),
        MINICPMV,
        minicpmv_scenarios(),
        eos=QWEN3_EOS,
        served=MINICPMV,
    ),
    Config(
        "M6",
        _parsers("minicpmv", None),
        MINICPMV,
        minicpmv_alone_scenarios(),
        eos=QWEN3_EOS,
        served=MINICPMV,
    ),
]
