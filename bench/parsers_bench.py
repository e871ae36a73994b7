"""Cost of one streamed token per parser, early and late in a long output.

For each parser configuration a long output is built whose late part lies in the
section that parser works on (reasoning, a tool call's argument string, content),
tokenized with the bundled Qwen3 tokenizer and streamed one token per chunk through
the parser (detokenization excluded). The mean cost of a step around two output
positions is reported; their ratio is the claim: it stays near 1 because a step's
work does not grow with the text before it.

    python -m bench.parsers_bench                      # positions 500 and 8,000
    python -m bench.parsers_bench --early 50 --late 300 --window 10   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from app.detokenizer import DecodeWindow, Detokenizer
from app.tokenizer import Tokenizer, load_tokenizer
from parsers.registry import ParserFactory
from parsers.types import ParseOptions, ToolSpec, Vocabulary

PROMPT = "<|im_start|>user\nPlan the trip.<|im_end|>\n<|im_start|>assistant\n"
SENTENCE = "We compare the fares, the weather in Lisbon and the hotel options near Alfama. "
TOOLS = (ToolSpec("save_note", {"type": "object", "properties": {"body": {"type": "string"}}}),)

# name -> (tool parser, reasoning parser, output builder); the late position falls in
# the part named in the comment.
CONFIGS: dict[str, tuple[str | None, str | None, str]] = {
    "qwen3": (None, "qwen3", "reasoning"),  # reasoning
    "deepseek_r1": (None, "deepseek_r1", "reasoning"),  # reasoning
    "qwen3+hermes": ("hermes", "qwen3", "hermes_call"),  # a call's argument string
    "hermes": ("hermes", None, "hermes_call"),  # a call's argument string
    "qwen3+qwen3_coder": ("qwen3_coder", "qwen3", "coder_call"),  # a parameter value
    "xlam": ("xlam", None, "content"),  # content
    "pythonic": ("pythonic", None, "content"),  # content
    "llama3_json": ("llama3_json", None, "content"),  # content
}


def build_output(kind: str, tokens: int) -> str:
    body = SENTENCE * (tokens // 12 + 10)
    if kind == "reasoning":
        return body
    if kind == "content":
        return body
    if kind == "hermes_call":
        return (
            'Short thought.\n</think>\n\n<tool_call>\n{"name": "save_note", "arguments": {"body": "'
            + body
        )
    return (
        "Short thought.\n</think>\n\n<tool_call>\n<function=save_note>\n<parameter=body>\n" + body
    )


def measure(tokenizer: Tokenizer, name: str, early: int, late: int, window: int) -> dict[str, Any]:
    tool, reasoning, kind = CONFIGS[name]
    ids = tokenizer._hf.encode(build_output(kind, late + window + 50))
    vocab = tokenizer.vocabulary
    if tool == "llama3_json":  # Qwen3's tokenizer has no <|python_tag|>; lend it one
        tokens = {**vocab.token_ids, "<|python_tag|>": tokenizer.vocab_size}
        vocab = Vocabulary(tokens, vocab.special_tokens, vocab.token_text)
    factory = ParserFactory(tool, reasoning, True, vocab)
    options = ParseOptions(tools=TOOLS, tool_choice="auto")
    stream = factory.stream_for_request(options, "bench")
    prompt = tokenizer._hf.encode(PROMPT)
    detokenizer = Detokenizer(tokenizer, DecodeWindow.seeded(tokenizer, prompt, False), False)
    texts = [detokenizer.decode([token]) for token in ids]
    spans = {"early": range(early - window // 2, early + window // 2)}
    spans["late"] = range(late - window // 2, late + window // 2)
    costs: dict[str, list[float]] = {"early": [], "late": []}
    for position, (token, text) in enumerate(zip(ids, texts, strict=True)):
        started = time.perf_counter()
        stream.step(text, [token], None, prompt)
        elapsed = time.perf_counter() - started
        for label, span in spans.items():
            if position in span:
                costs[label].append(elapsed)
        if position >= late + window:
            break
    early_us = 1e6 * sum(costs["early"]) / len(costs["early"])
    late_us = 1e6 * sum(costs["late"]) / len(costs["late"])
    return {"parser": name, "early_us": early_us, "late_us": late_us, "ratio": late_us / early_us}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--early", type=int, default=500)
    parser.add_argument("--late", type=int, default=8000)
    parser.add_argument("--window", type=int, default=200, help="tokens averaged per position")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer("qwen3")
    rows = []
    for name in CONFIGS:
        print(f"  measuring {name} ...", file=sys.stderr, flush=True)
        rows.append(measure(tokenizer, name, args.early, args.late, args.window))
    print(f"\nmean cost of a one-token step (µs) at output positions {args.early} and {args.late}")
    print(f"{'parser':<20}{'early':>10}{'late':>10}{'late/early':>12}")
    for row in rows:
        print(
            f"{row['parser']:<20}{row['early_us']:>10.1f}{row['late_us']:>10.1f}{row['ratio']:>12.2f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"early": args.early, "late": args.late, "window": args.window, "rows": rows}
    path = args.out / "parsers_bench.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
