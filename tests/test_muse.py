"""Muse: where headers start in each parser's reading, calls whose arguments vLLM's reader
raises on, a prompt that already opened a tool channel, and linear cost on long held
tails (the shared harnesses cover chunking, snapshots and the golden transcripts)."""

from __future__ import annotations

import time

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.families.muse_atem import reasoning_hold, tool_hold
from parsers.families.muse_frames import Reading, frames
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import Assembled
from tests.support.streams import run

TOOLS = (ToolSpec("f", {"type": "object", "properties": {"s": {"type": "string"}}}),)
CALL = '<atem:invoke name="f">\n<atem:parameter name="n">{}</atem:parameter>\n</atem:invoke>'


def _read(text: str, reading: Reading) -> list[tuple[str | None, str, int]]:
    return [(f.recipient, body, f.start) for f, body in frames(text, reading)]


@pytest.mark.parametrize(
    ("text", "reasoning", "tool"),
    [
        # Whitespace before a header: the tool parser's header takes it, the other's not.
        ("a to=x<|message|>b", [("x", "b", 2)], [("x", "b", 1)]),
        # A recipient glued to text: the reasoning parser's runs from the first ``to=``.
        ("ato=to=x<|message|>b", [("to=x", "b", 1)], [("x", "b", 4)]),
        # ``<|start|>`` and a newline before ``assistant``: only the tool parser's pattern.
        (
            "<|start|>\nassistant to=x<|message|>b",
            [("x", "b", 20)],
            [("x", "b", 0)],
        ),
        # The reasoning parser's body ends at ``<|start|>``; the tool parser's is cut there.
        ("to=self<|message|>a<|start|>b", [("self", "a", 0)], [("self", "a", 0)]),
        # A bare header.
        (" <|message|>b<|eom|>", [(None, "b", 1)], [(None, "b", 0)]),
    ],
)
def test_headers_start_where_each_parser_reads_them(
    text: str, reasoning: list[tuple[str | None, str, int]], tool: list[tuple[str | None, str, int]]
) -> None:
    assert _read(text, Reading.REASONING) == reasoning
    assert _read(text, Reading.TOOL) == tool


def test_glimmer_reads_a_bare_message_marker_as_body_text() -> None:
    text = "to=self<|message|>a<|message|>b<|eom|>"
    assert _read(text, Reading.GLIMMER) == [("self", "a<|message|>b", 0)]


@pytest.mark.parametrize(
    ("tail", "reasoning", "tool"),
    [
        ("abc", 0, 0),
        ("ab to", 3, 0),
        ("ab to=fn", 6, 6),
        ("ab to=fn\n", 7, 7),  # ``$`` also matches before a final newline
        ("ab<|eo", 4, 4),
        ("ab to=x<|eo", 9, 4),  # the reasoning parser's holds compose
        ("ab <", 1, 1),
    ],
)
def test_held_tails(tail: str, reasoning: int, tool: int) -> None:
    assert reasoning_hold(tail) == reasoning
    assert tool_hold(tail) == tool


def _factory(tokenizer: Tokenizer, reasoning: str | None, tool: str | None) -> ParserFactory:
    return ParserFactory(tool, reasoning, True, tokenizer.vocabulary)


def test_an_argument_too_deep_for_json_fails_the_call_as_in_vllm(tokenizer: Tokenizer) -> None:
    """vLLM's reader raises there: one-shot answers the whole text as content, and the
    stream sends nothing from that chunk on."""
    output = " to=f<|message|><atem:function_calls>\n" + CALL.format("[" * 5000) + " tail"
    options = ParseOptions(tools=TOOLS, tool_choice="auto")
    parsed = _factory(tokenizer, None, "muse").for_request(options).parse(output, [], "seed")
    assert parsed.tool_calls == [] and parsed.content == output
    ids = tokenizer.encode(output)
    folded, _ = run(
        tokenizer, _factory(tokenizer, None, "muse"), options, [[i] for i in ids], "stop"
    )
    assert folded == Assembled()


def test_a_prompt_whose_turn_opened_a_tool_channel_hands_off_at_once(tokenizer: Tokenizer) -> None:
    prompt = (
        "<|start|>user<|message|>hi<|eot|><|start|>assistant to=f<|message|><atem:function_calls>"
    )
    factory = _factory(tokenizer, "muse", "muse")
    stream = factory.stream_for_request(ParseOptions(tools=TOOLS, tool_choice="auto"), "seed")
    assert stream.reasoning is not None
    assert stream.reasoning.is_reasoning_end(tokenizer.encode(prompt))
    # Call markup in an earlier turn, or in the user's message, does not.
    earlier = (
        prompt + "</atem:function_calls><|eom|><|start|>user<|message|>x<|eot|><|start|>assistant"
    )
    assert not stream.reasoning.is_reasoning_end(tokenizer.encode(earlier))


@pytest.mark.parametrize("reasoning", ["muse", "muse_glimmer"])
def test_long_held_tails_cost_linear_time(tokenizer: Tokenizer, reasoning: str) -> None:
    """A recipient name that never ends, a reasoning body and an open call, each one
    token per chunk: doubling the output at most about doubles the time."""

    def seconds(n: int) -> float:
        output = (
            " to=self<|message|>"
            + "word " * n
            + "<|eom|><|start|>assistant to="
            + "a" * n
            + "<|message|><atem:function_calls>\n"
            + CALL.format('"' + "x" * n)
        )
        ids = tokenizer.encode(output)
        factory = _factory(tokenizer, reasoning, reasoning)
        options = ParseOptions(tools=TOOLS, tool_choice="auto")
        began = time.process_time()
        run(tokenizer, factory, options, [[i] for i in ids], "stop")
        return time.process_time() - began

    seconds(200)
    small, large = seconds(1500), seconds(3000)
    assert large < 3.0 * small + 0.05
