"""Inkling (``inkling`` reasoning and tools) with the synthetic test tokenizer
(tests/support/synthetic_tokenizers.py: Qwen3's vocabulary plus Inkling's markers as
single special tokens).

The hand-written cases are what vLLM 0.33.0's derender server answered for the same
outputs (tests/golden/golden-I1 holds the transcripts); the reading of a call's
``args`` member is checked against a plain re-reading of the whole body at every
character, which is what vLLM does; generated outputs check every chunking and a
snapshot restored at any chunk.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.inkling_args import ArgsReading, member_arguments
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec
from tests.support.parity import chunked
from tests.support.streams import PROPS, assemble, run, stream
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer

TOOLS = (
    ToolSpec(
        "get_weather",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    ),
    ToolSpec("get_time", {"type": "object", "properties": {"tz": {"type": "string"}}}),
)
MODEL, END = "<|message_model|>", "<|end_message|>"
THINK, TEXT, CALL = "<|content_thinking|>", "<|content_text|>", "<|content_invoke_tool_json|>"


@pytest.fixture(scope="module")
def ink(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The synthetic Inkling tokenizer."""
    return load_tokenizer(str(write_synthetic_tokenizer("inkling", tmp_path_factory.mktemp("i"))))


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


def call(body: str) -> str:
    return f"{MODEL}{CALL}{body}{END}"


# ------------------------------------------------------------------ as vLLM answers


def test_blocks_split_into_reasoning_content_and_a_call(ink: Tokenizer) -> None:
    """vLLM: the thinking block is reasoning, text blocks are content (also after a
    call), the call's arguments are its ``args`` object as written."""
    factory = ParserFactory("inkling", "inkling", True, ink.vocabulary)
    body = '{"name": "get_time", "args": {"tz": "UTC"}}'
    text = f"{THINK}Plan. {END}{call(body)}{MODEL}{TEXT}Done.{END}"
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert (parsed.reasoning, parsed.content) == ("Plan.", "Done.")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("get_time", '{"tz": "UTC"}')]
    folded = assemble(stream(ink, factory, options(), [[i] for i in ink.encode(text)]))
    assert (folded.reasoning, folded.content) == ("Plan.", "Done.")
    assert folded.calls == {0: ["get_time", '{"tz": "UTC"}']}


def test_a_compact_body_retyped_by_the_schema_loses_its_last_value(ink: Tokenizer) -> None:
    """vLLM: once the args object closes it is typed by the schema (``"2"`` -> ``2``)
    and written out again; a compact body then no longer extends what was streamed,
    so the stream stops at ``"days":`` while one-shot has the whole typed object."""
    factory = ParserFactory("inkling", None, True, ink.vocabulary)
    text = call('{"name":"get_weather","args":{"city":"Paris","days":"2"}}')
    parsed = factory.for_request(options()).parse(text, None, "seed")
    assert parsed.tool_calls[0].arguments == '{"city": "Paris", "days": 2}'
    deltas = stream(ink, factory, options(), [[i] for i in ink.encode(text)])
    pieces = [c.arguments for d in deltas if d is not None for c in d.tool_calls]
    assert pieces == [None, '{"city":"', "Paris", '","days":']


def test_the_prompt_decides_where_the_stream_starts(ink: Tokenizer) -> None:
    """vLLM: a prompt that opens the thinking block makes the output reasoning from the
    start; one-shot reads from a message header whatever the prompt, so there the
    reasoning is content."""
    factory = ParserFactory("inkling", "inkling", True, ink.vocabulary)
    text = f"Plan.{END}{MODEL}{TEXT}391.{END}"
    prompt = ink.encode(f"{MODEL}{TEXT}hi{END}{MODEL}{THINK}")
    parsed = factory.for_request(options()).parse(text, prompt, "seed")
    assert (parsed.reasoning, parsed.content) == (None, "Plan.391.")
    session = StreamSession(ink, factory.stream_for_request(options(), "seed"), prompt)
    deltas = [session.feed([i], [i], None)[0] for i in ink.encode(text)]
    folded = assemble(deltas)
    assert (folded.reasoning, folded.content) == ("Plan.", "391.")


# ------------------------------------------------------------------ the args reading


def _reference(body: str, string_keys: list[str] | None) -> str | None:
    """vLLM's answer for a whole body: the ``args`` object as written (None: not there
    yet, or not an object), cut to what later text cannot change. Read plainly, from
    the start, as vLLM reads it after every character."""
    depth, in_string, escape, start, last = 0, False, False, -1, None
    for i, ch in enumerate(body):
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1:
                    last = body[start + 1 : i]
        elif ch == '"':
            in_string, start = True, i
        elif ch == ":" and depth == 1 and last == "args":
            rest = body[i + 1 :].lstrip(" \t\r\n")
            if not rest or rest[0] != "{":
                return None
            return _safe(_object(rest), string_keys)
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return None


def _object(text: str) -> str:
    depth, in_string, escape = 0, False, False
    for i, ch in enumerate(text):
        if escape:
            escape = False
        elif in_string:
            escape, in_string = ch == "\\", ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "{}":
            depth += 1 if ch == "{" else -1
            if depth == 0:
                return text[: i + 1]
    return text


def _safe(obj: str, string_keys: list[str] | None) -> str:
    depth, in_string, escape, start = 0, False, False, -1
    pending: str | None = None
    colon, key = -1, None
    for i, ch in enumerate(obj):
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1:
                    pending = obj[start + 1 : i]
        elif ch == '"':
            in_string, start = True, i
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == ":" and depth == 1:
            colon, key, pending = i, pending, None
    if colon < 0:
        return ""
    end = colon + 1
    while end < len(obj) and obj[end] in " \t\r\n":
        end += 1
    if end >= len(obj) or obj[end] != '"':
        return obj[:end]
    if string_keys is not None and key not in string_keys:
        return obj[:end]
    escape = False
    for i in range(end + 1, len(obj)):
        if escape:
            escape = False
        elif obj[i] == "\\":
            escape = True
        elif obj[i] == '"':
            return obj[:i]
    return obj


PIECES = [
    '{"name": "get_weather", "args": ',
    '{"args":',
    '"args"',
    "args",
    '{"city": "Pa',
    'ris", ',
    '"days": ',
    "2",
    '"2"',
    ", ",
    "}",
    "{",
    "[",
    "]",
    ":",
    '"',
    '\\"',
    "\\",
    " ",
    '"x": {"y": [1, "}"]}',
    '"name": "args"',
]


@given(
    parts=st.lists(st.sampled_from(PIECES), max_size=14),
    keys=st.sampled_from([None, ["city"], []]),
)
def test_the_reading_is_vllms_whole_reading_at_every_character(
    parts: list[str], keys: list[str] | None
) -> None:
    body = "".join(parts)
    reading = ArgsReading()
    for n, ch in enumerate(body, 1):
        reading.read(body, ch, n - 1)
        expected = _reference(body[:n], keys)
        if expected is None:
            assert reading.phase in ("search", "value", "not_object")
            continue
        assert reading.start >= 0
        assert body[reading.start : reading.safe_end(keys)] == expected
    whole = member_arguments(body)
    if whole is not None and reading.start >= 0:
        assert whole == body[reading.start : reading.span_end()]


# ------------------------------------------------------------------ generated outputs

FEW = settings(PROPS, max_examples=25)

_args = st.fixed_dictionaries(
    {"city": st.sampled_from(["Paris", "東京 🗼", 'a "q" }']), "days": st.sampled_from([2, "3"])}
)


@st.composite
def outputs(draw: st.DrawFn) -> str:
    """Blocks of every kind. Neither thinking that ends in whitespace nor a text block
    of whitespace alone: vLLM's engine sends either or drops it depending on whether
    the text after it shares its chunk (docs/parity.md, engine-held-reasoning-whitespace
    and engine-whitespace-beside-calls), and ours reproduces that."""
    out = ""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["think", "text", "call", "raw", "header"]))
        if kind == "think":
            out += f"{MODEL}{THINK}{draw(st.sampled_from(['Plan.', '考える 🤔', '']))}{END}"
        elif kind == "text":
            out += f"{MODEL}{TEXT}{draw(st.sampled_from(['Sure.', 'Ok. ', '晴れ 🌞']))}{END}"
        elif kind == "call":
            separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
            body = {"name": "get_weather", "args": draw(_args)}
            out += call(json.dumps(body, ensure_ascii=False, separators=separators))
        elif kind == "raw":
            out += f"{MODEL}<|content_invoke_tool_text|>get_weather(x){END}"
        else:
            out += f"{MODEL}get_time{CALL}" + '{"name": "get_time", "args": {"tz": "UTC"}}' + END
    return out.removeprefix(MODEL)


@FEW
@given(output=outputs(), cuts=st.lists(st.integers(0, 200), max_size=12), cut=st.integers(0, 200))
def test_tool_streams_assemble_alike_in_any_chunking_and_after_a_restore(
    ink: Tokenizer, output: str, cuts: list[int], cut: int
) -> None:
    factory = ParserFactory("inkling", None, True, ink.vocabulary)
    ids = ink.encode(output)
    baseline, _ = run(ink, factory, options(), [[i] for i in ids], "stop")
    chunks = chunked(ids, cuts)
    folded, deltas = run(ink, factory, options(), chunks, "stop")
    assert folded == baseline, output
    restored = stream(ink, factory, options(), chunks, "stop", cut % (len(chunks) + 1))
    assert restored == deltas


@FEW
@given(output=outputs(), cuts=st.lists(st.integers(0, 200), max_size=12), cut=st.integers(0, 200))
def test_reasoning_and_tools_restore_mid_stream_identically(
    ink: Tokenizer, output: str, cuts: list[int], cut: int
) -> None:
    factory = ParserFactory("inkling", "inkling", True, ink.vocabulary)
    chunks = chunked(ink.encode(output), cuts)
    _, expected = run(ink, factory, options(), chunks, "length")
    assert stream(ink, factory, options(), chunks, "length", cut % (len(chunks) + 1)) == expected
