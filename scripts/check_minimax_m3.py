"""Stream generated outputs through vLLM 0.33.0's minimax_m3 reasoning parser and ours.

Run it with the oracle's Python (vLLM 0.33.0 installed), from the repository:

    ../oracle-copy/venv/bin/python scripts/check_minimax_m3.py \\
        --project-python .venv/bin/python [--outputs 1200] [--seed 0]

vLLM's MiniMax M3 reasoning re-reads the whole text per chunk; ours keeps positions
(parsers/families/minimax_m3_thinking.py). Outputs are made of the markers, halves of
them and text (CJK, emoji, ``<``), thinking_mode on or off, cut into random chunkings
of the synthetic M3 tokenizer's ids (a cut never splits a character, as a detokenizer
never does). Each chunk goes to vLLM's ``extract_reasoning_streaming`` and
``is_reasoning_end_streaming`` and to our ``stream`` and ``ended_by`` until reasoning
ends; deltas and the end must be equal, and so must the one-shot split. The ids handed
on with the last chunk's content are not compared (vLLM re-encodes text there, which
derendering never does: docs/parity.md). The tokenizer is written by the project's
Python (``--project-python``), so its ids are the suite's. Prints the number of outputs
and mismatches (the first few in full); the exit status is 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import logging
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vllm.reasoning.minimax_m3_reasoning_parser import MiniMaxM3ReasoningParser
from vllm.tokenizers import get_tokenizer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parsers.families.minimax_m3_thinking import M3Thinking  # noqa: E402
from parsers.types import Vocabulary  # noqa: E402

PIECES = ("<mm:think>", "</mm:think>", "<mm:th", "</mm", "<", ">", "Reason ", "ans", "東京🌤️")
PIECES += ("\n", "x<y", "</", "mm:think>")


def _cuts(tokenizer: Any, ids: list[int], rnd: random.Random) -> list[int]:
    """Random chunk ends that never split a character."""
    whole = [
        b
        for b in range(1, len(ids))
        if not tokenizer.decode(ids[:b], skip_special_tokens=False).endswith("\ufffd")
    ]
    return sorted(rnd.sample(whole, min(len(whole), rnd.randint(0, 5))))


def _steps(tokenizer: Any, ids: list[int], cuts: list[int], kwargs: dict[str, Any]) -> list[Any]:
    """vLLM's reasoning deltas and ends, chunk by chunk, until reasoning ends."""
    parser = MiniMaxM3ReasoningParser(tokenizer, **kwargs)
    previous_text, previous_ids, steps = "", [], []
    for start, end in zip([0, *cuts], [*cuts, len(ids)], strict=True):
        current_ids = ids[:end]
        current = tokenizer.decode(current_ids, skip_special_tokens=False)
        delta_ids = ids[start:end]
        delta = parser.extract_reasoning_streaming(
            previous_text,
            current,
            current[len(previous_text) :],
            previous_ids,
            current_ids,
            delta_ids,
        )
        ended = parser.is_reasoning_end_streaming(current_ids, delta_ids)
        pair = (delta.reasoning, delta.content) if delta is not None else (None, None)
        steps.append((current[len(previous_text) :], delta_ids, pair, ended))
        previous_text, previous_ids = current, current_ids
        if ended:
            break
    return steps


def check(tokenizer: Any, vocab: Vocabulary, rnd: random.Random) -> list[str]:
    """One output, both parsers: what differs."""
    text = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 8)))
    initial = rnd.random() < 0.5
    kwargs = {"chat_template_kwargs": {"thinking_mode": "enabled"}} if initial else {}
    ids = tokenizer.encode(text, add_special_tokens=False)
    ours = M3Thinking(vocab, initial)
    problems = []
    for delta_text, delta_ids, expected, ended in _steps(
        tokenizer, ids, _cuts(tokenizer, ids, rnd), kwargs
    ):
        delta = ours.stream(delta_text, delta_ids)
        got = (delta.reasoning, delta.content) if delta is not None else (None, None)
        if got != expected or ours.ended_by(delta_ids) != ended:
            problems.append(f"{text!r} thinking={initial}: {delta_text!r} {got} != {expected}")
            break
    theirs = MiniMaxM3ReasoningParser(tokenizer, **kwargs).extract_reasoning(text, None)
    if M3Thinking(vocab, initial).extract(text, None) != theirs:
        problems.append(f"{text!r} thinking={initial}: one-shot differs")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project-python", required=True)
    parser.add_argument("--outputs", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    folder = Path(tempfile.mkdtemp(prefix="m3-"))
    command = [args.project_python, "-m", "tests.support.synthetic_tokenizers", "minimax_m3"]
    subprocess.run([*command, str(folder)], cwd=ROOT, check=True, capture_output=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    tokenizer = get_tokenizer(str(folder))
    vocab = Vocabulary(
        tokenizer.get_vocab(),
        frozenset(tokenizer.all_special_tokens),
        lambda i: tokenizer.decode([i], skip_special_tokens=False),
    )
    rnd = random.Random(args.seed)
    problems = [p for _ in range(args.outputs) for p in check(tokenizer, vocab, rnd)]
    print(f"{args.outputs} outputs (seed {args.seed}); {len(problems)} differ from vLLM 0.33.0")
    for problem in problems[:5]:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
