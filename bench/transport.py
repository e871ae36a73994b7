"""``python -m bench transport``: the app's own CPU per chunk on each wire, in-process.

One qwen3 + hermes stream of ``--tokens`` tokens is sent one token per chunk to the ASGI
app itself, without a server or a socket: as POSTs of the full protocol (its state
echoed byte for byte), as POSTs carrying compact states, and as WebSocket messages on
one connection; then ``--streams`` such streams in batch frames, a frame per step
carrying every stream's next chunk, on one WebSocket connection (``batch``) and POSTed
to the batch path (``batch-http``, compact entries). What is timed (this process's CPU,
per stretch of the stream; a frame's over its entries) is the app's work: body reading,
decoding, the session, derendering, the reply. The difference to ``bench stream``'s and
``bench load``'s server CPU is the HTTP server's (uvicorn's) share, which the wire does
not change.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec
from starlette.types import Message

from app.serving.server import CHAT_PATH, DerenderApp, create_app
from app.serving.settings import Settings
from app.transports.socket_streams import SocketReply
from bench.report import machine, progress, table, write
from bench.workload import CHAT_REQUEST, chat_output, prompt_ids, qwen3

WIRES = ("full", "compact", "websocket", "batch", "batch-http")
# The stretches of the stream whose mean cost per chunk is reported, as fractions of it
# (0-256, 1024-2048 and 3072-4096 of a 4,096-token stream).
STRETCHES = ((0, 1 / 16), (1 / 4, 1 / 2), (3 / 4, 1))

_Reply = msgspec.json.Decoder(dict[str, msgspec.Raw])
Send = Callable[[bytes], Awaitable[bytes]]


class WireRun(msgspec.Struct):
    wire: str
    tokens: int
    cpu_s: float
    us_per_chunk: list[float]  # mean per stretch (STRETCHES)
    streams: int = 1  # a batch wire's frame carries a chunk of each


def _app(tokens: int) -> DerenderApp:
    settings = Settings(
        reasoning_parser="qwen3",
        tool_call_parser="hermes",
        enable_auto_tool_choice=True,
        max_model_len=tokens + 512,
    )
    return create_app(settings, qwen3())


def _poster(app: DerenderApp, compact: bool, path: str = CHAT_PATH) -> Send:
    """A POST to ``path``, answered by the app, as a function of its body."""
    headers = [(b"content-type", b"application/json")]
    if compact:
        headers.append((b"x-derender-state", b"compact"))
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}

    async def post(body: bytes) -> bytes:
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])
        sent: list[Message] = []

        async def receive() -> dict[str, Any]:
            return next(messages)

        async def send(message: Message) -> None:
            sent.append(message)

        await app({**scope, "query_string": b"", "root_path": ""}, receive, send)
        assert sent[0]["status"] == 200, sent[1]["body"]
        reply: bytes = sent[1]["body"]
        return reply

    return post


async def _stream(post: Send, output: list[int], prompt: list[int], wire: str) -> list[float]:
    """CPU seconds per chunk of one stream POSTed on ``wire`` (full or compact)."""
    state: msgspec.Raw | None = None
    costs = []
    for position, token in enumerate(output):
        last = position == len(output) - 1
        choice = {"index": 0, "token_ids": [token], "finish_reason": "stop" if last else None}
        body: dict[str, Any] = {"generate_chunk": {"request_id": wire, "choices": [choice]}}
        body["stream"] = True
        if state is None or wire == "full":
            body.update(prompt_token_ids=prompt, chat_request=CHAT_REQUEST)
        if state is not None:
            body["stream_state"] = state
        encoded = msgspec.json.encode(body)
        started = time.process_time()
        reply = await post(encoded)
        costs.append(time.process_time() - started)
        state = _Reply.decode(reply)["stream_state"]
    return costs


async def _socket_stream(app: DerenderApp, output: list[int], prompt: list[int]) -> list[float]:
    """One connection of the app's WebSocket route: each message is handed over when the
    app asks for the next one, so the CPU between two asks is one message's."""
    bodies = []
    for position, token in enumerate(output):
        last = position == len(output) - 1
        choice = {"index": 0, "token_ids": [token], "finish_reason": "stop" if last else None}
        message: dict[str, Any] = {"generate_chunk": {"request_id": "ws", "choices": [choice]}}
        if position == 0:
            message.update(prompt_token_ids=prompt, chat_request=CHAT_REQUEST)
        bodies.append(msgspec.json.encode(message).decode())
    messages = iter(
        [
            {"type": "websocket.connect"},
            *({"type": "websocket.receive", "text": body} for body in bodies),
            {"type": "websocket.disconnect"},
        ]
    )
    asked: list[float] = []

    async def receive() -> dict[str, Any]:
        asked.append(time.process_time())
        return next(messages)

    async def send(message: Message) -> None:
        if message["type"] == "websocket.send":
            msgspec.json.decode(message["text"], type=SocketReply)  # not an error reply

    scope = {"type": "websocket", "path": CHAT_PATH + "/ws", "headers": []}
    await app(scope, receive, send)
    # asked[0] is the handshake's ask, asked[-1] the disconnect's
    return [later - earlier for earlier, later in itertools.pairwise(asked[1:])]


def _frame(steps: list[bytes]) -> bytes:
    return b'{"batch":[' + b",".join(steps) + b"]}"


def _entries(
    output: list[int], prompt: list[int], streams: int, position: int, states: list[Any] | None
) -> bytes:
    """The frame of step ``position``: a chunk per stream, its context on the first; with
    ``states`` (a batch POST), each a compact chunk carrying its stream's last state."""
    last = position == len(output) - 1
    choice = {
        "index": 0,
        "token_ids": [output[position]],
        "finish_reason": "stop" if last else None,
    }
    steps = []
    for stream in range(streams):
        entry: dict[str, Any] = {
            "generate_chunk": {"request_id": f"b{stream}", "choices": [choice]}
        }
        if position == 0:
            entry.update(prompt_token_ids=prompt, chat_request=CHAT_REQUEST)
        elif states is not None:
            entry["stream_state"] = states[stream]
        steps.append(msgspec.json.encode(entry))
    return _frame(steps)


class _Replies(msgspec.Struct):
    batch: list[dict[str, msgspec.Raw]]


_replies = msgspec.json.Decoder(_Replies)


def _states(reply: bytes) -> list[msgspec.Raw]:
    """Each entry's state, once every entry is known to have answered its chunk."""
    entries = _replies.decode(reply).batch
    assert all("chunk" in entry for entry in entries), reply[:500]
    return [entry["stream_state"] for entry in entries]


async def _socket_frames(
    app: DerenderApp, output: list[int], prompt: list[int], streams: int
) -> list[float]:
    """CPU seconds per chunk of ``streams`` streams on one connection, a frame per step:
    the CPU between two asks for a message is one frame's, over its entries."""

    def lazily() -> Iterator[dict[str, Any]]:  # a frame is built when it is asked for
        yield {"type": "websocket.connect"}
        for position in range(len(output)):
            text = _entries(output, prompt, streams, position, None).decode()
            yield {"type": "websocket.receive", "text": text}
        yield {"type": "websocket.disconnect"}

    messages = lazily()
    asked: list[float] = []

    async def receive() -> dict[str, Any]:
        message = next(messages)  # built before the clock is read
        asked.append(time.process_time())
        return message

    async def send(message: Message) -> None:
        if message["type"] == "websocket.send":
            _states(message["text"].encode())

    scope = {"type": "websocket", "path": CHAT_PATH + "/ws", "headers": []}
    await app(scope, receive, send)
    return [(later - earlier) / streams for earlier, later in itertools.pairwise(asked[1:])]


async def _posted_frames(
    app: DerenderApp, output: list[int], prompt: list[int], streams: int
) -> list[float]:
    """CPU seconds per chunk of ``streams`` streams POSTed to the batch path, a frame per
    step, each entry a compact chunk."""
    post = _poster(app, False, CHAT_PATH + "/batch")
    states: list[Any] | None = None
    costs = []
    for position in range(len(output)):
        frame = _entries(output, prompt, streams, position, states)
        started = time.process_time()
        reply = await post(frame)
        costs.append((time.process_time() - started) / streams)
        states = _states(reply)
    return costs


def measure(wire: str, tokens: int, streams: int) -> WireRun:
    app = _app(tokens)
    tokenizer = qwen3()
    output, prompt = chat_output(tokenizer, tokens), prompt_ids(tokenizer, 100)
    if wire == "websocket":
        costs = asyncio.run(_socket_stream(app, output, prompt))
    elif wire == "batch":
        costs = asyncio.run(_socket_frames(app, output, prompt, streams))
    elif wire == "batch-http":
        costs = asyncio.run(_posted_frames(app, output, prompt, streams))
    else:
        costs = asyncio.run(_stream(_poster(app, wire == "compact"), output, prompt, wire))
    spans = [costs[int(start * tokens) : int(end * tokens)] for start, end in STRETCHES]
    means = [sum(span) / len(span) * 1e6 for span in spans]
    batched = wire in ("batch", "batch-http")
    return WireRun(wire, tokens, sum(costs), means, streams if batched else 1)


def render(runs: list[WireRun]) -> str:
    full = next(run for run in runs if run.wire == "full")
    columns = ["wire", "app CPU s", "x full"]
    columns += [
        f"µs/chunk {int(start * full.tokens)}-{int(end * full.tokens)}" for start, end in STRETCHES
    ]
    rows = [
        [run.wire, f"{run.cpu_s:.2f}", f"x{run.cpu_s / full.cpu_s:.2f}"]
        + [f"{cost:.0f}" for cost in run.us_per_chunk]
        for run in runs
    ]
    streams = max(run.streams for run in runs)
    head = (
        f"{full.tokens}-token qwen3 + hermes stream, one token per chunk, in-process "
        "(the app's CPU only: no HTTP server, no socket); the batch wires carry "
        f"{streams} such streams, a frame per step (CPU s: a stream's share)"
    )
    return head + "\n\n" + table(columns, rows)


def main(args: argparse.Namespace) -> int:
    runs = []
    for wire in WIRES:
        frames = f" in frames of {args.streams}" if wire in ("batch", "batch-http") else ""
        progress(f"{wire}: {args.tokens} chunks{frames}")
        runs.append(measure(wire, args.tokens, args.streams))
    result = {"machine": machine(), "runs": runs}
    write(args.out, "transport", result, render(runs))
    return 0
