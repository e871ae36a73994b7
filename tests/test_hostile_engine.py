"""Hostile model output through the marker engine, qwen3_coder, hermes, llama3_json and
forced choice: storms of markers and half-markers, deep nesting, escape storms.

Model output is untrusted, so these check that nothing raises, that any chunking of a
stream assembles the same message, and that the incremental parameter scan reads
parameters exactly as the regexes it replaces. The deadline only detects hangs; speed
is measured outside the test suite (see the timing table in docs/parity.md).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.tokens.tokenizer import Tokenizer
from parsers.engine.tools import coalesce_calls
from parsers.families.qwen3_coder import ParamScan
from parsers.registry import ParserFactory
from parsers.types import DeltaToolCall, OutputRefused, ParseOptions, ToolSpec, Vocabulary
from tests.support.golden import synthetic_model
from tests.support.parity import Assembled, chunked, chunking_invariant
from tests.support.streams import run, with_response_template
from tests.support.tokenizers import bundled_tokenizer

TOOLS = (
    ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec(
        "count",
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": "array"},
                "o": {"type": "object"},
            },
        },
    ),
)
HOSTILE = [
    ">",
    "<",
    "</",
    "<think>",
    "</think>",
    "<thi",
    "<tool_call>",
    "</tool_call>",
    "<tool_",
    "<longcat_tool_call>",
    "</longcat_tool_call>",
    "<function=",
    "<function=count>",
    "</function>",
    "<parameter=",
    "<parameter=x>",
    "<parameter=n>",
    "< parameter = o >",
    "</parameter>",
    "</ parameter >",
    "[[[[",
    "]]",
    '{"a":',
    '{"name": "count", "arguments": ',
    '"',
    "\\",
    '\\"',
    "\n",
    "12",
    "  ",
    "Here is my thought process:",
    "Here's my response:",
    "Here is my",
    "<|message_model|>",
    "<|content_thinking|>",
    "<|content_text|>",
    "<|content_invoke_tool_json|>",
    "<|end_message|>",
    "<|content_",
    '{"name": "count", "args": ',
    "<｜tool_calls_begin｜>",
    "<｜tool_call_begin｜>function<｜tool_sep｜>",
    '<steptml:invoke name="count">',
    '<steptml:parameter name="n">',
    "</steptml:parameter>",
    "<｜tool_call_end｜>",
    "<｜tool_calls_end｜>",
    " to=self<|message|>",
    "<|start|>assistant to=count<|message|>",
    "<|message|>",
    "<|eom|>",
    "<|start|>",
    "<atem:function_calls>",
    '<atem:invoke name="count">',
    '<atem:parameter name="n">',
    "</atem:parameter>",
    "</atem:invoke>",
    " to",
    "function call<|role_sep|>\n",
    "<|function_call|>",
    "<|message_sep|>",
    '{"name": "count", "arguments": {"n": ',
    "}</s>",
    "<|tool_call>call:count{",
    '<|"|>',
    "x:",
    "{a:[",
    "(",
    ")",
    "<tool_call|>",
    '<tool_call>[{"name": "count", "arguments": ',
    "},{",
    "]",
    "<tool_calls>",
    "</tool_calls>",
    "<think>\n",
    "\n</think>\n<answer>\n",
    "<tool_call>get_weather",
    "<arg_key>city</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "</tool_call>",
    "<|action_start|>",
    "<|action_start|><|plugin|>\n",
    '{"name": "count", "parameters": ',
    "<|action_end|>",
    "<|open|>think<|sep|>",
    "<|close|>think<|sep|>",
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|close|>message<|sep|>",
    "<|open|>tools<|sep|>",
    '<|open|>call tool="count" index="1"<|sep|>',
    '<|open|>argument key="n" type="number"<|sep|>',
    '<|open|>argument key="o" type="object"<|sep|>',
    "<|close|>argument<|sep|>",
    "<|close|>call<|sep|>",
    "<|open|>",
    "<|close|> call",
    "<|sep|>",
    "<ifm|tool_calls>",
    "</ifm|tool_calls>",
    "<ifm|tool_call>count",
    "</ifm|tool_call>",
    "<ifm|arg_key>n</ifm|arg_key>",
    "<ifm|arg_type>int</ifm|arg_type>",
    "<ifm|arg_value>",
    "</ifm|arg_value>",
    "<ifm|arg_",
    "<|tools_prefix|>",
    '[{"count": {"n": ',
    "<|tools_suffix|>",
    "<|tool_call_start|>",
    "[f(a='",
    "<|tool_call_end|>",
]
DEEP = "[" * 1200
CONFIGS = [
    ("qwen3", None),
    ("qwen3", "hermes"),
    (None, "hermes"),
    ("qwen3", "qwen3_coder"),
    (None, "qwen3_coder"),
    ("deepseek_r1", "hermes"),
    ("deepseek_r1", "longcat"),
    ("step5", "step5"),
    ("step3p5", "step3p5"),
    (None, "granite4"),
    ("granite", "granite4"),
    ("inkling", "inkling"),
    (None, "inkling"),
    ("holo2", "hermes"),
    ("nemotron_v3", "qwen3_coder"),
    (None, "phi4_mini_json"),
    ("olmo3", None),
    ("mimo", "mimo"),
    ("ernie45", "ernie45"),
    ("step3", "step3"),
    ("muse", "muse"),
    (None, "muse"),
    ("muse_glimmer", "muse_glimmer"),
    (None, "gigachat3"),
    ("gemma4", "gemma4"),
    (None, "gemma4"),
    ("granite_thinking_parser", "qwen3_coder"),
    (None, "granite"),
    ("cohere_command3", "cohere_command3"),
    ("cohere_command4", "cohere_command4"),
    (None, "poolside_v1"),
    ("hunyuan_a13b", "hunyuan_a13b"),
    (None, "hunyuan_a13b"),
    ("hy_v3", None),
    ("hy_v4", None),
    (None, "olmo3"),
    ("olmo3", "olmo3"),
    (None, "dots"),
    (None, "internlm"),
    (None, "functiongemma"),
    ("plamo3", "plamo3"),
    (None, "plamo3"),
    ("minicpmv", "qwen3_coder"),
    ("minicpmv", None),
    (None, "minicpm5"),
    ("kimi_k3", "kimi_k3"),
    ("kimi_k3", None),
    (None, "kimi_k3"),
    (None, "k2_horizon"),
    (None, "apertus"),
    (None, "lfm2"),
    ("hf", "hf"),
    ("hf", None),
    ("beam", "beam"),
]
HOSTILE_SETTINGS = settings(
    max_examples=40,
    deadline=60_000,  # a hang detector only
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

hostile_output = st.lists(st.sampled_from(HOSTILE) | st.just(DEEP), min_size=1, max_size=60).map(
    "".join
)


def options(**kwargs: Any) -> ParseOptions:
    return ParseOptions(tools=TOOLS, **({"tool_choice": "auto"} | kwargs))


@pytest.mark.parametrize(("reasoning", "tool"), CONFIGS)
@HOSTILE_SETTINGS
@given(output=hostile_output, cuts=st.lists(st.integers(0, 4000), max_size=12))
# poolside_v1 leaves the call open: the chunking decides its ``{}`` (poolside-open-call).
@example(output="<tool_call>function call<|role_sep|>\n\n</think>\n<answer>\n", cuts=[])
def test_hostile_output_parses_and_any_chunking_assembles_the_same(
    tokenizer: Tokenizer, reasoning: str | None, tool: str | None, output: str, cuts: list[int]
) -> None:
    factory = ParserFactory(tool, reasoning, True, with_response_template(tokenizer.vocabulary))
    # A refusal is vLLM's own answer (its parser raises: a 400), never a crash.
    with contextlib.suppress(OutputRefused):
        factory.for_request(options()).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    try:
        by_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
        by_cuts, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    except OutputRefused:
        return
    if chunking_invariant(reasoning, output, tool):
        assert by_cuts == by_token


@pytest.mark.parametrize(
    ("reasoning", "tool", "output", "one_token", "one_chunk"),
    [
        # qwen3-switch-chunk: the switching chunk stays with MiMo's reasoning engine.
        (
            "mimo",
            "mimo",
            "<tool_call>\n</think>\n<answer>\n",
            Assembled(),
            Assembled(content="<tool_call>\n\n<answer>\n"),
        ),
        # muse-framing: a second header's `` to`` is sent before its ``=`` is in.
        (
            None,
            "muse",
            " to=self<|message|> to=self<|message|>",
            Assembled(reasoning=" to=self"),
            Assembled(),
        ),
        # poolside-open-call: an open call's ``{}`` comes with a last chunk naming it.
        (
            None,
            "poolside_v1",
            "<tool_call>function call<|role_sep|>\n  ",
            Assembled(calls={0: ["function call<|role_sep|>", ""]}),
            Assembled(calls={0: ["function call<|role_sep|>", "{}"]}),
        ),
        (
            None,
            "poolside_v1",
            "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>Paris</arg_",
            Assembled(calls={0: ["get_weather", '{"city": "Paris']}),
            Assembled(calls={0: ["get_weather", '{"city": "Paris"}']}),
        ),
    ],
)
def test_unclaimed_outputs_depend_on_the_chunking_as_in_vllm(
    tokenizer: Tokenizer,
    reasoning: str | None,
    tool: str,
    output: str,
    one_token: Assembled,
    one_chunk: Assembled,
) -> None:
    """vLLM 0.33.0's streams of these outputs (checked with its parsers), one token per
    chunk and as one chunk; the chunking property leaves them out (docs/parity.md)."""
    factory = ParserFactory(tool, reasoning, True, with_response_template(tokenizer.vocabulary))
    ids = tokenizer.encode(output)
    assert not chunking_invariant(reasoning, output, tool)
    assert run(tokenizer, factory, options(), [[i] for i in ids], "stop")[0] == one_token
    assert run(tokenizer, factory, options(), [ids], "stop")[0] == one_chunk


@pytest.mark.parametrize(
    "forced", [{"tool_choice": "required"}, {"tool_choice": None, "named_tool": "count"}]
)
@HOSTILE_SETTINGS
@given(output=hostile_output)
def test_forced_choice_on_hostile_output_never_raises(
    tokenizer: Tokenizer, forced: dict[str, Any], output: str
) -> None:
    factory = ParserFactory("hermes", None, True, tokenizer.vocabulary)
    factory.for_request(options(**forced)).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    run(tokenizer, factory, options(**forced), [[i] for i in ids], "stop")


@HOSTILE_SETTINGS
@given(
    output=st.lists(
        st.sampled_from(['{"name": "count", "parameters": ', "; ", *HOSTILE]) | st.just(DEEP),
        min_size=1,
        max_size=40,
    ).map(lambda parts: "<|python_tag|>" + "".join(parts)),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_llama3_json_on_hostile_output_never_raises(output: str, cuts: list[int]) -> None:
    factory = ParserFactory("llama3_json", None, True, Vocabulary({"<|python_tag|>": 128010}))
    factory.for_request(options()).parse(output, [], "seed")
    bounds = sorted({c % (len(output) + 1) for c in cuts} | {0, len(output)})
    pieces = [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    stream = factory.stream_for_request(options(), "seed")
    folded = Assembled()
    for i, piece in enumerate(pieces):
        folded.add(stream.step(piece, [0], "stop" if i == len(pieces) - 1 else None, [])[0])


@HOSTILE_SETTINGS
@given(
    output=st.lists(
        st.sampled_from(['{"name": "count", "arguments": ', "<function_call>", *HOSTILE])
        | st.just(DEEP),
        min_size=1,
        max_size=40,
    ).map(lambda parts: "<function_call>" + "".join(parts)),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_granite_fc_on_hostile_output_never_raises(output: str, cuts: list[int]) -> None:
    """llama3_json's reading in granite-20b-fc's dialect (its stream, like vLLM's, depends
    on the chunking: no claim but that it reads)."""
    factory = ParserFactory("granite-20b-fc", None, True, Vocabulary({}))
    factory.for_request(options()).parse(output, [], "seed")
    bounds = sorted({c % (len(output) + 1) for c in cuts} | {0, len(output)})
    pieces = [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    stream = factory.stream_for_request(options(), "seed")
    for i, piece in enumerate(pieces):
        stream.step(piece, [0], "stop" if i == len(pieces) - 1 else None, [])


@pytest.mark.parametrize(
    "output",
    [
        '<tool_call>{"name": "count", "arguments": {"x": ' + DEEP * 2,
        '<tool_call>{"name": "count", "arguments": {"x": ' + DEEP + "]" * 1200 + "}}</tool_call>",
        "<tool_call>\n<function=count>\n<parameter=x>\n" + DEEP + "]" * 1200 + "\n</parameter>",
        "<tool_call>\n<function=count>\n<parameter=o>\n" + '{"a":' * 1500 + "\n</parameter>",
    ],
)
@pytest.mark.parametrize("tool", ["hermes", "qwen3_coder"])
def test_nesting_too_deep_for_json_is_content_not_an_error(
    tokenizer: Tokenizer, tool: str, output: str
) -> None:
    factory = ParserFactory(tool, None, True, tokenizer.vocabulary)
    for forced in ({}, {"tool_choice": "required"}, {"tool_choice": None, "named_tool": "count"}):
        factory.for_request(options(**forced)).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    run(tokenizer, factory, options(), [[i] for i in ids], "stop")


# ------------------------------------------------------------------ qwen3_coder chunkings

CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
END = "\n</function>\n</tool_call>"


def assembled_by_text(factory: ParserFactory, output: str, bounds: list[int]) -> Assembled:
    """The message a stream assembles when ``output`` arrives cut at ``bounds``."""
    stream = factory.stream_for_request(options(), "seed")
    pieces = [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    folded = Assembled()
    for i, piece in enumerate(pieces):
        folded.add(stream.step(piece, [0], "stop" if i == len(pieces) - 1 else None, [])[0])
    return folded


@pytest.mark.parametrize(
    ("output", "arguments"),
    [
        # Found by the hostile test (shrunk): one token per chunk streamed ``< parameter``
        # into x's value, then stopped; in one chunk the same text was an opener.
        ("<function=<parameter=x><parameter=x>< parameter = o >", '{"x": "", "o ": "'),
        # The same class written by hand; every chunking now reads as vLLM's one-shot
        # (vLLM streams {"city": "ab < parameter one token per chunk).
        (CALL + "ab < parameter = n >\n1\n</parameter>" + END, '{"city": "ab ", "n ": "1"}'),
        # A spelled closing tag (vLLM streams {"city": "Paris\n</ parameter  and stops).
        (CALL + "Paris\n</ parameter >" + END, '{"city": "Paris"}'),
        # Text that only looks like the start of a tag is value text, sent when that is
        # known, or when the call ends.
        (CALL + "<p>a <\n</p> </param> <para" + END[:12], '{"city": "<p>a <\\n</p> </param> <para'),
        # A repeated key open inside the JSON (not last): its value passing through the
        # value sent for it (a) let vLLM send y's text one token per chunk only.
        (
            "<tool_call>\n<function=f>\n<parameter=x>a</parameter><parameter=y></parameter>"
            "<parameter=x>q</parameter><parameter=y>b</parameter><parameter=x>a b</parameter>"
            + END,
            '{"x": "a", "y": "',
        ),
    ],
)
def test_qwen3_coder_arguments_are_the_same_in_every_chunking(
    tokenizer: Tokenizer, output: str, arguments: str
) -> None:
    factory = ParserFactory("qwen3_coder", None, True, tokenizer.vocabulary)
    ids = tokenizer.encode(output)
    by_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    assert [args for _, args in by_token.calls.values()] == [arguments]
    for chunks in ([ids], chunked(ids, range(0, len(ids), 2)), chunked(ids, range(1, len(ids), 3))):
        assert run(tokenizer, factory, options(), chunks, "stop")[0] == by_token
    # As text alone (no token ids, so ``<tool_call>`` is content), cut at every character.
    by_character = assembled_by_text(factory, output, list(range(len(output) + 1)))
    assert by_character == assembled_by_text(factory, output, [0, len(output)])
    assert by_character.calls == by_token.calls


coder_body = st.lists(
    st.sampled_from(
        [
            *("<parameter=x>", "<parameter=y>", "</parameter>", "< parameter = x >"),
            *("< parameter=y>", "</ parameter >", "< /parameter>", "<", "< ", "</", "<p"),
            *("a", " b", "\n"),
        ]
    ),
    min_size=1,
    max_size=24,
).map("".join)


@settings(max_examples=200, deadline=60_000, suppress_health_check=[HealthCheck.too_slow])
@given(
    head=st.sampled_from(["<tool_call>\n<function=f>\n", "<tool_call>\n<function=get_weather>\n"]),
    body=coder_body,
    end=st.sampled_from(["", END]),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_qwen3_coder_parameters_assemble_the_same_cut_anywhere(
    tokenizer: Tokenizer, head: str, body: str, end: str, cuts: list[int]
) -> None:
    """Spelled tags, tag-like text and repeated keys, cut at any character."""
    factory = ParserFactory("qwen3_coder", None, True, tokenizer.vocabulary)
    output = head + body + end
    size = len(output)
    whole = assembled_by_text(factory, output, [0, size])
    assert assembled_by_text(factory, output, list(range(size + 1))) == whole
    assert (
        assembled_by_text(factory, output, sorted({c % (size + 1) for c in cuts} | {0, size}))
        == whole
    )


# ------------------------------------------------------------------ parameter scan

# vLLM's parameter regexes, kept here as the reference the incremental scan must match.
_PARAM_RE = re.compile(
    r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s*=))",
    re.DOTALL,
)
_OPEN_PARAM_RE = re.compile(r"<\s*parameter\s*=\s*([^>]+)>(.*)$", re.DOTALL)
# Text that may still grow into the end of a value (vLLM asks its regex module for a
# partial match of the end pattern; the standard module spells the prefixes out).
_VALUE_END_PREFIX = re.compile(
    r"<\s*(?:/\s*)?(?:p(?:a(?:r(?:a(?:m(?:e(?:t(?:e(?:r\s*)?)?)?)?)?)?)?)?)?"
)


def reference_parameters(raw: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    matches = list(_PARAM_RE.finditer(raw))
    open_match = _OPEN_PARAM_RE.search(raw[matches[-1].end() :] if matches else raw)
    pairs = [(m.group(1), m.group(2)) for m in matches]
    return pairs, (open_match.group(1), open_match.group(2)) if open_match else None


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            [
                *("<parameter=", "</parameter>", "< parameter\n=", "</ parameter >", "<", "</"),
                *("parameter", "=", ">", "a", "b", " ", "\n", "<parameter=>", "x>v"),
            ]
        ),
        max_size=30,
    ),
    cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_the_parameter_scan_reads_as_vllms_regexes(parts: list[str], cuts: list[int]) -> None:
    """Same parameters and open parameter as the regexes, however the body arrives
    (the open one looked for after the last complete parameter; see docs/parity.md)."""
    raw = "".join(parts)
    scan = ParamScan()
    found: list[tuple[str, str]] = []
    for end in sorted({c % (len(raw) + 1) for c in cuts} | {len(raw)}):
        while (parameter := scan.next_parameter(raw[:end])) is not None:
            found.append(parameter)
    expected, expected_open = reference_parameters(raw)
    assert found == [
        (name.lstrip(), value.removeprefix("\n").removesuffix("\n")) for name, value in expected
    ]
    name = scan.open_name(raw)
    if expected_open is None:
        assert name is None
    else:
        assert (name, raw[scan.name_end + 1 :]) == expected_open
        # Held back: exactly the value's last ``<...`` when it may still grow into the
        # value's end (which vLLM streams, and then cannot take back).
        value = raw[scan.name_end + 1 :]
        last = value[value.rfind("<") :] if "<" in value else ""
        assert raw[scan.settled() :] == (last if _VALUE_END_PREFIX.fullmatch(last) else "")


def test_coalesced_pieces_keep_the_first_ones_fields_and_all_arguments_in_order() -> None:
    """One delta per call index; its arguments are every piece's, joined in order (None
    stays None only when no piece has any), whatever the number of pieces."""
    pieces = [
        DeltaToolCall(index=0, id="a", type="function", name="f"),
        DeltaToolCall(index=1, id="b", type="function", name="g", arguments=""),
        *(DeltaToolCall(index=0, arguments=f"{i}," if i % 3 else None) for i in range(3000)),
        DeltaToolCall(index=2, id="c", name="h"),
        DeltaToolCall(index=2, type="function"),
    ]
    merged = coalesce_calls(pieces)
    expected = "".join(f"{i}," for i in range(3000) if i % 3)
    assert [(c.index, c.id, c.type, c.name, c.arguments) for c in merged] == [
        (0, "a", "function", "f", expected),
        (1, "b", "function", "g", ""),
        (2, "c", "function", "h", None),
    ]
    alone = [DeltaToolCall(index=0, arguments="x"), DeltaToolCall(index=1)]
    assert coalesce_calls(alone) is alone


@HOSTILE_SETTINGS
@given(
    output=st.lists(
        st.sampled_from(['{"name": "count", "arguments": ', "<tool_calls>", "</tool_calls>"])
        | st.sampled_from(["[", "]", ", ", *HOSTILE])
        | st.just(DEEP),
        min_size=1,
        max_size=40,
    ).map(lambda parts: "<tool_calls>[" + "".join(parts)),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_jamba_on_hostile_output_never_raises(output: str, cuts: list[int]) -> None:
    """vLLM's jamba reading, on its markers' synthetic tokenizer (its stream, like vLLM's,
    depends on the chunking: no claim but that it reads)."""
    tokenizer = bundled_tokenizer(str(synthetic_model("jamba")))
    factory = ParserFactory("jamba", None, True, tokenizer.vocabulary)
    factory.for_request(options()).parse(output, [], "seed")
    ids = tokenizer.encode(output)
    run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
