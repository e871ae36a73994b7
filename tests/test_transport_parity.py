"""The compact, WebSocket and batch transports (docs/transports.md) give the full
protocol's chunks, on every recorded transcript and on every miss path.

1. Every recorded chat_stream transcript of the seven Qwen3 configurations (C1-C7),
   driven by app/transports/client.py in compact mode (its multi-token chunkings: one request per
   token is what the batch POSTs carry) and over the WebSocket endpoint (a real
   server per configuration; one connection carries all its transcripts), then all of
   them interleaved in batch frames (over that connection, and POSTed), gives the
   chunks vLLM 0.33.0 gave, compared as tests/test_golden.py compares; the full state
   the client rebuilds from each compact one is the state vLLM's reply carried.
2. Random qwen3 + hermes streams (reasoning, an answer, tool calls; random chunkings),
   with misses injected between chunks (compact: an eviction, a restart, a second
   replica without shared Redis, a retried chunk; WebSocket: a dropped connection, a
   reconnection to another replica, a server restarted on its port; batch frames, on a
   connection and POSTed: an eviction, a restart, a second replica, a dropped
   connection, and bad entries beside the good ones), assemble the same chunk bytes
   (``created`` aside) as a cache-off full-protocol run of the same chunks.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.transports.client import (
    CHAT_PATH,
    SOCKET_PATH,
    STATE_HEADER,
    STATE_REQUIRED,
    ChatStream,
    DerenderClient,
    Pending,
    Reply,
    ReplyError,
)
from app.wire.routing import STREAM_ID_HEADER
from tests.support.apps import AppFactory
from tests.support.golden import Answer, flags_of, load_cases, replay, stream_body
from tests.support.parity import chunked
from tests.support.processes import ServerProcess, serving
from tests.support.replies import without_created
from tests.support.tokenizers import bundled_tokenizer

pytestmark = pytest.mark.usefixtures("no_internal_errors")

# ------------------------------------------------------------- recorded transcripts

CONFIGS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")
TRANSCRIPTS = {
    config: [case for case in load_cases(config) if case["kind"] == "chat_stream"]
    for config in CONFIGS
}


class Transcript:
    """``replay``'s post (tests/support/golden.py) through a ``DerenderClient``: each call
    goes to the client stream of its (request id, choice index), opened on the lane's
    first call; the reply handed back carries the full state the client rebuilds, so the
    transcript's states are checked too."""

    def __init__(self, client: DerenderClient) -> None:
        self.client = client
        self.streams: dict[tuple[str, int], ChatStream] = {}

    def __call__(self, path: str, body: bytes, content_type: str) -> Answer:
        sent = json.loads(body)
        chunk = sent["generate_chunk"]
        index = chunk["choices"][0]["index"] if chunk["choices"] else 0
        key = (chunk["request_id"], index)
        if "stream_state" not in sent:  # the lane's first call
            # A transcript that leaves out its context (C7, without a parser) gets a null
            # chat request or no prompt ids: the client always sends both.
            self.streams[key] = self.client.stream(
                chunk["request_id"],
                chat_request=sent.get("chat_request"),
                prompt_token_ids=sent.get("prompt_token_ids", []),
                index=index,
            )
        stream = self.streams[key]
        fields = {name: sent[name] for name in ("model", "prompt_tokens") if name in sent}
        try:
            reply = stream.send_chunk(chunk, **fields)
        except ReplyError as exc:
            return exc.status, json.loads(exc.body), None
        state = stream.full_state() or b""
        return 200, {"chunk": reply.chunk, "stream_state": json.loads(state)}, state


@dataclass
class _Call:
    """A transcript's call as a client stream sends it."""

    key: tuple[str, int]
    generate_chunk: dict[str, Any]
    fields: dict[str, Any]
    opens: bool  # the lane's first call: the client stream begins


def _calls(case: dict[str, Any]) -> list[_Call]:
    """A transcript's calls, what replay sends without the state (the client keeps it)."""
    calls, lanes = [], set()
    for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
        body = stream_body(case, chunk, None)
        index = chunk["choices"][0]["index"] if chunk["choices"] else 0
        calls.append(_Call((chunk["request_id"], index), chunk, body, lane not in lanes))
        lanes.add(lane)
    return calls


def interleaved(client: DerenderClient, cases: list[dict[str, Any]]) -> list[str]:
    """Every transcript of ``cases`` at once through ``client``'s batch frames, a call of
    each running transcript per frame (transcripts whose streams share a key wait for
    one another), then compared with vLLM's replies as ``replay`` compares them."""
    waiting = {case["id"]: _calls(case) for case in cases}
    answers: dict[str, list[Answer]] = {case_id: [] for case_id in waiting}
    streams: dict[tuple[str, int], ChatStream] = {}
    running: dict[str, list[_Call]] = {}
    while waiting or running:
        for case_id, calls in list(waiting.items()):
            busy = {call.key for rest in running.values() for call in rest}
            if not busy & {call.key for call in calls}:
                running[case_id] = waiting.pop(case_id)
        staged: list[tuple[str, Pending]] = []
        for case_id, calls in running.items():
            call = calls.pop(0)
            if call.opens:
                streams[call.key] = client.stream(
                    call.key[0],
                    chat_request=call.fields.get("chat_request"),
                    prompt_token_ids=call.fields.get("prompt_token_ids", []),
                    index=call.key[1],
                )
            fields = {k: v for k, v in call.fields.items() if k in ("model", "prompt_tokens")}
            staged.append((case_id, streams[call.key].stage_chunk(call.generate_chunk, **fields)))
        client.flush()
        for case_id, pending in staged:
            answers[case_id].append(_answer(pending))
        running = {case_id: calls for case_id, calls in running.items() if calls}
    problems = []
    for case in cases:
        found = replay(case, _answered_by(answers[case["id"]]))
        problems += [f"{client.mode} {case['id']} {p}" for p in found]
    return problems


def _answered_by(answers: list[Answer]) -> Callable[[str, bytes, str], Answer]:
    """``replay``'s post, answered by the replies the transcript's calls got."""
    replies = iter(answers)
    return lambda path, body, content_type: next(replies)


def _answer(pending: Pending) -> Answer:
    """A settled chunk as ``replay`` reads a reply: the full state the client rebuilt."""
    try:
        reply = pending.result()
    except ReplyError as exc:
        return exc.status, json.loads(exc.body), None  # the entry's reply: its error, its stream
    state = pending.stream.full_state() or b""
    return 200, {"chunk": reply.chunk, "stream_state": json.loads(state)}, state


@pytest.mark.parametrize("config", CONFIGS)
def test_every_transcript_over_compact_http_websocket_and_batch_frames(config: str) -> None:
    """One server, every transcript of its configuration in compact mode, then all over
    one WebSocket connection, then all interleaved in batch frames on one connection and
    in batch POSTs. Every chunk after a parsed stream's first is answered from the
    stream's live session, and a usage chunk after the final one, its session gone, is
    sent in full at once: nothing is re-sent."""
    cases = TRANSCRIPTS[config]
    problems: list[str] = []
    with (
        serving(*flags_of(cases[0])) as base,
        DerenderClient(base, "compact") as compact,
        DerenderClient(base, "websocket") as socket,
        DerenderClient(base, "batch") as frames,
        DerenderClient(base, "batch-http") as posted,
    ):
        for client in (compact, socket):
            for case in cases:
                if client is compact and case["id"].endswith("#t1"):
                    continue  # one HTTP request per token: the batch POSTs below carry it
                where = f"{client.mode} {case['id']}"
                problems += [f"{where} {p}" for p in replay(case, Transcript(client))]
        for client in (frames, posted):
            problems += interleaved(client, cases)
    assert not problems, "\n".join(problems[:8])
    assert compact.resends == posted.resends == 0
    assert (socket.connection, socket.reconnects, socket.resends) == (1, 0, 0)
    assert (frames.connection, frames.reconnects, frames.resends) == (1, 0, 0)


# ------------------------------------------------------------------- random streams

FLAGS = (
    *("--served-model-name", "qwen3", "--max-model-len", "4096"),
    *("--reasoning-parser", "qwen3", "--tool-call-parser", "hermes"),
    "--enable-auto-tool-choice",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    for name in ("book_hotel", "get_weather")
]
CHAT_REQUEST = {"model": "qwen3", "messages": [{"role": "user", "content": "Plan"}], "tools": TOOLS}
PROMPT = "<|im_start|>user\nPlan<|im_end|>\n<|im_start|>assistant\n"
SENTENCES = (
    "Compare fares, weather and hotels near Alfama before deciding. ",
    "The user wants a weekend in Lisbon; ",
    "Here is the plan: café at 9, tram 28, então o miradouro 🌅. ",
    "数据 shows rain on Sunday. ",
    'Use {braces} and "quotes" carefully.\n',
)
EXAMPLES = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_request_ids = itertools.count()

text_pieces = st.lists(
    st.sampled_from(SENTENCES) | st.text(st.characters(codec="utf-8"), max_size=6), max_size=5
).map("".join)
tool_calls = st.lists(
    st.tuples(
        st.sampled_from(["book_hotel", "get_weather"]),
        st.dictionaries(
            st.sampled_from(["city", "nights", "note"]),
            st.integers(0, 99) | st.text(max_size=8) | st.sampled_from(SENTENCES),
            max_size=3,
        ),
    ),
    max_size=3,
)


@st.composite
def outputs(draw: st.DrawFn) -> str:
    """A Qwen3 turn as the model writes it: reasoning, an answer, hermes tool calls."""
    text = f"<think>\n{draw(text_pieces)}\n</think>\n\n{draw(text_pieces)}"
    for name, arguments in draw(tool_calls):
        call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        text += f"\n<tool_call>\n{call}\n</tool_call>"
    return text + "<|im_end|>"


@dataclass
class Plan:
    """One stream of an example: its id and its output cut into generate chunks."""

    request_id: str
    chunks: list[list[int]]

    def generate_chunk(self, step: int) -> dict[str, Any]:
        finish = "stop" if step == len(self.chunks) - 1 else None
        choice = {"index": 0, "token_ids": self.chunks[step], "finish_reason": finish}
        return {"request_id": self.request_id, "choices": [choice]}


@dataclass
class Example:
    """Streams sent interleaved (``order``: the plan of each step), with ``events``
    (miss kinds) run before the step they are keyed by."""

    plans: list[Plan]
    order: list[int]
    events: dict[int, list[str]]


@st.composite
def examples(draw: st.DrawFn, kinds: Sequence[str]) -> Example:
    """One or two random streams, randomly chunked and interleaved, with miss ``kinds``
    drawn before a few of the steps after the first."""
    plans = []
    for _ in range(draw(st.integers(1, 2))):
        ids = bundled_tokenizer("qwen3").encode(draw(outputs()))
        cuts = draw(st.lists(st.integers(0, len(ids)), min_size=3, max_size=40))
        plans.append(Plan(f"parity-{next(_request_ids)}", chunked(ids, cuts)))
    steps = [i for i, plan in enumerate(plans) for _ in plan.chunks]
    order = draw(st.permutations(steps))
    events: dict[int, list[str]] = {}
    if len(order) > 1:
        kinds_drawn = st.lists(st.sampled_from(kinds), min_size=1, max_size=2)
        gaps = st.integers(1, len(order) - 1)
        events = draw(st.dictionaries(gaps, kinds_drawn, min_size=1, max_size=6))
    return Example(plans, order, events)


@dataclass
class Sent:
    """A chunk as a stream sent it: the reply, and the states it was sent after (the
    previous reply's compact one, the full one the client rebuilt)."""

    generate_chunk: dict[str, Any]
    reply: Reply
    before: bytes | None
    full_before: bytes | None


class _Chunk(msgspec.Struct):
    chunk: msgspec.Raw


_chunk_of = msgspec.json.Decoder(_Chunk).decode


def chunk_bytes(body: bytes) -> bytes:
    """A reply's chunk as it came (HTTP body or WebSocket message), ``created`` zeroed."""
    return without_created(bytes(_chunk_of(body).chunk))


Assembled = dict[str, list[tuple[bytes, Any]]]
Expected = Callable[[Example], Assembled]


@dataclass
class Run:
    """One example driven through a client: each stream's chunks as sent, and the full
    states the client rebuilt after each."""

    sent: dict[str, list[Sent]] = field(default_factory=dict)
    states: dict[str, list[Any]] = field(default_factory=dict)

    def assembled(self) -> Assembled:
        return {
            request_id: [
                (chunk_bytes(s.reply.body), state)
                for s, state in zip(sent, self.states[request_id], strict=True)
            ]
            for request_id, sent in self.sent.items()
        }


def drive(
    client: DerenderClient, example: Example, before: Callable[[int, Run], None] | None = None
) -> Run:
    """Send an example's chunks in its order; ``before(step, run)`` runs first."""
    run = Run()
    streams = {
        plan.request_id: client.stream(
            plan.request_id, chat_request=CHAT_REQUEST, prompt_token_ids=_prompt_ids()
        )
        for plan in example.plans
    }
    progress = dict.fromkeys(streams, 0)
    for step, which in enumerate(example.order):
        if before is not None:
            before(step, run)
        plan = example.plans[which]
        stream = streams[plan.request_id]
        sent = run.sent.setdefault(plan.request_id, [])
        previous = bytes(sent[-1].reply.stream_state) if sent else None
        full_before = stream.full_state()
        generate_chunk = plan.generate_chunk(progress[plan.request_id])
        reply = stream.send_chunk(generate_chunk)
        sent.append(Sent(generate_chunk, reply, previous, full_before))
        run.states.setdefault(plan.request_id, []).append(json.loads(stream.full_state() or b""))
        progress[plan.request_id] += 1
    return run


@functools.cache
def _prompt_ids() -> list[int]:
    return bundled_tokenizer("qwen3").encode(PROMPT)


@pytest.fixture(scope="module")
def expected(make_app: AppFactory) -> Expected:
    """An example's replies from the vLLM protocol on a server that keeps no sessions."""
    http = TestClient(make_app([*FLAGS, "--stream-cache-size", "0"]))

    def run(example: Example) -> Assembled:
        client = DerenderClient("http://testserver", "full", http=http)
        return drive(client, example).assembled()

    return run


# ------------------------------------------------------------- compact over HTTP


class Replicas:
    """Two in-process replicas without shared Redis; the client posts to the current one.

    A replica's generation names its kept sessions: an eviction or a restart begins a new
    one, so a stream's live session is where its last chunk was answered, if that
    replica is still in the same generation.
    """

    def __init__(self, make_app: AppFactory) -> None:
        self.make_app = make_app
        self.clients = [TestClient(make_app(FLAGS)) for _ in range(2)]
        self.generations = [0, 0]
        self.current = 0

    @property
    def here(self) -> tuple[int, int]:
        return self.current, self.generations[self.current]

    def evict(self) -> None:
        self.clients[self.current].app.service.store.cache.clear()
        self.generations[self.current] += 1

    def restart(self) -> None:
        self.clients[self.current] = TestClient(self.make_app(FLAGS))
        self.generations[self.current] += 1

    def switch(self) -> None:
        self.current = 1 - self.current


class CompactMisses:
    """Runs an example's events before their step, and says what each compact chunk must
    get: what each replica generation keeps is modelled (for each stream, how many chunks
    its live session has consumed; a final chunk drops it), so a chunk must be answered
    from a session exactly when one continues the client's state, and else by a 409 and
    a re-send in full. ``misses`` counts the latter."""

    def __init__(self, client: DerenderClient, replicas: Replicas, example: Example) -> None:
        self.client = client
        self.replicas = replicas
        self.example = example
        self.plans = {plan.request_id: plan for plan in example.plans}
        self.kept: dict[tuple[int, int], dict[str, int]] = {}
        self.misses = 0
        self.retries = 0

    def __call__(self, step: int, run: Run) -> None:
        for kind in self.example.events.get(step, ()):
            if kind == "retry":
                self.retry(run, self.example.plans[self.example.order[step - 1]].request_id)
            else:
                getattr(self.replicas, kind)()
                self.client.http = self.replicas.clients[self.replicas.current]
        request_id = self.example.plans[self.example.order[step]].request_id
        consumed = len(run.sent.get(request_id, ()))
        if consumed and self.here.get(request_id) != consumed:
            self.misses += 1
        self.answered(request_id, consumed + 1)

    @property
    def here(self) -> dict[str, int]:
        """What the current replica keeps, in its current generation."""
        return self.kept.setdefault(self.replicas.here, {})

    def answered(self, request_id: str, consumed: int) -> None:
        if consumed == len(self.plans[request_id].chunks):
            self.here.pop(request_id, None)
        else:
            self.here[request_id] = consumed

    def retry(self, run: Run, request_id: str) -> None:
        """The stream's last chunk again, with the state it was sent with: refused as
        compact unless a session here still continues that state, and answered, in full
        if refused, with the same chunk and state as the first time."""
        last, consumed = run.sent[request_id][-1], len(run.sent[request_id])
        if last.before is None or last.full_before is None:
            return  # a stream's first chunk carried no state
        http = self.client.http
        headers = {"content-type": "application/json", STATE_HEADER: "compact"}
        headers[STREAM_ID_HEADER] = request_id
        body = {"stream": True, "generate_chunk": last.generate_chunk}
        compact = msgspec.json.encode({**body, "stream_state": msgspec.Raw(last.before)})
        again = http.post(CHAT_PATH, content=compact, headers=headers)
        if self.here.get(request_id) != consumed - 1:
            assert again.status_code == 409, again.text
            assert again.json()["error"]["code"] == STATE_REQUIRED
            full = {**body, "stream_state": msgspec.Raw(last.full_before)}
            full |= {"chat_request": CHAT_REQUEST, "prompt_token_ids": _prompt_ids()}
            again = http.post(CHAT_PATH, content=msgspec.json.encode(full), headers=headers)
        assert again.status_code == 200, again.text
        assert chunk_bytes(again.content) == chunk_bytes(last.reply.body)
        assert again.json()["stream_state"] == json.loads(bytes(last.reply.stream_state))
        self.answered(request_id, consumed)
        self.retries += 1


@pytest.fixture(scope="module")
def replicas(make_app: AppFactory) -> Replicas:
    return Replicas(make_app)


@settings(EXAMPLES, max_examples=30)
@given(example=examples(("evict", "restart", "switch", "retry")))
def test_compact_streams_survive_misses(
    replicas: Replicas, expected: Expected, example: Example
) -> None:
    client = DerenderClient("http://testserver", "compact", http=replicas.clients[0])
    replicas.current = 0
    misses = CompactMisses(client, replicas, example)
    run = drive(client, example, misses)
    assert run.assembled() == expected(example)
    # A chunk whose stream's session is still where it was answered hits: no 409.
    assert client.resends == misses.misses


# --------------------------------------------------------------------- WebSocket


class SocketDrops:
    """Runs an example's events before their step: the client's connection drops
    ("drop"), or drops and the balancer sends the new one to the other replica
    ("switch"); either way the client reconnects once on its next chunk."""

    def __init__(self, client: DerenderClient, urls: list[str], example: Example) -> None:
        self.client = client
        self.urls = urls
        self.example = example
        self.drops = 0

    def __call__(self, step: int, run: Run) -> None:
        kinds = self.example.events.get(step, ())
        for kind in kinds:
            if kind == "switch":
                self.client.url = self.urls[1 - self.urls.index(self.client.url)]
        if kinds:
            self.client._socket_scope.close()  # the socket closes under the client
            self.drops += 1


@pytest.fixture(scope="module")
def socket_replicas() -> Iterator[list[ServerProcess]]:
    servers = [ServerProcess(*FLAGS) for _ in range(2)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


@settings(EXAMPLES, max_examples=15)
@given(example=examples(("drop", "switch")))
def test_websocket_streams_resume_after_drops(
    socket_replicas: list[ServerProcess], expected: Expected, example: Example
) -> None:
    urls = [server.url for server in socket_replicas]
    with DerenderClient(urls[0], "websocket") as client:
        drops = SocketDrops(client, urls, example)
        run = drive(client, example, drops)
        assert (client.reconnects, client.resends) == (drops.drops, 0)
    assert run.assembled() == expected(example)


def test_websocket_streams_resume_on_a_restarted_server(
    socket_replicas: list[ServerProcess], expected: Expected
) -> None:
    """The server is stopped mid-stream and another started on its port: the client's
    next chunk finds the connection gone, reconnects and resumes both streams. (A
    replica of the module's serves: a start-up is seconds of CPU.)"""
    tokenizer = bundled_tokenizer("qwen3")
    texts = (
        f"<think>\n{SENTENCES[0] * 3}\n</think>\n\n{SENTENCES[2] * 2}",
        f"<think>\n{SENTENCES[3]}\n</think>\n\n" + '<tool_call>\n{"name": "book_hotel", '
        '"arguments": {"city": "Lisbon"}}\n</tool_call>',
    )
    plans = [
        Plan(f"parity-{next(_request_ids)}", chunked(tokenizer.encode(text + "<|im_end|>"), cuts))
        for text, cuts in zip(texts, (range(0, 200, 3), (1, 2, 9, 17, 20, 31)), strict=True)
    ]
    order = [i for step in itertools.zip_longest(*(p.chunks for p in plans)) for i, c in
             enumerate(step) if c is not None]  # fmt: skip
    example = Example(plans, order, {})
    middle = len(order) // 2
    server = socket_replicas[0]
    with DerenderClient(server.url, "websocket") as client:

        def restart(step: int, run: Run) -> None:
            if step == middle:
                server.stop()
                server.start()

        run = drive(client, example, restart)
        assert (client.connection, client.reconnects) == (2, 1)
    assert run.assembled() == expected(example)


# ------------------------------------------------------------------ batch frames


class _InProcessSocket:
    """A connection of an in-process app as app/transports/client.py uses one (``send``, ``recv``);
    once closed under the client, it fails as a dropped connection does."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.open = True

    def send(self, text: str) -> None:
        if not self.open:
            raise OSError("the connection dropped")
        self.session.send_text(text)

    def recv(self, timeout: float | None = None) -> str:
        text: str = self.session.receive_text()
        return text

    def close(self) -> None:
        self.open = False


class InProcessBatchClient(DerenderClient):
    """A batch-mode client of the replicas' current app: its WebSocket connection opens
    on the app in process, so a test can evict, restart or switch under it."""

    def __init__(self, replicas: Replicas, mode: Any) -> None:
        super().__init__("http://testserver", mode, http=replicas.clients[replicas.current])
        self.replicas = replicas

    def _connected(self) -> Any:
        if self._socket is None:
            http = self.replicas.clients[self.replicas.current]
            session = self._socket_scope.enter_context(http.websocket_connect(SOCKET_PATH))
            socket = _InProcessSocket(session)
            self._socket_scope.callback(socket.close)
            self._socket = cast(Any, socket)
            self.connection += 1
        return self._socket

    def drop(self) -> None:
        """The connection drops under the client: its next frame reconnects."""
        self._socket_scope.close()


def frames_of(example: Example) -> list[tuple[list[str], list[int]]]:
    """An example's steps cut into frames: a frame runs until a stream comes again or an
    event is due; each with the events run before it."""
    frames: list[tuple[list[str], list[int]]] = []
    for step, which in enumerate(example.order):
        events = example.events.get(step, [])
        if not frames or events or which in frames[-1][1]:
            frames.append((list(events), []))
        frames[-1][1].append(which)
    return frames


BAD_CHUNKS = ([-5], [10**9])  # a negative id, an id past the vocabulary


def drive_frames(client: InProcessBatchClient, example: Example) -> tuple[Run, int]:
    """Send an example's chunks in batch frames, its events run before their frame: a
    "bad" event puts an entry the server must refuse in the frame. Returns the run and
    how many bad entries were refused on their own."""
    run = Run()
    replicas = client.replicas
    streams = {
        plan.request_id: client.stream(
            plan.request_id, chat_request=CHAT_REQUEST, prompt_token_ids=_prompt_ids()
        )
        for plan in example.plans
    }
    progress = dict.fromkeys(streams, 0)
    refused = 0
    for events, members in frames_of(example):
        bad: list[Pending] = []
        for kind in events:
            if kind == "bad":
                stream = client.stream(
                    f"bad-{next(_request_ids)}",
                    chat_request=CHAT_REQUEST,
                    prompt_token_ids=_prompt_ids(),
                )
                bad.append(stream.stage(BAD_CHUNKS[len(bad) % 2]))
                continue
            if kind != "drop":
                getattr(replicas, kind)()
                client.http = replicas.clients[replicas.current]
            if kind != "evict":  # a restart or another replica is a new connection too
                client.drop()
        staged = []
        for which in members:
            plan = example.plans[which]
            generate_chunk = plan.generate_chunk(progress[plan.request_id])
            staged.append((plan, generate_chunk, streams[plan.request_id].stage_chunk(
                generate_chunk)))  # fmt: skip
        client.flush()
        for pending in bad:
            with pytest.raises(ReplyError) as refusal:
                pending.result()
            assert refusal.value.status == 400
            refused += 1
        for plan, generate_chunk, pending in staged:
            stream = streams[plan.request_id]
            sent = run.sent.setdefault(plan.request_id, [])
            sent.append(Sent(generate_chunk, pending.result(), None, None))
            run.states.setdefault(plan.request_id, []).append(
                json.loads(stream.full_state() or b"")
            )
            progress[plan.request_id] += 1
    return run, refused


@pytest.mark.parametrize("mode", ["batch", "batch-http"])
@settings(EXAMPLES, max_examples=20)
@given(example=examples(("evict", "restart", "switch", "drop", "bad")))
def test_batch_frames_survive_misses_and_bad_entries(
    replicas: Replicas, expected: Expected, mode: str, example: Example
) -> None:
    """Streams in batch frames, with evictions, restarts, a second replica, dropped
    connections and refused entries between and beside them: every stream's chunks and
    rebuilt states are a cache-off full-protocol run's, and every bad entry is refused
    on its own."""
    replicas.current = 0
    client = InProcessBatchClient(replicas, mode)
    try:
        run, refused = drive_frames(client, example)
    finally:  # the replicas' clients stay open for the next example
        client.drop()
    assert run.assembled() == expected(example)
    assert refused == sum(kinds.count("bad") for kinds in example.events.values())
