"""The in-process cost of a one-token chunk on a kept session, per parser configuration.

A chunk here is what a hit costs the server between its transport's bytes: the
generate chunk decoded from JSON, the chunk derendered as continuing the session
(``ParsedStreamDerenderer.continued``; in a tree without it, the request continued
from the session by ``StreamSession.request_for``, then derendered), as the hit paths
run it within the CPU budget, the carried state encoded (``carried_state``) and the
reply written as the server writes it: a WebSocket reply with a compact state
(``socket``) and an HTTP reply with the full state (``http``: ``reply_json``, or the
reply struct encoded in a tree without it). Framing, request validation and the
session store are left out.

Each scenario streams its opening (markers included) untimed, then times one-token
chunks of plain text where no marker can start: reasoning text, or content after the
reasoning ended. It is run as a module by ``python -m bench micro`` in this tree and,
copied there, in an earlier commit's tree (``--against``), so the code that measures
is the same on both sides; what an earlier tree lacks, it does as that tree's server did.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import Raw

from app.serving.budget import run_within
from app.streams.parsed_stream import ParsedStreamDerenderer
from app.streams.session import Fingerprint, SessionBuilder, StreamSession
from app.tokens.tokenizer import Tokenizer
from app.transports.socket_streams import SocketReply
from app.wire.protocol import ChatStreamDerenderRequest, ChatStreamReply, GenerateChunk, encoder
from bench.workload import (
    CHAT_REQUEST,
    PARSER_CONFIGS,
    SENTENCE,
    THOUGHT,
    prompt_ids,
    tokenizer_for,
)
from parsers.registry import TOOL_PARSERS, ParserFactory

try:
    from app.streams.chunk_path import carried_state
except ImportError:  # a tree from before the carried state's encoding was a module function
    from app.streams.chunk_path import ParsedChunks

    carried_state = ParsedChunks.carried  # type: ignore[attr-defined]

try:
    from app.streams.reply import reply_json
except ImportError:  # a tree from before an HTTP reply was written around its parts

    def reply_json(chunk: Any, state: bytes) -> bytes:
        return encoder.encode(ChatStreamReply(chunk, Raw(state)))


try:
    from app.streams.parsed_stream import Continued
except ImportError:  # a tree from before a hit was derendered without its request first
    Continued = None  # type: ignore[assignment,misc]

# Reasoning's opening and closing text, where a family spells them otherwise than
# ``<think>`` and ``</think>``.
REASONING_MARKUP = {
    "mistral": ("[THINK]", "[/THINK]"),
    "openai_gptoss": (
        "<|channel|>analysis<|message|>",
        "<|end|><|start|>assistant<|channel|>final<|message|>",
    ),
}
# Content's opening where no reasoning parser runs but the format needs one.
CONTENT_OPENING = {"openai": "<|channel|>final<|message|>"}
WARM_UP = 256  # chunks streamed untimed before the timed ones, opening included
# Chunks timed together; a scenario's figure is the least block's mean: on a shared
# machine other work only ever adds to a block (caches, a sibling hyperthread), so the
# least is the chunk's own cost.
BLOCK = 64
LANES = ("socket", "http")


class Scenario(msgspec.Struct):
    config: str
    section: str  # "reasoning" or "content"
    socket_us: float
    http_us: float
    # The share of its chunks the plain-text fast path answered (None: the tree has none).
    plain: float | None = None


def scenarios(config: str) -> list[str]:
    """The sections a configuration's plain text is timed in."""
    _, reasoning, _ = PARSER_CONFIGS[config]
    return ["reasoning", "content"] if reasoning is not None else ["content"]


def output(tokenizer: Tokenizer, config: str, section: str, tokens: int) -> tuple[list[int], int]:
    """The output streamed, and how many of its ids open it (streamed untimed)."""
    tool, reasoning, _ = PARSER_CONFIGS[config]
    opening = ""
    if reasoning is not None:
        start, end = REASONING_MARKUP.get(reasoning, ("<think>", "</think>"))
        opening = start + "\n" + THOUGHT
        if section == "content":
            opening += end + "\n\n"
    elif tool is not None:
        opening = CONTENT_OPENING.get(tool, "")
    ids = tokenizer.encode(opening)
    unit = tokenizer.encode(THOUGHT if section == "reasoning" else SENTENCE)
    while len(ids) < tokens:
        ids += unit
    return ids[:tokens], len(tokenizer.encode(opening))


def factory(tokenizer: Tokenizer, tool: str | None, reasoning: str | None) -> ParserFactory:
    """The configuration's parsers, a marker Qwen3's tokenizer lacks lent an id."""
    vocab = tokenizer.vocabulary
    needs = TOOL_PARSERS[tool].needs if tool is not None else ()
    lent = [token for token in needs if vocab.id_of(token) is None]
    if lent:
        tokens = {**vocab.token_ids}
        for offset, token in enumerate(lent):
            tokens[token] = tokenizer.vocab_size + offset
        vocab = dataclasses.replace(vocab, token_ids=tokens)
    return ParserFactory(tool, reasoning, True, vocab)


class Stream:
    """One stream's kept session, fed a chunk at a time as a hit would be."""

    def __init__(self, tokenizer: Tokenizer, config: str) -> None:
        tool, reasoning, _ = PARSER_CONFIGS[config]
        self.builder = SessionBuilder(tokenizer, factory(tokenizer, tool, reasoning))
        self.derenderer = ParsedStreamDerenderer(tokenizer)
        body = {
            "generate_chunk": {"choices": [], "request_id": "onetoken"},
            "stream": True,
            "chat_request": CHAT_REQUEST,
            "prompt_token_ids": prompt_ids(tokenizer, 100),
        }
        raw = msgspec.json.encode(body)
        self.first = msgspec.json.decode(raw, type=ChatStreamDerenderRequest)
        self.context = Fingerprint(
            b"onetoken", Raw(msgspec.json.encode(CHAT_REQUEST)), Raw(b"[]")
        ).digest
        self.session: StreamSession | None = None
        self.chunk_decoder = msgspec.json.Decoder(GenerateChunk)

    def message(self, token: int) -> bytes:
        """A one-token generate chunk as it arrives."""
        return b'{"choices":[{"index":0,"token_ids":[%d]}],"request_id":"onetoken"}' % token

    def feed(self, message: bytes, lane: str) -> bytes:
        """One chunk through the hit path; its reply's bytes."""
        chunk = self.chunk_decoder.decode(message)
        session = self.session
        if session is None:
            first = msgspec.structs.replace(self.first, generate_chunk=chunk)
            session = self.session = self.builder.new(first)
            reply, state = run_within(60.0, self.derenderer.chunk, first, "qwen3", session)
        elif Continued is not None:
            hit = Continued(chunk, None, None)
            reply, state = run_within(60.0, self.derenderer.continued, hit, "qwen3", session)
        else:
            request = session.request_for(chunk, None, None)
            reply, state = run_within(60.0, self.derenderer.chunk, request, "qwen3", session)
        if lane == "socket":
            carried = carried_state(state, session, self.context)
            return encoder.encode(SocketReply("onetoken", 0, reply, Raw(carried)))
        return reply_json(reply, carried_state(state, session, None))


def timed(
    tokenizer: Tokenizer, config: str, section: str, lane: str, chunks: int
) -> tuple[float, Stream]:
    """CPU microseconds a one-token chunk costs: the least mean of a block of ``BLOCK``."""
    ids, opening = output(tokenizer, config, section, WARM_UP + chunks)
    assert opening < WARM_UP, "the opening must stream untimed"
    stream = Stream(tokenizer, config)
    messages = [stream.message(token) for token in ids]
    feed: Callable[[bytes, str], bytes] = stream.feed
    for message in messages[:WARM_UP]:
        feed(message, lane)
    means = []
    # CPU time of this thread: a shared machine's other work preempts it, and that is
    # not the chunk's cost.
    clock = time.thread_time
    for start in range(WARM_UP, len(messages) - BLOCK + 1, BLOCK):
        block = messages[start : start + BLOCK]
        began = clock()
        for message in block:
            feed(message, lane)
        means.append((clock() - began) / BLOCK)
    return 1e6 * min(means), stream


def plain_share(tokenizer: Tokenizer, config: str, section: str, chunks: int) -> float | None:
    """The share of the timed chunks that the server's plain-text fast path answers (a
    chunk's reply carries the state its session's frame writes:
    ``ParsedStreamDerenderer.continued``), streamed again untimed; None in a tree
    without that path."""
    ids, _ = output(tokenizer, config, section, WARM_UP + chunks)
    stream = Stream(tokenizer, config)
    plain = 0
    for at, token in enumerate(ids):
        stream.feed(stream.message(token), "socket")
        session = stream.session
        frame = getattr(session, "frame", None)
        if frame is None and not hasattr(session, "frame"):
            return None
        if at >= WARM_UP and frame is not None and frame.state is session.carried:
            plain += 1
    return plain / chunks


def measure(configs: list[str], chunks: int) -> list[Scenario]:
    results = []
    for config in configs:
        tokenizer = tokenizer_for(PARSER_CONFIGS[config][0], config)
        for section in scenarios(config):
            costs = {}
            for lane in LANES:
                gc.collect()
                costs[lane], _ = timed(tokenizer, config, section, lane, chunks)
            plain = plain_share(tokenizer, config, section, chunks)
            results.append(Scenario(config, section, costs["socket"], costs["http"], plain))
    return results


def main(argv: list[str] | None = None) -> int:
    """Measure and print the results as JSON on stdout (for ``bench micro``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.onetoken")
    parser.add_argument("--configs", nargs="+", default=list(PARSER_CONFIGS))
    parser.add_argument("--chunks", type=int, default=2048)
    args = parser.parse_args(argv)
    # An earlier tree (``--against``) may not know a configuration added since.
    unknown = [config for config in args.configs if config not in PARSER_CONFIGS]
    if unknown:
        print(f"not in this tree, left out: {', '.join(unknown)}", file=sys.stderr)
    known = [config for config in args.configs if config in PARSER_CONFIGS]
    sys.stdout.buffer.write(msgspec.json.encode(measure(known, args.chunks)) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
