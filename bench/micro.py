"""``python -m bench micro``: in-process cost of one chunk, session kept versus replayed.

For each parser configuration one long output (its long stretch where that
configuration works hardest) is streamed one token per chunk through the server's
derenderer, the live session passed along: the hit path. At each checkpoint (256 to
``--positions`` tokens, doubling) the same chunk is also derendered without the
session, rebuilt from the carried ``stream_state`` by replay, as vLLM does on every
chunk and as the server does on a cache miss. HTTP, request decoding and the cache
lookup are left out: this is the derender work alone.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import msgspec

from app.oneshot import OneShotDerenderer
from app.parsed_stream import ParsedStreamDerenderer
from app.protocol import (
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    GenerateChunk,
    GenerateStreamChoice,
    StreamState,
)
from app.session import SessionBuilder, StreamSession
from app.tokenizer import Tokenizer
from bench import plots
from bench.report import machine, progress, table, write
from bench.stats import checkpoints, window
from bench.workload import (
    CHAT_REQUEST,
    PARSER_CONFIGS,
    parser_output,
    prompt_ids,
    tokenizer_for,
)
from parsers.registry import TOOL_PARSERS, ParserFactory
from parsers.types import Vocabulary

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
        """One chunk fed to ``session``, or to one rebuilt by replay when None."""
        if session is None:
            session = self.sessions.replayed(request)
        _, state = self.parsed.chunk(request, "qwen3", session)
        return state, session


def derenderer(tokenizer: Tokenizer, tool: str | None, reasoning: str | None) -> Derender:
    vocab = tokenizer.vocabulary
    needs = TOOL_PARSERS[tool].needs if tool is not None else ()
    lent = [token for token in needs if vocab.id_of(token) is None]
    if lent:
        # Qwen3's tokenizer has no <|python_tag|> (llama3_json's marker); lend it one
        tokens = {**vocab.token_ids}
        for offset, token in enumerate(lent):
            tokens[token] = tokenizer.vocab_size + offset
        vocab = Vocabulary(tokens, vocab.special_tokens, vocab.token_text)
    return Derender(tokenizer, ParserFactory(tool, reasoning, True, vocab))


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
    state = None
    session: StreamSession | None = None
    costs: list[float] = []
    replays: dict[int, float] = {}
    for position, token in enumerate(output, start=1):
        choice = GenerateStreamChoice(0, token_ids=[token])
        chunk = GenerateChunk([choice], request_id=f"micro-{config}")
        request = msgspec.structs.replace(base, generate_chunk=chunk, stream_state=state)
        if position in marks:
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                derender.chunk(request, None)
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


def main(args: argparse.Namespace) -> int:
    runs = []
    for config in args.configs or PARSER_CONFIGS:
        progress(f"micro: {config}")
        tokenizer = tokenizer_for(PARSER_CONFIGS[config][0], config)
        runs.append(measure(tokenizer, config, args.positions, args.repeats))
    figure = draw(runs, args.out)
    write(args.out, "micro", {"machine": machine(), "runs": runs}, render(runs), [figure])
    return 0
