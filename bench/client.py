"""A streaming client as a router drives the derender protocol: one call per chunk.

Each chunk's request carries the prompt ids, the chat request and the
``stream_state`` the previous reply returned, as vLLM's clients send them. The
prompt and chat request are encoded once and the state is passed through as raw
JSON, so the client's own CPU stays small and the bytes it counts are exactly the
bytes on the wire. A ``json_dumps`` client instead writes what a ``requests``,
``aiohttp`` or ``urllib`` user writes: the reply parsed with ``json.loads`` and every
request body, state included, re-encoded with ``json.dumps`` defaults (ASCII escapes,
``", "`` and ``": "`` separators).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec

from bench.servers import Target
from bench.workload import CHAT_REQUEST

JSON_HEADERS = {"content-type": "application/json"}
ROUTE = "/v1/chat/completions/derender"


class _Reply(msgspec.Struct):
    stream_state: msgspec.Raw


@dataclass(slots=True)
class StreamRecord:
    """What the client saw of one stream, chunk by chunk."""

    positions: list[int] = field(default_factory=list)  # output tokens after each chunk
    latencies: list[float] = field(default_factory=list)  # seconds, request to reply
    bytes_sent: int = 0
    bytes_received: int = 0
    prompt_bytes: int = 0  # of bytes_sent: the re-sent prompt_token_ids
    history_bytes: int = 0  # of bytes_sent: the echoed stream_state
    hits: int = 0  # replies marked x-derender-cache: hit or redis
    misses: int = 0


def grown_state(state: msgspec.Raw | None, chunk: list[int]) -> msgspec.Raw:
    """The state a derender server would return after ``chunk`` (for the echo floor)."""
    value: dict[str, Any] = msgspec.json.decode(state) if state is not None else {}
    value["output_token_ids"] = value.get("output_token_ids", []) + chunk
    value["output_chunk_lens"] = [*value.get("output_chunk_lens", []), len(chunk)]
    value["role_sent"] = True
    return msgspec.Raw(msgspec.json.encode(value))


async def run_stream(
    client: aiohttp.ClientSession,
    target: Target,
    request_id: str,
    output: list[int],
    prompt: list[int],
    chunk_size: int,
    *,
    echo: bool = False,
    json_dumps: bool = False,
    interval_s: float = 0.0,
    on_chunk: Callable[[int, StreamRecord], None] | None = None,
) -> StreamRecord:
    """Stream ``output`` ``chunk_size`` tokens per call, one chunk every ``interval_s``.

    ``echo``: the server answers with the request itself, so the client grows the
    state as a derender server would. ``json_dumps``: each reply is parsed and each
    body re-encoded with ``json.dumps`` defaults (its encoding is not timed, as a
    router's own CPU is not). ``on_chunk`` gets the output position and the record so
    far after each reply (the stream bench samples server CPU there).
    """
    record = StreamRecord()
    prompt_raw = msgspec.Raw(msgspec.json.encode(prompt))
    chat_raw = msgspec.Raw(msgspec.json.encode(CHAT_REQUEST))
    context: tuple[Any, Any] = (prompt, CHAT_REQUEST) if json_dumps else (prompt_raw, chat_raw)
    prompt_bytes = len(json.dumps(prompt)) if json_dumps else len(prompt_raw)
    urls = itertools.cycle(base + ROUTE for base in target.bases)
    state: msgspec.Raw | None = None
    parsed_state: Any = None  # the json_dumps client's, as json.loads gave it
    started = time.perf_counter()
    for index, start in enumerate(range(0, len(output), chunk_size)):
        if interval_s:
            await asyncio.sleep(max(0.0, started + index * interval_s - time.perf_counter()))
        tokens = output[start : start + chunk_size]
        last = start + chunk_size >= len(output)
        choice = {"index": 0, "token_ids": tokens, "finish_reason": "stop" if last else None}
        body: dict[str, Any] = {
            "stream": True,
            "generate_chunk": {"request_id": request_id, "choices": [choice]},
            "prompt_token_ids": context[0],
            "chat_request": context[1],
        }
        if json_dumps:
            content = json.dumps(body).encode()
            if parsed_state is not None:
                # the state's share, from the body without it: encoding the state twice
                # would add client CPU, which competes with the server's on a shared box
                without = len(content) + len(b', "stream_state": ')
                body["stream_state"] = parsed_state
                content = json.dumps(body).encode()
                record.history_bytes += len(content) - without
        else:
            if state is not None:
                body["stream_state"] = state
                record.history_bytes += len(state)
            content = msgspec.json.encode(body)
        sent = time.perf_counter()
        async with client.post(next(urls), data=content, headers=JSON_HEADERS) as reply:
            reply.raise_for_status()
            answer = await reply.read()
            cache = reply.headers.get("x-derender-cache")
        record.latencies.append(time.perf_counter() - sent)
        record.positions.append(start + len(tokens))
        record.bytes_sent += len(content)
        record.prompt_bytes += prompt_bytes
        record.bytes_received += len(answer)
        record.hits += cache in ("hit", "redis")  # no replay: kept or restored session
        record.misses += cache == "miss"
        if echo:
            state = grown_state(state, tokens)
        elif json_dumps:
            parsed_state = json.loads(answer)["stream_state"]
        else:
            state = msgspec.json.decode(answer, type=_Reply).stream_state
        if on_chunk is not None:
            on_chunk(start + len(tokens), record)
    return record


async def warm_up(
    target: Target, output: list[int], prompt: list[int], echo: bool, json_dumps: bool = False
) -> None:
    """One short unmeasured stream per replica: first-request costs are not the chunk's."""
    async with http_client(1) as client:
        for base in target.bases:
            single = Target([base], [])
            await run_stream(
                client, single, f"warm-up-{base}", output[:32], prompt, 1,
                echo=echo, json_dumps=json_dumps,
            )  # fmt: skip


def http_client(connections: int) -> aiohttp.ClientSession:
    """A keep-alive client with one connection per concurrent stream.

    aiohttp rather than httpx: at 32 streams httpx's client used more CPU than the
    server it measured, on a machine the two share.
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections),
        timeout=aiohttp.ClientTimeout(total=600),
    )
