"""gpt-oss's Harmony parsers: ``openai_gptoss`` reasoning and ``openai`` tool calls.

Outputs are encoded with the bundled ``gpt-oss`` tokenizer (o200k_harmony, built from
``quicktok-v1``), so Harmony's markers are their special ids. The hand cases are what
vLLM 0.33.0's derender server answered for the same outputs (tests/golden/golden-G1
holds the full transcripts); the property tests check that any chunking, and a
snapshot and restore at any chunk, stream what one token per chunk streams, and that
the streamed message is the one-shot message.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from parsers.families.harmony import (
    HarmonyGrammar,
    HarmonyState,
    _byte_decoder,
    is_function_recipient,
    normalize_recipient,
)
from parsers.families.harmony_header import MessageHeader
from parsers.families.harmony_reader import (
    CONTENT,
    EXPECT_START,
    HEADER,
    OPENED,
    REFUSED,
    TEXT,
    TOOK,
    HarmonyReader,
)
from parsers.registry import ParserConfigError, ParserFactory
from parsers.stream import ChatStreamState
from parsers.types import Delta, ParseOptions, ToolSpec
from tests.support.parity import chunked

TOOLS = (
    ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("get_time", {"type": "object", "properties": {"timezone": {"type": "string"}}}),
)
START = "<|start|>assistant"
PROPS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer("gpt-oss")


@pytest.fixture(scope="module")
def grammar(tokenizer: Tokenizer) -> HarmonyGrammar:
    return HarmonyGrammar(tokenizer.vocabulary)


@pytest.fixture(scope="module")
def factory(tokenizer: Tokenizer) -> ParserFactory:
    return ParserFactory("openai", "openai_gptoss", True, tokenizer.vocabulary)


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, **{"tool_choice": "auto", **kwargs})


def analysis(text: str) -> str:
    return f"<|channel|>analysis<|message|>{text}<|end|>{START}"


def call(name: str, arguments: str, end: str = "<|call|>") -> str:
    return f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}{end}"


def final(text: str) -> str:
    return f"<|channel|>final<|message|>{text}<|return|>"


@dataclass
class Assembled:
    content: str = ""
    reasoning: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict)
    ids: dict[int, str] = field(default_factory=dict)

    def add(self, delta: Delta | None) -> None:
        if delta is None:
            return
        self.content += delta.content or ""
        self.reasoning += delta.reasoning or ""
        for piece in delta.tool_calls:
            name, arguments = self.calls.setdefault(piece.index, ["", ""])
            self.calls[piece.index] = [
                name or piece.name or "",
                arguments + (piece.arguments or ""),
            ]
            if piece.id is not None:
                assert piece.index not in self.ids, "a call's id is sent once"
                self.ids[piece.index] = piece.id


def stream(
    tokenizer: Tokenizer,
    factory: ParserFactory,
    opts: ParseOptions,
    chunks: list[list[int]],
    finish: str = "stop",
    restore_at: int = -1,
) -> tuple[list[Delta | None], str | None]:
    """The deltas and finish reason of one streamed choice; ``restore_at``: snapshot and
    restore there (a fresh parser rebuilt from the state, as after a Redis restore)."""
    session = StreamSession(tokenizer, factory.stream_for_request(opts, "seed"), [])
    deltas = []
    reason = None
    for i, chunk in enumerate(chunks):
        if i == restore_at:
            state = msgspec.msgpack.decode(session.parser.snapshot(), type=ChatStreamState)
            window = session.detokenizer.window
            restored = factory.stream_for_request(opts, "seed", state)
            session = StreamSession(tokenizer, restored, [])
            session.detokenizer.window = window
        delta, reason = session.feed(chunk, chunk, finish if i == len(chunks) - 1 else None)
        deltas.append(delta)
    return deltas, reason


def assemble(deltas: list[Delta | None]) -> Assembled:
    folded = Assembled()
    for delta in deltas:
        folded.add(delta)
    return folded


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text))


def _byte_ids(tokenizer: Tokenizer, raw: bytes) -> list[int]:
    """One token per byte: the byte-level pieces of ``raw``."""
    piece_of_byte = {byte: char for char, byte in _byte_decoder().items()}
    found = [tokenizer.vocabulary.id_of(piece_of_byte[byte]) for byte in raw]
    assert None not in found
    return [token_id for token_id in found if token_id is not None]


# ------------------------------------------------------------------ hand cases (vLLM's answers)


def test_reasoning_then_a_call(tokenizer: Tokenizer, factory: ParserFactory) -> None:
    output = analysis("Need data.") + call("get_weather", '{"city":  "Paris"}')
    ids = encode(tokenizer, output)
    parsed = factory.for_request(options()).parse("", [], "seed", ids)
    assert parsed.reasoning == "Need data."
    assert parsed.content is None
    # One-shot arguments are re-serialized by Python's json.dumps.
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", '{"city": "Paris"}')
    ]
    deltas, reason = stream(tokenizer, factory, options(), [[t] for t in ids])
    folded = assemble(deltas)
    assert (folded.reasoning, folded.content) == ("Need data.", "")
    # Streamed arguments are the text as generated; the call opens at <|message|>.
    assert folded.calls == {0: ["get_weather", '{"city":  "Paris"}']}
    assert folded.ids == {0: parsed.tool_calls[0].id}
    assert reason == "tool_calls"


def test_preamble_is_content_and_final_answer_after_it(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    output = (
        analysis("Plan.")
        + "<|channel|>commentary<|message|>Let me check.<|end|>"
        + START
        + final("Sunny.")
    )
    parsed = factory.for_request(options()).parse("", [], "s", encode(tokenizer, output))
    assert (parsed.reasoning, parsed.content, parsed.tool_calls) == (
        "Plan.",
        "Let me check.\nSunny.",
        [],
    )


def test_a_header_cut_off_is_recovered_as_raw_content(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    output = analysis("Plan.") + "<|channel|>commentary to=functions.get_wea"
    ids = encode(tokenizer, output)
    expected = "<|start|>assistant<|channel|>commentary to=functions.get_wea"
    parsed = factory.for_request(options()).parse("", [], "s", ids)
    assert (parsed.reasoning, parsed.content) == ("Plan.", expected)
    deltas, _ = stream(tokenizer, factory, options(), [[t] for t in ids], finish="length")
    assert assemble(deltas).content == expected


def test_builtin_recipients_are_not_calls(tokenizer: Tokenizer, factory: ParserFactory) -> None:
    output = (
        analysis("Plan.")
        + "<|channel|>analysis to=python<|message|>print(1)<|call|>"
        + START
        + "<|channel|>notes<|message|>hidden<|end|>"
        + START
        + final("Done.")
    )
    parsed = factory.for_request(options()).parse("", [], "s", encode(tokenizer, output))
    # vLLM: an analysis message to python is reasoning; an unknown channel is dropped.
    assert (parsed.reasoning, parsed.content, parsed.tool_calls) == (
        "Plan.\nprint(1)",
        "Done.",
        [],
    )
    assert not is_function_recipient("browser.search")
    assert is_function_recipient("functions.get_weather")
    assert is_function_recipient("lookup")
    assert normalize_recipient("functions.f <|constrain|>json") == "functions.f"


def test_tool_choice_none_drops_calls_and_forced_choices_keep_them(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    ids = encode(tokenizer, call("get_time", '{"timezone": "UTC"}'))
    none = factory.for_request(options(tool_choice="none")).parse("", [], "s", ids)
    assert (none.content, none.tool_calls) == (None, [])
    named = factory.for_request(options(tool_choice=None, named_tool="get_time"))
    forced = named.parse("", [], "s", ids)
    assert forced.content == "" and [c.name for c in forced.tool_calls] == ["get_time"]
    deltas, reason = stream(
        tokenizer, factory, options(tool_choice=None, named_tool="get_time"), [ids]
    )
    assert assemble(deltas).calls == {0: ["get_time", '{"timezone": "UTC"}']}
    assert reason == "stop"  # a named choice keeps "stop", as in vLLM


def test_each_parser_alone_drops_what_the_other_reads(tokenizer: Tokenizer) -> None:
    ids = encode(tokenizer, analysis("Plan.") + call("get_time", "{}"))
    vocab = tokenizer.vocabulary
    reasoning_only = ParserFactory(None, "openai_gptoss", False, vocab).for_request(options())
    tools_only = ParserFactory("openai", None, True, vocab).for_request(options())
    first = reasoning_only.parse("", [], "s", ids)
    assert (first.reasoning, first.content, first.tool_calls) == ("Plan.", None, [])
    second = tools_only.parse("", [], "s", ids)
    assert second.reasoning is None and [c.name for c in second.tool_calls] == ["get_time"]


def test_harmony_does_not_mix_with_other_parsers_or_tokenizers(tokenizer: Tokenizer) -> None:
    with pytest.raises(ParserConfigError, match="cannot be combined"):
        ParserFactory("hermes", "openai_gptoss", True, tokenizer.vocabulary)
    qwen = load_tokenizer("qwen3")
    with pytest.raises(ParserConfigError, match=r"o200k|gpt-oss"):
        ParserFactory("openai", "openai_gptoss", True, qwen.vocabulary)


def test_the_state_is_the_open_header_or_message_only(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    ids = encode(tokenizer, analysis("Some long reasoning here.") + final("Answer 東"))
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    opened = ids.index(tokenizer.encode("<|message|>")[0], len(ids) - 6)
    session.feed(ids[:opened], ids[:opened], None)
    state = session.parser.state.harmony
    assert isinstance(state, HarmonyState)
    # In a header: its tokens from <|start|> on; the closed analysis is gone.
    assert state.reader.phase == HEADER and state.reader.header is None
    assert tokenizer.decode(state.reader.tokens) == "<|start|>assistant<|channel|>final"
    # In a message: its header and the bytes of an unfinished character, no tokens.
    half = _byte_ids(tokenizer, "東".encode()[:2])
    session.feed(ids[opened:-2] + half, ids[opened:-2] + half, None)
    assert state.reader.phase == CONTENT and state.reader.tokens == []
    assert state.reader.header == MessageHeader("assistant", "final", None, None)
    assert state.reader.held == "東".encode()[:2]


def test_a_refused_header_is_dropped_live_and_after_a_restore(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    # "assistantstray" is no role: the parser refuses the header at <|message|>, drops
    # the message and waits for <|start|>; the "<" after it is refused too. Found by the
    # chunking property with a restore right after the refused header.
    output = call("get_weather", '{"city": "Paris"}') + f"{START}stray" + final("<")[:-10]
    ids = encode(tokenizer, output)
    expected = assemble(stream(tokenizer, factory, options(), [[t] for t in ids])[0])
    assert expected.content == ""
    chunks = [ids[:-1], ids[-1:]]
    for at in (-1, 1):
        assert assemble(stream(tokenizer, factory, options(), chunks, restore_at=at)[0]) == expected


def test_a_refused_first_header_leaves_the_given_role_live_and_after_a_restore(
    tokenizer: Tokenizer, factory: ParserFactory
) -> None:
    # Four parts are no header: refused. The package keeps the role it was given
    # (assistant), so the next header needs none; a restore between them keeps it too.
    output = "<|channel|>a b c d<|message|>x" + "<|start|><|channel|>final<|message|>hi<|end|>"
    ids = encode(tokenizer, output)
    parsed = factory.for_request(options()).parse("", [], "seed", ids)
    assert parsed.content == "hi"
    cut = ids.index(tokenizer.encode("<|start|>")[0])
    for at in (-1, 1):
        deltas, _ = stream(tokenizer, factory, options(), [ids[:cut], ids[cut:]], restore_at=at)
        assert assemble(deltas).content == "hi"


# ------------------------------------------------------------------ properties

_TEXTS = st.sampled_from(["Hi", " there", "東京 🗼", "{", "x\n", "<|not a token|>", "391."])
_ARGS = st.sampled_from(['{"city": "Paris"}', '{"timezone": "Asia/Tokyo"}', '{"a": [1, '])


@st.composite
def harmony_outputs(draw: st.DrawFn) -> str:
    """Outputs with each message kind at most once, cut anywhere (in a header, in a
    call's arguments), sometimes with stray text between messages."""
    parts = []
    if draw(st.booleans()):
        parts.append(analysis("".join(draw(st.lists(_TEXTS, min_size=1, max_size=4)))))
    if draw(st.booleans()):
        parts.append(f"<|channel|>commentary<|message|>{draw(_TEXTS)}<|end|>{START}")
    if draw(st.booleans()):
        parts.append(call(draw(st.sampled_from(["get_weather", "get_time"])), draw(_ARGS)))
        parts.append(START)
    if draw(st.booleans()):
        parts.append("stray")
    parts.append(final("".join(draw(st.lists(_TEXTS, min_size=0, max_size=3)))))
    output = "".join(parts)
    return output[: draw(st.integers(min_value=1, max_value=len(output)))]


@PROPS
@given(output=harmony_outputs(), cuts=st.lists(st.integers(0, 400), max_size=8), data=st.data())
def test_any_chunking_and_any_restore_stream_the_same(
    tokenizer: Tokenizer,
    factory: ParserFactory,
    output: str,
    cuts: list[int],
    data: st.DataObject,
) -> None:
    ids = encode(tokenizer, output)
    chunks = chunked(ids, cuts)
    restore_at = data.draw(st.integers(0, len(chunks) - 1))
    one_token, reason = stream(tokenizer, factory, options(), [[t] for t in ids])
    expected = assemble(one_token)
    for at in (-1, restore_at):
        deltas, chunked_reason = stream(tokenizer, factory, options(), chunks, restore_at=at)
        assert assemble(deltas) == expected
        assert chunked_reason == reason


@PROPS
@given(output=harmony_outputs())
def test_the_streamed_message_is_the_one_shot_message(
    tokenizer: Tokenizer, factory: ParserFactory, output: str
) -> None:
    ids = encode(tokenizer, output)
    parsed = factory.for_request(options()).parse("", [], "seed", ids)
    folded = assemble(stream(tokenizer, factory, options(), [[t] for t in ids])[0])

    def unjoined(text: str | None) -> str:
        # vLLM joins one-shot messages with a newline; the stream does not.
        return (text or "").replace("\n", "")

    assert unjoined(folded.reasoning) == unjoined(parsed.reasoning)
    assert unjoined(folded.content) == unjoined(parsed.content)
    calls = [(c.name, c.id) for c in parsed.tool_calls]
    assert calls == [(name, folded.ids[i]) for i, (name, _) in folded.calls.items()]
    for streamed, one_shot in zip(folded.calls.values(), parsed.tool_calls, strict=True):
        try:
            assert json.dumps(json.loads(streamed[1])) == one_shot.arguments
        except ValueError:
            assert streamed[1] == one_shot.arguments


# ------------------------------------------------------------------ the reader is the package

_PIECES = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "assistant",
    "user",
    "analysis",
    "final",
    "commentary",
    " to=functions.get_weather",
    " to=python",
    "json",
    " ",
    "Hi 東京 🗼",
    '{"a": 1}',
]


@st.composite
def token_soups(draw: st.DrawFn, tokenizer: Tokenizer) -> list[int]:
    """Markers, header words, text, and lone bytes (a character's, and some that form
    none: a stray continuation, an overlong or surrogate start), in any order."""
    piece_of_byte = {byte: char for char, byte in _byte_decoder().items()}
    pieces = [encode(tokenizer, p) for p in _PIECES]
    for byte in [*"🗼".encode(), 0x80, 0xC0, 0xED, 0xA0, 0xE2, 0x82]:
        token_id = tokenizer.vocabulary.id_of(piece_of_byte[byte])
        assert token_id is not None
        pieces.append([token_id])
    chosen = draw(st.lists(st.sampled_from(pieces), max_size=24))
    return [token_id for piece in chosen for token_id in piece]


@PROPS
@given(data=st.data())
def test_the_reader_reads_as_the_package_does(
    tokenizer: Tokenizer, grammar: HarmonyGrammar, data: st.DataObject
) -> None:
    from openai_harmony import HarmonyError, Role, StreamableParser

    ids = data.draw(token_soups(tokenizer))
    package = StreamableParser(grammar.encoding, Role.ASSISTANT)
    reader = HarmonyReader(grammar.framing, keep_text=True)
    for token_id in ids:
        outcome = reader.process(token_id)
        try:
            package.process(token_id)
        except HarmonyError:
            assert outcome == REFUSED
            continue
        assert outcome != REFUSED
        assert (reader.s.phase == CONTENT) == (package.state_data["state"] == "Content")
        if outcome == OPENED:
            assert reader.header is not None
            assert (reader.header.role, reader.header.channel, reader.header.recipient) == (
                package.current_role.value,
                package.current_channel,
                package.current_recipient,
            )
            assert reader.header.content_type == package.current_content_type
        if outcome == TEXT:
            assert reader.delta == (package.last_content_delta or "")
    try:
        package.process_eos()
        cut_off = False
    except HarmonyError:
        cut_off = True
    assert (reader.close() is not None) == cut_off
    found = [(h.role, h.channel, h.recipient, h.content_type, text) for h, text in reader.messages]
    expected = [
        (m.author.role, m.channel, m.recipient, m.content_type, m.content[0].text)
        for m in package.messages
    ]
    assert found == expected


# ------------------------------------------------------------------ headers, long and odd

_HEADER_PIECES = [
    "<|channel|>",
    "<|constrain|>",
    "<|start|>",
    "<|end|>",
    "assistant",
    "user",
    "tool",
    "system",
    "developer",
    "Assistant",
    "foo",
    "to=",
    "to=functions.get_weather",
    "functions.f",
    "json",
    "analysis",
    "final",
    "commentary",
    " ",
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    "\xa0",
    "\u3000",
    "\u2028",
    "\x85",
    "\x1c",
    "<",
    "<x",
    "東京",
]


def _package_header(grammar: HarmonyGrammar, given: bool, ids: list[int]) -> MessageHeader | None:
    """What the package reads of a header (``given``: the first message's, the role
    given), None when it refuses it: the answer before the header rules were ours."""
    from openai_harmony import HarmonyError, Role, StreamableParser

    package = StreamableParser(grammar.encoding, Role.ASSISTANT if given else None)
    try:
        if not given:
            package.process(grammar.framing.start_id)
        for token_id in [*ids, grammar.framing.message_id]:
            package.process(token_id)
    except HarmonyError:
        return None
    role = package.current_role
    return MessageHeader(
        role.value if role is not None else "",
        package.current_channel,
        package.current_recipient,
        package.current_content_type,
    )


def _reader_header(grammar: HarmonyGrammar, given: bool, ids: list[int]) -> MessageHeader | None:
    """What the reader reads of the same header, token by token."""
    reader = HarmonyReader(grammar.framing)
    if not given:
        reader.s.started, reader.s.given_role, reader.s.phase = True, False, EXPECT_START
        assert reader.process(grammar.framing.start_id) == TOOK
    for token_id in ids:
        assert reader.process(token_id) == TOOK
    outcome = reader.process(grammar.framing.message_id)
    assert outcome in (OPENED, REFUSED)
    return reader.header if outcome == OPENED else None


@PROPS
@given(data=st.data(), given_role=st.booleans())
def test_headers_are_read_as_the_package_reads_them(
    tokenizer: Tokenizer, grammar: HarmonyGrammar, data: st.DataObject, given_role: bool
) -> None:
    pieces = [encode(tokenizer, p) for p in _HEADER_PIECES]
    # Bytes that form no character alone: the package refuses such a header.
    pieces += [[i] for i in _byte_ids(tokenizer, bytes([0x80, 0xE6]))]
    chosen = data.draw(st.lists(st.sampled_from(pieces), max_size=10))
    ids = [token_id for piece in chosen for token_id in piece]
    expected = _package_header(grammar, given_role, ids)
    assert _reader_header(grammar, given_role, ids) == expected


# Headers of thousands of ids, each closed by one <|message|>: what they say, or their
# refusal, must be the package's, in one piece, streamed, and restored anywhere.
_LONG = 1500
LONG_HEADERS = {
    "a long recipient": "<|channel|>commentary to=functions." + "get_weather" * _LONG,
    "a long channel": "<|channel|>" + "analysis" * _LONG,
    "a long content type": "<|channel|>commentary to=functions.get_time <|constrain|>"
    + "json" * _LONG,
    "too many parts": "<|channel|>final" + " x" * _LONG,
    "channel markers repeated": "<|channel|>analysis" + "<|channel|>x y" * _LONG,
    "odd whitespace": "\u3000<|channel|>final\xa0" + " \t\u3000\x0b" * _LONG,
}


def _package_messages(grammar: HarmonyGrammar, ids: list[int]) -> list[tuple[Any, ...]]:
    """The messages the package reads of a whole output (refused tokens skipped, as
    vLLM's parser goes on after them)."""
    from openai_harmony import HarmonyError, Role, StreamableParser

    package = StreamableParser(grammar.encoding, Role.ASSISTANT)
    for token_id in ids:
        with contextlib.suppress(HarmonyError):
            package.process(token_id)
    with contextlib.suppress(HarmonyError):
        package.process_eos()
    return [
        (m.author.role, m.channel, m.recipient, m.content_type, m.content[0].text)
        for m in package.messages
    ]


@pytest.mark.parametrize("name", list(LONG_HEADERS))
def test_a_long_header_closed_by_one_token_reads_as_the_package_does(
    tokenizer: Tokenizer, grammar: HarmonyGrammar, factory: ParserFactory, name: str
) -> None:
    header = encode(tokenizer, LONG_HEADERS[name])
    assert len(header) > 1000
    rest = encode(tokenizer, 'Hi {"a": 1}<|end|>' + START + final("done"))
    ids = [*header, grammar.framing.message_id, *rest]
    for given_role in (True, False):
        # The header as the first message (its role given), and as a later one.
        assert _reader_header(grammar, given_role, header) == _package_header(
            grammar, given_role, header
        )
    reader = HarmonyReader(grammar.framing, keep_text=True)
    for token_id in ids:
        reader.process(token_id)
    assert reader.close() is None
    found = [(h.role, h.channel, h.recipient, h.content_type, t) for h, t in reader.messages]
    assert found == _package_messages(grammar, ids)
    # Streamed: the header in one chunk, closed by the next, then the rest; restored
    # from a snapshot in the open header, in the open message, and after it.
    one_token = assemble(stream(tokenizer, factory, options(), [[t] for t in ids])[0])
    chunks = [header, [grammar.framing.message_id], rest[:3], rest[3:]]
    for at in (-1, 1, 2, 3):
        assert assemble(stream(tokenizer, factory, options(), chunks, restore_at=at)[0]) == (
            one_token
        )
    parsed = factory.for_request(options()).parse("", [], "seed", ids)
    assert (parsed.content or "").replace("\n", "") == one_token.content
    assert [c.name for c in parsed.tool_calls] == [n for n, _ in one_token.calls.values()]
