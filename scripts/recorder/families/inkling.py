"""Inkling's message framing."""

from __future__ import annotations

import json
from typing import Any

from recorder.common import (
    ASK_JA,
    ASK_SUM,
    ASK_WEATHER,
    NAMED_TIME,
    NO_THINK,
    PLAN,
    PLAN_TWO,
    QWEN3_EOS,
    REASONING,
    SYSTEM,
    THINK,
    TIME,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _parsers,
    _served,
)

# --- Inkling (synthetic tokenizer) ----------------------------------------------------

INKLING = "inkling"  # the synthetic tokenizer's family (tests/support/synthetic_tokenizers.py)


MODEL = "<|message_model|>"


END = "<|end_message|>"


def ink_thinking(text: str, end: str = END) -> str:
    return f"{MODEL}<|content_thinking|>{text}{end}"


def ink_text(text: str, end: str = END) -> str:
    return f"{MODEL}<|content_text|>{text}{end}"


def ink_calls(calls: list[tuple[str, Any]], compact: bool = False) -> str:
    """Each call its own tool block: ``{"name": ..., "args": {...}}``."""
    separators = (",", ":") if compact else None
    blocks = []
    for name, args in calls:
        if isinstance(args, str):  # raw (malformed) args text
            body = f'{{"name": "{name}", "args": {args}}}'
        else:
            payload = {"name": name, "args": args}
            body = json.dumps(payload, ensure_ascii=False, separators=separators)
        blocks.append(f"{MODEL}<|content_invoke_tool_json|>{body}{END}")
    return "".join(blocks)


def inkling_scenarios(tools_parsed: bool) -> list[Scenario]:
    """Inkling's typed blocks: the coverage list, plus the prompt's three openings
    (a bare model message, thinking or text prefilled), a name in the message header,
    raw and error tool blocks, the end-sampling closer, a typed argument.
    ``tools_parsed``: requests with tools (vLLM renders them only with a tool parser)."""
    chat = _served(INKLING)
    tools = {"tools": TOOLS}
    weather = [SYSTEM, ASK_WEATHER]
    bare = lambda text: text.removeprefix(MODEL)  # noqa: E731 - the prompt opened it
    scenarios = [
        Scenario(
            "reason_answer",
            "a thinking block then a text block",
            chat([ASK_SUM]),
            [bare(ink_thinking(REASONING) + ink_text("17 × 23 = **391**."))],
        ),
        Scenario(
            "reasoning_only_length",
            "a thinking block cut by length",
            chat([ASK_SUM]),
            [bare(ink_thinking(REASONING, end=""))],
            finish="length",
        ),
        Scenario(
            "thinking_prefilled",
            "the prompt opens the thinking block (thinking: true)",
            chat([ASK_SUM], chat_template_kwargs=THINK),
            [f"{REASONING}{END}" + ink_text("391.")],
        ),
        Scenario(
            "text_prefilled",
            "the prompt opens the text block (thinking: false)",
            chat([ASK_SUM], chat_template_kwargs=NO_THINK),
            [f"17 × 23 = 391.{END}"],
        ),
        Scenario(
            "text_only",
            "a text block alone",
            chat([ASK_SUM]),
            [bare(ink_text("17 × 23 = 391."))],
        ),
        Scenario(
            "end_sampling",
            "thinking closed by <|content_model_end_sampling|>, then text",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN, end="<|content_model_end_sampling|>") + ink_text("391."))],
        ),
        Scenario(
            "explicit_header_text",
            "text in the model message header before the content-kind marker",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}answer<|content_text|>391.{END}"],
        ),
        Scenario(
            "header_cut_length",
            "output cut inside a message header",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}get_wea"],
            finish="length",
        ),
        Scenario(
            "header_closed",
            "a header closed by <|end_message|> without a content kind",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN)) + f"{MODEL}stray{END}" + ink_text("391.")],
        ),
        Scenario(
            "call_markup_no_tools",
            "a tool block in a request without tools",
            chat([ASK_SUM]),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
        ),
    ]
    if not tools_parsed:
        return scenarios
    scenarios += [
        Scenario(
            "reason_one_call",
            "thinking then one tool block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
        ),
        Scenario(
            "reason_two_calls",
            "thinking then two tool blocks",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN_TWO) + ink_calls([WEATHER, TIME]))],
        ),
        Scenario(
            "call_without_thinking",
            "a tool block straight away",
            chat(weather, **tools),
            [bare(ink_calls([WEATHER]))],
        ),
        Scenario(
            "content_then_call",
            "a text block, then a tool block",
            chat(weather, **tools),
            [bare(ink_text("Let me check.") + ink_calls([WEATHER]))],
        ),
        Scenario(
            "text_after_calls",
            "thinking, a tool block, then a text block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]) + ink_text("Done."))],
        ),
        Scenario(
            "header_name_call",
            "the function name in the message header before the tool block",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN)) + ink_calls([TIME]).replace(MODEL, MODEL + "get_time")],
        ),
        Scenario(
            "compact_typed_arguments",
            "compact JSON, a string where the schema wants an integer",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", {"city": "Paris", "days": "2"})], compact=True))],
        ),
        Scenario(
            "spaced_typed_arguments",
            "JSON as json.dumps writes it, a string where the schema wants an integer",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", {"city": "Paris", "days": "2"})]))],
        ),
        Scenario(
            "args_before_name",
            "the args member before the name",
            chat(weather, **tools),
            [
                bare(
                    f'{MODEL}<|content_invoke_tool_json|>{{"args": {{"timezone": "UTC"}}, '
                    f'"name": "get_time"}}{END}'
                )
            ],
        ),
        Scenario(
            "args_not_object",
            "an args member that is not an object",
            chat(weather, **tools),
            [bare(ink_calls([("get_time", '"UTC"')]))],
        ),
        Scenario(
            "unknown_tool",
            "a call to a tool the request does not have",
            chat(weather, **tools),
            [bare(ink_calls([("get_stock", {"symbol": "ACME", "n": 2})]))],
        ),
        Scenario(
            "tool_text_and_error",
            "raw and error tool blocks read as visible text",
            chat(weather, **tools),
            [
                bare(ink_thinking(PLAN))
                + f"{MODEL}<|content_invoke_tool_text|>get_weather(Paris){END}"
                + f"{MODEL}<|content_tool_error|>bad call{END}"
            ],
        ),
        Scenario(
            "tool_choice_required",
            "tool_choice required (parsed like auto)",
            chat(weather, **tools, tool_choice="required"),
            [bare(ink_calls([WEATHER]))],
        ),
        Scenario(
            "tool_choice_named",
            "named tool_choice (parsed like auto)",
            chat(weather, **tools, tool_choice=NAMED_TIME),
            [bare(ink_calls([TIME]))],
        ),
        Scenario(
            "tool_choice_none",
            "tool_choice none: the tool block is read and dropped",
            chat(weather, **tools, tool_choice="none"),
            [bare(ink_thinking(PLAN) + ink_text("Sure.") + ink_calls([WEATHER]))],
        ),
        Scenario(
            "malformed_arguments",
            "malformed JSON inside the args member",
            chat(weather, **tools),
            [bare(ink_calls([("get_weather", '{"city": "Paris", "unit": }')]))],
        ),
        Scenario(
            "call_cut_length",
            "a tool block cut by length in its arguments",
            chat(weather, **tools),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))[:-30]],
            finish="length",
        ),
        Scenario(
            "multibyte",
            "CJK and emoji in reasoning, answer and a string argument",
            chat([ASK_JA], **tools),
            [
                bare(
                    ink_thinking("東京の天気を調べる 🌤️ 必要がある。")
                    + ink_text("晴れ 🌞。")
                    + ink_calls([("get_weather", {"city": "東京 🗼", "days": 2})])
                )
            ],
        ),
        Scenario(
            "n2_logprobs",
            "n=2 with logprobs: one choice answers, the other calls a tool",
            chat(weather, **tools, n=2, logprobs=True, top_logprobs=2),
            [
                bare(ink_thinking(PLAN) + ink_text("Sunny.")),
                bare(ink_thinking(PLAN) + ink_calls([WEATHER])),
            ],
            logprobs=2,
        ),
        Scenario(
            "usage_chunk",
            "stream_options.include_usage: a usage-only final chunk",
            chat(weather, **tools, stream_options={"include_usage": True}),
            [bare(ink_thinking(PLAN) + ink_calls([WEATHER]))],
            usage_chunk=True,
            one_shot=False,
        ),
    ]
    return scenarios


SYNTHETIC: dict[str, dict[str, Any] | None] = {INKLING: None}


CONFIGS = [
    Config(
        "I1",
        _parsers(INKLING, INKLING),
        INKLING,
        inkling_scenarios(True),
        eos=QWEN3_EOS,
        served=INKLING,
    ),
    Config(
        "I2",
        _parsers(INKLING, None),
        INKLING,
        inkling_scenarios(False),
        eos=QWEN3_EOS,
        served=INKLING,
    ),
    Config(
        "I3",
        _parsers(None, INKLING),
        INKLING,
        inkling_scenarios(True),
        eos=QWEN3_EOS,
        served=INKLING,
    ),
]
