"""Stream generated Llama 3 JSON outputs through vLLM 0.33.0's llama3_json parser and ours.

Run it with the oracle's Python (vLLM 0.33.0 installed), from the repository:

    ../oracle-copy/venv/bin/python scripts/check_llama3_json.py [--outputs 1200] [--seed 0]

llama3_json has no golden corpus (Qwen3's tokenizer lacks ``<|python_tag|>``, so vLLM's
server refuses it), so its parser is compared directly. Each output is fed one character
per chunk to vLLM's ``Llama3JsonToolParser.extract_tool_calls_streaming`` and to our
``Llama3JsonStream.stream``; every step's delta (content, and each call piece's index,
name and argument text; vLLM's random call ids only as present or not) must be equal.
The last character ends the stream as each server ends it: vLLM's adds the current
call's unstreamed arguments (``get_remaining_unstreamed_args``) to a last delta that
carries a call piece; ours adds ``remaining_arguments`` there, then what ``finish``
settles (docs/parity.md, llama3-json-lost-calls: nothing, one character at a time).
Our parsers package needs only
msgspec and partial-json-parser, which vLLM's environment has, so it is imported from
the repository. Prints the number of outputs, steps and mismatches (the first few in
full); the exit status is 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from pathlib import Path
from typing import Any

from vllm.tool_parsers.llama_tool_parser import Llama3JsonToolParser

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parsers.families.llama3_json import BOT_TOKEN, Llama3JsonStream
from parsers.types import Delta

NAMES = ("get_weather", "count", "search_flights", "book_hotel", "noop")
KEYS = ("city", "n", "options", "unit", "days", "query", "nonstop")
STRINGS = (
    "Paris", "東京 🗼", "café", 'say "hi"', "a\\b", "{not json}", "</tool_call> inside",
    "line\nbreak", "tab\there", "👩‍👩‍👧", "", " ", "[1, 2]", "; ", "<|python_tag|>",
)  # fmt: skip
Step = dict[str, Any] | None


class VocabularyOnly:
    """What vLLM's parser asks of a tokenizer when it is built: the vocabulary, to find
    ``<|python_tag|>`` (Llama 3's id); streaming reads text only."""

    def get_vocab(self) -> dict[str, int]:
        return {BOT_TOKEN: 128010}


def value(rng: random.Random, depth: int = 0) -> Any:
    """An argument value: strings that stress escaping, numbers, booleans, null, and
    lists or objects nested up to two levels."""
    kind = rng.randrange(8 if depth < 2 else 6)
    if kind < 3:
        return rng.choice(STRINGS)
    if kind == 3:
        return rng.choice((0, 3, -7, 2.5, 1e-3, 10**12))
    if kind == 4:
        return rng.choice((True, False, None))
    if kind == 5:
        return rng.choice(STRINGS) + rng.choice(STRINGS)
    if kind == 6:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {key: value(rng, depth + 1) for key in rng.sample(KEYS, rng.randrange(3))}


def output(rng: random.Random) -> str:
    """One model output: one to three calls separated by ``; `` (``arguments`` or
    ``parameters``, spaced or compact JSON, escaped or raw non-ASCII), with or without
    ``<|python_tag|>``; sometimes plain text, sometimes cut short as ``length`` cuts it."""
    if rng.random() < 0.05:
        return rng.choice(("Sure, here it is.", "No tool needed: 42.", "[not a call]"))
    key = rng.choice(("arguments", "parameters"))
    separators = rng.choice(((", ", ": "), (",", ":")))
    ascii_only = rng.random() < 0.3
    calls = []
    for _ in range(rng.randint(1, 3)):
        arguments = {k: value(rng) for k in rng.sample(KEYS, rng.randrange(4))}
        call = {"name": rng.choice(NAMES), key: arguments}
        calls.append(json.dumps(call, ensure_ascii=ascii_only, separators=separators))
    text = (BOT_TOKEN if rng.random() < 0.5 else "") + "; ".join(calls)
    if rng.random() < 0.25:
        text = text[: rng.randint(1, len(text))]
    return text


def vllm_steps(text: str) -> list[Step]:
    parser = Llama3JsonToolParser(VocabularyOnly())
    steps = []
    previous = ""
    for at, char in enumerate(text):
        current = previous + char
        delta = parser.extract_tool_calls_streaming(previous, current, char, [], [], [], None)
        if at == len(text) - 1 and delta is not None and delta.tool_calls:
            # vLLM's server on the last chunk (``_append_unstreamed_tool_args``).
            last = delta.tool_calls[-1]
            if last.function:
                last.function.arguments = (
                    last.function.arguments or ""
                ) + parser.get_remaining_unstreamed_args()
        steps.append(None if delta is None else vllm_delta(delta))
        previous = current
    return steps


def vllm_delta(delta: Any) -> dict[str, Any]:
    calls = []
    for call in delta.tool_calls or ():
        function = call.function
        if isinstance(function, dict):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name = function.name if function is not None else None
            arguments = function.arguments if function is not None else None
        calls.append([call.index, call.id is not None, name, arguments])
    return {"content": delta.content, "calls": calls}


def our_steps(text: str) -> list[Step]:
    stream = Llama3JsonStream("seed")
    steps = []
    for at, char in enumerate(text):
        delta = stream.stream(char)
        if at == len(text) - 1:
            # The stream processor on the last chunk (parsers/stream.py ``_finish``).
            if delta is not None and delta.tool_calls:
                last = delta.tool_calls[-1]
                last.arguments = (last.arguments or "") + stream.remaining_arguments()
            settled = stream.finish()
            if settled is not None:
                delta = delta or Delta()
                delta.tool_calls += settled.tool_calls
        steps.append(None if delta is None else our_delta(delta))
    return steps


def our_delta(delta: Delta) -> dict[str, Any]:
    calls = [[c.index, c.id is not None, c.name, c.arguments] for c in delta.tool_calls]
    return {"content": delta.content, "calls": calls}


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--outputs", type=int, default=1200, help="how many outputs (1200)")
    cli.add_argument("--seed", type=int, default=0, help="the generator's seed (0)")
    args = cli.parse_args()
    # vLLM logs every partial text it cannot read yet; only the deltas matter here.
    logging.getLogger("vllm").setLevel(logging.CRITICAL)
    rng = random.Random(args.seed)
    steps = calls = 0
    mismatches: list[str] = []
    for _ in range(args.outputs):
        text = output(rng)
        expected, ours = vllm_steps(text), our_steps(text)
        steps += len(text)
        calls += sum(1 for step in expected if step and any(c[2] for c in step["calls"]))
        for at, (want, got) in enumerate(zip(expected, ours, strict=True)):
            if want != got:
                mismatches.append(f"{text!r} at char {at}: vLLM {want} ours {got}")
                break
    for line in mismatches[:5]:
        print("MISMATCH", line)
    print(
        f"llama3_json, one character per chunk: {args.outputs} outputs (seed {args.seed}), "
        f"{steps} steps, {calls} calls named; {len(mismatches)} outputs differ from vLLM 0.33.0"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
