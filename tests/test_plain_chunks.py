"""A hit's chunk answered by ``ParsedStreamDerenderer.continued`` (a one-id chunk of plain
text goes from the id to its reply's bytes) is the chunk the general path answers, from
the request ``StreamSession.request_for`` builds: the same reply bytes, state and carried
states, and the same session after it, whatever the tokens, chunking, logprobs, options
and finish."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Raw

from app.streams.chunk_path import carried_state
from app.streams.parsed_stream import Continued, ParsedStreamDerenderer
from app.streams.session import SessionBuilder, StreamSession
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from app.wire.protocol import (
    ChatRequest,
    ChatStreamDerenderRequest,
    ChatTool,
    FunctionDefinition,
    GenerateChunk,
    GenerateLogProb,
    GenerateLogProbs,
    GenerateLogProbsContent,
    GenerateStreamChoice,
    UsageInput,
    encoder,
)
from parsers.engine.reasoning import ends_unspaced
from parsers.families.deepseek import CALL_BEGIN, CALL_FINISH, CALLS_BEGIN, CALLS_END, SEP
from parsers.stream import ChatStreamState, Section, _plain_check
from parsers.types import PlainText
from tests.support.streams import PROMPT, PROPS, TOOLS, factory_for
from tests.support.synthetic_tokenizers import write_synthetic_tokenizer
from tests.support.tekken_tokenizers import tekken_tokenizer_dir
from tests.support.tokenizers import qwen3_with_tokens

T = TypeVar("T")
_CREATED = re.compile(rb'"created":\d+')
CONTEXT = bytes(range(16))
MODEL = "served-model"
# Outputs whose stretches of plain text lie between markers (partial ones included), in
# reasoning and in content, with characters a tokenizer splits across ids.
OUTPUTS = (
    "<think>\nCompare the fares, the weather and the hotels near Alfama & <weather> tags, "
    "then decide on one of them.\n</think>\n\nHere is the plan: "
    "“Alfama” at dusk 你好 🙂 <tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>',
    "<think>  \n</think>\n\n  \n Content after blanks, < and > and <tool and </think> "
    'mid-way. <tool_call>{"name": "noop", "arguments": {}}</tool_call> after it.',
    "An answer without thinking: 1 < 2, <b>bold</b>, <tool_call>"
    '{"name": "count", "arguments": {"n": 3}}</tool_call>',
)
CODER_CALL = (
    "<tool_call>\n<function=count>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
)
CODER_OUTPUTS = (f"<think>\nA thought.\n</think>\n\nCalling it: {CODER_CALL} and done.",)

# A call in each family's markup.
# DeepSeek's second call sends its arguments with the chunk after its name's.
DEEPSEEK_CALL = (
    f'{CALLS_BEGIN}{CALL_BEGIN}get_weather{SEP}{{"city": "Lisbon"}}{CALL_FINISH}\n'
    f"{CALL_BEGIN}noop{SEP}{{}}{CALL_FINISH}\n{CALLS_END}"
)
KIMI_CALL = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Lisbon"}<|tool_call_end|><|tool_calls_section_end|>'
)
GLM_CALL = "<tool_call>count\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
MINIMAX_CALL = (
    '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Lisbon'
    "</parameter>\n</invoke>\n</minimax:tool_call>"
)
DSML_CALL = (
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="count">\n<｜DSML｜parameter name="n" '
    'string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
)
MISTRAL_CALL = '[TOOL_CALLS]get_weather[ARGS]{"city": "Lisbon"}'
M3 = "]<]minimax[>["
M3_CALL = (
    f'{M3}<tool_call>\n{M3}<invoke name="count">\n{M3}<n>3{M3}</n>\n{M3}</invoke>\n{M3}</tool_call>'
)
GRANITE_CALL = '<|tool_call|>[{"name": "count", "arguments": {"n": 3}}]'

# Outputs that open with calls (pythonic's list, Llama 3's JSON), or with text (never a call).
CALL_LISTS = (
    '[get_weather(city="Lisbon"), count(n=3)]',
    '{"name": "count", "parameters": {"n": 3}}; {"name": "noop", "parameters": {}}',
    '  \n An answer, not a call: [count(n=3)] and {"name": "noop"} 你好 🙂 \n',
)


def in_markup(call: str, think: tuple[str, str] = ("<think>", "</think>")) -> tuple[str, ...]:
    """Outputs in a family's markup (its reasoning markers and one call): reasoning and
    content whose plain stretches end in whitespace, whitespace alone, a partial marker."""
    start, end = think
    return (
        f"{start}\nCompare the fares,  \n\n the weather & <b>hotels</b> 你好 🙂 then decide. \n"
        f"{end}Here is the plan: “Alfama” at dusk  \n {call} and after it, {start}a second "
        f"thought  {end}then more.",
        f"{start}  \n{end}\n\n  \n Content after blanks, 1 < 2, {call[:6]} {end} mid-way.\n"
        f"{call}\n\n",
        f"An answer without thinking: {start[:3]} {call}{call}",
    )


# Parser configurations: (tool parser, reasoning parser).
Config = tuple[str | None, str | None]
# Each with the tokenizer it runs on (a test tokenizer with the family's markers) and
# outputs in its markup.
CONFIGS: list[tuple[Config, str, tuple[str, ...]]] = [
    (("hermes", "qwen3"), "qwen3", OUTPUTS),
    ((None, "qwen3"), "qwen3", OUTPUTS),
    (("hermes", None), "qwen3", OUTPUTS),
    ((None, None), "qwen3", OUTPUTS),
    (("qwen3_coder", "qwen3"), "qwen3", CODER_OUTPUTS),
    (("step5", "step5"), "qwen3", CODER_OUTPUTS + OUTPUTS[1:2]),
    (("qwen3_coder", "nemotron_v3"), "qwen3", in_markup(CODER_CALL)),
    ((None, "deepseek_r1"), "qwen3", OUTPUTS),
    (("deepseek_v31", "deepseek_v3"), "deepseek", in_markup(DEEPSEEK_CALL)),
    (("kimi_k2", "kimi_k2"), "kimi_k2", in_markup(KIMI_CALL)),
    (("glm45", "glm45"), "glm45", in_markup(GLM_CALL)),
    (("minimax_m2", "minimax_m2"), "minimax_m2", in_markup(MINIMAX_CALL)),
    (("deepseek_v4", "deepseek_v4"), "dsml", in_markup(DSML_CALL)),
    (("mistral", "mistral"), "mistral_v13", in_markup(MISTRAL_CALL, ("[THINK]", "[/THINK]"))),
    (("minimax_m3", "minimax_m3"), "minimax_m3", in_markup(M3_CALL, ("<mm:think>", "</mm:think>"))),
    (("granite", None), "granite", in_markup(GRANITE_CALL)),
    (("pythonic", None), "qwen3", CALL_LISTS),
    (("llama3_json", None), "llama3", CALL_LISTS),
    (("granite-20b-fc", None), "qwen3", (*CALL_LISTS, f"<function_call> {CALL_LISTS[1]}")),
]


CHAT_TOOLS = [ChatTool(FunctionDefinition(spec.name, parameters=spec.parameters)) for spec in TOOLS]


def _mostly(common: T, *others: T) -> st.SearchStrategy[T]:
    """``common`` four times in five, else one of ``others`` (most streams and chunks
    are the common ones)."""
    return st.sampled_from([common] * 4 * len(others) + list(others))


def _seldom() -> st.SearchStrategy[bool]:
    return st.integers(0, 7).map(lambda n: n == 0)


class Case:
    """One stream: its parsers, options and chunks."""

    def __init__(
        self,
        config: Config,
        chat_request: ChatRequest,
        chunks: list[GenerateChunk],
        requested: str | None = None,
    ) -> None:
        self.tool, self.reasoning = config
        self.chat_request = chat_request
        self.chunks = chunks
        self.requested = requested

    @classmethod
    def drawn(
        cls, data: st.DataObject, tokenizer: Tokenizer, config: Config, outputs: tuple[str, ...]
    ) -> Case:
        """A stream of one of ``outputs`` (cut short, ids added), its options, chunking and
        how each chunk comes drawn."""
        draw = data.draw
        chat_request = ChatRequest(
            messages=Raw(b"[]"),
            tools=CHAT_TOOLS,
            tool_choice=draw(st.sampled_from(["auto", "none", "required"])),
            include_reasoning=draw(_mostly(True, False)),
            logprobs=draw(st.booleans()),
            top_logprobs=draw(st.integers(0, 1)),
            return_token_ids=draw(_mostly(None, False, True)),
            chat_template_kwargs={
                "enable_thinking": draw(_mostly(True, False)),
                # Nemotron 3 keeps what it streams as reasoning for an answer then.
                "force_nonempty_content": draw(st.booleans()),
            },
        )
        output = tokenizer.encode(draw(st.sampled_from(outputs)))
        output = output[: draw(st.integers(1, len(output)))]
        # Any id besides: the outputs' (markers among them), or any of the vocabulary's.
        any_id = st.sampled_from(output) | st.integers(0, tokenizer.vocab_size - 1)
        output += draw(st.lists(any_id, max_size=6))
        sizes = st.integers(1, 3) | st.just(1) | st.just(1) | st.just(0)
        chunks: list[GenerateChunk] = []
        at = 0
        while at < len(output):
            size = draw(sizes)
            chunks.append(cls._chunk(draw, output[at : at + size]))
            at += size
        last = chunks[-1].choices[0]
        last.finish_reason = draw(st.sampled_from([None, "stop", "length"]))
        last.stop_reason = draw(st.sampled_from([None, 7, "</s>"]))
        return cls(config, chat_request, chunks, draw(st.sampled_from([None, "asked-model"])))

    @staticmethod
    def _chunk(draw: Callable[[st.SearchStrategy[Any]], Any], ids: list[int]) -> GenerateChunk:
        logprobs = None
        if draw(_seldom()):
            top = (GenerateLogProb(token_id=ids[0] if ids else 0, logprob=-1.0),)
            content = [GenerateLogProbsContent(i, None, -0.5, 1, top) for i in ids]
            logprobs = GenerateLogProbs(content)
        sent = bool(ids) or draw(st.booleans())  # an empty chunk's ids may be left out
        choice = GenerateStreamChoice(0, token_ids=ids if sent else None)
        choice.logprobs = logprobs
        usage = UsageInput(3, 4) if draw(_seldom()) else None
        return GenerateChunk(choices=[choice], request_id="stream", usage=usage)


def _chunkings(ids: list[int]) -> Iterator[list[list[int]]]:
    """``ids`` cut by each of a few cycles of chunk sizes, from every offset in its cycle."""
    for sizes in ((1,), (2, 1), (3, 1)):
        for offset in range(sum(sizes)):
            cuts = [ids[:offset]] if offset else []
            at = offset
            for size in itertools.cycle(sizes):
                if at >= len(ids):
                    break
                cuts.append(ids[at : at + size])
                at += size
            yield cuts


def _written(reply: object) -> bytes:
    """A reply's bytes, but for ``created`` (the clock may tick between the two paths)."""
    encoded = bytes(reply) if isinstance(reply, Raw) else encoder.encode(reply)
    return _CREATED.sub(b"", encoded)


def _answers(tokenizer: Tokenizer, case: Case, fast: bool) -> list[bytes]:
    """Everything a stream's chunks answer and leave in its session, chunk by chunk:
    continued as a hit (``fast``) or by the request built from the session."""
    builder = SessionBuilder(tokenizer, factory_for(tokenizer, case.tool, case.reasoning))
    derenderer = ParsedStreamDerenderer(tokenizer)
    first = ChatStreamDerenderRequest(
        case.chunks[0], prompt_token_ids=tokenizer.encode(PROMPT), chat_request=case.chat_request
    )
    session = builder.new(first)
    reply, state = derenderer.chunk(first, MODEL, session)
    answers = [_written(reply), encoder.encode(state)]
    for chunk in case.chunks[1:]:
        if fast:
            hit = Continued(chunk, case.requested, 5)
            reply, state = derenderer.continued(hit, MODEL, session)
        else:
            request = session.request_for(chunk, case.requested, 5)
            reply, state = derenderer.chunk(request, MODEL, session)
        answers += [_written(reply), encoder.encode(state)]
        answers += [carried_state(state, session, CONTEXT), carried_state(state, session, None)]
        answers += [session.snapshot(), encoder.encode(session.carried)]
    return answers


@pytest.fixture(scope="module")
def tokenizers(
    tokenizer: Tokenizer, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Tokenizer]:
    """The configurations' tokenizers by name, each loaded once."""

    @functools.cache
    def load(name: str) -> Tokenizer:
        if name == "qwen3":
            return tokenizer
        if name == "deepseek":
            return qwen3_with_tokens(CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_FINISH, SEP)
        if name == "llama3":
            return qwen3_with_tokens("<|python_tag|>")
        if name == "dsml":
            return qwen3_with_tokens("｜DSML｜")
        if name == "mistral_v13":
            return load_tokenizer(str(tekken_tokenizer_dir(name)))
        return load_tokenizer(str(write_synthetic_tokenizer(name, tmp_path_factory.mktemp(name))))

    return load


@pytest.mark.parametrize(
    ("config", "tokenizer_name", "outputs"),
    CONFIGS,
    ids=["+".join(map(str, config)) for config, _, _ in CONFIGS],
)
@settings(PROPS, max_examples=60)
@given(data=st.data())
def test_a_hit_is_answered_as_the_request_built_for_it_is(
    tokenizers: Callable[[str], Tokenizer],
    config: Config,
    tokenizer_name: str,
    outputs: tuple[str, ...],
    data: st.DataObject,
) -> None:
    tokenizer = tokenizers(tokenizer_name)
    case = Case.drawn(data, tokenizer, config, outputs)
    assert _answers(tokenizer, case, fast=True) == _answers(tokenizer, case, fast=False)


@pytest.mark.parametrize(
    ("config", "tokenizer_name", "outputs"),
    CONFIGS,
    ids=["+".join(map(str, config)) for config, _, _ in CONFIGS],
)
def test_every_chunking_of_an_output_is_answered_alike(
    tokenizers: Callable[[str], Tokenizer],
    config: Config,
    tokenizer_name: str,
    outputs: tuple[str, ...],
) -> None:
    """Each output whole, in chunks of one id, or chunks of two or three ids each followed
    by one of one id (the chunks a hit's fast path may answer), from every offset: every
    place a marker, a blank or held text can meet a chunk's edge (what random chunking
    reaches only by chance)."""
    tokenizer = tokenizers(tokenizer_name)
    request = ChatRequest(
        messages=Raw(b"[]"),
        tools=CHAT_TOOLS,
        tool_choice="auto",
        chat_template_kwargs={"force_nonempty_content": True},
    )
    for output in outputs:
        for cuts in _chunkings(tokenizer.encode(output)):
            chunks = [
                GenerateChunk([GenerateStreamChoice(0, token_ids=cut)], "stream") for cut in cuts
            ]
            chunks[-1].choices[0].finish_reason = "stop"
            case = Case(config, request, chunks)
            assert _answers(tokenizer, case, fast=True) == _answers(tokenizer, case, fast=False)


def test_a_plain_chunk_builds_no_request_and_writes_its_reply_at_once(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = SessionBuilder(tokenizer, factory_for(tokenizer, "hermes", "qwen3"))
    derenderer = ParsedStreamDerenderer(tokenizer)
    first = ChatStreamDerenderRequest(
        GenerateChunk([GenerateStreamChoice(0, token_ids=tokenizer.encode("<think>\n"))]),
        prompt_token_ids=tokenizer.encode(PROMPT),
        chat_request=ChatRequest(messages=Raw(b"[]")),
    )
    session = builder.new(first)
    derenderer.chunk(first, MODEL, session)

    def refused(*args: object) -> None:
        raise AssertionError("a plain chunk's request was built")

    def fed(text: str) -> str:
        """The chunks of ``text``, an id each; the text of their replies' deltas."""
        shown = []
        for token in tokenizer.encode(text):
            chunk = GenerateChunk([GenerateStreamChoice(0, token_ids=[token])])
            reply, _ = derenderer.continued(Continued(chunk), MODEL, session)
            assert isinstance(reply, Raw)  # written at once
            delta = msgspec.json.decode(bytes(reply))["choices"][0]["delta"]
            shown.append(delta["reasoning"] or delta["content"] or "")
        return "".join(shown)

    with monkeypatch.context() as patch:
        patch.setattr(StreamSession, "request_for", refused)
        assert fed("A plain thought, its words.") == "A plain thought, its words."
    fed("\n</think>\n\n")
    with monkeypatch.context() as patch:
        patch.setattr(StreamSession, "request_for", refused)
        assert fed("A plain answer, in words.") == "A plain answer, in words."


def test_a_reasoning_parser_that_reads_chunks_otherwise_calls_no_text_plain() -> None:
    """``Qwen3Reasoning.plain_text`` is its own ``stream``'s test: a subclass with its own
    ``stream``, ``ended_by`` or ``_delta`` and no ``plain_text`` of its own says no text is
    plain (its chunks go through the general path); one that keeps them keeps ``plain_text``."""
    from parsers.engine.reasoning import HoldingReasoning
    from parsers.families.minicpmv import MiniCPMVReasoning
    from parsers.families.qwen3 import Qwen3Reasoning

    def subclass(**members: Any) -> type[Qwen3Reasoning]:
        return type("Sub", (Qwen3Reasoning,), members)

    assert Qwen3Reasoning._stream_is_ours and HoldingReasoning._stream_is_ours
    assert not MiniCPMVReasoning._stream_is_ours
    held = type("Held", (HoldingReasoning,), {"stream": HoldingReasoning.stream})
    assert not held._stream_is_ours
    for name in ("stream", "ended_by", "_delta"):
        assert not subclass(**{name: getattr(Qwen3Reasoning, name)})._stream_is_ours
    assert subclass(finish=Qwen3Reasoning.finish)._stream_is_ours
    own = subclass(stream=Qwen3Reasoning.stream, plain_text=Qwen3Reasoning.plain_text)
    assert own._stream_is_ours


@settings(PROPS, max_examples=300)
@given(
    ids=st.frozensets(st.integers(0, 5), max_size=3),
    chars=st.frozensets(st.sampled_from("<>[a"), max_size=4),
    text=st.text(alphabet="<>[ab ", max_size=5),
    token_ids=st.lists(st.integers(0, 7), max_size=3),
    section=st.sampled_from(["reasoning", "content"]),
    checked=st.booleans(),
)
def test_a_plain_check_passes_what_its_parser_told_plain_and_counts_it(
    ids: frozenset[int],
    chars: frozenset[str],
    text: str,
    token_ids: list[int],
    section: Section,
    checked: bool,
) -> None:
    """Each shape of ``_plain_check`` (characters one by one or as a set, one id or
    many, a parser's own check of the text) passes a chunk of text and ids iff neither
    has one of what ``PlainText`` names and the check passes it, and counts the chunk's
    ids when it does."""
    state = ChatStreamState(output_tokens=4)
    check = ends_unspaced if checked else None
    plain = _plain_check(state, section, PlainText(ids, chars, check))
    passes = bool(text and token_ids) and ids.isdisjoint(token_ids) and chars.isdisjoint(text)
    passes = passes and not (checked and text.endswith(" "))
    assert plain(text, token_ids) == (section if passes else None)
    assert state.output_tokens == 4 + (len(token_ids) if passes else 0)


def test_a_tool_or_think_tag_parser_that_reads_chunks_otherwise_calls_no_text_plain() -> None:
    """So are ``EngineTools.plain_text`` (a format with its own ``stream`` or ``_delta``,
    as Gemma 4's and PLaMo 3's are, takes the general path) and ``ThinkTagStream``'s
    (its own ``stream`` or ``ended_by``), unless the subclass gives its own
    ``plain_text``."""
    from parsers.engine.tools import EngineTools
    from parsers.families.gemma4 import Gemma4Tools
    from parsers.families.glm import GlmTools
    from parsers.families.plamo3 import PlamoTools
    from parsers.families.think import ThinkTagStream

    assert EngineTools._stream_is_ours and GlmTools._stream_is_ours
    assert not Gemma4Tools._stream_is_ours and not PlamoTools._stream_is_ours
    for name in ("stream", "_delta"):
        assert not type("Sub", (GlmTools,), {name: getattr(GlmTools, name)})._stream_is_ours
    own = type("Own", (GlmTools,), {"stream": GlmTools.stream, "plain_text": GlmTools.plain_text})
    assert own._stream_is_ours
    assert ThinkTagStream._stream_is_ours
    for name in ("stream", "ended_by"):
        sub = type("Sub", (ThinkTagStream,), {name: getattr(ThinkTagStream, name)})
        assert not sub._stream_is_ours
