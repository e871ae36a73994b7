"""``python -m bench`` / ``derender-bench``: the session cache against pure replay and vLLM.

    python -m bench micro                                # in-process cost of one chunk
    python -m bench micro --one-token --against 6399818  # a one-token chunk, then and now
    python -m bench hostile                              # cost per token on adversarial output
    python -m bench stream --quick                       # under a minute: cache on, off, floor
    python -m bench stream --tokens 4096                 # one stream over HTTP, per mode
    python -m bench transport                            # the app's CPU per chunk, per wire
    python -m bench load --streams 32 --tokens 1024      # concurrent streams, per mode
    python -m bench health                               # /health under slowloris and amplification
    python -m bench render --vllm-python /tmp/oracle/venv/bin/python   # /render CPU per request
    python -m bench stream --vllm-python /tmp/oracle/venv/bin/python   # vLLM beside ours

Absolute times hold for the machine that measured them; ratios from one run are the
claim. Results go under bench/results/ (or --out DIR) as NAME.md, NAME.json and PNGs.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from app.serving.cli import DefaultsHelpFormatter
from app.serving.cli import _positive_int as positive
from bench import health, hostile, load, micro, render, stream, transport
from bench.modes import MODES, Setup, selected
from bench.report import DEFAULT_OUT
from bench.workload import PARSER_CONFIGS


def summary(doc: str | None) -> str:
    """A module docstring's first line without its ``command``: prefix."""
    assert doc is not None
    return doc.splitlines()[0].split(": ", 1)[-1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="derender-bench", description=summary(__doc__), formatter_class=DefaultsHelpFormatter
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    served = argparse.ArgumentParser(add_help=False)
    served.add_argument(
        "--modes",
        nargs="+",
        choices=[mode.name for mode in MODES],
        help="modes to run: "
        + ", ".join(f"{mode.name} ({mode.label})" for mode in MODES)
        + " (default: all; vllm only with --vllm-python)",
    )
    served.add_argument(
        "--prompt-tokens",
        type=positive,
        nargs="+",
        default=[100],
        help="prompt lengths (re-sent on every chunk), e.g. 100 4000 32000",
    )
    served.add_argument(
        "--vllm-python",
        type=Path,
        help="python of a vLLM 0.33.0 installation (../shared/oracle/setup_oracle.sh builds one)",
    )
    served.add_argument(
        "--vllm-model",
        type=Path,
        help="tokenizer directory for vLLM (default: tokenizers/qwen3 beside its venv)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    m = commands.add_parser(
        "micro",
        parents=[common],
        help=summary(micro.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    m.add_argument("--positions", type=positive, default=16384, help="last output position")
    m.add_argument("--repeats", type=positive, default=3, help="replays timed per position")
    m.add_argument(
        "--configs",
        nargs="+",
        choices=list(PARSER_CONFIGS),
        metavar="CONFIG",
        help=f"parser configurations (default: all {len(PARSER_CONFIGS)}; an unknown name "
        "lists them)",
    )
    m.add_argument(
        "--one-token",
        action="store_true",
        help="instead: the cost of a one-token chunk of plain text on a kept session",
    )
    m.add_argument(
        "--against",
        metavar="REF",
        help="with --one-token: also measure git REF's tree, alternated with this one",
    )
    m.add_argument(
        "--now",
        metavar="REF",
        help="with --against: measure git REF's tree instead of this working tree",
    )
    m.add_argument("--rounds", type=positive, default=3, help="--against's rounds")
    m.add_argument(
        "--chunks", type=positive, default=2048, help="one-token chunks timed per scenario"
    )
    m.add_argument(
        "--profile",
        action="store_true",
        help="instead: profile qwen3+hermes's one-token chunks (pyinstrument)",
    )

    h = commands.add_parser(
        "hostile",
        parents=[common],
        help=summary(hostile.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    h.add_argument(
        "--sizes", type=positive, nargs="+", default=list(hostile.SIZES), help="output lengths"
    )
    h.add_argument(
        "--long-sizes",
        type=positive,
        nargs="+",
        default=list(hostile.LONG_SIZES),
        help="output lengths of the long-token families",
    )
    h.add_argument(
        "--configs",
        nargs="+",
        choices=list(hostile.CONFIGS),
        metavar="CONFIG",
        help=f"parser configurations (default: all {len(hostile.CONFIGS)}; an unknown name "
        "lists them)",
    )
    h.add_argument(
        "--families",
        nargs="+",
        choices=[*hostile.FAMILIES, *hostile.LONG_FAMILIES],
        help="default: all",
    )
    h.add_argument(
        "--check", action="store_true", help="exit 1 unless every row holds the linearity claim"
    )

    r = commands.add_parser(
        "render",
        parents=[common],
        help=summary(render.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    r.add_argument("--prompt-tokens", type=positive, nargs="+", default=list(render.PROMPT_TOKENS))
    r.add_argument("--requests", type=positive, default=10, help="least timed requests per row")
    r.add_argument("--seconds", type=float, default=3.0, help="least timed wall time per row")
    r.add_argument("--warmup", type=positive, default=3, help="untimed requests per row")
    r.add_argument("--vllm-python", type=Path, help="python of a vLLM 0.33.0 installation")
    r.add_argument("--model", type=Path, help="model directory (default: the bundled qwen3)")

    s = commands.add_parser(
        "stream",
        parents=[common, served],
        help=summary(stream.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    quick = stream.QUICK
    s.add_argument(
        "--quick",
        action="store_true",
        help=f"a run of under a minute: {quick.tokens:,} tokens, chunk size "
        f"{quick.chunk_sizes[0]}, modes {', '.join(quick.modes or [])}; flags given beside "
        "it win",
    )
    s.add_argument(
        "--tokens",
        type=positive,
        help=f"output tokens of the stream (default: {stream.FULL.tokens}; "
        f"--quick: {quick.tokens})",
    )
    s.add_argument(
        "--chunk-sizes",
        type=positive,
        nargs="+",
        help="tokens per chunk, a run each (default: "
        f"{' '.join(map(str, stream.FULL.chunk_sizes))}; --quick: "
        f"{' '.join(map(str, quick.chunk_sizes))})",
    )

    t = commands.add_parser(
        "transport",
        parents=[common],
        help=summary(transport.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    t.add_argument("--tokens", type=positive, default=4096, help="output tokens of the stream")
    t.add_argument(
        "--streams", type=positive, default=256, help="streams a batch wire's frame carries"
    )

    lo = commands.add_parser(
        "load",
        parents=[common, served],
        help=summary(load.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    lo.add_argument("--streams", type=positive, default=32, help="concurrent streams")
    lo.add_argument("--tokens", type=positive, default=1024, help="output tokens per stream")
    lo.add_argument("--chunk-size", type=positive, default=1, help="tokens per chunk")
    lo.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="tokens per second per stream, as an engine decodes (0: as fast as answered)",
    )
    lo.add_argument("--ramp", type=float, default=0.0, help="seconds over which the streams start")
    lo.add_argument(
        "--py-spy",
        type=Path,
        help="py-spy executable: sample each mode's servers while measured (bench/profile.py)",
    )

    he = commands.add_parser(
        "health",
        parents=[common],
        help=summary(health.__doc__),
        formatter_class=DefaultsHelpFormatter,
    )
    he.add_argument("--seconds", type=float, default=10.0, help="length of each scenario")
    he.add_argument("--interval", type=float, default=0.02, help="seconds between probes")
    he.add_argument(
        "--scenarios",
        nargs="+",
        choices=["idle", "slowloris", "amplifying"],
        help="scenarios to run (default: all)",
    )
    he.add_argument("--slow-sockets", type=positive, default=200, help="slowloris sockets")
    he.add_argument("--choices", type=positive, default=16, help="amplifying request's choices")
    he.add_argument("--tokens", type=positive, default=16384, help="token ids per choice")
    he.add_argument(
        "--server-flags",
        nargs=argparse.REMAINDER,
        default=[],
        help="flags for the server, after all others (e.g. --server-flags --replay-workers 4)",
    )
    he.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 unless every max is under {health.BUDGET_MS:g} ms",
    )
    return parser


def setup_of(args: argparse.Namespace, tokens: int) -> Setup:
    python = args.vllm_python.absolute() if args.vllm_python else None
    model = args.vllm_model
    if python is not None and model is None:
        model = python.parent.parent.parent / "tokenizers" / "qwen3"
    return Setup(max(args.prompt_tokens) + tokens + 64, python, model)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # a terminated bench still stops the servers it started (``finally`` runs on exit)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.command == "micro":
        return micro.main(args)
    if args.command == "hostile":
        return hostile.main(args)
    if args.command == "health":
        return health.main(args)
    if args.command == "transport":
        return transport.main(args)
    if args.command == "render":
        return render.main(args)
    if args.command == "stream":
        stream.preset(args)
    setup = setup_of(args, args.tokens)
    modes = selected(args.modes, setup)
    if args.command == "stream":
        return stream.main(args, modes, setup)
    return load.main(args, modes, setup)


if __name__ == "__main__":
    sys.exit(main())
