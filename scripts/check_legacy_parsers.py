"""Stream generated ERNIE-4.5, Step-3, InternLM2, FunctionGemma, MiniCPM5 and Jamba outputs
through vLLM 0.33.0's parsers and ours.

Run it with the oracle's Python (vLLM 0.33.0 installed), from the repository:

    ../oracle-copy/venv/bin/python scripts/check_legacy_parsers.py [--outputs 3000] [--seed 0]
        [--only NAME]

The golden corpus (E1-E4, E6, T1, M4, T3) pins these parsers on a synthetic tokenizer; this compares
them with vLLM's classes directly on outputs no transcript holds: random runs of the
families' markers, call markup and text pieces (ERNIE's ``<0x0A>`` newline token
included), cut into random chunks. Each chunk goes to vLLM's legacy streaming methods
with the previous/current text and ids as its delegating parser passes them, and to our
streams; every chunk's delta (content, reasoning, each call piece's index, name and
arguments) must be equal, as must the one-shot readings and, at the end, the arguments
vLLM's server would add (``get_remaining_unstreamed_args``). Reasoning is compared up
to the chunk that ends it (vLLM stops asking the reasoning parser there). Prints the
counts and the first mismatches; the exit status is 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.reasoning.ernie45_reasoning_parser import Ernie45ReasoningParser
from vllm.reasoning.step3_reasoning_parser import Step3ReasoningParser
from vllm.tool_parsers.ernie45_tool_parser import Ernie45ToolParser
from vllm.tool_parsers.functiongemma_tool_parser import FunctionGemmaToolParser
from vllm.tool_parsers.internlm2_tool_parser import Internlm2ToolParser
from vllm.tool_parsers.jamba_tool_parser import JambaToolParser
from vllm.tool_parsers.minicpm5xml_tool_parser import MiniCPM5XMLToolParser
from vllm.tool_parsers.step3_tool_parser import Step3ToolParser

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parsers.families import ernie45, functiongemma, internlm, jamba, minicpm5, step3
from parsers.types import Delta, OutputRefused, ParseOptions, ToolSpec, Vocabulary

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": properties},
        },
    }
    for name, properties in (
        ("get_weather", {"city": {"type": "string"}, "n": {"type": "integer"}}),
        ("count", {"n": {"type": "null"}, "flag": {"type": "boolean"}, "x": {"type": "number"}}),
    )
]
REQUEST = ChatCompletionRequest(
    model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS
)
OPTIONS = ParseOptions(
    tools=tuple(ToolSpec(t["function"]["name"], t["function"]["parameters"]) for t in TOOLS),
    tool_choice="auto",
)
ERNIE_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


class Family:
    """One family's markers (tokens of their own), text pieces and whole calls."""

    def __init__(self, markers: list[str], pieces: list[str], calls: list[str]) -> None:
        self.markers = len(markers)
        self.vocab = {marker: i for i, marker in enumerate(markers)}
        self.texts = {i: "\n" if m == "<0x0A>" else m for m, i in self.vocab.items()}
        self.pieces = pieces
        self.calls = calls

    def output(self, rng: random.Random) -> list[list[int]]:
        """An output as chunks of ids: markers, pieces and whole calls at random."""
        ids: list[int] = []
        for _ in range(rng.randint(0, 30)):
            pick = rng.random()
            if pick < 0.25:
                ids.append(rng.randrange(self.markers))
            elif pick < 0.4:
                ids += self.encode(rng.choice(self.calls))
            else:
                ids += self.encode(rng.choice(self.pieces))
        chunks, at = [], 0
        while at < len(ids):
            size = rng.randint(1, 5)
            chunks.append(ids[at : at + size])
            at += size
        return chunks

    def encode(self, text: str) -> list[int]:
        """``text`` as its markers' ids and one id per other character."""
        ids = []
        while text:
            marker = next((m for m in self.vocab if text.startswith(m)), None)
            token = marker or text[0]
            if token not in self.vocab:
                self.vocab[token] = len(self.vocab)
                self.texts[self.vocab[token]] = token
            ids.append(self.vocab[token])
            text = text[len(token) :]
        return ids

    def tokenizer(self) -> Any:
        vocab = self.vocab

        class Tokenizer:
            def get_vocab(self) -> dict[str, int]:
                return dict(vocab)

        return Tokenizer()


ERNIE = Family(
    ["<think>", "</think>", "<response>", "</response>", "<tool_call>", "</tool_call>", "<0x0A>"],
    ["\n", "\n\n", " ", "{", "}", "hi", "é", "</tool", "_call>", "\x1c", '"', "<respon"],
    [ERNIE_CALL, ERNIE_CALL.replace("Paris", "Paris}"), '<tool_call>{"name": 5}</tool_call>'],
)
STEP3_CALL = (
    '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">\n'
    '<steptml:parameter name="city"> Paris </steptml:parameter>\n'
    '<steptml:parameter name="n">12</steptml:parameter>\n</steptml:invoke><｜tool_call_end｜>'
)
STEP3_TAIL = (step3.CALL_END, step3.SEP)
STEP3 = Family(
    ["<think>", "</think>", step3.BLOCK_BEGIN, step3.BLOCK_END, step3.CALL_BEGIN, *STEP3_TAIL],
    ["\n", " ", "x", '"', ">", '">', "<｜tool", "_calls_begin｜>", '<steptml:invoke name="'],
    [
        STEP3_CALL,
        STEP3_CALL.replace("get_weather", "count").replace('"n"', '"flag"'),
        step3.BLOCK_BEGIN + STEP3_CALL + STEP3_CALL + step3.BLOCK_END,
    ],
)


INTERNLM_CALL = (
    '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Paris"}}'
    "<|action_end|>"
)
INTERNLM = Family(
    ["<|action_start|>", "<|plugin|>", "<|action_end|>"],
    ["\n", " ", "hi", "é", '"', "{", "}", '"name": "f"', ', "arguments": {"a": [1, 2', "]}"],
    [INTERNLM_CALL, INTERNLM_CALL.replace('"Paris"', '"Par'), INTERNLM_CALL.replace("}}", "}")],
)
FUNCTIONGEMMA_CALL = (
    "<start_function_call>call:get_weather{city:<escape>Paris<escape>,"
    "days:<escape>2<escape>}<end_function_call>"
)
FUNCTIONGEMMA = Family(
    ["<start_function_call>", "<end_function_call>", "<escape>"],
    [
        *("call:", "get_weather", "{", "}", "city:", "a", ":", ",", " ", "é", "1", "\n"),
        *("<", "<s", "<e", "<st", "tart_function_call>", "nd_function_call>", "Paris", "x<"),
        *('"q"', "[1, 2]", "{}", "call:f{", "call:{", "call:g h{", "<escape", "_"),
    ],
    [
        FUNCTIONGEMMA_CALL,
        FUNCTIONGEMMA_CALL.replace("2<escape>}", "2<escape>,city:<escape>Rome<escape>}"),
        FUNCTIONGEMMA_CALL.replace("}<end_function_call>", ""),
        "<start_function_call>call:get_time{}<end_function_call>",
        "<start_function_call>call:f{a:<escape>[[1]]<escape>}<end_function_call>",
    ],
)
MINICPM5_CALL = '<function name="get_weather"><param name="city">Paris</param></function>'
MINICPM5 = Family(
    ["<|im_end|>"],
    [
        "\n",
        " ",
        "hi",
        "é",
        "<",
        "<func",
        "tion",
        ' name="get_weather">',
        '<param name="n">',
        "Paris",
        "</param>",
        "</function>",
        "<param>",
        "&amp;",
        "{1, 2}",
        "<![CDATA[x<]]>",
        "</think>",
        '<functionname="count">',
        '<paramname="flag">',
        "\u0120",
        "\u010a",
        "'",
        '"',
        "</fun",
        "ction>",
        "<function",
        "<paramname=",
        "true",
    ],
    [
        MINICPM5_CALL,
        MINICPM5_CALL.replace("Paris", "Paris < Lyon"),
        '<function name="count"><param name="flag">true</param><param name="x">1.5</param>'
        "</function>",
        '<functionname="get_weather"><paramname="city">A</param></function>',
        '<function name="get_weather"><param name="properties">{"city": "B", "n": 2}</param>'
        "</function>",
        '<function name="get_details_by_phone"><param name="phone">1</param></function>',
    ],
)
JAMBA_CALLS = [
    ("get_weather", {"city": "Paris", "n": 3}),
    ("count", {"x": {"deep": [1, {"y": "z"}], "s": "a, b"}, "flag": True}),
    ("get_weather", "Paris"),
    ("count", {}),
    ("get_weather", {"city": "Paris is  nice... really!!  ok\u3000 end", "s": ["a b", "c"]}),
]
JAMBA = Family(
    [jamba.START, jamba.END],
    [
        *("\n", " ", "hi", "é", '"', "'", "{", "}", "[", "]", ", ", ": ", "1", "2.5", "null"),
        *('"name": "count"', '"arguments": ', '{"city": "Par', 'is"}', "\\u00e9", "<tool_"),
        *("calls>", "</tool_", '{"name": "get_weather", "arguments": {"n": [1, 2'),
        *("!!", "...", "word ", "  ", "\u3000", "a.b", "é!"),
    ],
    [
        *(
            jamba.START + json.dumps([{"name": n, "arguments": a}]) + jamba.END
            for n, a in JAMBA_CALLS
        ),
        jamba.START + json.dumps([{"name": n, "arguments": a} for n, a in JAMBA_CALLS[:2]]),
        jamba.START + json.dumps([{"name": n, "arguments": a} for n, a in JAMBA_CALLS], indent=1),
        jamba.START + json.dumps([{"name": "count"}, {"name": 5, "arguments": {}}]) + jamba.END,
        jamba.START + '[{"name":"get_weather","arguments":{"city":"Tōkyō","n":1}}]' + jamba.END,
        # Punctuation that vLLM's common suffix reaches into (a rotated middle).
        jamba.START + '[{"name": "count", "arguments": {"a": "ab..x.!a! . .a..é.\u3000w "}}]',
    ],
)
# A parser that raises: vLLM's server fails the request (ours refuses it, OutputRefused).
RAISES = "raises"


def ours(delta: Delta | None) -> Any:
    if delta is None:
        return None
    calls = [(c.index, c.name, c.arguments or None) for c in delta.tool_calls]
    return delta.content or None, delta.reasoning, calls


def theirs(delta: Any) -> Any:
    if delta is None:
        return None
    calls = [
        (c.index, c.function.name if c.function else None, c.function.arguments or None)
        for c in delta.tool_calls or []
    ]
    return delta.content or None, getattr(delta, "reasoning", None), calls


def compare_tools(family: Family, vllm: Any, stream: Any, chunks: list[list[int]]) -> str:
    before, before_ids = "", []
    for chunk in chunks:
        text = "".join(family.texts[i] for i in chunk)
        now, now_ids = before + text, before_ids + chunk
        try:
            got = theirs(
                vllm.extract_tool_calls_streaming(
                    before, now, text, before_ids, now_ids, chunk, REQUEST
                )
            )
        except Exception:
            got = RAISES
        try:
            mine = ours(stream.stream(text, chunk))
        except OutputRefused:
            mine = RAISES
        if got != mine:
            return f"stream {text!r}: {got} against ours {mine}"
        if got == RAISES:
            return ""
        before, before_ids = now, now_ids
    remaining = vllm.get_remaining_unstreamed_args()
    return "" if remaining == stream.remaining_arguments() else f"remaining {remaining!r}"


def compare_reasoning(family: Family, vllm: Any, stream: Any, chunks: list[list[int]]) -> str:
    before, before_ids = "", []
    for chunk in chunks:
        text = "".join(family.texts[i] for i in chunk)
        got = vllm.extract_reasoning_streaming(
            before, before + text, text, before_ids, before_ids + chunk, chunk
        )
        mine = stream.stream(text, chunk)
        got_pair = None if got is None else (got.content, got.reasoning)
        if got_pair != (None if mine is None else (mine.content, mine.reasoning)):
            return f"reasoning {text!r}: {got_pair}"
        if stream.ended_by(chunk):
            break
        before, before_ids = before + text, before_ids + chunk
    return ""


def check(family: Family, rng: random.Random, build: Callable[[Family], Any]) -> str:
    chunks = family.output(rng)
    vllm_tools, vllm_reasoning, tools, reasoning, one_shot, thinking = build(family)
    problem = compare_tools(family, vllm_tools, tools, chunks)
    if vllm_reasoning is not None:
        problem = problem or compare_reasoning(family, vllm_reasoning, reasoning, chunks)
    text = "".join(family.texts[i] for chunk in chunks for i in chunk)
    if one_shot_theirs(vllm_tools, text) != one_shot_ours(one_shot, text):
        problem = problem or f"one-shot {text!r}"
    if vllm_reasoning is not None and vllm_reasoning.extract_reasoning(
        text, REQUEST
    ) != thinking.extract(text, None):
        problem = problem or f"one-shot reasoning {text!r}"
    return problem and f"{problem}\n  output {text!r}"


def one_shot_theirs(vllm_tools: Any, text: str) -> Any:
    """vLLM's one-shot reading, or how its server fails it (400 with the message, or 500)."""
    try:
        found = vllm_tools.extract_tool_calls(text, REQUEST)
    except ValueError as exc:
        return 400, str(exc)
    except Exception:
        return 500
    calls = [(c.function.name, c.function.arguments) for c in found.tool_calls]
    return found.tools_called, calls, found.content


def one_shot_ours(one_shot: Any, text: str) -> Any:
    """Ours, alike; where vLLM's server fails with a 500 ours refuses with a 400
    (docs/parity.md, internlm-unreadable-call)."""
    try:
        mine = one_shot.extract(text, "seed")
    except OutputRefused as exc:
        return 500 if str(exc) == internlm.UNREADABLE else (400, str(exc))
    return mine.tools_called, [(c.name, c.arguments) for c in mine.calls], mine.content


def ernie_parsers(family: Family) -> tuple[Any, ...]:
    vocab = Vocabulary(family.vocab)
    reasoning = ernie45.ErnieReasoning(vocab)
    tools = ernie45.ErnieToolStream(ernie45.ErnieMarkers(vocab), "seed", ernie45.ErnieToolState())
    return (
        Ernie45ToolParser(family.tokenizer()),
        Ernie45ReasoningParser(family.tokenizer()),
        tools,
        ernie45.ErnieReasoningStream(reasoning),
        ernie45.ErnieTools(),
        reasoning,
    )


def step3_parsers(family: Family) -> tuple[Any, ...]:
    reasoning = step3.Step3Reasoning(Vocabulary(family.vocab))
    vllm_tools = Step3ToolParser(family.tokenizer(), REQUEST.tools)
    tools = step3.Step3ToolStream(OPTIONS, "seed", step3.Step3ToolState())
    return (
        vllm_tools,
        Step3ReasoningParser(family.tokenizer()),
        tools,
        reasoning,
        step3.Step3Tools(OPTIONS),
        reasoning,
    )


def internlm_parsers(family: Family) -> tuple[Any, ...]:
    stream = internlm.InternlmStream("seed", internlm.InternlmState())
    return (
        Internlm2ToolParser(family.tokenizer()),
        None,
        stream,
        None,
        internlm.InternlmTools(),
        None,
    )


def functiongemma_parsers(family: Family) -> tuple[Any, ...]:
    stream = functiongemma.FunctionGemmaStream("seed", functiongemma.FunctionGemmaState())
    return (
        FunctionGemmaToolParser(family.tokenizer()),
        None,
        stream,
        None,
        functiongemma.FunctionGemmaTools(),
        None,
    )


def minicpm5_parsers(family: Family) -> tuple[Any, ...]:
    return (
        MiniCPM5XMLToolParser(family.tokenizer(), REQUEST.tools),
        None,
        minicpm5.MiniCPM5Stream("seed", OPTIONS.tools or (), minicpm5.MiniCPM5State()),
        None,
        minicpm5.MiniCPM5Tools(OPTIONS.tools or ()),
        None,
    )


def jamba_parsers(family: Family) -> tuple[Any, ...]:
    stream = jamba.JambaStream(family.vocab[jamba.START], "seed", jamba.JambaState())
    return JambaToolParser(family.tokenizer()), None, stream, None, jamba.JambaTools(), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="one family's name (default: all)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # vLLM logs every call it fails to read
    rng = random.Random(args.seed)
    failures = 0
    for name, family, build in (
        ("ernie45", ERNIE, ernie_parsers),
        ("step3", STEP3, step3_parsers),
        ("internlm", INTERNLM, internlm_parsers),
        ("functiongemma", FUNCTIONGEMMA, functiongemma_parsers),
        ("minicpm5", MINICPM5, minicpm5_parsers),
        ("jamba", JAMBA, jamba_parsers),
    ):
        if args.only not in (None, name):
            continue
        mismatches = [p for _ in range(args.outputs) if (p := check(family, rng, build))]
        print(f"{name}: {args.outputs} outputs, {len(mismatches)} mismatches")
        for problem in mismatches[:3]:
            print(" ", problem)
        failures += len(mismatches)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
