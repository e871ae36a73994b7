"""llama3_json streaming reads each call once: same deltas as the re-reading stream.

``ReferenceStream`` is the stream as it was before it kept finished calls (it re-reads
every call on every chunk, as vLLM does, and was checked equal to vLLM 0.33.0), with
the stream's end as vLLM's server has it (the unstreamed arguments added to a last
delta that carries a call piece) and the complete calls a coarse chunking left out
settled; the kept-calls stream must emit exactly its deltas for any chunking, on
generated calls and on hostile ones (long strings, escapes, deep nesting, separators,
malformed JSON).
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

import partial_json_parser
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from partial_json_parser.core.options import Allow

from parsers.families.llama3_json import (
    _DEPTH_MARGIN,
    _SEPARATOR,
    _UNPARSABLE,
    BOT_TOKEN,
    REREAD_FREE,
    REREAD_PER_CHAR,
    Llama3JsonStream,
    _complete,
    _loads_partial,
)
from parsers.ids import opening_call_delta
from parsers.readers.partialjson import common_length
from parsers.types import Delta, DeltaToolCall
from tests.support.outputs import llama_output
from tests.support.streams import PROPS


class ReferenceStream:
    """The re-reading stream (commit 9fe8f34), kept as the oracle."""

    def __init__(self, id_seed: str) -> None:
        self.id_seed = id_seed
        self.text = ""
        self.passthrough = False
        self.current = -1
        self.name_sent = False
        self.streamed: list[str] = []
        self.previous: list[Any] = []
        self.named: list[int] = []
        self.sent: dict[int, str] = {}
        self.advanced = False  # the last step started a call

    def finish(self) -> Delta | None:
        """Complete calls get their name and the rest of their arguments (unless empty);
        an open call its name once that string is closed."""
        if self.passthrough or not (self.text.startswith(BOT_TOKEN) or self.text.startswith("{")):
            return None
        calls: list[DeltaToolCall] = []
        for index, (call, start, complete) in enumerate(self._final_calls()):
            name = call.get("name")
            if not complete and index not in self.named:
                try:
                    name = _loads_partial(self.text[start:], Allow.ALL & ~Allow.STR)[0].get("name")
                except _UNPARSABLE:
                    name = None
            if not isinstance(name, str) or not name:
                break
            if index not in self.named:
                calls.append(opening_call_delta(self.id_seed, index, name))
                self.named.append(index)
            arguments = call.get("arguments")
            if not complete or not arguments:
                continue
            text = json.dumps(arguments, ensure_ascii=False)
            sent = self.sent.get(index, "")
            if text.startswith(sent) and text != sent:
                calls.append(DeltaToolCall(index=index, arguments=text[len(sent) :]))
                self.sent[index] = text
        return Delta(tool_calls=calls) if calls else None

    def remaining_arguments(self) -> str:
        """vLLM's ``get_remaining_unstreamed_args``: the last call of the last reading
        that was kept, against what was sent. After a step that starts a call (which
        keeps no reading) nothing: vLLM compares the reading before with the text just
        sent for that call, which differs only where a key given twice made readings
        contradict each other (docs/parity.md, llama3-json-unread-arguments)."""
        if not self.previous or self.advanced:
            return ""
        index = len(self.previous) - 1
        arguments = self.previous[index].get("arguments", {})
        if isinstance(arguments, str):
            expected = arguments
        else:
            expected = json.dumps(arguments, ensure_ascii=False)
        actual = self.streamed[index] if index < len(self.streamed) else ""
        rest = expected[len(actual) :] if expected.startswith(actual) else ""
        self.sent[index] = self.sent.get(index, "") + rest
        return rest

    def _final_calls(self) -> list[tuple[dict[str, Any], int, bool]]:
        text = self.text
        start = len(BOT_TOKEN) if text.startswith(BOT_TOKEN) else 0
        calls: list[tuple[dict[str, Any], int, bool]] = []
        while start < len(text):
            try:
                obj, end = _loads_partial(text[start:], Allow.ALL)
            except _UNPARSABLE:
                break
            if not isinstance(obj, dict):
                break
            if "parameters" in obj and "arguments" not in obj:
                obj["arguments"] = obj["parameters"]
            calls.append((obj, start, _complete(text[start : start + end])))
            start += end + len(_SEPARATOR)
        return calls

    def stream(self, text: str) -> Delta | None:
        self.advanced = False
        if self.passthrough:
            return Delta(content=text)
        self.text += text
        if not (self.text.startswith(BOT_TOKEN) or self.text.startswith("{")):
            if self.text and not BOT_TOKEN.startswith(self.text):
                self.passthrough, self.text = True, ""
            return Delta(content=text)
        try:
            delta = self._calls()
        except _UNPARSABLE:
            return None
        for call in delta.tool_calls if delta is not None else ():
            if call.name is not None:
                self.named.append(call.index)
            if call.arguments is not None:
                self.sent[call.index] = self.sent.get(call.index, "") + call.arguments
        return delta

    def _calls(self) -> Delta | None:
        current = self.text
        flags = Allow.ALL if self.name_sent else Allow.ALL & ~Allow.STR
        calls: list[Any] = []
        complete: list[bool] = []
        start = len(BOT_TOKEN) if current.startswith(BOT_TOKEN) else 0
        try:
            while start < len(current):
                obj, end = _loads_partial(current[start:], flags)
                complete.append(_complete(current[start : start + end]))
                start += end + len(_SEPARATOR)
                if "parameters" in obj:
                    if "arguments" in obj:
                        raise ValueError("a call has both parameters and arguments")
                    obj["arguments"] = obj["parameters"]
                calls.append(obj)
        except partial_json_parser.core.exceptions.MalformedJSON:
            return None
        if not calls:
            return None
        call: dict[str, Any] = calls[self.current] if self.current < len(calls) else {}
        self.advanced = len(calls) > self.current + 1
        if self.advanced:
            finished: list[DeltaToolCall] = []
            if self.current >= 0:
                name = call.get("name")
                if not self.name_sent and name:
                    finished.append(opening_call_delta(self.id_seed, self.current, name))
                arguments = call.get("arguments")
                if arguments:
                    text = json.dumps(arguments, ensure_ascii=False)
                    tail = text[len(self.streamed[self.current]) :]
                    self.streamed[self.current] += tail
                    finished.append(DeltaToolCall(index=self.current, arguments=tail))
            self.current += 1
            self.name_sent = False
            self.streamed.append("")
            return Delta(tool_calls=finished) if finished else None
        delta = None
        if not self.name_sent:
            name = call.get("name")
            if name:
                delta = Delta(tool_calls=[opening_call_delta(self.id_seed, self.current, name)])
                self.name_sent = True
        else:
            arguments = call.get("arguments")
            if arguments:
                sent = len(self.streamed[self.current])
                text = json.dumps(arguments, ensure_ascii=False)
                before = self.previous[self.current].get("arguments")
                piece: str | None = None
                if complete[self.current]:
                    piece = text[sent:]
                elif before:
                    before_text = json.dumps(before, ensure_ascii=False)
                    if text != before_text:
                        piece = text[sent : common_length(before_text, text)]
                if piece is not None:
                    delta = Delta(tool_calls=[DeltaToolCall(index=self.current, arguments=piece)])
                    self.streamed[self.current] += piece
        self.previous = calls
        return delta


def pieces_of(output: str, cuts: list[int]) -> list[str]:
    bounds = sorted({c % (len(output) + 1) for c in cuts} | {0, len(output)})
    return [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def ended(stream: Llama3JsonStream | ReferenceStream, delta: Delta | None) -> Delta | None:
    """The last chunk's step as the stream processor ends it: a delta carrying a call
    piece gets the unstreamed arguments."""
    if delta is not None and delta.tool_calls:
        last = delta.tool_calls[-1]
        last.arguments = (last.arguments or "") + stream.remaining_arguments()
    return delta


def assembled(stream: Llama3JsonStream | ReferenceStream, pieces: list[str]) -> list[list[str]]:
    """The calls ([name, arguments]) a stream of ``pieces`` assembles."""
    calls: list[list[str]] = []
    deltas = [stream.stream(piece) for piece in pieces]
    if deltas:
        deltas[-1] = ended(stream, deltas[-1])
    for delta in [*deltas, stream.finish()]:
        for call in delta.tool_calls if delta is not None else ():
            if call.index == len(calls):
                calls.append(["", ""])
            calls[call.index][0] += call.name or ""
            calls[call.index][1] += call.arguments or ""
    return calls


def assert_muted_message(pieces: list[str]) -> None:
    """A muted call (docs/parity.md, llama3-json-unread-arguments): the calls named as
    the reference names them; each complete call's arguments those of the final reading
    wherever it extends what was sent before (empty arguments: nothing)."""
    output = "".join(pieces)
    final = ReferenceStream("seed")
    final.text = output
    calls = assembled(Llama3JsonStream("seed"), pieces)
    reference = assembled(ReferenceStream("seed"), pieces)
    assert [name for name, _ in calls] == [name for name, _ in reference], output
    for (_, arguments), (call, _, complete) in zip(calls, final._final_calls(), strict=False):
        dump = json.dumps(call.get("arguments", {}), ensure_ascii=False)
        if complete and call.get("arguments"):
            assert arguments == dump or not dump.startswith(arguments), output


def assert_same_deltas(pieces: list[str]) -> None:
    """Exactly the reference's deltas, unless a call is muted (``assert_muted_message``)."""
    reference, stream = ReferenceStream("seed"), Llama3JsonStream("seed")
    for at, piece in enumerate(pieces):
        ours = stream.stream(piece)
        if stream.s.reading is not None and stream.s.reading.muted:
            assert_muted_message(pieces)
            return
        theirs = reference.stream(piece)
        if at == len(pieces) - 1:
            ours, theirs = ended(stream, ours), ended(reference, theirs)
        assert ours == theirs, (piece, "".join(pieces))
    assert stream.finish() == reference.finish(), "".join(pieces)


HOSTILE_PARTS = [
    '{"name": "count", "parameters": ',
    '{"name": "f", "arguments": {"a": ',
    '"name"',
    '"arguments": ',
    "; ",
    ";",
    " ",
    "\n",
    "{",
    "}",
    "[",
    "]",
    "[[[[",
    "]]",
    '{"a":',
    '"',
    "\\",
    '\\"',
    "\\u00e9",
    "\\ud83d",
    "\\ude00",
    "\\u12",
    ",",
    ":",
    "12",
    "-1.5e3",
    "tru",
    "null",
    "x",
    "東京",
    "a" * 50,
]
hostile_llama = st.lists(st.sampled_from(HOSTILE_PARTS), min_size=1, max_size=30).map(
    lambda parts: "<|python_tag|>" + "".join(parts)
)


@st.composite
def corrupted_llama(draw: st.DrawFn) -> str:
    """A generated call list with text inserted or cut out somewhere."""
    output = draw(llama_output())
    at = draw(st.integers(0, len(output)))
    if draw(st.booleans()):
        return output[:at] + draw(st.sampled_from(HOSTILE_PARTS)) + output[at:]
    return output[:at] + output[at + draw(st.integers(1, 5)) :]


@PROPS
@given(output=llama_output())
def test_one_char_per_chunk(output: str) -> None:
    assert_same_deltas(list(output))


@PROPS
@given(output=llama_output(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_any_chunking(output: str, cuts: list[int]) -> None:
    assert_same_deltas(pieces_of(output, cuts))


@settings(PROPS, max_examples=150)
@given(output=hostile_llama | corrupted_llama(), cuts=st.lists(st.integers(0, 900), max_size=40))
def test_hostile_output(output: str, cuts: list[int]) -> None:
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


CALLS = [
    '{"name": "f", "arguments": {"a": 1}}',
    '{"name": "g", "parameters": {"b": "x"}}',
    '{"name": "h", "arguments": {}}',
]
SEPARATORS = ["; ", '"a', '{"', '["', '"[', "}]", '"}', ']"', "  ", ';"', "[]", '""', '\\"', ", "]
TAILS = ["", '"', "{", "]", "}", '"x": 1}', '"name": "q"}', ' {"name": "z", "arguments": {"c": [1']


@settings(PROPS, max_examples=150)
@given(
    calls=st.lists(st.tuples(st.sampled_from(CALLS), st.sampled_from(SEPARATORS)), max_size=4),
    tail=st.lists(st.sampled_from(TAILS), max_size=2),
    cuts=st.lists(st.integers(0, 400), max_size=20),
)
def test_odd_separators(calls: list[tuple[str, str]], tail: list[str], cuts: list[int]) -> None:
    """Separators holding quotes or brackets change how later text reads from earlier calls."""
    output = "<|python_tag|>" + "".join(call + sep for call, sep in calls) + "".join(tail)
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


STRING_PARTS = [
    "a" * 40,
    " ",
    "   ",
    "\u3000",
    "\\n",
    "\\\\",
    '\\"',
    "\\u00e9",
    "\\u0020",
    "\\ud83d",
    "\\ude00",
    "\\ud83d\\ude00",
    "\\udbff",
    "東京",
    "{[",
    "]}",
    ",",
    ":",
    "\\/",
    "\\t",
]
string_content = st.lists(st.sampled_from(STRING_PARTS), max_size=25).map("".join)
OPENINGS = [
    '{"name": "f", "parameters": {"body": ',
    '{"name": "f", "arguments": {"a": 1, "b": [1, ',
    '{"name": "f", "arguments": {"a": {"b": "x", "c": ',
    '{"name": "f", "arguments": {"body": "x", "n": 2, "body": ',
    '{"name": "f", "arguments": ["x", ',
    '{"name": "f", "arguments": "',
    '{"name": "f", "other": "y", "arguments": {"k": ',
]


@settings(PROPS, max_examples=150)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(OPENINGS), st.lists(string_content, min_size=1, max_size=3)),
        min_size=1,
        max_size=3,
    ),
    ending=st.sampled_from(["", '"', '"}', '"}}', '"]}', '"\\', '"x', "\\u12", "\\"]),
    cuts=st.lists(st.integers(0, 2000), max_size=40),
)
def test_long_strings(calls: list[tuple[str, list[str]]], ending: str, cuts: list[int]) -> None:
    """Calls whose arguments end inside long strings (several, with keys between them)."""
    texts = []
    for opening, strings in calls:
        quoted = '", "k": '.join('"' + content for content in strings)
        texts.append(opening + quoted + '"}}')
    output = "<|python_tag|>" + "; ".join(texts)[: -len('"}}')] + ending
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


NAMELESS_PARTS = ['{"a": ', '"a": ', "[", "{", "1, ", '"x", ', "}", "]", ", ", '"na', 'me": "f", ']
NAMELESS_PARTS += ['"name": "g", "parameters": {"k": ', "\\u006e", '"\\u006eame": "h", ', "; "]


@settings(PROPS, max_examples=100)
@given(
    head=st.lists(st.sampled_from(['{"a": ', '{"b": [', '"x": ']), min_size=1, max_size=60),
    tail=st.lists(st.sampled_from(NAMELESS_PARTS), max_size=12),
    tag=st.booleans(),
    cuts=st.lists(st.integers(0, 900), max_size=30),
)
def test_nameless_calls(head: list[str], tail: list[str], tag: bool, cuts: list[int]) -> None:
    """A call whose text holds no name yet sends nothing until one appears, as read again."""
    output = ("<|python_tag|>" if tag else "") + "".join(head) + "".join(tail)
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


@settings(PROPS, max_examples=2)
@given(
    opening=st.sampled_from(
        ['{"name": "f", "parameters": {"body": ', '{"a": ', '{"name": "f", "parameters": ']
    ),
    unit=st.sampled_from(['[{"a": ', "[", '{"a": {"b": ']),
    tail=st.lists(
        st.sampled_from(["}", "]", "}]", '"x"', "1", ", ", '"a": ', "]}" * 20]), max_size=8
    ),
)
def test_nesting_past_the_recursion_limit(opening: str, unit: str, tail: list[str]) -> None:
    """Past the recursion limit every reading fails: nothing is sent, as read again."""
    depth = sys.getrecursionlimit() + 3 * _DEPTH_MARGIN
    prefix = '<|python_tag|>{"name": "e", "arguments": {}}; ' + opening + unit * depth
    pieces = [prefix[i : i + 997] for i in range(0, len(prefix), 997)]
    assert_same_deltas(pieces + list(unit * 3 * _DEPTH_MARGIN + "".join(tail)))


SPOILED_HEADS = [
    '{"name": "f", "parameters": {"a": "s"',
    '{"name": "f", "parameters": {"a": ["s"',
    '{"name": "f", "parameters": {"a": true',
    '{"name": "f", "parameters": {"a": [1, {}]',
    '{"name": "f", "parameters": [null ',
    '{"name": "f", "parameters": {"a": {"b": 1} ',
    '{"name": "f", "parameters": {"a": 1 ',
]
SPOILERS = [*"\\x'{[:a;#\x01\x1c\x85\u3000\"-.e1", '\\"\\\\\'"']
AFTER_SPOILER = ['\\"\\\\\'"', '"', "\\", ",", "}", "]", "{", "[", ":", "1", "1.5-", '"a": ', " "]
AFTER_SPOILER += ["tru", '"x', ', "k": "v"', '; {"name": "g", "arguments": {}}', "\\u12", "\x01"]


@settings(PROPS, max_examples=200)
@given(
    head=st.sampled_from(SPOILED_HEADS),
    spoiler=st.sampled_from(SPOILERS),
    rest=st.lists(st.sampled_from(AFTER_SPOILER), max_size=12),
    cuts=st.lists(st.integers(0, 400), max_size=20),
)
def test_spoiled_calls(head: str, spoiler: str, rest: list[str], cuts: list[int]) -> None:
    """A call broken right after an item (a quote/backslash storm) sends nothing more."""
    output = "<|python_tag|>" + head + spoiler + "".join(rest)
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


NEST_PARTS = [
    "[",
    "{",
    '"a": ',
    '"b" :',
    ' "c d":',
    "\n",
    '"',
    "k",
    "\\u0061",
    "]",
    "}",
    "1",
    ", ",
    '"x"',
]


@settings(PROPS, max_examples=150)
@given(
    opening=st.sampled_from(['{"name": "f", "parameters": {"a": ', '{"name": "f", "arguments": ']),
    parts=st.lists(st.sampled_from(NEST_PARTS), max_size=40),
    cuts=st.lists(st.integers(0, 400), max_size=20),
)
def test_openings_only(opening: str, parts: list[str], cuts: list[int]) -> None:
    """Containers opened one in another (and what breaks the chain) read as read again."""
    output = "<|python_tag|>" + opening + "".join(parts)
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


def _spaced(value: Any, draw: st.DrawFn) -> str:
    """``value`` as JSON text with whitespace drawn around its tokens, escapes varied."""
    space = st.sampled_from(["", " ", "  ", "\n", "\t ", " \r\n"])
    if isinstance(value, dict):
        members = [
            _spaced(key, draw) + draw(space) + ":" + draw(space) + _spaced(item, draw)
            for key, item in value.items()
        ]
        return "{" + draw(space) + ("," + draw(space)).join(members) + draw(space) + "}"
    if isinstance(value, list):
        items = [_spaced(item, draw) + draw(space) for item in value]
        return "[" + draw(space) + ",".join(items) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=draw(st.booleans()))
    return json.dumps(value)


NUMBER_TEXTS = ["0", "-0", "-0.0", "1.5e3", "1E-2", "12345678901234567890", "1e400", "-1e400"]
NUMBER_TEXTS += ["0.1000000000000000055511151231257827", "1e-400", "2.5E+10", "-7", "3.0"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    | st.sampled_from(["", " ", "a  ", "\u3000", "\ud83d\ude00", "\\", '"', "\u00e9"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=14,
)


@st.composite
def regular_calls(draw: st.DrawFn) -> str:
    """Calls of generated JSON arguments, spaced and escaped every way, joined by "; "."""
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        arguments = _spaced(draw(json_values), draw)
        if draw(st.integers(0, 5)) == 0:
            arguments = draw(st.sampled_from(NUMBER_TEXTS))
        key = draw(st.sampled_from(["arguments", "parameters"]))
        name = json.dumps(draw(st.sampled_from(["f", "get_weather", "", "n\u00e9"])))
        head = [f'"name": {name}', f'"{key}": {arguments}']
        if draw(st.integers(0, 4)) == 0:
            head.reverse()
        if draw(st.integers(0, 4)) == 0:
            head.insert(1, '"other": [1, {"x": "y"}]')
        calls.append("{" + ", ".join(head) + "}")
    output = ("<|python_tag|>" if draw(st.booleans()) else "") + "; ".join(calls)
    if draw(st.booleans()):  # cut anywhere, or garbage after
        output = output[: draw(st.integers(1, len(output)))]
    if draw(st.integers(0, 5)) == 0:
        output += draw(st.sampled_from(HOSTILE_PARTS))
    return output


@settings(PROPS, max_examples=200)
@given(output=regular_calls(), cuts=st.lists(st.integers(0, 900), max_size=40))
# Arguments that are a JSON string, named in the chunk that closes the call: vLLM's last
# chunk adds the string unquoted (`"`), and the final settle the rest of its dump (`\\""`).
@example(output='{"arguments": "\\"", "other": [1, {"x": "y"}], "name": "f"}', cuts=[1])
def test_generated_calls(output: str, cuts: list[int]) -> None:
    """The incremental reading of whole JSON values: same deltas as read again."""
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@settings(PROPS, max_examples=3)
@given(
    unit=st.sampled_from(['[{"a": ', "[", '{"a": ']),
    ending=st.sampled_from(["", "1", '"x"', " ", "]}" * 3, "}"]),
)
def test_through_the_recursion_limit(unit: str, ending: str) -> None:
    """Each step through the nesting where json meets the recursion limit, as read again."""
    levels = unit.count("[") + unit.count("{")
    # The limit counts the frames already on the stack: the tail, read a character at a
    # time, starts 60 levels below where this stack meets it and ends 60 past it.
    below = (sys.getrecursionlimit() - _stack_depth() - 60) // levels
    prefix = '<|python_tag|>{"name": "f", "parameters": {"a": ' + unit * below
    pieces = [prefix[i : i + 997] for i in range(0, len(prefix), 997)]
    tail = unit * (120 // levels) + ending + "  " + ending
    assert_same_deltas(pieces + list(tail))


CORNER_PARTS = ["1", "234", "234" * 30, ".5", "e7", ", ", '"a": ', '"b": ', "\\ud800", "\\udc00"]
CORNER_PARTS += ['"', "x", "\x01", "\n", " ", "}", "]", "[", "{", "; "]


@settings(PROPS, max_examples=150)
@given(
    parts=st.lists(st.sampled_from(CORNER_PARTS), max_size=30),
    cuts=st.lists(st.integers(0, 900), max_size=30),
)
def test_corners(parts: list[str], cuts: list[int]) -> None:
    """Long numbers, keys twice, control characters, unpaired surrogate escapes."""
    output = '<|python_tag|>{"name": "f", "parameters": {"a": ' + "".join(parts)
    assert_same_deltas(list(output))
    assert_same_deltas(pieces_of(output, cuts))


def test_a_call_named_after_its_reading_stopped() -> None:
    """An escape right after a long number stops the incremental reading (the number
    mutes the call, the escape spoils it) before the name was sent; the whole call,
    read again once the escape's string closes, names it, as vLLM's reading does."""
    head = '<|python_tag|>{"name": "f", "parameters": {"a": ' + "234" * 30
    assert_same_deltas(["<|python_tag|>{", head[len("<|python_tag|>{") :] + "\\", 'ud800"'])


def test_malformed_calls_are_read_again_within_a_linear_budget() -> None:
    """A call partial_json_parser keeps reading though it never parses (an unquoted
    value, then markup) would be read again every chunk; the stream stops reading it
    once what it has read again passes its budget, whatever the chunking."""
    text = '{"name": "save_note", "parameters": {"body": ' + "a>" * 3000
    for size in (1, 5):
        stream = Llama3JsonStream("seed")
        deltas = [stream.stream(text[i : i + size]) for i in range(0, len(text), size)]
        deltas.append(stream.finish())
        assert REREAD_FREE < stream.s.reread <= REREAD_PER_CHAR * len(text) + REREAD_FREE
        names = [c.name for d in deltas if d for c in d.tool_calls or () if c.name]
        assert names == ["save_note"]


CALL_CUT_IN_KEY = '<|python_tag|>{"name": "send_message", "parameters": {"'
CALL_CUT_IN_STRING = '<|python_tag|>{"name": "f", "parameters": {"a": "hello world'
EMPTY_CALL = '{"name": "get_current_time", "parameters": {}}'


@pytest.mark.parametrize(
    ("pieces", "calls"),
    [
        (list(CALL_CUT_IN_KEY), [["send_message", ""]]),
        ([CALL_CUT_IN_KEY], [["send_message", ""]]),  # vLLM: nothing (the call is lost)
        (list('<|python_tag|>{"name": "save_note'), []),
        (['<|python_tag|>{"name": "save_note'], []),
        ([*EMPTY_CALL, ""], [["get_current_time", ""]]),  # "" : <|eot_id|>
        ([EMPTY_CALL[:20], EMPTY_CALL[20:]], [["get_current_time", "{}"]]),
        (list(CALL_CUT_IN_STRING), [["f", '{"a": "hello world"}']]),
        ([CALL_CUT_IN_STRING[:-6], CALL_CUT_IN_STRING[-6:]], [["f", "{}"]]),
        ([*CALL_CUT_IN_STRING, " "], [["f", '{"a": "hello worl']]),
    ],
)
def test_the_last_chunk_ends_the_stream_as_vllm_does(pieces: list[str], calls: Any) -> None:
    """What vLLM 0.33.0's render server streams for these (checked against it with the
    Llama 3.1 tokenizer): an open call is not flushed unless the last chunk's step sends
    a piece of it; empty arguments go only with a name in the last chunk."""
    assert assembled(Llama3JsonStream("seed"), pieces) == calls
    assert assembled(ReferenceStream("seed"), pieces) == calls or len(pieces) == 1
