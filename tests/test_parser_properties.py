"""Streamed parsing over generated outputs: chunking, one-shot agreement, snapshots.

Outputs are built from pieces that stress the parsers (markers, CJK and emoji split
across byte tokens, braces, quotes and marker-like text inside arguments, parallel,
repeated and zero-argument calls, malformed JSON, cuts by ``length``), tokenized
with the bundled Qwen3 tokenizer and fed through stream sessions in random
chunkings. Classes where vLLM 0.33.0's own stream depends on the chunking are
kept out of the invariance claims and listed in docs/parity.md.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from app.streams.session import StreamSession
from app.tokens.tokenizer import Tokenizer
from parsers.engine.core import EngineState, MarkerEngine
from parsers.families import dots
from parsers.families.qwen3 import Qwen3Grammar
from parsers.registry import ParserFactory
from parsers.types import Vocabulary
from tests.support.golden import synthetic_model
from tests.support.outputs import args, llama_output, text
from tests.support.parity import Assembled, chunked, chunking_invariant
from tests.support.streams import PROMPT, PROPS, factory_for, options, run, stream
from tests.support.tokenizers import bundled_tokenizer


@st.composite
def hermes_output(draw: st.DrawFn, reasoning: bool, tag: str = "tool_call") -> str:
    out = "<think>\n" if draw(st.booleans()) and reasoning else ""
    if reasoning:
        out += draw(text) + "\n</think>\n\n"
    calls = draw(st.lists(args, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    for name, arguments in calls:
        separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
        body = json.dumps(
            {"name": name, "arguments": arguments}, ensure_ascii=False, separators=separators
        )
        out += f"<{tag}>\n{body}\n</{tag}>"
    return out


@st.composite
def window_output(draw: st.DrawFn) -> str:
    """Plain text and a run of ``<`` (each may start a delimiter) 60 to 70 characters
    long, or as far past the template reader's second stretch of 64, before an output."""
    length = draw(st.integers(60, 70)) + draw(st.sampled_from([0, 64]))
    run = draw(st.one_of(st.just(length), st.integers(0, length)))
    return "x" * (length - run) + "<" * run + draw(hermes_output(reasoning=True))


@st.composite
def coder_output(draw: st.DrawFn) -> str:
    out = draw(text) + "\n</think>\n\n"
    for name, arguments in draw(st.lists(args, max_size=3)):
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
        out += f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    return out


@st.composite
def step3_output(draw: st.DrawFn) -> str:
    """Reasoning, text, then a block of Step-3 ``steptml`` calls."""
    out = draw(text) + "</think>"
    calls = draw(st.lists(args, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    if not calls:
        return out
    out += "<｜tool_calls_begin｜>"
    for name, arguments in calls:
        params = "".join(
            f'<steptml:parameter name="{k}">{v}</steptml:parameter>\n' for k, v in arguments.items()
        )
        out += (
            f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{name}">\n'
            f"{params}</steptml:invoke><｜tool_call_end｜>"
        )
    return out + "<｜tool_calls_end｜>" + draw(st.one_of(st.just(""), text))


@st.composite
def internlm_output(draw: st.DrawFn) -> str:
    """Text, then at most one InternLM2 call (a second one fails the request, as vLLM's)."""
    out = draw(text)
    calls = draw(st.lists(args, max_size=1))
    for name, arguments in calls:
        body = json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)
        out += f"<|action_start|><|plugin|>\n{body}<|action_end|>" + draw(text)
    return out


@st.composite
def functiongemma_output(draw: st.DrawFn) -> str:
    """Text, then FunctionGemma calls (values written as JSON where they are not text),
    maybe text after them."""
    out = draw(text)
    for name, arguments in draw(st.lists(args, max_size=3)):
        body = ",".join(
            f"{k}:<escape>{v if isinstance(v, str) else json.dumps(v)}<escape>"
            for k, v in arguments.items()
        )
        out += f"<start_function_call>call:{name}{{{body}}}<end_function_call>"
    return out + draw(st.one_of(st.just(""), text))


@st.composite
def apertus_output(draw: st.DrawFn) -> str:
    """Text, then at most one Apertus block of calls (``[{name: arguments}, ...]``)."""
    out = draw(text)
    calls = draw(st.lists(args, max_size=3))
    if calls:
        body = json.dumps([{name: arguments} for name, arguments in calls], ensure_ascii=False)
        out += f"<|tools_prefix|>{body}<|tools_suffix|>" + draw(text)
    return out


@st.composite
def lfm2_output(draw: st.DrawFn) -> str:
    """Text, then at most one LFM2 call list, then text."""
    out = draw(text)
    calls = draw(st.lists(args, max_size=3))
    if calls:
        rendered = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
        out += f"<|tool_call_start|>[{', '.join(rendered)}]<|tool_call_end|>" + draw(text)
    return out


@st.composite
def pythonic_output(draw: st.DrawFn) -> str:
    calls = draw(st.lists(args, min_size=1, max_size=3))
    if draw(st.booleans()):
        return draw(text)
    rendered = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    return "[" + ", ".join(rendered) + "]"


@st.composite
def xlam_output(draw: st.DrawFn) -> str:
    calls = draw(st.lists(args, min_size=1, max_size=3))
    if draw(st.booleans()):
        return draw(text)
    array = json.dumps([{"name": n, "arguments": a} for n, a in calls], ensure_ascii=False)
    wrapper = draw(st.sampled_from(["{}", "Let me check.\n```json\n{}\n```", "{} "]))
    return wrapper.format(array)


@st.composite
def granite4_output(draw: st.DrawFn) -> str:
    """Granite 4.0 calls, some of them bodies vLLM drops (not JSON, not an object) or
    stops at (no arguments), with text around them."""
    out = draw(text) if draw(st.booleans()) else ""
    for name, arguments in draw(st.lists(args, max_size=3)):
        good = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        bad = ['{"name": "count", "arguments": }', "[1]", json.dumps({"name": name})]
        body = draw(st.sampled_from([good, good, *bad]))
        out += f"<tool_call>\n{body}\n</tool_call>" + draw(st.sampled_from(["", "\n", draw(text)]))
    return out


@st.composite
def granite_phrases_output(draw: st.DrawFn) -> str:
    """Granite 3.2's phrases around reasoning that says ``Here`` and half a phrase."""
    noise = st.sampled_from(["", " Here we go.", " Here is my", " He", "re's my r", " Here"])
    opening = draw(st.sampled_from(["Here is my thought process:", "Here's my thought process:"]))
    response = draw(st.sampled_from(["Here is my response:", "Here's my response:"]))
    return opening + draw(text) + draw(noise) + draw(text) + response + draw(text)


@st.composite
def inkling_output(draw: st.DrawFn, reasoning: bool) -> str:
    """Inkling's blocks, markers spelled as text (Qwen3's vocabulary has none of them)."""
    blocks = []
    if reasoning and draw(st.booleans()):
        blocks.append("<|content_thinking|>" + draw(text))
    if draw(st.booleans()):
        blocks.append("<|content_text|>" + draw(text))
    for name, arguments in draw(st.lists(args, max_size=3)):
        separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
        body = {"name": name, "args": arguments}
        blocks.append(
            "<|content_invoke_tool_json|>"
            + json.dumps(body, ensure_ascii=False, separators=separators)
        )
    return "<|message_model|>".join(block + "<|end_message|>" for block in blocks)


@st.composite
def muse_output(draw: st.DrawFn) -> str:
    """Muse's messages as the model frames them: reasoning, commentary, tool messages
    of ATEM calls (a string parameter as it is, others as JSON), an answer."""
    messages = []
    if draw(st.booleans()):
        messages.append(("self", draw(text)))
    if draw(st.booleans()):
        messages.append(("commentary", draw(text)))
    for name, arguments in draw(st.lists(args, max_size=3)):
        params = "".join(
            f'<atem:parameter name="{key}">'
            f"{value if isinstance(value, str) else json.dumps(value)}</atem:parameter>\n"
            for key, value in arguments.items()
        )
        invoke = f'<atem:invoke name="{name}">\n{params}</atem:invoke>\n'
        messages.append((name, f"<atem:function_calls>\n{invoke}</atem:function_calls>"))
    messages.append(("user", draw(text)))
    return "<|start|>assistant".join(f" to={to}<|message|>{body}<|eom|>" for to, body in messages)


def _gemma4_value(value: object) -> str:
    return f'<|"|>{value}<|"|>' if isinstance(value, str) else json.dumps(value)


@st.composite
def gemma4_output(draw: st.DrawFn, reasoning: bool) -> str:
    """Gemma 4's channel and calls, markers spelled as text (Qwen3's vocabulary has none)."""
    out = ""
    if reasoning and draw(st.booleans()):
        out += "<|channel>thought\n" + draw(text) + "<channel|>"
    calls = draw(st.lists(args, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    for name, arguments in calls:
        body = ",".join(f"{k}:{_gemma4_value(v)}" for k, v in arguments.items())
        out += f"<|tool_call>call:{name}{{{body}}}<tool_call|>"
    return out


@st.composite
def granite_array_output(draw: st.DrawFn) -> str:
    """Granite 3's calls: one JSON array after ``<tool_call>`` (Qwen3's token here)."""
    calls = draw(st.lists(args, max_size=3))
    out = draw(text) if not calls or draw(st.booleans()) else ""
    if calls:
        separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
        body = [{"name": n, "arguments": a} for n, a in calls]
        out += "<tool_call>" + json.dumps(body, ensure_ascii=False, separators=separators)
    return out


@st.composite
def cohere_output(draw: st.DrawFn, answer: str = "RESPONSE") -> str:
    """Cohere Command's sections and an action block (parameters never empty: the
    filter sends no text for ``{}``, one-shot or streamed)."""
    out = ""
    if draw(st.booleans()):
        out += "<|START_THINKING|>" + draw(text) + "<|END_THINKING|>"
    if draw(st.booleans()):
        out += f"<|START_{answer}|>" + draw(text) + f"<|END_{answer}|>"
    calls = [call for call in draw(st.lists(args, max_size=3)) if call[1]]
    if calls:
        lines = [
            "    "
            + json.dumps(
                {"tool_call_id": str(n), "tool_name": name, "parameters": arguments},
                ensure_ascii=False,
            )
            for n, (name, arguments) in enumerate(calls)
        ]
        out += "<|START_ACTION|>[\n" + ",\n".join(lines) + "\n]<|END_ACTION|>"
    return out or draw(text)


@st.composite
def a13b_output(draw: st.DrawFn) -> str:
    """Hunyuan-A13B's answer: a JSON call list in ``<tool_calls>`` (or bare), or text."""
    calls = draw(st.lists(args, max_size=3))
    if not calls:
        return draw(text)
    separators = draw(st.sampled_from([(", ", ": "), (",", ":")]))
    items = [{"name": name, "arguments": arguments} for name, arguments in calls]
    body = json.dumps(items, ensure_ascii=False, separators=separators)
    lead = draw(st.sampled_from(["", "\n", " "]))
    return lead + (f"<tool_calls>{body}</tool_calls>" if draw(st.booleans()) else body)


@st.composite
def olmo3_output(draw: st.DrawFn) -> str:
    """Olmo 3's call lines in ``<function_calls>``, some with a ``)`` on the next line,
    blank lines or spaces around them; or text alone."""
    calls = draw(st.lists(args, min_size=1, max_size=3))
    if draw(st.booleans()):
        return draw(text)
    lines = []
    for name, arguments in calls:
        values = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
        lines.append(f"{name}({values}{draw(st.sampled_from(['', chr(10), ' ']))})")
    gap = draw(st.sampled_from(["\n", "\n\n", " \n"]))
    return f"<function_calls>\n{gap.join(lines)}\n</function_calls>"


@st.composite
def dots_output(draw: st.DrawFn) -> str:
    """dots blocks of ``<invoke>`` calls or one JSON call each, text around them."""
    out = draw(text) if draw(st.booleans()) else ""
    for calls in draw(st.lists(st.lists(args, min_size=1, max_size=2), max_size=3)):
        if draw(st.booleans()):
            name, arguments = calls[0]
            body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        else:
            body = "\n".join(
                f'<invoke name="{name}">'
                + "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in arguments.items())
                + "</invoke>"
                for name, arguments in calls
            )
        out += f"<dots_function_call>\n{body}\n</dots_function_call>" + draw(
            st.sampled_from(["", "\n", " "])
        )
    return out


@st.composite
def plamo3_output(draw: st.DrawFn) -> str:
    """PLaMo 3: reasoning, its end marker, text, a block of requests, text after it."""
    out = draw(text) + "<|plamo:end_think:plamo|>"
    calls = draw(st.lists(args, max_size=3))
    if not calls or draw(st.booleans()):
        out += draw(text)
    if not calls:
        return out
    out += "<|plamo:begin_tool_requests:plamo|>"
    for name, arguments in calls:
        out += (
            "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>"
            f"{name}<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>"
            "<|plamo:constrain|>json<|plamo:msg|>"
            f"{json.dumps(arguments, ensure_ascii=False)}<|plamo:end_tool_arguments:plamo|>"
            "<|plamo:end_tool_request:plamo|>"
        )
    return out + "<|plamo:end_tool_requests:plamo|>" + draw(st.sampled_from(["", "\n", " x"]))


@st.composite
def minicpmv_output(draw: st.DrawFn) -> str:
    """Reasoning and text with MiniCPM-V's escaped newlines, code, LaTeX and reserved
    markers among the words, then Qwen3-Coder calls."""
    words = st.sampled_from(
        ["\\n", "\\r\\n", "\\", "`", "```", "$", "\\(", "\\)", "<reserved_12>", " a"]
    )
    escaped = st.lists(words | text, min_size=1, max_size=8).map("".join)
    return draw(escaped) + "</think>" + draw(escaped) + draw(coder_output()).split("</think>")[1]


@st.composite
def minicpm5_output(draw: st.DrawFn) -> str:
    """MiniCPM5's ``<function name=N><param name=K>V</param></function>`` calls, text
    around them, some with a collapsed tag name or a param without a name."""
    out = draw(text)
    for name, arguments in draw(st.lists(args, max_size=3)):
        params = "".join(f'<param name="{k}">{v}</param>' for k, v in arguments.items())
        opener = draw(st.sampled_from(['<function name="', '<functionname="']))
        out += f'{opener}{name}">{params}</function>' + draw(st.one_of(st.just(""), text))
    return out


@st.composite
def kimi_k3_output(draw: st.DrawFn) -> str:
    """Kimi K3's channels: reasoning, a response (or bare text), typed calls."""
    out = draw(text) + "<|close|>think<|sep|>"
    if draw(st.booleans()):
        out += f"<|open|>response<|sep|>{draw(text)}<|close|>response<|sep|>"
    calls = draw(st.lists(args, max_size=3))
    if calls:
        out += "<|open|>tools<|sep|>"
        for index, (name, arguments) in enumerate(calls, 1):
            out += f'<|open|>call tool="{name}" index="{index}"<|sep|>'
            for key, value in arguments.items():
                kind, body = ("string", value) if isinstance(value, str) else ("number", value)
                out += (
                    f'<|open|>argument key="{key}" type="{kind}"<|sep|>{body}'
                    "<|close|>argument<|sep|>"
                )
            out += "<|close|>call<|sep|>"
        out += "<|close|>tools<|sep|>"
    return out + "<|close|>message<|sep|>"


@st.composite
def k2_horizon_output(draw: st.DrawFn) -> str:
    """Text, then at most one K2 Horizon group of XML calls, text after it."""
    out = draw(text)
    calls = draw(st.lists(args, max_size=3))
    if calls:
        out += "<ifm|tool_calls>"
        for name, arguments in calls:
            out += f"<ifm|tool_call>{name}" + "".join(
                f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>{v}</ifm|arg_value>"
                for k, v in arguments.items()
            )
            out += "</ifm|tool_call>"
        out += "</ifm|tool_calls>" + draw(st.sampled_from(["", "\n", " Done."]))
    return out


CONFIGS = {
    "qwen3+hermes": (("hermes", "qwen3"), hermes_output(reasoning=True)),
    "deepseek_r1+hermes": (("hermes", "deepseek_r1"), hermes_output(reasoning=True)),
    "qwen3+qwen3_coder": (("qwen3_coder", "qwen3"), coder_output()),
    "qwen3": ((None, "qwen3"), hermes_output(reasoning=True)),
    "pythonic": (("pythonic", None), pythonic_output()),
    "hermes": (("hermes", None), hermes_output(reasoning=False)),
    "xlam": (("xlam", None), xlam_output()),
    "deepseek_r1+longcat": (
        ("longcat", "deepseek_r1"),
        hermes_output(reasoning=True, tag="longcat_tool_call"),
    ),
    "deepseek_r1+step5": (("step5", "step5"), coder_output()),
    "step3p5": (("step3p5", "step3p5"), coder_output()),
    "granite4": (("granite4", None), granite4_output()),
    "granite": ((None, "granite"), granite_phrases_output()),
    "inkling+inkling": (("inkling", "inkling"), inkling_output(reasoning=True)),
    "inkling": (("inkling", None), inkling_output(reasoning=False)),
    "holo2+hermes": (("hermes", "holo2"), hermes_output(reasoning=True)),
    "nemotron_v3+qwen3_coder": (("qwen3_coder", "nemotron_v3"), coder_output()),
    "mimo+mimo": (("mimo", "mimo"), coder_output()),
    "ernie45": (("ernie45", "ernie45"), hermes_output(reasoning=True)),
    "step3": (("step3", "step3"), step3_output()),
    "muse+muse": (("muse", "muse"), muse_output()),
    "gemma4+gemma4": (("gemma4", "gemma4"), gemma4_output(reasoning=True)),
    "gemma4": (("gemma4", None), gemma4_output(reasoning=False)),
    "granite_thinking_parser+qwen3_coder": (
        ("qwen3_coder", "granite_thinking_parser"),
        coder_output(),
    ),
    "granite (tools)": (("granite", None), granite_array_output()),
    "cohere_command3": (("cohere_command3", "cohere_command3"), cohere_output()),
    "cohere_command4": (("cohere_command4", "cohere_command4"), cohere_output("TEXT")),
    "hunyuan_a13b": (("hunyuan_a13b", None), a13b_output()),
    "olmo3": (("olmo3", None), olmo3_output()),
    "dots": (("dots", None), dots_output()),
    "internlm": (("internlm", None), internlm_output()),
    "functiongemma": (("functiongemma", None), functiongemma_output()),
    "plamo3+plamo3": (("plamo3", "plamo3"), plamo3_output()),
    "plamo3": (("plamo3", None), plamo3_output()),
    "minicpmv+qwen3_coder": (("qwen3_coder", "minicpmv"), minicpmv_output()),
    "minicpm5": (("minicpm5", None), minicpm5_output()),
    "kimi_k3+kimi_k3": (("kimi_k3", "kimi_k3"), kimi_k3_output()),
    "kimi_k3": ((None, "kimi_k3"), kimi_k3_output()),
    "k2_horizon (tools)": (("k2_horizon", None), k2_horizon_output()),
    "apertus": (("apertus", None), apertus_output()),
    "lfm2": (("lfm2", None), lfm2_output()),
    "hf+hf": (("hf", "hf"), st.one_of(hermes_output(reasoning=True), window_output())),
    "hf (tools)": (("hf", None), hermes_output(reasoning=False)),
    "beam+beam": (("beam", "beam"), st.one_of(hermes_output(reasoning=True), window_output())),
}
# Tool parsers whose stream takes a bounded step per chunk and leaves the rest to later
# chunks: what the last chunk leaves never goes out (vLLM's ernie45 and step3,
# docs/parity.md); functiongemma's and lfm2's arguments go out cut by the length sent
# (functiongemma-chunk-reading, lfm2-chunk-reading).
STEPPED_CALLS = frozenset({"ernie45", "step3", "internlm", "functiongemma", "minicpm5", "lfm2"})


def _without_leading_think(output: str, config: str) -> str:
    # vLLM's deepseek_r1 (and holo2, its reading, and ernie45) keeps a literal <think> in reasoning
    # when it shares a chunk with other text (docs/parity.md); its generated outputs
    # leave it to the template.
    think_tags = config.startswith(("deepseek", "holo2", "ernie45"))
    return output.removeprefix("<think>\n") if think_tags else output


@st.composite
def case(draw: st.DrawFn) -> tuple[str, str, list[int], list[int], str]:
    config = draw(st.sampled_from(sorted(CONFIGS)))
    output = _without_leading_think(draw(CONFIGS[config][1]), config)
    cuts_a = draw(st.lists(st.integers(0, 400), max_size=30))
    cuts_b = draw(st.lists(st.integers(0, 400), max_size=30))
    finish = draw(st.sampled_from(["stop", "length"]))
    return config, output, cuts_a, cuts_b, finish


# ------------------------------------------------------------------ properties


@PROPS
@given(generated=case())
def test_any_chunking_assembles_the_same_message(
    tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str]
) -> None:
    config, output, cuts_a, cuts_b, finish = generated
    (tool, reasoning), _ = CONFIGS[config]
    factory = factory_for(tokenizer, tool, reasoning)
    ids = tokenizer.encode(output)
    if finish == "length":
        ids = ids[: max(1, len(ids) * 2 // 3)]
    one_token = [[i] for i in ids]
    baseline, _ = run(tokenizer, factory, options(), one_token, finish)
    if not chunking_invariant(reasoning, output, tool):
        return  # vLLM's own stream depends on the chunking here (docs/parity.md)
    if finish == "length" and tool == "dots" and _dots_json_cut_at_closer(tokenizer.decode(ids)):
        return  # docs/parity.md, dots-cut-json-body
    for cuts in (cuts_a, cuts_b, [10**6]):
        folded, _ = run(tokenizer, factory, options(), chunked(ids, cuts), finish)
        expected = baseline
        if finish == "length" and tool == "step5":
            folded, expected = _held_whitespace_lost(folded, baseline)
        assert folded == expected, (config, output, cuts)


def _held_whitespace_lost(a: Assembled, b: Assembled) -> tuple[Assembled, Assembled]:
    """Two Step-5 streams cut by ``length``, whitespace-only content sent by one and not
    the other left out of both: Step-5 keeps such content before its calls but holds it
    until a chunk sends no call piece, so whether it is sent before the stream ends inside
    a call depends on where the chunks fell, as in vLLM (docs/parity.md,
    engine-held-content-at-cut)."""
    if (a.content and b.content) or (a.content + b.content).strip():
        return a, b
    return dataclasses.replace(a, content=""), dataclasses.replace(b, content="")


def _dots_json_cut_at_closer(text: str) -> bool:
    """Whether ``text`` ends inside an open dots block of JSON, in its closing marker's
    first characters: its call goes out only if a chunk ended after the whole object, as
    in vLLM (docs/parity.md, dots-cut-json-body)."""
    _, opener, body = text.rpartition(dots.START)
    if not opener or dots.END in body or not body.lstrip().startswith("{"):
        return False
    at = body.rfind("<")
    return at >= 0 and dots.END.startswith(body[at:])


def test_dots_json_body_cut_in_its_closer_goes_out_by_the_chunking(tokenizer: Tokenizer) -> None:
    """vLLM 0.33.0's dots stream of this output cut by ``length`` (checked with its parser):
    one token per chunk sends the JSON call once its object is whole, one chunk never sees
    it whole before the closer's start and sends the first call alone
    (docs/parity.md, dots-cut-json-body)."""
    factory = factory_for(tokenizer, "dots", None)
    invoke = f'{dots.START}\n<invoke name="noop"></invoke>\n{dots.END}'
    json_call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    ids = tokenizer.encode(f"{invoke}{dots.START}\n{json_call}\n</dots")
    assert _dots_json_cut_at_closer(tokenizer.decode(ids))
    one_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "length")
    one_chunk, _ = run(tokenizer, factory, options(), [ids], "length")
    assert one_token.calls == {0: ["noop", "{}"], 1: ["get_weather", '{"city": "Paris"}']}
    assert one_chunk.calls == {0: ["noop", "{}"]}
    assert one_token.content == one_chunk.content == ""


def test_step5_whitespace_before_calls_is_lost_when_held_to_a_cut(tokenizer: Tokenizer) -> None:
    """vLLM 0.33.0's step5 + step5 stream of this output (checked with its parsers): the
    ``\\n\\n`` after ``</think>`` goes out one token per chunk, but not when it ends the
    chunk of ``</think>`` and the rest comes in one chunk that leaves the last call's
    closing ``"}`` to the end (docs/parity.md, engine-held-content-at-cut)."""
    factory = factory_for(tokenizer, "step5", "step5")
    call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    ids = tokenizer.encode(f" x\n</think>\n\n{call}</function>\n</tool_call>{call}</function")
    head = len(tokenizer.encode(" x\n</think>\n\n"))
    one_token, _ = run(tokenizer, factory, options(), [[i] for i in ids], "length")
    two_chunks, _ = run(tokenizer, factory, options(), [ids[:head], ids[head:]], "length")
    assert (one_token.content, two_chunks.content) == ("\n\n", "")
    assert one_token.calls == two_chunks.calls


@PROPS
@given(generated=case())
def test_streams_agree_with_the_one_shot_parse(
    tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str]
) -> None:
    """Where vLLM's stream and one-shot parse agree (parsers.md section 11), so do ours."""
    config, output, cuts, _, _ = generated
    (tool, reasoning), _ = CONFIGS[config]
    factory = factory_for(tokenizer, tool, reasoning)
    ids = tokenizer.encode(output)
    folded, _ = run(tokenizer, factory, options(), chunked(ids, cuts), "stop")
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    assert folded.reasoning == (parsed.reasoning or "")
    if not parsed.tool_calls or tool in STEPPED_CALLS:
        return
    names = [call.name for call in parsed.tool_calls]
    assert [name for name, _ in folded.calls.values()] == names
    for (_, streamed), call in zip(folded.calls.values(), parsed.tool_calls, strict=True):
        # Streams carry the raw argument text, one-shot re-serializes it (section 11.1).
        assert json.loads(streamed or "{}") == json.loads(call.arguments)


@PROPS
@given(generated=case(), cut=st.integers(0, 400))
def test_snapshot_and_restore_continue_identically(
    tokenizer: Tokenizer, generated: tuple[str, str, list[int], list[int], str], cut: int
) -> None:
    config, output, cuts, _, finish = generated
    (tool, reasoning), _ = CONFIGS[config]
    factory = factory_for(tokenizer, tool, reasoning)
    ids = tokenizer.encode(output)
    chunks = chunked(ids, cuts)
    _, expected = run(tokenizer, factory, options(), chunks, finish)
    deltas = stream(
        tokenizer, factory, options(), chunks, finish, restore_at=cut % (len(chunks) + 1)
    )
    assert deltas == expected


@PROPS
@given(ids=st.lists(st.integers(0, 151_000), max_size=60), cuts=st.lists(st.integers(0, 60)))
def test_the_sessions_history_json_is_msgspecs_encoding(
    tokenizer: Tokenizer, ids: list[int], cuts: list[int]
) -> None:
    factory = factory_for(tokenizer, "hermes", "qwen3")
    session = StreamSession(tokenizer, factory.stream_for_request(options(), "seed"), [])
    for chunk in chunked(ids, cuts):
        session.feed(chunk, chunk, None)
    assert session.history_json() == (
        msgspec.Raw(msgspec.json.encode(ids)),
        msgspec.Raw(msgspec.json.encode([len(c) for c in chunked(ids, cuts)])),
    )


# ------------------------------------------------------------------ llama3_json
# Qwen3's tokenizer has no <|python_tag|>, so this parser runs on text deltas with a
# vocabulary that names one; vLLM's own streaming logic is text-based as well.


@PROPS
@given(output=llama_output(), cuts=st.lists(st.integers(0, 400), max_size=30))
def test_llama3_json_streams_the_one_shot_calls(output: str, cuts: list[int]) -> None:
    vocab = Vocabulary({"<|python_tag|>": 128010})
    factory = ParserFactory("llama3_json", None, True, vocab)
    parsed = factory.for_request(options()).parse(output, [], "seed")
    bounds = sorted({c % (len(output) + 1) for c in cuts} | {0, len(output)})
    stream = factory.stream_for_request(options(), "seed")
    folded = Assembled()
    pieces = [output[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    for i, piece in enumerate(pieces):
        folded.add(stream.step(piece, [0], "stop" if i == len(pieces) - 1 else None, [])[0])
    streamed = [folded.calls[index] for index in sorted(folded.calls)]
    assert [name for name, _ in streamed] == [c.name for c in parsed.tool_calls]
    for (_, arguments), call in zip(streamed, parsed.tool_calls, strict=True):
        # As in vLLM, empty arguments (one-shot ``{}``) stream only with a name in the
        # last chunk (docs/parity.md, llama3-json-cut-call).
        expected = json.loads(call.arguments)
        assert json.loads(arguments or "{}") == expected or not (arguments or expected)


# ------------------------------------------------------------------ jamba
# vLLM's parser needs Jamba's markers as tokens of the vocabulary: its synthetic tokenizer
# (Qwen3's vocabulary plus the two markers) stands in for Qwen3's here.


@functools.cache
def jamba_tokenizer() -> Tokenizer:
    return bundled_tokenizer(str(synthetic_model("jamba")))


@st.composite
def jamba_output(draw: st.DrawFn) -> str:
    """Text, then maybe one array of calls between Jamba's markers, then maybe text."""
    out = draw(text)
    calls = draw(st.lists(args, max_size=3))
    if calls:
        body = json.dumps([{"name": n, "arguments": a} for n, a in calls], ensure_ascii=False)
        out += f"<tool_calls>{body}</tool_calls>" + draw(st.one_of(st.just(""), text))
    return out


@PROPS
@given(
    output=jamba_output(),
    cuts=st.lists(st.integers(0, 400), max_size=30),
    cut=st.integers(0, 400),
)
def test_jamba_snapshots_go_on_and_one_token_chunks_name_every_call(
    output: str, cuts: list[int], cut: int
) -> None:
    """vLLM's jamba stream depends on the chunking (docs/parity.md, jamba-chunk-reading):
    a restored snapshot goes on as the kept session would, and one token per chunk
    names the calls one-shot reads, in order."""
    tokenizer = jamba_tokenizer()
    factory = factory_for(tokenizer, "jamba", None)
    ids = tokenizer.encode(output)
    chunks = chunked(ids, cuts)
    _, expected = run(tokenizer, factory, options(), chunks, "stop")
    restored = stream(
        tokenizer, factory, options(), chunks, "stop", restore_at=cut % (len(chunks) + 1)
    )
    assert restored == expected
    folded, _ = run(tokenizer, factory, options(), [[i] for i in ids], "stop")
    parsed = factory.for_request(options()).parse(output, tokenizer.encode(PROMPT), "seed")
    streamed = [folded.calls[index][0] for index in sorted(folded.calls)]
    assert streamed == [call.name for call in parsed.tool_calls]


@PROPS
@given(
    texts=st.lists(st.text(alphabet="<>/thinkol_cab \n", max_size=12), min_size=1, max_size=4),
    held=st.sampled_from(["", "<", "</thi"]),
    marker=st.booleans(),
    section=st.sampled_from(["reasoning", "content", "tool_args", "message_header"]),
    had_ids=st.booleans(),
)
def test_the_engines_plain_text_is_its_plain_test_while_it_reads_plain_deltas(
    tokenizer: Tokenizer, texts: list[str], held: str, marker: bool, section: str, had_ids: bool
) -> None:
    """``plain_text``, asked once, tells apart what ``plain`` passes for every delta the
    engine reads after it, as long as each of them was plain (it leaves the engine as
    ``plain`` does)."""
    grammar = Qwen3Grammar(tokenizer.vocabulary).grammar
    ids = [next(iter(grammar.marker_ids))] if marker else tokenizer.encode("ab")
    two = [MarkerEngine(grammar, EngineState(section, held=held)) for _ in range(2)]
    for engine in two:
        engine.s.ever_had_token_ids = had_ids
    looks = two[1].plain_text(ids)
    for delta in texts:
        passes = (
            looks is not None
            and bool(delta)
            and looks.ids.isdisjoint(ids)
            and looks.chars.isdisjoint(delta)
        )
        assert two[0].plain(delta, ids) == passes
        assert two[0].s == two[1].s
        if not passes:
            break
