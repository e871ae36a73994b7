"""functiongemma: what the golden corpus cannot show (long and many-argument calls, a
snapshot mid-stream, the argument JSON read from its end, the pattern's ``\\w``)."""

from __future__ import annotations

import json
import random
import time

import msgspec
import pytest

from parsers.families.functiongemma import (
    FunctionGemmaState,
    FunctionGemmaStream,
    extract_calls,
    held_back,
)
from parsers.families.functiongemma_args import Arguments, read_arguments
from parsers.types import Delta

START, END, ESC = "<start_function_call>", "<end_function_call>", "<escape>"


def _call(name: str, body: str) -> str:
    return f"{START}call:{name}{{{body}}}{END}"


def _tokens(text: str) -> list[str]:
    """``text`` as the synthetic tokenizer would cut it, roughly: markers alone, the
    rest a character at a time."""
    pieces: list[str] = []
    while text:
        marker = next((m for m in (START, END, ESC) if text.startswith(m)), None)
        piece = marker or text[0]
        pieces.append(piece)
        text = text[len(piece) :]
    return pieces


def _fold(deltas: list[Delta | None]) -> tuple[str, list[str | None], dict[int, str]]:
    content, names, arguments = "", [], {}
    for delta in deltas:
        if delta is None:
            continue
        content += delta.content or ""
        for call in delta.tool_calls:
            if call.name:
                names.append(call.name)
            arguments[call.index] = arguments.get(call.index, "") + (call.arguments or "")
    return content, names, arguments


def _stream(pieces: list[str]) -> tuple[str, list[str | None], dict[int, str]]:
    stream = FunctionGemmaStream("seed", FunctionGemmaState())
    return _fold([stream.stream(piece) for piece in pieces])


def test_one_shot_reads_every_call_and_types_values() -> None:
    text = "Sure. " + _call("get_weather", f"city:{ESC}Paris{ESC},days:{ESC}2{ESC}")
    text += _call("f", f"a:{ESC}[1, 2]{ESC},a:{ESC}true{ESC},b:{ESC}{{x{ESC}")
    text += f"{START}call:g{{n:{ESC}null{ESC}"  # no end: read to the end of the text
    found = extract_calls(text)
    assert found.content == "Sure."
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [
        ("get_weather", {"city": "Paris", "days": 2}),
        ("f", {"a": True, "b": "{x"}),
        ("g", {"n": None}),
    ]
    assert extract_calls(f"{START}call:bad name{{}}{END}").tools_called is False


def test_arguments_stream_as_vllm_cuts_them_by_length() -> None:
    """One token per chunk, each argument's JSON goes out from the length sent, so a
    second argument lands after the first one's closing brace (as vLLM's does)."""
    text = _call("get_weather", f"city:{ESC}Paris{ESC},unit:{ESC}celsius{ESC}")
    _, names, arguments = _stream(_tokens(text))
    assert names == ["get_weather"]
    assert arguments == {0: '{"city": "Paris"} "unit": "celsius"}'}
    # In one chunk after the name, both arguments go out at once: the one-shot JSON.
    _, _, arguments = _stream([START, "call:get_weather{", text[len(START) + 17 :]])
    assert arguments == {0: json.dumps({"city": "Paris", "unit": "celsius"})}


def test_held_text_waits_and_is_lost_at_the_end() -> None:
    stream = FunctionGemmaStream("seed", FunctionGemmaState())
    assert stream.stream("1 <") == Delta(content="1 ")
    assert stream.stream(" 2 <e") == Delta(content="< 2 ")
    assert stream.stream("") is None
    assert stream.finish() is None
    assert held_back("a <start_function") == "<start_function"
    assert held_back("a <start_function_call>") == ""
    assert held_back("<x") == ""


def test_a_long_call_streamed_a_token_at_a_time_costs_what_it_brings() -> None:
    body = ",".join(f"k{i}:{ESC}{'v' * 5}{ESC}" for i in range(4000))
    body += f",long:{ESC}" + "word " * 40_000 + ESC
    pieces = _tokens(_call("save", body))
    began = time.process_time()
    _, names, arguments = _stream(pieces)
    assert time.process_time() - began < 10  # vLLM's re-reading: hours
    assert names == ["save"]
    sent = arguments[0]
    assert sent.startswith('{"k0": "vvvvv"} "k1": "vvvvv"}')
    assert sent.endswith(' "long": "' + "word " * 40_000 + '"}')


@pytest.mark.parametrize("cut", [3, 40, 95, 170])
def test_a_snapshot_mid_stream_goes_on_as_the_stream_would(cut: int) -> None:
    text = "Hi <" + _call("f", f"a:{ESC}x <{ESC},b:{ESC}[1]{ESC}") + "ok" + _call("g", "")
    pieces = _tokens(text)
    whole = FunctionGemmaStream("seed", FunctionGemmaState())
    expected = [whole.stream(piece) for piece in pieces]
    first = FunctionGemmaStream("seed", FunctionGemmaState())
    head = [first.stream(piece) for piece in pieces[:cut]]
    kept = msgspec.msgpack.decode(msgspec.msgpack.encode(first.s), type=FunctionGemmaState)
    rest = FunctionGemmaStream("seed", kept)
    assert head + [rest.stream(piece) for piece in pieces[cut:]] == expected


def test_the_arguments_json_is_read_from_its_end() -> None:
    rng = random.Random(7)
    for _ in range(300):
        arguments = Arguments(0, 0)
        expected: dict[str, object] = {}
        text = ""
        for _ in range(rng.randint(1, 8)):
            key = rng.choice("abcde")
            value = rng.choice(["1", "x y", '"q"', "[1, {}]", "é", ""])
            text += f"{key}:{ESC}{value}{ESC},"
            arguments.advance(text)
            try:
                expected[key] = json.loads(value)
            except ValueError:
                expected[key] = value
        dump = json.dumps(expected, ensure_ascii=False)
        assert arguments.dump() == dump
        start = rng.randint(0, len(dump))
        assert arguments.dump_from(start) == dump[start:]


def test_keys_are_the_pattern_modules_word_runs() -> None:
    # A combining mark is a word character of vLLM's pattern module (not of ``re``'s).
    assert json.loads(read_arguments(f"cafe\u0301:{ESC}1{ESC}")) == {"cafe\u0301": 1}
    assert read_arguments(f" :{ESC}1{ESC}b c:{ESC}2{ESC}") == '{"c": 2}'
    assert read_arguments(f"a:{ESC}open") == "{}"


STORMS = {
    "many arguments": lambda n: (
        f"{START}call:f{{" + ",".join(f"k{i}:{ESC}v{ESC}" for i in range(n))
    ),
    "a key again and again": lambda n: (
        f"{START}call:f{{"
        + ",".join(f"k{i}:{ESC}v{ESC}" for i in range(n // 2))
        + ",".join(f"k0:{ESC}{'v' * i}{ESC}" for i in range(n // 40))
    ),
    "markers without calls": lambda n: f"{START}call:x" * n,
    "ends after a call": lambda n: _call("f", f"a:{ESC}1{ESC}") + END * n,
    "ends in an open call": lambda n: f"{START}call:f{{a:{ESC}1{ESC}" + END * n,
    "held < in a value": lambda n: f"{START}call:f{{a:{ESC}" + "x <" * n,
    "keys after no word": lambda n: f"{START}call:f{{" + f" :{ESC}" * n,
    "calls": lambda n: (_call("f", f"a:{ESC}1{ESC}") + "ok") * (n // 5),
    "ends never whole": lambda n: f"{START}call:f{{a" + "}<end_func" * n,
}


@pytest.mark.parametrize("storm", sorted(STORMS))
def test_hostile_output_costs_the_same_per_chunk_at_any_length(storm: str) -> None:
    costs = []
    for n in (1000, 4000):
        pieces = _tokens(STORMS[storm](n))
        stream = FunctionGemmaStream("seed", FunctionGemmaState())
        began = time.process_time()
        for piece in pieces:
            stream.stream(piece)
        extract_calls("".join(pieces))
        costs.append((time.process_time() - began) / len(pieces))
    assert costs[1] < 3 * costs[0]  # vLLM's re-reading: 4x the length, 4x per chunk
