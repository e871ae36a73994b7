"""One streamed choice driven as the server drives it: a stream session fed chunk by
chunk, optionally snapshotted and restored on the way, its deltas folded as a client
folds them."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, settings

from app.examples.response_templates import QWEN3_RESPONSE_TEMPLATE
from app.streams.session import StreamSession
from app.streams.state_json import HistoryJson, LiftedHistory
from app.tokens.tokenizer import Tokenizer
from parsers.registry import ParserFactory
from parsers.types import Delta, ParseOptions, ToolSpec, Vocabulary
from tests.support.parity import Assembled

PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
# The tools the generated outputs call (tests/support/outputs.py).
TOOLS = (
    ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("count", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    ToolSpec("noop", {"type": "object", "properties": {}}),
)
# Property tests over streams: slow examples are expected, the tokenizer is a fixture.
PROPS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def options(**kwargs: Any) -> ParseOptions:
    """A request offering ``TOOLS`` with ``tool_choice: auto``."""
    return ParseOptions(tools=TOOLS, tool_choice="auto", **kwargs)


def with_response_template(vocab: Vocabulary) -> Vocabulary:
    """The vocabulary with Qwen3's markup as its response template when it has none (the
    tests' Qwen3 tokenizer stands for a checkpoint whose configuration describes it)."""
    if vocab.response_template is not None:
        return vocab
    return dataclasses.replace(vocab, response_template=QWEN3_RESPONSE_TEMPLATE)


def factory_for(tokenizer: Tokenizer, tool: str | None, reasoning: str | None) -> ParserFactory:
    return ParserFactory(tool, reasoning, True, with_response_template(tokenizer.vocabulary))


def stream(
    tokenizer: Tokenizer,
    factory: ParserFactory,
    opts: ParseOptions,
    chunks: list[list[int]],
    finish: str = "stop",
    restore_at: int = -1,
) -> list[Delta | None]:
    """The deltas of one streamed choice. ``restore_at``: before that chunk the session
    is snapshotted and restored, as a replica restoring it from Redis would."""
    prompt = tokenizer.encode(PROMPT)
    session = StreamSession(tokenizer, factory.stream_for_request(opts, "seed"), prompt)
    deltas = []
    for i, chunk in enumerate(chunks):
        if i == restore_at:
            session = restored(tokenizer, factory, opts, session)
        deltas.append(session.feed(chunk, chunk, finish if i == len(chunks) - 1 else None)[0])
    return deltas


def restored(
    tokenizer: Tokenizer, factory: ParserFactory, opts: ParseOptions, session: StreamSession
) -> StreamSession:
    """``session`` through its snapshot's bytes, restored as a replica restores it from
    Redis (app/streams/session.py ``SessionBuilder.restored``) from the history it consumed, as
    a reply carried it (its JSON, adopted without a decode)."""
    saved = StreamSession.load_snapshot(session.snapshot())
    assert saved is not None
    ids, lens = session.history_json()
    sent = LiftedHistory(bytes(ids), bytes(lens))
    history = HistoryJson.adopted(sent)
    count = sent.tokens()
    assert count == session.output_tokens
    assert saved.problem(tokenizer, session.prompt_token_ids, count, history.tail) is None
    assert saved.parser.restored(count)
    parser = factory.stream_for_request(opts, "seed", saved.parser)
    restored = StreamSession(tokenizer, parser, session.prompt_token_ids)
    restored.resume(saved, history)
    return restored


def assemble(deltas: list[Delta | None]) -> Assembled:
    folded = Assembled()
    for delta in deltas:
        folded.add(delta)
    return folded


def run(
    tokenizer: Tokenizer,
    factory: ParserFactory,
    opts: ParseOptions,
    chunks: list[list[int]],
    finish: str,
) -> tuple[Assembled, list[Delta | None]]:
    """A stream's assembled message and its deltas."""
    deltas = stream(tokenizer, factory, opts, chunks, finish)
    return assemble(deltas), deltas
