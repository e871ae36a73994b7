"""MiniCPM-V's reasoning (``minicpmv``, with Qwen3-Coder's calls) on a synthetic tokenizer:
Qwen3's vocabulary, ChatML turns and the reserved markers its parser drops."""

from __future__ import annotations

from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    PLAN,
    QWEN3_EOS,
    SYSTEM,
    TOOLS,
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


SYNTHETIC: dict[str, dict[str, Any] | None] = {MINICPMV: None}


CONFIGS = [
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
