"""The server set-ups a bench compares, side by side in one run.

A mode is a name and the processes it runs; the client spreads a stream's chunks
round-robin over them. Adding a set-up is one more entry in ``MODES``; its place there
fixes its colour in every plot, its kind the line style (``LINESTYLES``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.client import Wire
from bench.plots import Style
from bench.servers import Command, Target, redis_server, running
from bench.workload import SERVER_FLAGS


@dataclass(frozen=True, slots=True)
class Setup:
    """What every mode's processes are started with."""

    max_model_len: int
    vllm_python: Path | None = None
    vllm_model: Path | None = None
    redis_url: str | None = None  # set for a mode that runs with Redis


@dataclass(frozen=True, slots=True)
class Mode:
    name: str  # for --modes and the JSON: no spaces
    label: str  # for tables and plots
    commands: Callable[[Setup], list[Command]]
    wire: Wire = "full"  # how the client sends a chunk (bench/client.py)
    needs_vllm: bool = False
    redis: bool = False  # a private redis-server runs beside the mode's processes
    linestyle: str = "-"  # what kind of mode it is, in plots (LINESTYLES)


# Line styles by what a mode is, so lines that lie on each other stay apart and a
# reader tells the kinds apart without the legend.
SERVED, OTHER_WIRE, REPLAYS, FLOOR = "-", "-.", "--", ":"
LINESTYLES = {
    SERVED: "our server as deployed",
    OTHER_WIRE: "another client or transport on it",
    REPLAYS: "every chunk replays its history",
    FLOOR: "an echo app: the transport alone",
}


def ours(*flags: str) -> Callable[[Setup], list[Command]]:
    """One derender-server process with the qwen3 + hermes parsers and ``flags``."""

    def commands(setup: Setup) -> list[Command]:
        argv = [sys.executable, "-m", "app", "--log-level", "warning"]
        argv += ["--max-model-len", str(setup.max_model_len), *SERVER_FLAGS, *flags]
        return [Command(argv)]

    return commands


def replicas_sharing_redis(count: int) -> Callable[[Setup], list[Command]]:
    """``count`` cache-on processes that share session snapshots through Redis."""

    def commands(setup: Setup) -> list[Command]:
        assert setup.redis_url is not None
        return ours("--redis-url", setup.redis_url, "--redis-secret", "bench")(setup) * count

    return commands


def echo_floor(setup: Setup) -> list[Command]:
    """The echo app on the server's uvicorn configuration: the transport alone."""
    return [Command([sys.executable, "-m", "bench.echo_app"])]


def vllm_render(setup: Setup) -> list[Command]:
    """vLLM's own render server (``vllm launch render``) from the given installation."""
    assert setup.vllm_python is not None and setup.vllm_model is not None
    argv = [str(setup.vllm_python), "-m", "vllm.entrypoints.cli.main", "launch", "render"]
    argv += [str(setup.vllm_model), "--served-model-name", "qwen3", "--host", "127.0.0.1"]
    argv += ["--max-model-len", str(setup.max_model_len), *SERVER_FLAGS]
    # no access log, as ours runs: logging every chunk would be billed to vLLM
    argv += ["--disable-uvicorn-access-log", "--uvicorn-log-level", "warning"]
    env = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return [Command(argv, env, startup_s=300.0)]


MODES: tuple[Mode, ...] = (
    Mode("cache-on", "cache on", ours()),
    # Chunks alternate between the replicas: every chunk after the first restores.
    Mode("redis-replicas", "2 replicas + Redis", replicas_sharing_redis(2), redis=True),
    Mode("cache-off", "cache off", ours("--stream-cache-size", "0"), linestyle=REPLAYS),
    Mode("http-floor", "HTTP floor", echo_floor, wire="echo", linestyle=FLOOR),
    Mode("vllm", "vLLM 0.33.0", vllm_render, needs_vllm=True, linestyle=REPLAYS),
    # cache-on's server; its client re-encodes the state as requests/aiohttp users do
    Mode("json-dumps", "json.dumps client", ours(), wire="json-dumps", linestyle=OTHER_WIRE),
    # cache-on's server, the transports of docs/transports.md
    Mode("compact", "compact state", ours(), wire="compact", linestyle=OTHER_WIRE),
    Mode("websocket", "WebSocket", ours(), wire="websocket", linestyle=OTHER_WIRE),
    # one process writing every kept chunk's snapshot to Redis, on a wire that does not
    # grow with the stream: what keeping snapshots costs a chunk, and nothing else
    Mode("compact-redis", "compact + Redis", replicas_sharing_redis(1), "compact", redis=True),
    # the echo app, sent what the two transports send: what they cost before any
    # derender work, the least their server CPU can be
    Mode("compact-floor", "compact floor", echo_floor, wire="compact-echo", linestyle=FLOOR),
    Mode("websocket-floor", "WebSocket floor", echo_floor, wire="socket-echo", linestyle=FLOOR),
    # cache-on's server, batch frames: one frame per engine step carries every stream's
    # chunk, on one WebSocket connection or POSTed
    Mode("batch", "batch WebSocket", ours(), wire="batch", linestyle=OTHER_WIRE),
    Mode("batch-http", "batch HTTP", ours(), wire="batch-http", linestyle=OTHER_WIRE),
)
BASELINE = MODES[0]  # the mode every other one is compared with


def by_name(name: str) -> Mode:
    return next(mode for mode in MODES if mode.name == name)


# A colour per mode, never two modes in one (matplotlib's ten, then three more).
PALETTE = (*(f"C{i}" for i in range(10)), "black", "gold", "teal")
assert len(MODES) <= len(PALETTE), "a new mode needs a colour of its own in PALETTE"


def style(name: str) -> Style:
    """The mode's colour and line style, the same in every panel and plot of every run."""
    mode = by_name(name)
    return Style(PALETTE[MODES.index(mode)], mode.linestyle)


def selected(names: Sequence[str] | None, setup: Setup) -> list[Mode]:
    """The modes named (all by default); vLLM's needs an installation."""
    chosen = [mode for mode in MODES if names is None or mode.name in names]
    if setup.vllm_python is not None:
        return chosen
    if names is not None and any(mode.needs_vllm for mode in chosen):
        raise SystemExit("the vLLM mode needs --vllm-python")
    return [mode for mode in chosen if not mode.needs_vllm]


@contextlib.contextmanager
def started(mode: Mode, setup: Setup) -> Iterator[Target]:
    """The mode's processes (and its Redis, whose CPU is billed to the mode), running."""
    with contextlib.ExitStack() as stack:
        redis_pids: list[int] = []
        if mode.redis:
            redis = stack.enter_context(redis_server())
            assert redis.process is not None
            setup = dataclasses.replace(setup, redis_url=redis.url)
            redis_pids.append(redis.process.pid)
        target = stack.enter_context(running(mode.commands(setup)))
        yield Target(target.bases, [*target.pids, *redis_pids], setup.redis_url)
