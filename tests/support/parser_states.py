"""Session snapshots of every family, recorded so a change to the parsers' layout or
registry can show it keeps them byte for byte (tests/test_parser_states.py).

Each golden stream transcript chunked one token at a time (``#t1``) is fed through
the server's derenderer without HTTP, a session per choice; after every chunk the
session is snapshotted as the Redis tier stores it. A case's record is the SHA-256 of
its snapshots in order, and the last snapshot itself (to check it still decodes). A
snapshot's sets (pythonic's names) encode in the process's hash order, so the digest
reads each snapshot back and encodes it with sets sorted: the same bytes otherwise.
Record again only when a snapshot is meant to change, and bump SCHEMA_VERSION in
cache/redis_tier.py with it: ``python -m tests.support.parser_states``.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
from typing import Any

import msgspec

from app.serving.service import DerenderService
from app.streams.parsed_stream import ParsedStreamDerenderer
from app.streams.session import StreamSession
from app.wire.protocol import ChatStreamDerenderRequest, StreamState
from parsers.registry import REASONING_PARSERS, TOOL_PARSERS
from parsers.types import OutputRefused
from tests.support.apps import build_app
from tests.support.golden import GOLDEN_DIR, flags_of, load_cases, stream_body, tokenizer_of

RECORD = GOLDEN_DIR / "parser-states.json.gz"
CHUNKING = "#t1"
# Every golden configuration with a parser, as the families declare them.
ENTRIES = (*REASONING_PARSERS.values(), *TOOL_PARSERS.values())
CONFIGS = tuple(sorted({config for entry in ENTRIES for config in entry.golden}))


class CaseStates(msgspec.Struct):
    digest: str  # SHA-256 of every snapshot of the case, in order
    snapshots: int
    last: str  # the last snapshot, base64


@functools.cache
def _service(model: str, flags: tuple[str, ...]) -> DerenderService:
    return build_app(model, flags).service


def snapshots(case: dict[str, Any]) -> list[bytes]:
    """The snapshot of each choice's session after each chunk of a streamed case."""
    service = _service(tokenizer_of(case), flags_of(case))
    derender = ParsedStreamDerenderer(service.tokenizer)
    sessions: dict[int, StreamSession] = {}
    states: dict[int, StreamState] = {}
    taken = []
    for chunk, lane in zip(case["chunks"], case["lanes"], strict=True):
        sent = states.get(lane)
        body = stream_body(case, chunk, None if sent is None else msgspec.to_builtins(sent))
        try:
            request = msgspec.json.decode(json.dumps(body), type=ChatStreamDerenderRequest)
        except msgspec.ValidationError:
            continue  # a case the server refuses before any parsing
        if request.chat_request is None or request.prompt_token_ids is None:
            continue
        session = sessions.get(lane)
        if session is None and request.generate_chunk.choices:
            session = sessions[lane] = service.sessions.new(request)
        try:
            _, states[lane] = derender.chunk(request, "model", session)
        except OutputRefused:
            break  # the parser refuses the output as vLLM's does: the stream ends in a 400
        if session is not None:
            taken.append(session.snapshot())
    return taken


def canonical_snapshot(snapshot: bytes) -> bytes:
    """The snapshot as read back and encoded again with its sets sorted."""
    saved = StreamSession.load_snapshot(snapshot)
    assert saved is not None, "a snapshot that does not decode"
    try:
        return msgspec.msgpack.encode(saved, order="deterministic")
    except TypeError:  # a dict keyed by ints (Cohere's held ids) keeps its insertion order
        return msgspec.msgpack.encode(saved)


def cases() -> list[dict[str, Any]]:
    return [
        case
        for config in CONFIGS
        for case in load_cases(config)
        if case["kind"] == "chat_stream" and case["id"].endswith(CHUNKING)
    ]


def record_of(case: dict[str, Any]) -> CaseStates:
    taken = snapshots(case)
    digest = hashlib.sha256()
    for snapshot in taken:
        canonical = canonical_snapshot(snapshot)
        digest.update(len(canonical).to_bytes(4, "big") + canonical)
    last = base64.b64encode(taken[-1]).decode() if taken else ""
    return CaseStates(digest.hexdigest(), len(taken), last)


def load_record() -> dict[str, CaseStates]:
    with gzip.open(RECORD, "rb") as f:
        return msgspec.json.decode(f.read(), type=dict[str, CaseStates])


def main() -> None:
    record = {case["id"]: record_of(case) for case in cases()}
    with gzip.GzipFile(RECORD, "wb", mtime=0) as f:
        f.write(msgspec.json.format(msgspec.json.encode(record), indent=1))
    print(f"{len(record)} cases, {sum(r.snapshots for r in record.values())} snapshots: {RECORD}")


if __name__ == "__main__":
    main()
