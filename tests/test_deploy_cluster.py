"""deploy/local-cluster end to end: real replicas behind a real nginx on loopback.

The same streams (qwen3 reasoning + hermes tool calls, mixed chunk sizes) go through
a single cache-off server for the expected replies, then through the cluster: with
the routing header, without it, across a replica killed and restarted mid-stream,
and across a scale from 2 to 3 replicas mid-stream. Every reply must be the same
bytes (the ``created`` timestamp aside); with the header, chunks after a stream's
first must hit the session cache of the replica that holds it. The same streams then
go through the two opt-in transports (docs/transports.md) on three replicas, one killed
mid-stream: compact states over HTTP and the WebSocket endpoint. Each reply's chunk,
and the full state the client rebuilds from its compact one, must be the full
protocol's bytes.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
import pytest

from app.tokens.tokenizer import Tokenizer
from app.transports.client import ChatStream, DerenderClient, Reply, split
from tests.support.processes import serving
from tests.support.replies import without_created

MISSING = [
    command
    for command in ("nginx", "redis-server")
    if not (shutil.which(command) or shutil.which(command, path="/usr/sbin:/usr/bin"))
]
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"{' and '.join(MISSING)} not installed: scripts/install installs Debian's "
        "packages as root or with sudo",
    ),
]

ROOT = Path(__file__).resolve().parent.parent
LOCAL_CLUSTER = ROOT / "deploy" / "local-cluster"
# An odd count, so that without the header nginx's round robin moves every stream
# from replica to replica instead of happening to keep each on one.
SIZES = [(1,), (2,), (1, 3), (4, 1, 2), (1, 1, 5), (3,), (2, 1)]
STREAMS = len(SIZES)
# Chunks per stream, about: events mid-stream happen while every stream is in flight.
CHUNKS = 110
SERVER_FLAGS = (
    *("--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"),
    "--enable-auto-tool-choice",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_hotel",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CHAT_REQUEST = {"model": "qwen3", "messages": [{"role": "user", "content": "Plan"}], "tools": TOOLS}
PROMPT = "<|im_start|>user\nPlan<|im_end|>\n<|im_start|>assistant\n"
# An agentic turn: reasoning, an answer, then tool calls, each part repeated to length.
THOUGHT = "Compare fares, weather and hotels near Alfama before deciding. "
ANSWER = "Here is the plan for your weekend in Lisbon. "
CALL = '\n<tool_call>\n{"name": "book_hotel", "arguments": {"city": "Lisbon"}}\n</tool_call>'

Replies = dict[str, list[bytes]]
# Each reply as the full protocol gives it: its chunk and its (vLLM) stream_state.
Resolved = dict[str, list[tuple[bytes, bytes]]]


@dataclass(frozen=True)
class Plan:
    """One stream: its id and its output cut into generate chunks."""

    request_id: str
    chunks: list[list[int]]


def chat_output(tokenizer: Tokenizer, tokens: int) -> list[int]:
    """``tokens`` ids of one agentic turn: reasoning (half), an answer, tool calls."""
    thinking = "<think>\n" + THOUGHT * (tokens // 20 + 1)
    ids = tokenizer.encode(thinking)[: tokens // 2] + tokenizer.encode("\n</think>\n\n")
    ids += tokenizer.encode(ANSWER * 4 + CALL * (tokens // 20 + 1))
    return ids[:tokens]


@pytest.fixture(scope="module")
def prompt_ids(tokenizer: Tokenizer) -> list[int]:
    return tokenizer.encode(PROMPT)


@pytest.fixture(scope="module")
def plans(tokenizer: Tokenizer) -> list[Plan]:
    plans = []
    for i, sizes in enumerate(SIZES):
        tokens = sum(itertools.islice(itertools.cycle(sizes), CHUNKS))
        plans.append(Plan(f"cluster-{i}", split(chat_output(tokenizer, tokens), sizes)))
    return plans


def in_flight(plans: list[Plan]) -> int:
    """The steps during which every stream is still sending chunks."""
    return min(len(plan.chunks) for plan in plans)


def sent(
    client: DerenderClient,
    plans: list[Plan],
    prompt_ids: list[int],
    events: dict[int, Callable[[], None]] | None = None,
) -> Iterator[tuple[str, Reply, ChatStream]]:
    """Send the streams interleaved, chunk ``step`` of each in turn, yielding each reply
    with its stream; ``events[step]`` runs before that step, while every stream is in
    flight."""
    streams = [
        client.stream(plan.request_id, chat_request=CHAT_REQUEST, prompt_token_ids=prompt_ids)
        for plan in plans
    ]
    for step in range(max(len(plan.chunks) for plan in plans)):
        if events and step in events:
            events[step]()
        for plan, stream in zip(plans, streams, strict=True):
            if step < len(plan.chunks):
                finish = "stop" if step == len(plan.chunks) - 1 else None
                yield plan.request_id, stream.send(plan.chunks[step], finish), stream


def drive(
    base: str,
    plans: list[Plan],
    prompt_ids: list[int],
    *,
    route: bool = True,
    events: dict[int, Callable[[], None]] | None = None,
) -> Replies:
    """The replies' bodies (``created`` zeroed) of the streams sent in the full protocol."""
    replies: Replies = {plan.request_id: [] for plan in plans}
    with DerenderClient(base, timeout=60, route=route) as client:
        for request_id, reply, _ in sent(client, plans, prompt_ids, events):
            replies[request_id].append(without_created(reply.body))
    return replies


@pytest.fixture(scope="module")
def expected(plans: list[Plan], prompt_ids: list[int]) -> Replies:
    """The replies of one server that keeps no sessions: every chunk replays."""
    with serving(*SERVER_FLAGS, "--stream-cache-size", "0") as base:
        return drive(base, plans, prompt_ids, route=False)


@dataclass
class LocalCluster:
    state: Path
    balancer: str
    replicas: list[str]

    def run(self, *args: str) -> str:
        command = [str(LOCAL_CLUSTER), "--state-dir", str(self.state), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def refresh(self) -> None:
        urls = dict(re.findall(r"^(balancer|replica \d+): (\S+)", self.run("status"), re.M))
        self.balancer = urls.pop("balancer")
        self.replicas = list(urls.values())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), "", [])
    up = local.run("up", "--replicas", "2", *SERVER_FLAGS, "--log-level", "warning")
    try:
        assert len(re.findall(r"^balancer: http://127\.0\.0\.1:\d+$", up, re.M)) == 1
        local.refresh()
        assert len(local.replicas) == 2
        yield local
    finally:
        local.run("down")


def counter(base: str, name: str) -> float:
    """The sum of a Prometheus counter's samples on one replica (0 if it is down)."""
    try:
        text = httpx.get(f"{base}/metrics", timeout=10).text
    except httpx.TransportError:
        return 0.0
    pattern = rf"^{name}_total(?:{{[^}}]*}})? (\S+)$"
    return sum(float(value) for value in re.findall(pattern, text, re.M))


def counters(cluster: LocalCluster, name: str) -> list[float]:
    return [counter(base, name) for base in cluster.replicas]


def chunks_after_the_first(plans: list[Plan]) -> int:
    return sum(len(plan.chunks) - 1 for plan in plans)


def test_with_the_header_a_stream_stays_on_its_replica(
    cluster: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    hits = sum(counters(cluster, "derender_cache_hits"))
    replies = drive(cluster.balancer, plans, prompt_ids)
    hits = sum(counters(cluster, "derender_cache_hits")) - hits
    ratio = hits / chunks_after_the_first(plans)
    print(
        f"with the header: {hits:.0f} hits over {chunks_after_the_first(plans)} chunks "
        f"after the first ({ratio:.1%})"
    )
    assert replies == expected
    assert ratio >= 0.99


def test_without_the_header_replies_are_unchanged_and_restore_from_redis(
    cluster: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    served = counters(cluster, "derender_requests")
    restored = sum(counters(cluster, "derender_redis_hits"))
    replies = drive(cluster.balancer, plans, prompt_ids, route=False)
    served = [a - b for a, b in zip(counters(cluster, "derender_requests"), served, strict=True)]
    ratio = (sum(counters(cluster, "derender_redis_hits")) - restored) / chunks_after_the_first(
        plans
    )
    print(f"without the header: requests per replica {served}, {ratio:.1%} restored from Redis")
    assert replies == expected
    assert all(served), "nginx spreads header-less calls round robin"
    assert ratio >= 0.9


def test_a_replica_killed_and_restarted_mid_stream(
    cluster: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    steps = in_flight(plans)
    hits_before = counters(cluster, "derender_cache_hits")
    victim: list[int] = []

    def kill() -> None:
        hits = counters(cluster, "derender_cache_hits")
        grown = [a - b for a, b in zip(hits, hits_before, strict=True)]
        victim.append(grown.index(max(grown)) + 1)
        cluster.run("kill", str(victim[0]))

    def restart() -> None:
        cluster.run("start", str(victim[0]))

    replies = drive(
        cluster.balancer, plans, prompt_ids, events={steps // 3: kill, 2 * steps // 3: restart}
    )
    after_restart = counter(cluster.replicas[victim[0] - 1], "derender_requests")
    print(
        f"replica {victim[0]} killed at chunk {steps // 3}, restarted at "
        f"{2 * steps // 3}; it then served {after_restart:.0f} calls"
    )
    assert replies == expected
    assert after_restart > 0


def test_scaling_from_two_to_three_replicas_mid_stream(
    cluster: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    assert len(cluster.replicas) == 2
    misses = sum(counters(cluster, "derender_cache_misses"))

    def add() -> None:
        cluster.run("add")
        cluster.refresh()

    steps = in_flight(plans)
    replies = drive(cluster.balancer, plans, prompt_ids, events={steps // 2: add})
    misses = sum(counters(cluster, "derender_cache_misses")) - misses
    moved = counter(cluster.replicas[2], "derender_requests")
    print(
        f"scaled to 3 at chunk {steps // 2}: {misses:.0f} misses for {STREAMS} streams, "
        f"{moved:.0f} calls on the new replica"
    )
    assert replies == expected
    # A stream misses on its first chunk, and once more if the new ring moved it.
    assert misses <= 2 * STREAMS


class _Reply(msgspec.Struct):
    chunk: msgspec.Raw
    stream_state: msgspec.Raw


def as_full(replies: Replies) -> Resolved:
    """Full-protocol replies as their chunk and state."""
    decode = msgspec.json.Decoder(_Reply).decode
    return {
        stream: [(bytes(reply.chunk), bytes(reply.stream_state)) for reply in map(decode, bodies)]
        for stream, bodies in replies.items()
    }


def resolved(
    client: DerenderClient,
    plans: list[Plan],
    prompt_ids: list[int],
    events: dict[int, Callable[[], None]],
) -> Resolved:
    """The streams sent through ``client``: each reply's chunk (``created`` zeroed) and
    the vLLM state its compact one stands for, rebuilt from the stream's history."""
    replies: Resolved = {plan.request_id: [] for plan in plans}
    for request_id, reply, stream in sent(client, plans, prompt_ids, events):
        # Every stream is a parsed chat: a full state would mean the transport was unused.
        assert b'"output_digest":"' in bytes(reply.stream_state), reply.body[:300]
        chunk = without_created(bytes(msgspec.json.decode(reply.body, type=_Reply).chunk))
        full = stream.full_state()
        assert full is not None
        replies[request_id].append((chunk, full))
    return replies


@pytest.fixture
def three_replicas(cluster: LocalCluster) -> LocalCluster:
    """The cluster with three replicas (the scaling test leaves it so; alone, add one)."""
    while len(cluster.replicas) < 3:
        cluster.run("add")
        cluster.refresh()
    assert len(cluster.replicas) == 3
    return cluster


def kill_and_restart(
    cluster: LocalCluster, steps: int, metric: str
) -> tuple[dict[int, Callable[[], None]], list[int]]:
    """Events that SIGKILL the replica ``metric`` grew most on, a third of the way in,
    and start it again at two thirds; and the list that names the victim."""
    before = counters(cluster, metric)
    victim: list[int] = []

    def kill() -> None:
        grown = [a - b for a, b in zip(counters(cluster, metric), before, strict=True)]
        victim.append(grown.index(max(grown)) + 1)
        cluster.run("kill", str(victim[0]))

    def restart() -> None:
        cluster.run("start", str(victim[0]))

    return {steps // 3: kill, 2 * steps // 3: restart}, victim


def test_compact_streams_across_a_killed_replica(
    three_replicas: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    """Compact chunks that reach a replica without their session (the victim's streams,
    moved, and moved back on its restart) are refused with 409 and re-sent in full."""
    cluster = three_replicas
    events, victim = kill_and_restart(cluster, in_flight(plans), "derender_cache_hits")
    with DerenderClient(cluster.balancer, "compact", timeout=60) as client:
        replies = resolved(client, plans, prompt_ids, events)
    print(f"compact: replica {victim[0]} killed and restarted; {client.resends} re-sends")
    assert replies == as_full(expected)
    # Each of the victim's streams re-sends once on the kill and once on the restart.
    assert 1 <= client.resends <= 2 * STREAMS
    assert client.reconnects == 0


def test_websocket_streams_resume_on_another_replica(
    three_replicas: LocalCluster, plans: list[Plan], prompt_ids: list[int], expected: Replies
) -> None:
    """Issue 17, acceptance 3: the replica holding the connection is killed mid-stream;
    the client reconnects through nginx and resumes every open stream elsewhere."""
    cluster = three_replicas
    # The connection's replica is where the streams opened (their first chunk missed).
    events, victim = kill_and_restart(cluster, in_flight(plans), "derender_cache_misses")
    with DerenderClient(cluster.balancer, "websocket", timeout=60) as client:
        replies = resolved(client, plans, prompt_ids, events)
    print(
        f"websocket: replica {victim[0]} killed and restarted; {client.reconnects} "
        f"reconnects, {client.resends} re-sends"
    )
    assert replies == as_full(expected)
    assert client.reconnects >= 1


def test_the_readme_client_runs_through_the_balancer(cluster: LocalCluster) -> None:
    readme = (ROOT / "deploy" / "README.md").read_text()
    port = cluster.balancer.rsplit(":", 1)[1]
    command = ".venv/bin/python -m app.transports.client http://127.0.0.1:PORT"
    assert command in readme
    snippet = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(snippet) == 1
    for argv, check in (
        (
            command.replace("PORT", port).split()[1:],
            "content: '\\n\\nHello! How can I help you today?'",
        ),
        (["-c", snippet[0].replace("PORT", port)], "'content': ' today?'"),
    ):
        run = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        assert check in run.stdout
        assert run.stdout.count("miss") == 1, run.stdout


def test_local_cluster_refuses_clearly(cluster: LocalCluster, tmp_path: Path) -> None:
    def refused(*args: str, state: Path = cluster.state) -> str:
        command = [str(LOCAL_CLUSTER), "--state-dir", str(state), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr
        return done.stderr

    assert "already up" in refused("up")
    assert "no replica 9" in refused("kill", "9")
    assert "chosen per replica" in refused("up", "--port", "9000")
    assert "run `up` first" in refused("status", state=tmp_path)
