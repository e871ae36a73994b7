"""MiniCPM5 tool calls (``minicpm5``): XML blocks read whole one-shot and one reading per
chunk streamed, as vLLM 0.33.0 reads them (golden M4 records it)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.families.minicpm5 import MiniCPM5Tools, normalized, visible
from parsers.families.minicpm5_xml import ToolMaps, read_block
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.streams import run, stream

WEATHER = ToolSpec(
    "get_weather",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
FREE = ToolSpec("note", {"type": "object", "properties": {}})
TOOLS = ToolMaps.of((WEATHER, FREE))


def call(name: str, **params: str) -> str:
    body = "".join(f'<param name="{k}">{v}</param>' for k, v in params.items())
    return f'<function name="{name}">{body}</function>'


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            call("get_weather", city=" Paris ", days="3"),
            ("get_weather", {"city": " Paris ", "days": 3}),
        ),
        # Not XML (a bare "<"): the tag patterns read it, values stripped.
        (call("get_weather", city=" a < b "), ("get_weather", {"city": "a < b"})),
        (
            '<function name="get_weather"><param name="city"><![CDATA[x<y]]></param></function>',
            ("get_weather", {"city": "x<y"}),
        ),
        (
            call("get_weather", properties="{'city': 'Lyon', 'z': 1}"),
            ("get_weather", {"city": "Lyon"}),
        ),
        (
            call("note", anything="[1, 2]", flag="True"),
            ("note", {"anything": [1, 2], "flag": True}),
        ),
        (call("get_weather", days="2"), None),  # a required key missing
        (call("get_weather", city="a") + "x", ("get_weather", {"city": "a"})),
        ('<function name="get_weather"><param>Paris</param></function>', None),
        (call("unknown", city="a"), None),
    ],
)
def test_a_block_reads_as_vllm_reads_it(block: str, expected: Any) -> None:
    found = read_block(block, TOOLS)
    assert (found and (found.name, found.arguments)) == expected


def test_the_rewrites_and_the_visible_answer() -> None:
    assert normalized("<functionname='a'>\u0120x\u010a<paramname='b'>") == (
        "<function name='a'> x\n<param name='b'>"
    )
    assert visible("plan</think>\n answer") == "answer"
    assert visible("plan</think>  ") == "plan</think>  "


def test_one_shot_keeps_failed_blocks_as_content_and_a_set_fails_the_reading() -> None:
    tools = MiniCPM5Tools((WEATHER, FREE))
    found = tools.extract("Hi " + call("unknown", a="1") + " bye", "seed")
    assert (found.tools_called, found.content) == (
        False,
        'Hi <function name="unknown"><param name="a">1</param></function> bye',
    )
    text = call("note", s="{1, 2}")
    assert tools.extract(text, "seed") == tools.extract(text, "seed")
    assert tools.extract(text, "seed").content == text and not tools.extract(text, "seed").calls


@pytest.mark.parametrize(
    "text",
    [
        "Checking.\n" + call("get_weather", city="Paris", days="2") + "\nDone.",
        call("get_weather", city="A") + call("get_weather", city="B"),
        '<functionname="get_weather"><paramname="city">P</param></function>',
        call("note", s="{1, 2}") + " after",
    ],
)
def test_every_restore_point_streams_the_same(tokenizer: Tokenizer, text: str) -> None:
    factory = ParserFactory("minicpm5", None, True, tokenizer.vocabulary)
    opts = ParseOptions(tools=(WEATHER, FREE), tool_choice="auto")
    ids = tokenizer.encode(text)
    for chunks in ([[i] for i in ids], [ids[i : i + 3] for i in range(0, len(ids), 3)]):
        _, expected = run(tokenizer, factory, opts, chunks, "stop")
        for cut in range(len(chunks) + 1):
            assert stream(tokenizer, factory, opts, chunks, "stop", cut) == expected


def test_a_long_open_call_costs_each_token_once(tokenizer: Tokenizer) -> None:
    """Params of a tool with no schema keys, one token per chunk: no re-reading."""
    factory = ParserFactory("minicpm5", None, True, tokenizer.vocabulary)
    opts = ParseOptions(tools=(FREE,), tool_choice="auto")

    def cost(params: int) -> float:
        # The opening tag whole in the first chunk (else its start goes out as content).
        opener = tokenizer.encode('<function name="note">')
        body = "".join(f'<param name="k{i}">{i}</param>' for i in range(params))
        chunks = [opener] + [[i] for i in tokenizer.encode(body)]
        started = time.process_time()
        folded, _ = run(tokenizer, factory, opts, chunks, "length")
        # The last chunk adds the held "}" (the rest of the last reading), as vLLM does.
        assert json.loads(next(iter(folded.calls.values()))[1]) == {
            f"k{i}": i for i in range(params)
        }
        return (time.process_time() - started) / len(chunks)

    small, large = cost(100), cost(1600)
    assert large < 3 * small


def test_tags_run_into_their_name_split_across_chunks_cost_what_they_add(
    tokenizer: Tokenizer,
) -> None:
    """``<paramname=`` split across chunks in an open call: its space goes back in the
    text kept without reading the call again from its start."""
    factory = ParserFactory("minicpm5", None, True, tokenizer.vocabulary)
    opts = ParseOptions(tools=(FREE,), tool_choice="auto")

    def cost(params: int) -> float:
        opener = tokenizer.encode('<function name="note">')
        chunks = [opener]
        for i in range(params):
            chunks += [tokenizer.encode("<param"), tokenizer.encode(f'name="k{i}">{i}</param>')]
        started = time.process_time()
        folded, _ = run(tokenizer, factory, opts, chunks, "length")
        assert json.loads(next(iter(folded.calls.values()))[1]) == {
            f"k{i}": i for i in range(params)
        }
        return (time.process_time() - started) / len(chunks)

    small, large = cost(100), cost(400)
    assert large < 3 * small
