"""Streamed chat chunks through a parser: the session carries the parse between chunks.

The session (kept, restored or rebuilt by replay: app/streams/session_store.py and
app/streams/session.py) is fed the chunk; the carried ``stream_state`` grows exactly as
vLLM's (its history from the session's JSON of it), so any later chunk can be
answered from it alone.
"""

from __future__ import annotations

import msgspec
from msgspec import Raw

from app.streams.derender import (
    chat_chunk,
    chat_top_logprobs,
    drop_stop_token,
    resolve_stream_logprobs,
)
from app.streams.parsing import to_wire_delta
from app.streams.reply import encoded_chunk, plain_chunk
from app.streams.session import StreamSession
from app.streams.state_frame import StateFrame
from app.tokens.logprobs import context_tail
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatCompletionChunk,
    ChatRequest,
    ChatStreamChoice,
    ChatStreamDerenderRequest,
    GenerateChunk,
    StreamState,
)
from parsers.types import Delta

# What a chunk the parser says nothing of shows (read only).
_NO_DELTA = Delta()


class Continued(msgspec.Struct, gc=False):  # gc=False: as the wire's per-chunk structs
    """A chunk that continues its session's last answered request (a hit), with the
    ``model`` and ``prompt_tokens`` its body gave: the request it makes with the
    session's (``StreamSession.request_for``) is built only if the chunk needs it."""

    generate_chunk: GenerateChunk
    model: str | None = None
    prompt_tokens: int | None = None


# A chunk to derender: its request, or a hit's chunk that continues its session's.
ChunkRequest = ChatStreamDerenderRequest | Continued


class ParsedStreamDerenderer:
    """One parsed chunk at a time, fed to the stream's session."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def continued(
        self, hit: Continued, model: str, session: StreamSession
    ) -> tuple[ChatCompletionChunk | Raw, StreamState]:
        """``chunk`` of the request that continues ``session`` with ``hit``: the same
        reply and state, but that most chunks (one id of plain text, nothing else:
        ``ChatStream.plain``) go from the id to the reply's bytes, without the request,
        the wire delta or choice."""
        chunk = hit.generate_chunk
        state = session.carried
        frame = session.frame
        choices = chunk.choices
        text = None
        if (
            ((frame is not None and frame.state is state) or _plain_ready(session))
            and len(choices) == 1
            and chunk.usage is None
            and chunk.metrics is None
            and chunk.prompt_token_ids is None
        ):
            choice = choices[0]
            token_ids = choice.token_ids
            if (
                token_ids is not None
                and len(token_ids) == 1
                and choice.finish_reason is None
                and choice.stop_reason is None
                and choice.logprobs is None
            ):
                text = session.detokenizer.step(token_ids[0])  # as ``StreamSession.feed``
                section = session.parser.plain(text, token_ids)
                if section is not None:
                    assert state is not None  # ``_plain_ready``
                    session.grown(token_ids)
                    if frame is None or frame.state is not state:
                        frame = session.frame = StateFrame(state)
                    context = context_tail(state.logprob_context_token_ids, token_ids)
                    state = session.carried = frame.state = msgspec.structs.replace(
                        state, logprob_context_token_ids=context
                    )
                    reply = plain_chunk(
                        session, chunk.request_id, choice.index, model, section, text
                    )
                    return reply, state
        request = session.request_for(chunk, hit.model, hit.prompt_tokens)
        return self.chunk(request, model, session, text)

    def chunk(
        self,
        request: ChatStreamDerenderRequest,
        model: str,
        session: StreamSession | None,
        text: str | None = None,
    ) -> tuple[ChatCompletionChunk | Raw, StreamState]:
        """The chunk's reply (as JSON when it is a common one: app/streams/reply.py) and
        the state it carries, but for its history when a session was fed: the session
        holds that (``StreamSession.history_json``). ``session`` is None only for a chunk
        without a choice (a usage-only chunk), which needs no parser; its state is the
        request's, history and all. ``text``: the text of the chunk's one id, when the
        session decoded it already (``continued``: the chunk was not plain text)."""
        chat_request = request.chat_request
        assert chat_request is not None
        state = request.stream_state or StreamState()
        return_token_ids = bool(chat_request.return_token_ids)
        if not request.generate_chunk.choices:
            return chat_chunk(request, model, [], return_token_ids), state
        assert session is not None
        choice, state = self._feed(request, chat_request, session, state, return_token_ids, text)
        return encoded_chunk(request, model, choice, return_token_ids, session), state

    def _feed(
        self,
        request: ChatStreamDerenderRequest,
        chat_request: ChatRequest,
        session: StreamSession,
        state: StreamState,
        return_token_ids: bool,
        text: str | None,
    ) -> tuple[ChatStreamChoice, StreamState]:
        parser = session.parser
        # The carried flag is authoritative over the one the session rebuilt.
        parser.state.tools_streamed = state.tools_streamed
        choice = request.generate_chunk.choices[0]
        token_ids = choice.token_ids or []
        finish_reason, stop_reason = choice.finish_reason, choice.stop_reason
        text_ids = token_ids
        if finish_reason == "stop":
            text_ids, stop_reason = drop_stop_token(
                self.tokenizer, token_ids, finish_reason, stop_reason, chat_request
            )
        delta, finish_reason = session.feed(token_ids, text_ids, finish_reason, text)
        # Hidden reasoning would leak through per-token metadata, so it goes too.
        shows_metadata = parser.options.include_reasoning
        logprobs = None
        if choice.logprobs is not None and shows_metadata:
            logprobs = resolve_stream_logprobs(
                self.tokenizer, choice.logprobs, state, chat_top_logprobs(chat_request)
            )
        pinned_ids = state.last_tool_call_ids
        if delta is None:
            delta = _NO_DELTA
        elif delta.tool_calls:
            pinned_ids = list(pinned_ids)  # grows by the ids of calls first seen
        reply = ChatStreamChoice(
            choice.index,
            to_wire_delta(delta, pinned_ids, state.role_sent),
            logprobs,
            finish_reason,
            stop_reason,
            choice.token_ids if return_token_ids and shows_metadata else None,
        )
        state = _next_state(state, parser.state.tools_streamed, pinned_ids, token_ids)
        session.answer(request, state)
        return reply, state


def _plain_ready(session: StreamSession) -> bool:
    """Whether a chunk continuing ``session``'s carried state may be a plain one
    (``continued``): the state moves only its logprob context (no pinned history, the
    role sent) and the replies show no token ids. Asked until a plain chunk makes the
    session's frame (state_frame.py), which holds it while its state is the carried one."""
    state = session.carried
    if (
        not session.plain_replies
        or state is None
        or not state.role_sent
        or state.output_token_ids
        or state.output_chunk_lens
    ):
        return False
    # As ``_feed``; a plain chunk leaves the flag as it is, so this holds for the frame.
    session.parser.state.tools_streamed = state.tools_streamed
    return True


def _next_state(
    state: StreamState, tools_streamed: bool, pinned_ids: list[str], token_ids: list[int]
) -> StreamState:
    """The state a chunk's reply carries, from the one its request carried, without the
    history: the session's now (a reply puts it back, ``history_json``)."""
    context = context_tail(state.logprob_context_token_ids, token_ids)
    if (
        state.role_sent
        and state.tools_streamed == tools_streamed
        and pinned_ids is state.last_tool_call_ids
        and not state.output_token_ids
        and not state.output_chunk_lens
    ):
        # Most chunks: only the logprob context moves (one field replaced costs less).
        return msgspec.structs.replace(state, logprob_context_token_ids=context)
    return msgspec.structs.replace(
        state,
        output_token_ids=[],
        output_chunk_lens=[],
        role_sent=True,
        tools_streamed=tools_streamed,
        last_tool_call_ids=pinned_ids,
        logprob_context_token_ids=context,
    )
