"""A streaming client as a router drives the derender protocol: one exchange per chunk.

How a chunk travels is the mode's ``Wire`` (docs/transports.md):

- ``full``: one POST per chunk carrying the prompt ids, the chat request and the
  ``stream_state`` the previous reply returned, as vLLM's clients send them. The
  prompt and chat request are encoded once and the state is passed through as raw
  JSON, so the client's own CPU stays small and the bytes it counts are exactly the
  bytes on the wire.
- ``echo``: the same requests to a server that answers with the request itself; the
  client grows the state as a derender server would, so its requests have the size.
- ``json-dumps``: what a ``requests``, ``aiohttp`` or ``urllib`` user writes: the reply
  parsed with ``json.loads`` and every request body, state included, re-encoded with
  ``json.dumps`` defaults (ASCII escapes, ``", "`` and ``": "`` separators).
- ``compact``: the POSTs carry ``X-Derender-State: compact``; after the first chunk
  a body is the generate chunk and the compact state alone. The client keeps the
  stream's history and re-sends a chunk in full after a ``409 stream_state_required``.
- ``websocket``: one connection per stream, a text message per chunk; after the first
  message (the context) a message is the generate chunk alone.
- ``compact-echo`` and ``socket-echo``: the bodies and messages of ``compact`` and
  ``websocket`` to the echo server; a compact body carries a compact state of a real
  one's size (``ECHO_COMPACT_STATE``).
- ``batch`` and ``batch-http``: batch frames, as an engine sends a step of all its
  streams at once (``run_engine``): on one WebSocket connection, an entry per stream as
  ``websocket`` sends its message, or POSTed to the batch path, an entry per stream as
  ``compact`` sends its body; entries answered ``stream_state_required`` go again in
  full in a second frame. A single stream (``run_stream``) sends frames of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp
import msgspec

from app.transports.client import (
    BATCH_PATH,
    CHAT_PATH,
    FRAME_ENTRIES,
    SOCKET_PATH,
    STATE_HEADER,
    STATE_REQUIRED,
    StreamHistory,
)
from app.wire.protocol import CompactStreamState
from bench.servers import Target
from bench.workload import CHAT_REQUEST

Wire = Literal[
    "full", "echo", "json-dumps", "compact", "websocket", "compact-echo", "socket-echo", "batch",
    "batch-http",
]  # fmt: skip
BATCHED: tuple[Wire, ...] = ("batch", "batch-http")
JSON_HEADERS = {"content-type": "application/json"}
COMPACT_HEADERS = {**JSON_HEADERS, STATE_HEADER: "compact"}
# What the echo floors carry as the state a reply returned: a compact state as the
# server's are late in the bench's stream (its decode window, counts and digest).
ECHO_COMPACT_STATE = msgspec.json.encode(
    CompactStreamState(
        prev_tokens=[" the", " hotel", " options", " near", " Alf", "ama"],
        prefix_offset=4089,
        read_offset=4095,
        role_sent=True,
        output_tokens=4095,
        output_digest="5f" * 16,
        tools_streamed=True,
        tool_calls=38,
    )
)


class _Reply(msgspec.Struct):
    """A reply as far as the client reads it: the chunk (the tool-call ids it names are
    part of the history a compact client keeps), the state to thread, or the error."""

    chunk: dict[str, Any] | None = None
    stream_state: msgspec.Raw = msgspec.Raw(b"null")
    error: dict[str, Any] | None = None


class _Frame(msgspec.Struct):
    batch: list[msgspec.Raw] | None = None


_decode = msgspec.json.Decoder(_Reply).decode
_decode_frame = msgspec.json.Decoder(_Frame).decode


@dataclass(slots=True)
class Exchange:
    """One chunk's traffic: body (or message payload) bytes each way, a 409's round
    trip and the re-send included, and of the bytes sent those that carry the prompt
    and the stream's state."""

    sent: int = 0
    received: int = 0
    prompt: int = 0
    history: int = 0
    cache: str | None = None  # x-derender-cache of the reply that answered the chunk
    resent: bool = False  # re-sent in full after stream_state_required
    latency: float = 0.0  # seconds from sending the body to having read the reply


@dataclass(slots=True)
class StreamRecord:
    """What the client saw of one stream, chunk by chunk."""

    positions: list[int] = field(default_factory=list)  # output tokens after each chunk
    latencies: list[float] = field(default_factory=list)  # seconds, request to reply
    chunk_bytes: list[int] = field(default_factory=list)  # sent + received, per chunk
    bytes_sent: int = 0
    bytes_received: int = 0
    prompt_bytes: int = 0  # of bytes_sent: the re-sent prompt_token_ids
    history_bytes: int = 0  # of bytes_sent: the echoed stream_state
    hits: int = 0  # replies marked x-derender-cache: hit or redis
    misses: int = 0
    resends: int = 0  # chunks re-sent in full after stream_state_required

    def add(self, position: int, exchange: Exchange) -> None:
        self.positions.append(position)
        self.latencies.append(exchange.latency)
        self.chunk_bytes.append(exchange.sent + exchange.received)
        self.bytes_sent += exchange.sent
        self.bytes_received += exchange.received
        self.prompt_bytes += exchange.prompt
        self.history_bytes += exchange.history
        self.hits += exchange.cache in ("hit", "redis")  # no replay: kept or restored session
        self.misses += exchange.cache == "miss"
        self.resends += exchange.resent


class ReplyError(Exception):
    """A chunk the server refused or failed."""


def grown_state(state: msgspec.Raw | None, chunk: list[int]) -> msgspec.Raw:
    """The state a derender server would return after ``chunk`` (for the echo floor)."""
    value: dict[str, Any] = msgspec.json.decode(state) if state is not None else {}
    value["output_token_ids"] = value.get("output_token_ids", []) + chunk
    value["output_chunk_lens"] = [*value.get("output_chunk_lens", []), len(chunk)]
    value["role_sent"] = True
    return msgspec.Raw(msgspec.json.encode(value))


def _tokens(chunk: dict[str, Any]) -> list[int]:
    tokens: list[int] = chunk["choices"][0]["token_ids"]
    return tokens


async def _post(
    http: aiohttp.ClientSession, url: str, content: bytes, headers: dict[str, str]
) -> tuple[int, bytes, str | None]:
    async with http.post(url, data=content, headers=headers) as reply:
        return reply.status, await reply.read(), reply.headers.get("x-derender-cache")


class _Wire(Protocol):
    async def send(self, chunk: dict[str, Any]) -> Exchange: ...


class _Full:
    """The vLLM protocol: every body carries the context and the whole state."""

    def __init__(
        self, http: aiohttp.ClientSession, target: Target, prompt: list[int], wire: Wire
    ) -> None:
        self.http = http
        self.urls = itertools.cycle(base + CHAT_PATH for base in target.bases)
        self.wire = wire
        prompt_raw = msgspec.Raw(msgspec.json.encode(prompt))
        chat_raw = msgspec.Raw(msgspec.json.encode(CHAT_REQUEST))
        dumps = wire == "json-dumps"
        self.context: tuple[Any, Any] = (prompt, CHAT_REQUEST) if dumps else (prompt_raw, chat_raw)
        self.prompt_bytes = len(json.dumps(prompt)) if dumps else len(prompt_raw)
        self.state: msgspec.Raw | None = None
        self.parsed_state: Any = None  # the json-dumps client's, as json.loads gave it

    async def send(self, chunk: dict[str, Any]) -> Exchange:
        body: dict[str, Any] = {
            "stream": True,
            "generate_chunk": chunk,
            "prompt_token_ids": self.context[0],
            "chat_request": self.context[1],
        }
        content, history = self._encode(body)
        begun = time.perf_counter()
        status, answer, cache = await _post(self.http, next(self.urls), content, JSON_HEADERS)
        latency = time.perf_counter() - begun
        if status != 200:
            raise ReplyError(f"derender replied {status}: {answer[:500]!r}")
        if self.wire == "echo":
            self.state = grown_state(self.state, _tokens(chunk))
        elif self.wire == "json-dumps":
            self.parsed_state = json.loads(answer)["stream_state"]
        else:
            self.state = _decode(answer).stream_state
        sent = len(content)
        return Exchange(sent, len(answer), self.prompt_bytes, history, cache, latency=latency)

    def _encode(self, body: dict[str, Any]) -> tuple[bytes, int]:
        """The body's bytes and how many of them are the state."""
        if self.wire != "json-dumps":
            if self.state is None:
                return msgspec.json.encode(body), 0
            body["stream_state"] = self.state
            return msgspec.json.encode(body), len(self.state)
        content = json.dumps(body).encode()
        if self.parsed_state is None:
            return content, 0
        # the state's share, from the body without it: encoding the state twice would
        # add client CPU, which competes with the server's on a shared box
        without = len(content) + len(b', "stream_state": ')
        body["stream_state"] = self.parsed_state
        content = json.dumps(body).encode()
        return content, len(content) - without


class _History(StreamHistory):
    """A compact client's memory of its stream (app/transports/client.py's) and its context, from
    which it builds each chunk's body."""

    def __init__(self, prompt: list[int]) -> None:
        super().__init__()
        self.prompt = msgspec.Raw(msgspec.json.encode(prompt))
        self.chat = msgspec.Raw(msgspec.json.encode(CHAT_REQUEST))

    def body(
        self, chunk: dict[str, Any], exchange: Exchange, *, context: bool, state: bytes | None,
        stream: bool,
    ) -> bytes:  # fmt: skip
        """A chunk's body with its context and ``state`` if asked, counted in ``exchange``."""
        fields: dict[str, Any] = {"stream": True} if stream else {}
        fields["generate_chunk"] = chunk
        if context:
            fields.update(prompt_token_ids=self.prompt, chat_request=self.chat)
            exchange.prompt += len(self.prompt)
        if state is not None:
            fields["stream_state"] = msgspec.Raw(state)
            exchange.history += len(state)
        content = msgspec.json.encode(fields)
        exchange.sent += len(content)
        return content


class _Compact:
    """Compact state over HTTP: a chunk is its generate chunk and the compact state.
    With ``echo``, to the echo server: its reply is the body itself."""

    def __init__(
        self, http: aiohttp.ClientSession, target: Target, prompt: list[int], echo: bool
    ) -> None:
        self.http = http
        self.urls = itertools.cycle(base + CHAT_PATH for base in target.bases)
        self.history = _History(prompt)
        self.echo = echo

    async def send(self, chunk: dict[str, Any]) -> Exchange:
        exchange = Exchange()
        history = self.history
        context = not history.compact
        body = history.body(chunk, exchange, context=context, state=history.state, stream=True)
        begun = time.perf_counter()
        status, answer = await self._post(body, exchange)
        if status == 409 and _required(answer):
            exchange.resent = True
            full = history.full_state()
            body = history.body(chunk, exchange, context=True, state=full, stream=True)
            status, answer = await self._post(body, exchange)
        exchange.latency = time.perf_counter() - begun
        if status != 200:
            raise ReplyError(f"derender replied {status}: {answer[:500]!r}")
        _keep(history, chunk, answer, self.echo)
        return exchange

    async def _post(self, body: bytes, exchange: Exchange) -> tuple[int, bytes]:
        status, answer, exchange.cache = await _post(
            self.http, next(self.urls), body, COMPACT_HEADERS
        )
        exchange.received += len(answer)
        return status, answer


class _Socket:
    """One WebSocket connection for the stream: after the context, a message per chunk.
    With ``echo``, to the echo server: its reply is the message itself."""

    def __init__(
        self, socket: aiohttp.ClientWebSocketResponse, prompt: list[int], echo: bool
    ) -> None:
        self.socket = socket
        self.history = _History(prompt)
        self.echo = echo

    async def send(self, chunk: dict[str, Any]) -> Exchange:
        exchange = Exchange()
        history = self.history
        opening = history.state is None
        body = history.body(chunk, exchange, context=opening, state=None, stream=False)
        begun = time.perf_counter()
        answer = await self._exchange(body, exchange)
        if not self.echo and _required(answer):  # the connection lost the stream: resume
            exchange.resent = True
            full = history.full_state()
            body = history.body(chunk, exchange, context=True, state=full, stream=False)
            answer = await self._exchange(body, exchange)
        exchange.latency = time.perf_counter() - begun
        _keep(history, chunk, answer, self.echo)
        return exchange

    async def _exchange(self, body: bytes, exchange: Exchange) -> bytes:
        await self.socket.send_str(body.decode())
        message = await self.socket.receive()
        if message.type != aiohttp.WSMsgType.TEXT:
            raise ReplyError(f"the WebSocket gave {message.type.name}: {message.data!r}")
        answer: bytes = message.data.encode()
        exchange.received += len(answer)
        return answer


class _Engine:
    """An engine's way to the server: each step of its streams is one batch frame (more
    past the server's default ``--batch-max-entries``), on one WebSocket connection or
    POSTed; the entries answered ``stream_state_required`` go again in full."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        target: Target,
        socket: aiohttp.ClientWebSocketResponse | None,
    ) -> None:
        self.http = http
        self.url = target.bases[0] + BATCH_PATH
        self.socket = socket

    async def step(self, entries: list[tuple[_History, dict[str, Any]]]) -> list[Exchange]:
        """Each stream's chunk through the server; every entry's latency is its frame's
        (its re-send's included)."""
        exchanges = [Exchange() for _ in entries]
        begun = time.perf_counter()
        answers: list[bytes] = [b""] * len(entries)
        todo = list(range(len(entries)))
        full = False
        while todo:
            again = []
            for start in range(0, len(todo), FRAME_ENTRIES):
                part = todo[start : start + FRAME_ENTRIES]
                bodies = [self._entry(*entries[i], exchanges[i], full) for i in part]
                replies = await self._frame(b'{"batch":[' + b",".join(bodies) + b"]}")
                for i, reply in zip(part, replies, strict=True):
                    exchanges[i].received += len(reply)
                    if not full and _required(reply):
                        exchanges[i].resent = True
                        again.append(i)
                    answers[i] = reply
            todo, full = again, True
        latency = time.perf_counter() - begun
        for (history, chunk), exchange, answer in zip(entries, exchanges, answers, strict=True):
            exchange.latency = latency
            _keep(history, chunk, answer, echo=False)
        return exchanges

    def _entry(
        self, history: _History, chunk: dict[str, Any], exchange: Exchange, full: bool
    ) -> bytes:
        state = history.full_state() if full else None
        if self.socket is not None:  # the connection holds the stream after its first entry
            context = full or history.state is None
            return history.body(chunk, exchange, context=context, state=state, stream=False)
        context = full or not history.compact
        state = state if full else history.state
        return history.body(chunk, exchange, context=context, state=state, stream=True)

    async def _frame(self, frame: bytes) -> list[bytes]:
        if self.socket is not None:
            await self.socket.send_str(frame.decode())
            message = await self.socket.receive()
            if message.type != aiohttp.WSMsgType.TEXT:
                raise ReplyError(f"the WebSocket gave {message.type.name}: {message.data!r}")
            answer: bytes = message.data.encode()
        else:
            async with self.http.post(self.url, data=frame, headers=JSON_HEADERS) as reply:
                answer = await reply.read()
                if reply.status != 200:
                    raise ReplyError(f"derender replied {reply.status}: {answer[:500]!r}")
        batch = _decode_frame(answer).batch
        if batch is None:
            raise ReplyError(f"the frame was refused: {answer[:500]!r}")
        return [bytes(entry) for entry in batch]


class _OneStreamFrames:
    """One stream's chunks as frames of one entry."""

    def __init__(self, engine: _Engine, prompt: list[int]) -> None:
        self.engine = engine
        self.history = _History(prompt)

    async def send(self, chunk: dict[str, Any]) -> Exchange:
        [exchange] = await self.engine.step([(self.history, chunk)])
        return exchange


@contextlib.asynccontextmanager
async def engine(http: aiohttp.ClientSession, target: Target, wire: Wire) -> AsyncIterator[_Engine]:
    """An engine's connection (``batch``: a WebSocket to the first replica, opened before
    the first frame) or its POSTs (``batch-http``)."""
    if wire == "batch":
        url = "ws" + target.bases[0].removeprefix("http") + SOCKET_PATH
        async with http.ws_connect(url, max_msg_size=0) as socket:
            yield _Engine(http, target, socket)
    else:
        yield _Engine(http, target, None)


def _keep(history: StreamHistory, chunk: dict[str, Any], answer: bytes, echo: bool) -> None:
    """Remember a chunk and what its reply (read once) names and carries; an echo (the
    request itself) stands for a reply that named no tool call and returned a compact
    state."""
    if echo:
        history.keep(chunk, {}, ECHO_COMPACT_STATE)
        return
    reply = _decode(answer)
    if reply.error is not None:
        raise ReplyError(f"derender replied {answer[:500]!r}")
    history.keep(chunk, reply.chunk or {}, bytes(reply.stream_state))


def _required(answer: bytes) -> bool:
    """The reply asks for the chunk in full (``stream_state_required``)."""
    try:
        error = _decode(answer).error
    except msgspec.DecodeError:
        return False
    return error is not None and error.get("code") == STATE_REQUIRED


@contextlib.asynccontextmanager
async def opened(
    http: aiohttp.ClientSession, target: Target, prompt: list[int], wire: Wire
) -> AsyncIterator[_Wire]:
    """The stream's way to the server: a WebSocket connection is opened (to the first
    replica) before the first chunk, so its handshake is not a chunk's latency."""
    if wire in BATCHED:
        async with engine(http, target, wire) as batches:
            yield _OneStreamFrames(batches, prompt)
    elif wire in ("websocket", "socket-echo"):
        url = "ws" + target.bases[0].removeprefix("http") + SOCKET_PATH
        async with http.ws_connect(url, max_msg_size=0) as socket:
            yield _Socket(socket, prompt, echo=wire == "socket-echo")
    elif wire in ("compact", "compact-echo"):
        yield _Compact(http, target, prompt, echo=wire == "compact-echo")
    else:
        yield _Full(http, target, prompt, wire)


def chunks(request_id: str, output: list[int], size: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each generate chunk of ``output`` and the output position it ends at."""
    for start in range(0, len(output), size):
        tokens = output[start : start + size]
        last = start + size >= len(output)
        choice = {"index": 0, "token_ids": tokens, "finish_reason": "stop" if last else None}
        yield start + len(tokens), {"request_id": request_id, "choices": [choice]}


async def run_stream(
    http: aiohttp.ClientSession,
    target: Target,
    request_id: str,
    output: list[int],
    prompt: list[int],
    chunk_size: int,
    *,
    wire: Wire = "full",
    interval_s: float = 0.0,
    on_chunk: Callable[[int, StreamRecord], None] | None = None,
) -> StreamRecord:
    """Stream ``output`` ``chunk_size`` tokens per call over ``wire``, one chunk every
    ``interval_s``. A chunk's latency is its round trips, a 409's re-send included, not
    the client's encoding of its first body nor its decoding of the reply (a router's
    CPU, not the server's). ``on_chunk`` gets the output position and the record so far
    after each reply (the stream bench samples server CPU there).
    """
    record = StreamRecord()
    started = time.perf_counter()
    async with opened(http, target, prompt, wire) as way:
        for index, (position, chunk) in enumerate(chunks(request_id, output, chunk_size)):
            if interval_s:
                await asyncio.sleep(max(0.0, started + index * interval_s - time.perf_counter()))
            record.add(position, await way.send(chunk))
            if on_chunk is not None:
                on_chunk(position, record)
    return record


async def run_engine(
    http: aiohttp.ClientSession,
    target: Target,
    prefix: str,
    streams: int,
    output: list[int],
    prompt: list[int],
    chunk_size: int,
    *,
    wire: Wire,
    interval_s: float = 0.0,
    on_step: Callable[[int], None] | None = None,
) -> tuple[list[StreamRecord], list[float]]:
    """``streams`` streams of ``output`` driven as an engine drives them: every step (one
    every ``interval_s``, else as soon as the last is answered) is one frame carrying the
    next chunk of each. Returns each stream's record and each step's frame latency;
    ``on_step`` gets the chunks answered so far after each step."""
    records = [StreamRecord() for _ in range(streams)]
    histories = [_History(prompt) for _ in range(streams)]
    steps = [list(chunks(f"{prefix}-{index}", output, chunk_size)) for index in range(streams)]
    latencies = []
    started = time.perf_counter()
    async with engine(http, target, wire) as batches:
        for step in range(len(steps[0])):
            if interval_s:
                await asyncio.sleep(max(0.0, started + step * interval_s - time.perf_counter()))
            entries = [
                (history, own[step][1]) for history, own in zip(histories, steps, strict=True)
            ]
            exchanges = await batches.step(entries)
            latencies.append(exchanges[0].latency)
            for record, own, exchange in zip(records, steps, exchanges, strict=True):
                record.add(own[step][0], exchange)
            if on_step is not None:
                on_step((step + 1) * streams)
    return records, latencies


async def warm_up(target: Target, output: list[int], prompt: list[int], wire: Wire) -> None:
    """One short unmeasured stream per replica: first-request costs are not the chunk's."""
    async with http_client(1) as client:
        for base in target.bases:
            single = Target([base], [])
            await run_stream(client, single, f"warm-up-{base}", output[:32], prompt, 1, wire=wire)


def http_client(connections: int) -> aiohttp.ClientSession:
    """A keep-alive client with one connection per concurrent stream.

    aiohttp rather than httpx: at 32 streams httpx's client used more CPU than the
    server it measured, on a machine the two share.
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections),
        timeout=aiohttp.ClientTimeout(total=600),
    )
