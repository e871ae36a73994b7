"""``python -m bench micro``: in-process cost of one chunk, session kept versus replayed.

For each parser configuration one long output (its long stretch where that
configuration works hardest) is streamed one token per chunk through the server's
derenderer, the live session passed along: the hit path. At each checkpoint (256 to
``--positions`` tokens, doubling) the same chunk is also derendered without the
session, rebuilt from the carried ``stream_state`` by replay, as vLLM does on every
chunk and as the server does on a cache miss. HTTP, request decoding and the cache
lookup are left out: this is the derender work alone.

``--one-token`` measures instead what a one-token chunk of plain text costs on a kept
session, hit path and reply encoding included (bench/onetoken.py), per parser
configuration and section (reasoning text, content); ``--against REF`` runs the same
measurement in REF's tree too (``git archive`` into a temporary folder), the two trees
alternated round by round in fresh processes, and gives their ratio; ``--profile``
profiles qwen3+hermes's chunks with pyinstrument.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import msgspec

from app.streams.oneshot import OneShotDerenderer
from app.streams.parsed_stream import Continued, ParsedStreamDerenderer
from app.streams.session import SessionBuilder, StreamSession
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    GenerateChunk,
    GenerateStreamChoice,
    StreamState,
)
from bench import onetoken, plots
from bench.report import machine, progress, table, write
from bench.stats import checkpoints, window
from bench.workload import (
    CHAT_REQUEST,
    PARSER_CONFIGS,
    parser_output,
    prompt_ids,
    tokenizer_for,
)
from parsers.registry import ParserFactory

FIRST = 256


class ChunkCost(msgspec.Struct):
    position: int
    hit_us: float  # median cost of the chunks ending in the last eighth before position
    replay_ms: float  # median cost of this chunk with its session rebuilt by replay


class ConfigRun(msgspec.Struct):
    config: str
    points: list[ChunkCost]


class Derender:
    """The server's chat derendering over one parser configuration, without HTTP."""

    def __init__(self, tokenizer: Tokenizer, parsers: ParserFactory) -> None:
        self.one_shot = OneShotDerenderer(tokenizer, parsers)
        self.sessions = SessionBuilder(tokenizer, parsers)
        self.parsed = ParsedStreamDerenderer(tokenizer)

    def chat(self, request: ChatDerenderRequest) -> None:
        self.one_shot.chat(request, "qwen3")

    def chunk(
        self, request: ChatStreamDerenderRequest, session: StreamSession | None
    ) -> tuple[StreamState, StreamSession]:
        """One chunk fed to ``session`` as the server's hit path feeds it (``continued``,
        the request made from the session's only where the chunk needs it), or to a
        session rebuilt by replay when None."""
        if session is None:
            session = self.sessions.replayed(request)
            _, state = self.parsed.chunk(request, "qwen3", session)
            return state, session
        hit = Continued(request.generate_chunk, request.model, request.prompt_tokens)
        _, state = self.parsed.continued(hit, "qwen3", session)
        return state, session


def derenderer(tokenizer: Tokenizer, tool: str | None, reasoning: str | None) -> Derender:
    return Derender(tokenizer, onetoken.factory(tokenizer, tool, reasoning))


def measure(tokenizer: Tokenizer, config: str, last: int, repeats: int) -> ConfigRun:
    tool, reasoning, kind = PARSER_CONFIGS[config]
    derender = derenderer(tokenizer, tool, reasoning)
    output = parser_output(tokenizer, kind, last)
    body = {
        "generate_chunk": {"choices": []},
        "stream": True,
        "chat_request": CHAT_REQUEST,
        "prompt_token_ids": prompt_ids(tokenizer, 100),
    }
    # decoded from JSON as the server decodes it (the chat request keeps raw parts)
    base = msgspec.json.decode(msgspec.json.encode(body), type=ChatStreamDerenderRequest)
    marks = checkpoints(last, FIRST)
    state: StreamState | None = None
    session: StreamSession | None = None
    costs: list[float] = []
    replays: dict[int, float] = {}
    for position, token in enumerate(output, start=1):
        choice = GenerateStreamChoice(0, token_ids=[token])
        chunk = GenerateChunk([choice], request_id=f"micro-{config}")
        request = msgspec.structs.replace(base, generate_chunk=chunk, stream_state=state)
        if position in marks:
            replayed = request
            if session is not None and state is not None:  # the session holds the history
                history = session.output_token_ids.copy(), session.output_chunk_lens.copy()
                carried = msgspec.structs.replace(
                    state, output_token_ids=history[0], output_chunk_lens=history[1]
                )
                replayed = msgspec.structs.replace(request, stream_state=carried)
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                derender.chunk(replayed, None)
                times.append(time.perf_counter() - started)
            replays[position] = statistics.median(times)
        started = time.perf_counter()
        state, session = derender.chunk(request, session)
        costs.append(time.perf_counter() - started)
    positions = range(1, len(output) + 1)
    return ConfigRun(
        config,
        [
            ChunkCost(at, 1e6 * statistics.median(window(positions, costs, at)), 1e3 * replays[at])
            for at in marks
        ],
    )


def render(runs: list[ConfigRun]) -> str:
    first, last = runs[0].points[0].position, runs[0].points[-1].position
    columns = [
        "parsers",
        f"hit µs @{first}",
        f"hit µs @{last}",
        "hit late/early",
        f"replay ms @{first}",
        f"replay ms @{last}",
        f"replay/hit @{last}",
    ]
    rows = []
    for r in runs:
        early, late = r.points[0], r.points[-1]
        rows.append(
            [
                r.config,
                f"{early.hit_us:.1f}",
                f"{late.hit_us:.1f}",
                f"{late.hit_us / early.hit_us:.2f}",
                f"{early.replay_ms:.2f}",
                f"{late.replay_ms:.1f}",
                f"{1e3 * late.replay_ms / late.hit_us:.0f}",
            ]
        )
    title = (
        "cost of one one-token chunk in-process (derenderer only, no HTTP): session kept (hit) "
        "vs rebuilt by replay; times are this machine's"
    )
    return "\n".join([title, "", table(columns, rows)])


def draw(runs: list[ConfigRun], out: Path) -> Path:
    """Hit and replay cost by position; a configuration keeps its colour in both panels."""
    hit: dict[str, plots.Series] = {}
    replay: dict[str, plots.Series] = {}
    styles = {
        config: plots.Style(f"C{index % 10}", ("-", "--", "-.", ":")[index % 4])
        for index, config in enumerate(PARSER_CONFIGS)
    }
    for r in runs:
        xs = [point.position for point in r.points]
        hit[r.config] = (xs, [point.hit_us for point in r.points])
        replay[r.config] = (xs, [1e3 * point.replay_ms for point in r.points])
    path = out / "micro.png"
    plots.lines(
        path,
        "one chunk in-process, by output position",
        {"hit path (session kept)": hit, "replay path (history replayed)": replay},
        ylabel="cost of one chunk (µs)",
        loglog=True,
        styles=styles,
    )
    return path


ROOT = Path(__file__).resolve().parent.parent
Lanes = dict[tuple[str, str], dict[str, list[float]]]  # (config, section) -> lane -> µs


@contextmanager
def tree_of(ref: str) -> Iterator[Path]:
    """REF's files (``git archive`` of this repository) in a temporary folder, with this
    tree's bench/onetoken.py, so both sides are measured by the same code."""
    folder = Path(tempfile.mkdtemp(prefix="bench-ref-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        shutil.copy(ROOT / "bench" / "onetoken.py", folder / "bench" / "onetoken.py")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# bench.onetoken run on the tree's own modules only: an editable install's finder (pip
# install -e) would answer for a module the tree lacks with this checkout's. In a tree
# from before app/'s modules were grouped by part, the grouped names bench.onetoken
# imports stand for the flat modules.
_GROUPED = (
    "app.serving.budget",
    "app.streams.chunk_path",
    "app.streams.parsed_stream",
    "app.streams.session",
    "app.tokens.tokenizer",
    "app.transports.socket_streams",
    "app.wire.protocol",
)
_IN_TREE = f"""
import importlib, pathlib, runpy, sys, types
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in str(f.__module__)]
if not pathlib.Path("app/serving").is_dir():
    for grouped in {_GROUPED!r}:
        part, name = grouped.rsplit(".", 1)
        sys.modules.setdefault(part, types.ModuleType(part))
        sys.modules[grouped] = importlib.import_module("app." + name)
runpy.run_module("bench.onetoken", run_name="__main__", alter_sys=True)
"""


def one_token_run(tree: Path, configs: list[str], chunks: int) -> list[onetoken.Scenario]:
    """bench/onetoken.py run in a fresh process on ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", _IN_TREE, "--chunks", str(chunks), "--configs", *configs]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"bench.onetoken failed in {tree}:\n{done.stderr.decode()[-2000:]}")
    return msgspec.json.decode(done.stdout, type=list[onetoken.Scenario])


def collect(into: Lanes, scenarios: list[onetoken.Scenario]) -> None:
    for s in scenarios:
        lanes = into.setdefault((s.config, s.section), {})
        lanes.setdefault("socket", []).append(s.socket_us)
        lanes.setdefault("http", []).append(s.http_us)
        if s.plain is not None:
            lanes.setdefault("plain", []).append(s.plain)


def fast_path(lanes: dict[str, list[float]]) -> str:
    """The share of a scenario's chunks the plain-text fast path answered."""
    shares = lanes.get("plain")
    if shares is None:
        return "-"  # a tree without one
    share = statistics.median(shares)
    return f"{share:.0%}" if share else "none"


def keyed(lanes: Lanes) -> dict[str, dict[str, list[float]]]:
    """``lanes`` keyed by ``config|section``, as JSON keys must be strings."""
    return {"|".join(key): value for key, value in lanes.items()}


def one_token_table(
    after: Lanes, before: Lanes | None, ref: str | None, now: str = "this tree"
) -> str:
    """One row per configuration and section: µs per chunk (the median over rounds of
    each round's least block mean)."""
    columns = ["parsers", "text", "fast path"]
    for lane in onetoken.LANES:
        columns += [f"{lane} µs"] if before is None else [f"{lane} µs {ref}", "now", "ratio"]
    rows = []
    for (config, section), lanes in after.items():
        row = [config, section, fast_path(lanes)]
        for lane in onetoken.LANES:
            cost = statistics.median(lanes[lane])
            if before is None:
                row.append(f"{cost:.1f}")
                continue
            earlier = before.get((config, section))
            if earlier is None:  # a configuration the earlier tree does not have
                row += ["-", f"{cost:.1f}", "-"]
                continue
            then = statistics.median(earlier[lane])
            row += [f"{then:.1f}", f"{cost:.1f}", f"{then / cost:.2f}"]
        rows.append(row)
    title = (
        "cost of a one-token chunk of plain text on a kept session, in-process (chunk "
        "decoded, derendered, its state and reply encoded; no framing, checks or store): "
        "socket = WebSocket reply with a compact state, http = reply with the full state; "
        "fast path = the share of chunks the plain-text fast path answered (none: this "
        "parser configuration's section takes the general path)"
    )
    if before is not None:
        title += f"; {ref} and {now} alternated round by round, medians, ratio = {ref}/now"
    return "\n".join([title, "", table(columns, rows)])


def one_token(args: argparse.Namespace) -> int:
    configs = args.configs or list(PARSER_CONFIGS)
    after: Lanes = {}
    if args.against is None:
        progress("micro: one-token chunks")
        collect(after, onetoken.measure(configs, args.chunks))
        text = one_token_table(after, None, None)
        write(args.out, "micro-one-token", {"machine": machine(), "now": keyed(after)}, text)
        return 0
    before: Lanes = {}
    now = args.now or "this tree"
    with tree_of(args.against) as old, ExitStack() as stack:
        new = stack.enter_context(tree_of(args.now)) if args.now else ROOT
        for round_ in range(args.rounds):
            sides = [(old, before, args.against), (new, after, now)]
            for tree, into, name in sides if round_ % 2 == 0 else sides[::-1]:
                progress(f"micro: one-token chunks, round {round_ + 1}, {name}")
                collect(into, one_token_run(tree, configs, args.chunks))
    text = one_token_table(after, before, args.against, now)
    result = {
        "machine": machine(),
        "against": args.against,
        "now_ref": args.now,
        "before": keyed(before),
        "now": keyed(after),
    }
    write(args.out, "micro-one-token", result, text)
    return 0


def profile(args: argparse.Namespace) -> int:
    """pyinstrument's view of qwen3+hermes's one-token chunks, per section, printed and
    saved as text and HTML."""
    from pyinstrument import Profiler

    config = "qwen3+hermes"
    tokenizer = tokenizer_for(PARSER_CONFIGS[config][0], config)
    for section in onetoken.scenarios(config):
        progress(f"micro: profiling {config} {section}, {args.chunks} chunks")
        profiler = Profiler(interval=0.0001)
        with profiler:
            onetoken.timed(tokenizer, config, section, "socket", args.chunks)
        name = f"micro-profile-{section}"
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}.html").write_text(profiler.output_html())
        write_text = profiler.output_text(unicode=True, color=False)
        print(write_text)
        (args.out / f"{name}.txt").write_text(write_text)
        print(f"written: {args.out / name}.txt, {args.out / name}.html")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.profile:
        return profile(args)
    if args.one_token or args.against is not None:
        return one_token(args)
    runs = []
    for config in args.configs or PARSER_CONFIGS:
        progress(f"micro: {config}")
        tokenizer = tokenizer_for(PARSER_CONFIGS[config][0], config)
        runs.append(measure(tokenizer, config, args.positions, args.repeats))
    figure = draw(runs, args.out)
    write(args.out, "micro", {"machine": machine(), "runs": runs}, render(runs), [figure])
    return 0
