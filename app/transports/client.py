"""Drive streamed chats through a derender tier, as an orchestrator does, in any of the
transports of docs/transports.md.

- ``full``: the vLLM protocol. Each chunk is one POST carrying the context and the
  previous reply's ``stream_state``, passed on byte for byte (never decoded and rebuilt).
- ``compact``: the same POSTs with ``X-Derender-State: compact``. The client keeps its
  stream's history and sends only the compact state; a ``409 stream_state_required``
  (a replica without the session) is answered by re-sending that chunk in full.
- ``websocket``: one connection carries every stream of the client, a message per chunk;
  a dropped connection is re-opened (through the balancer: any replica) and each stream
  resumes on it with its full state.
- ``batch``: the same connection, batch frames: each stream ``stage``s its next chunk
  and ``flush`` sends every staged chunk in one frame; entries answered
  ``stream_state_required`` go again in full in the next frame, and a dropped
  connection is re-opened and the frame re-sent with every stream's full context.
- ``batch-http``: the same frames POSTed to the batch path, each entry as a compact
  chunk (``stream_state_required`` entries re-sent in full in the next frame), for a
  router that cannot hold a WebSocket.

Every HTTP call carries ``X-Derender-Stream-Id`` so a balancer hashing on it keeps the
stream on the process that holds its session; a WebSocket handshake and a batch POST
carry the client's own id in it.

    python -m app.transports.client http://127.0.0.1:8000 --mode compact   # a short demo stream
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, get_args

import httpx
import msgspec
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.wire.protocol import StreamState
from app.wire.routing import STREAM_ID_HEADER

CHAT_PATH = "/v1/chat/completions/derender"
SOCKET_PATH = CHAT_PATH + "/ws"
BATCH_PATH = CHAT_PATH + "/batch"
CACHE_HEADER = "x-derender-cache"
STATE_HEADER = "X-Derender-State"
STATE_REQUIRED = "stream_state_required"

Mode = Literal["full", "compact", "websocket", "batch", "batch-http"]
MODES: tuple[Mode, ...] = get_args(Mode)
BATCH_MODES: tuple[Mode, ...] = ("batch", "batch-http")
# The server's default frame bounds (--batch-max-entries, --batch-max-bytes).
FRAME_ENTRIES = 1024
FRAME_BYTES = 4 * 1024 * 1024

# The demo stream, Qwen3 token ids for a chat that says "Hi": the prompt as the chat
# template renders it, and an output with reasoning and an answer.
DEMO_PROMPT_IDS = (151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198)
DEMO_OUTPUT_IDS = (
    151667, 198, 785, 1196, 2727, 23811, 11, 773, 358, 40786, 1105, 1182, 624, 151668,
    271, 9707, 0, 2585, 646, 358, 1492, 498, 3351, 30, 151645,
)  # fmt: skip


class Reply(msgspec.Struct):
    """One chunk's reply: its bytes as they came (an HTTP body or a WebSocket message),
    the chunk, the ``stream_state`` it carries and where its session came from."""

    body: bytes
    chunk: dict[str, Any]
    stream_state: msgspec.Raw
    cache: str | None = None


class ReplyError(Exception):
    """A chunk the server refused or failed: its HTTP status (or the error's ``code``
    on a WebSocket) and the OpenAI-style error body."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"derender replied {status}: {body[:500].decode(errors='replace')}")
        self.status = status
        self.body = body


class _Decoded(msgspec.Struct):
    chunk: dict[str, Any] | None = None
    stream_state: msgspec.Raw = msgspec.Raw(b"null")
    error: dict[str, Any] | None = None


class _Frame(msgspec.Struct):
    """A batch frame's reply: its entries' replies, or the error that refused it whole."""

    batch: list[msgspec.Raw] | None = None
    error: dict[str, Any] | None = None


_decode = msgspec.json.Decoder(_Decoded).decode
_decode_frame = msgspec.json.Decoder(_Frame).decode
_decode_state = msgspec.json.Decoder(dict[str, Any]).decode


def split(token_ids: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """Cut an output into generate chunks, cycling through ``sizes`` tokens each."""
    if not sizes or min(sizes) < 1:
        raise ValueError("chunk sizes must be positive")
    cycle = itertools.cycle(sizes)
    chunks: list[list[int]] = []
    start = 0
    while start < len(token_ids):
        size = next(cycle)
        chunks.append(list(token_ids[start : start + size]))
        start += size
    return chunks


class StreamHistory:
    """What a client keeps of a stream past the full protocol: the chunks it forwarded,
    the tool-call ids its replies named, and the last state. From them it rebuilds the
    full vLLM state a compact one stands for."""

    def __init__(self) -> None:
        self.token_ids: list[int] = []
        self.chunk_lens: list[int] = []
        self.tool_call_ids: list[str] = []
        self.state: bytes | None = None

    @property
    def compact(self) -> bool:
        """The last state is compact: the server holds the stream's context."""
        return self.state is not None and b'"output_digest"' in self.state

    def keep(
        self, generate_chunk: dict[str, Any], reply_chunk: dict[str, Any], state: bytes
    ) -> None:
        """Remember a chunk the server answered, what its reply named, and its state.

        A reply's tool call with an id at an index past the ids so far is a new one: the
        server pins ids by the same rule (app/streams/parsing.py ``to_wire_delta``)."""
        for choice in generate_chunk.get("choices", ()):
            if choice.get("token_ids"):
                self.token_ids += choice["token_ids"]
                self.chunk_lens.append(len(choice["token_ids"]))
        for choice in reply_chunk.get("choices", ()):
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                if call.get("id") is not None and call["index"] >= len(self.tool_call_ids):
                    self.tool_call_ids.append(call["id"])
        self.state = state

    def full_state(self) -> bytes | None:
        """The vLLM state the stream is at (None before its first chunk): a compact
        state's counts and digest give way to the lists they stand for."""
        if self.state is None or not self.compact:
            return self.state
        rebuilt = {
            name: value
            for name, value in _decode_state(self.state).items()
            if name not in ("output_tokens", "output_digest", "tool_calls")
        }
        rebuilt["output_token_ids"] = self.token_ids
        rebuilt["output_chunk_lens"] = self.chunk_lens
        rebuilt["last_tool_call_ids"] = self.tool_call_ids
        # Every field, in vLLM's order: the defaults a compact state leaves out put back.
        return msgspec.json.encode(msgspec.convert(rebuilt, StreamState))


class DerenderClient:
    """A client of a derender tier in one transport ``mode``; ``stream`` starts a stream.

    ``route=False`` leaves the routing header off, as a client unaware of the convention
    would; the replies are the same, only the balancer can no longer keep a stream on one
    process. ``resends`` counts chunks re-sent in full after a 409, ``reconnects`` the
    WebSocket connections re-opened after a drop. ``http``: an httpx client to post
    through instead of the client's own (a test's in-process one, say). In the batch
    modes a flush sends one frame, more only past ``frame_entries`` entries or
    ``frame_bytes`` bytes (the server's ``--batch-max-entries`` and ``--batch-max-bytes``).
    """

    def __init__(
        self,
        url: str,
        mode: Mode = "full",
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        route: bool = True,
        http: httpx.Client | None = None,
        frame_entries: int = FRAME_ENTRIES,
        frame_bytes: int = FRAME_BYTES,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
        self.url = url.rstrip("/")
        self.mode = mode
        self.route = route
        self.timeout = timeout
        self.headers = {"content-type": "application/json"}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self.http = http or httpx.Client(base_url=self.url, timeout=timeout)
        self.resends = 0
        self.reconnects = 0
        self._socket: ClientConnection | None = None
        self._socket_scope = contextlib.ExitStack()
        self.connection = 0  # counts the WebSocket connections opened
        self._socket_id = secrets.token_hex(8)
        self.frame_entries = frame_entries
        self.frame_bytes = frame_bytes
        self._staged: list[Pending] = []

    def stream(
        self,
        request_id: str,
        *,
        chat_request: dict[str, Any],
        prompt_token_ids: Sequence[int],
        index: int = 0,
    ) -> ChatStream:
        return ChatStream(self, request_id, chat_request, prompt_token_ids, index)

    def post(
        self, body: bytes, request_id: str, compact: bool, path: str = CHAT_PATH
    ) -> httpx.Response:
        headers = dict(self.headers)
        if self.route:
            headers[STREAM_ID_HEADER] = request_id
        if compact:
            headers[STATE_HEADER] = "compact"
        return self.http.post(path, content=body, headers=headers)

    def flush(self) -> list[Pending]:
        """Send every staged chunk in one batch frame (more only past the frame bounds)
        and settle each with its reply or its error; the entries answered
        ``stream_state_required`` go again, in full, in a frame of their own."""
        staged, self._staged = self._staged, []
        todo = staged
        while todo:
            todo = [again for part in self._parts(todo) for again in self._send_frame(part)]
        return staged

    def _parts(self, staged: list[Pending]) -> Iterator[list[Pending]]:
        """The staged chunks in frames within the bounds, as this connection gets them."""
        part: list[Pending] = []
        size = 0
        connection = self.connection if self._socket is not None else -1  # -1: a new one
        for pending in staged:
            entry = len(pending.entry(connection)) + 1
            if part and (len(part) == self.frame_entries or size + entry > self.frame_bytes):
                yield part
                part, size = [], 0
            part.append(pending)
            size += entry
        if part:
            yield part

    def _send_frame(self, part: list[Pending]) -> list[Pending]:
        """Send one frame and settle its entries; returns those to send again in full."""
        if self.mode == "batch":
            body = self.exchange(lambda connection: _frame(p.entry(connection) for p in part))
        else:
            response = self.post(
                _frame(p.entry(0) for p in part), self._socket_id, False, BATCH_PATH
            )
            body = response.content
            if response.status_code != 200:
                for pending in part:
                    pending.fail(ReplyError(response.status_code, body))
                return []
        frame = _decode_frame(body)
        if frame.batch is None or len(frame.batch) != len(part):  # refused whole
            code = (frame.error or {}).get("code")
            for pending in part:
                pending.fail(ReplyError(code if isinstance(code, int) else 400, body))
            return []
        return [p for p, entry in zip(part, frame.batch, strict=True) if not p.settle(bytes(entry))]

    def exchange(self, message: Callable[[int], bytes]) -> bytes:
        """Send one WebSocket message (``message(connection)`` builds it for the
        connection it goes on) and return its reply, re-opening a dropped connection."""
        for attempt in itertools.count():
            try:
                socket = self._connected()
                socket.send(message(self.connection).decode())
                reply = socket.recv(timeout=self.timeout)
                return reply.encode() if isinstance(reply, str) else reply
            except (ConnectionClosed, OSError):
                self._drop_socket()
                if attempt >= 20:
                    raise
                self.reconnects += 1
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise AssertionError("unreachable")

    def _connected(self) -> ClientConnection:
        if self._socket is None:
            url = "ws" + self.url.removeprefix("http") + SOCKET_PATH
            headers = {k: v for k, v in self.headers.items() if k == "authorization"}
            if self.route:
                headers[STREAM_ID_HEADER] = self._socket_id
            self._socket = self._socket_scope.enter_context(
                connect(
                    url,
                    additional_headers=headers,
                    open_timeout=self.timeout,
                    max_size=None,
                    compression=None,  # a chunk's message is too small to be worth it
                )
            )
            self.connection += 1
        return self._socket

    def _drop_socket(self) -> None:
        self._socket_scope.close()
        self._socket = None

    def close(self) -> None:
        self._drop_socket()
        self.http.close()

    def __enter__(self) -> DerenderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame(entries: Iterable[bytes]) -> bytes:
    return b'{"batch":[' + b",".join(entries) + b"]}"


class Pending:
    """A chunk a stream staged, until a flush settles it: ``result()`` is its reply or
    raises its ``ReplyError``."""

    def __init__(
        self, stream: ChatStream, generate_chunk: dict[str, Any], fields: dict[str, Any]
    ) -> None:
        self.stream = stream
        self.generate_chunk = generate_chunk
        self.fields = fields
        self.full = False  # re-sent in full after stream_state_required
        self.reply: Reply | None = None
        self.error: ReplyError | None = None

    def entry(self, connection: int) -> bytes:
        """Its frame entry, for WebSocket connection ``connection``."""
        return self.stream._entry(self, connection)

    def settle(self, body: bytes) -> bool:
        """Settle it with its entry's reply; False when it is to be re-sent in full."""
        return self.stream._settled(self, body)

    def fail(self, error: ReplyError) -> None:
        self.error = error
        self.stream._staged = None
        self.stream._opened_on = 0

    def result(self) -> Reply:
        if self.error is not None:
            raise self.error
        if self.reply is None:
            raise RuntimeError("the chunk is staged: flush the client first")
        return self.reply


class ChatStream:
    """One stream: what it repeats, the state to thread and, past the full protocol,
    its history (to rebuild the full state when a chunk must be re-sent in full)."""

    def __init__(
        self,
        client: DerenderClient,
        request_id: str,
        chat_request: dict[str, Any],
        prompt_token_ids: Sequence[int],
        index: int,
    ) -> None:
        self.client = client
        self.request_id = request_id
        self.index = index
        self._context = {
            "chat_request": msgspec.Raw(msgspec.json.encode(chat_request)),
            "prompt_token_ids": msgspec.Raw(msgspec.json.encode(list(prompt_token_ids))),
        }
        self.history = StreamHistory()
        self._opened_on = 0  # the WebSocket connection that holds this stream
        # A chunk with a finish reason was answered: the server let the stream's session
        # go, so what follows (the usage-only chunk) is sent in full, not refused first.
        self._finished = False
        self._staged: Pending | None = None  # its chunk in the client's next frame

    def send(self, token_ids: Sequence[int], finish_reason: str | None = None) -> Reply:
        """Derender one generate chunk of this stream's choice; raises ``ReplyError``."""
        choice = {"index": self.index, "token_ids": list(token_ids), "finish_reason": finish_reason}
        return self.send_chunk({"request_id": self.request_id, "choices": [choice]})

    def send_chunk(self, generate_chunk: dict[str, Any], **fields: Any) -> Reply:
        """Derender a generate chunk given whole (logprobs and all), with any other body
        ``fields`` (``model``, ``prompt_tokens``)."""
        mode = self.client.mode
        if mode in BATCH_MODES:  # a frame of its own, with what else is staged
            pending = self.stage_chunk(generate_chunk, **fields)
            self.client.flush()
            return pending.result()
        if mode == "websocket":
            reply = self._over_socket(generate_chunk, fields)
        else:
            reply = self._over_http(generate_chunk, fields, mode == "compact")
        self._kept(generate_chunk, reply)
        return reply

    def stage(self, token_ids: Sequence[int], finish_reason: str | None = None) -> Pending:
        """Put one generate chunk of this stream's choice in the client's next frame
        (batch modes); ``client.flush()`` sends it."""
        choice = {"index": self.index, "token_ids": list(token_ids), "finish_reason": finish_reason}
        return self.stage_chunk({"request_id": self.request_id, "choices": [choice]})

    def stage_chunk(self, generate_chunk: dict[str, Any], **fields: Any) -> Pending:
        """``stage`` for a generate chunk given whole, with any other body ``fields``."""
        if self.client.mode not in BATCH_MODES:
            raise ValueError(f"staging is for the batch modes ({', '.join(BATCH_MODES)})")
        if self._staged is not None:
            raise ValueError("this stream has a chunk staged already: flush the client first")
        self._staged = Pending(self, generate_chunk, fields)
        self.client._staged.append(self._staged)
        return self._staged

    def _kept(self, generate_chunk: dict[str, Any], reply: Reply) -> None:
        self.history.keep(generate_chunk, reply.chunk, bytes(reply.stream_state))
        choices = generate_chunk.get("choices", ())
        self._finished |= any(choice.get("finish_reason") for choice in choices)

    def _entry(self, pending: Pending, connection: int) -> bytes:
        """A staged chunk's frame entry: on a WebSocket as its message would be on
        ``connection``; over HTTP as a compact chunk, in full when it must be."""
        generate_chunk, fields = pending.generate_chunk, pending.fields
        if self.client.mode == "batch-http":
            return self._body(generate_chunk, fields, pending.full or self._finished)
        if self._finished:
            self._opened_on = 0  # the connection let the stream go with its final chunk
        if connection == self._opened_on:
            return msgspec.json.encode({"generate_chunk": generate_chunk, **fields})
        return self._body(generate_chunk, fields, True)

    def _settled(self, pending: Pending, body: bytes) -> bool:
        decoded = _decode(body)
        if decoded.error is not None:
            code = decoded.error.get("code")
            if code == STATE_REQUIRED and not pending.full:
                self._opened_on = 0
                pending.full = True
                self.client.resends += 1
                return False
            pending.fail(ReplyError(code if isinstance(code, int) else 409, body))
            return True
        assert decoded.chunk is not None
        pending.reply = Reply(body, decoded.chunk, decoded.stream_state)
        self._kept(pending.generate_chunk, pending.reply)
        self._opened_on = self.client.connection
        self._staged = None
        return True

    def run(
        self, output_ids: Sequence[int], sizes: Sequence[int] = (1,), finish_reason: str = "stop"
    ) -> list[Reply]:
        """Send a whole output chunk by chunk; the last chunk carries ``finish_reason``."""
        *body, last = split(output_ids, sizes) or [[]]
        return [*(self.send(chunk) for chunk in body), self.send(last, finish_reason)]

    def full_state(self) -> bytes | None:
        """The vLLM state the stream is at (None before its first chunk)."""
        return self.history.full_state()

    def _body(self, generate_chunk: dict[str, Any], fields: dict[str, Any], full: bool) -> bytes:
        body: dict[str, Any] = {"stream": True, "generate_chunk": generate_chunk, **fields}
        if full or not self.history.compact:
            body.update(self._context)
        state = self.history.full_state() if full else self.history.state
        if state is not None:
            body["stream_state"] = msgspec.Raw(state)
        return msgspec.json.encode(body)

    def _over_http(
        self, generate_chunk: dict[str, Any], fields: dict[str, Any], compact: bool
    ) -> Reply:
        post = self.client.post
        full = self._finished
        response = post(self._body(generate_chunk, fields, full), self.request_id, compact)
        if response.status_code == 409 and _code(response.content) == STATE_REQUIRED:
            self.client.resends += 1
            response = post(self._body(generate_chunk, fields, True), self.request_id, compact)
        if response.status_code != 200:
            raise ReplyError(response.status_code, response.content)
        decoded = _decode(response.content)
        assert decoded.chunk is not None
        cache = response.headers.get(CACHE_HEADER)
        return Reply(response.content, decoded.chunk, decoded.stream_state, cache)

    def _over_socket(self, generate_chunk: dict[str, Any], fields: dict[str, Any]) -> Reply:
        if self._finished:
            self._opened_on = 0  # the connection let the stream go with its final chunk

        def message(connection: int) -> bytes:
            if connection == self._opened_on:
                return msgspec.json.encode({"generate_chunk": generate_chunk, **fields})
            return self._body(generate_chunk, fields, True)

        body = self.client.exchange(message)
        decoded = _decode(body)
        if decoded.error is not None and decoded.error.get("code") == STATE_REQUIRED:
            self.client.resends += 1
            self._opened_on = 0
            body = self.client.exchange(message)
            decoded = _decode(body)
        if decoded.error is not None:
            self._opened_on = 0  # the server dropped the stream from the connection
            code = decoded.error.get("code")
            raise ReplyError(code if isinstance(code, int) else 409, body)
        assert decoded.chunk is not None
        self._opened_on = self.client.connection
        return Reply(body, decoded.chunk, decoded.stream_state)


def _code(body: bytes) -> object:
    try:
        return (_decode(body).error or {}).get("code")
    except msgspec.DecodeError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Stream a short demo chat through derender.")
    parser.add_argument("url", help="the server or balancer, e.g. http://127.0.0.1:8000")
    parser.add_argument("--mode", choices=MODES, default="full", help="the transport")
    parser.add_argument("--request-id", default="demo-stream")
    parser.add_argument("--chunk-tokens", type=int, default=1, help="tokens per chunk")
    parser.add_argument("--no-header", action="store_true", help=f"leave {STREAM_ID_HEADER} off")
    args = parser.parse_args(argv)
    text = {"reasoning": "", "content": ""}
    chunks = split(DEMO_OUTPUT_IDS, [args.chunk_tokens])
    try:
        with DerenderClient(args.url, args.mode, route=not args.no_header) as client:
            stream = client.stream(
                args.request_id,
                chat_request={"messages": [{"role": "user", "content": "Hi"}]},
                prompt_token_ids=DEMO_PROMPT_IDS,
            )
            for number, chunk in enumerate(chunks, 1):
                reply = stream.send(chunk, "stop" if number == len(chunks) else None)
                delta = reply.chunk["choices"][0]["delta"]
                shown = {key: delta[key] for key in text if delta.get(key)}
                size, cache = len(reply.body), reply.cache or "-"
                print(f"chunk {number:>2}  {size:>5} bytes  cache {cache:<5}  {shown}")
                for key, value in shown.items():
                    text[key] += value
    except ReplyError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (httpx.HTTPError, OSError) as exc:
        print(f"cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    for key, value in text.items():
        print(f"{key}: {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
