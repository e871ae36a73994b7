"""A parsed stream's live session: what one choice carries from chunk to chunk.

It holds the incremental detokenizer window (special tokens kept, seeded from
the prompt), the parser with its stream-processor state, the history it has
consumed (token ids and chunk lengths), and the last request it answered with the
state its reply carried: a hit continues from that request without decoding it
again. What it keeps of a request is copied out of it (never a view that would pin
the request body) and slimmed to what a hit reads, and ``size`` is what all of it
really costs, so the cache's byte bound holds in RSS. A session is built fresh for a
stream's first chunk or rebuilt from the client-carried ``stream_state`` by replaying
the history with its original chunk boundaries, which leaves it exactly where the
previous chunk left it, or restored from a Redis snapshot. A session restored from the
history's JSON as a client sent it keeps that JSON and reads it as ints only if
something asks for them (a compact state's digest, a ``json.dumps`` client): a restore
costs a copy and a hash of the history, not a decode. A session built otherwise keeps
the ints and writes the JSON only when a full state or a Redis name first asks for it:
a stream answered with compact states never writes it. Either way, the next chunk is fed
the same way.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
from msgspec import Raw

from app.serving import budget
from app.streams.compact import StreamDigest, compact
from app.streams.memsize import deep_size, int_list_bytes
from app.streams.parsing import parse_options
from app.streams.state_frame import StateFrame
from app.streams.state_json import (
    COMPACT,
    JSON_DUMPS,
    PLACEHOLDER,
    HistoryJson,
    LiftedHistory,
    compact_lifted,
    json_dumps_echo,
    state_digest,
)
from app.tokens.detokenizer import SEED_IDS, DecodeWindow, Detokenizer
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    ChatRequest,
    ChatStreamDerenderRequest,
    CompactStreamState,
    GenerateChunk,
    StreamState,
)
from cache.redis_tier import Outcome
from parsers.registry import ParserFactory
from parsers.stream import ChatStream, ChatStreamState
from parsers.types import Delta

if TYPE_CHECKING:  # reply.py writes a session's chunks: it imports this module
    from app.streams.reply import ReplyHead


@dataclass(slots=True)
class Fingerprint:
    """What a session depends on besides its history: the server's parser settings and
    the request's ``chat_request`` and ``prompt_token_ids`` as sent. Compared byte for
    byte (a long prompt compares far faster than it hashes); hashed once, for the Redis
    key and envelope of the session's snapshots."""

    settings: bytes
    chat_request: Raw
    prompt_token_ids: Raw
    _digest: bytes | None = field(default=None, compare=False, repr=False)

    def detached(self) -> Fingerprint:
        """A copy that does not keep the request body it was read from alive."""
        return Fingerprint(
            self.settings, self.chat_request.copy(), self.prompt_token_ids.copy(), self._digest
        )

    @property
    def digest(self) -> bytes:
        if self._digest is None:
            digest = hashlib.blake2b(self.settings, digest_size=16)
            digest.update(self.chat_request)
            digest.update(b"\x00")
            digest.update(self.prompt_token_ids)
            self._digest = digest.digest()
        return self._digest


class SessionSnapshot(msgspec.Struct, array_like=True):
    """A session's state besides what the request carries (prompt, history): plain
    data, so it travels as msgpack bytes and restores without replaying anything.

    The parser state leaves out what grows with the stream but a restore rebuilds
    (``ChatStreamState.for_snapshot``), so writing one per chunk costs the same at any
    length.
    """

    parser: ChatStreamState
    prev_tokens: list[str]
    prefix_offset: int
    read_offset: int

    def problem(
        self,
        tokenizer: Tokenizer,
        prompt_token_ids: Sequence[int],
        history_len: int,
        history_tail: Callable[[int], Sequence[int]],
    ) -> str | None:
        """Why this snapshot cannot continue the stream the request carries (its history
        of ``history_len`` ids, whose last ones ``history_tail`` gives), if it cannot.

        Redis is shared, so a restored snapshot is checked against the request even
        after its MAC: the parser has consumed exactly the carried history, and the
        decode window is the pieces of the last ids of prompt and history (as a
        session's window always is) with its offsets inside it.
        """
        if self.parser.output_tokens != history_len:
            return "the parser consumed another history"
        window = len(self.prev_tokens)
        if window > history_len + min(len(prompt_token_ids), SEED_IDS):
            return "the decode window is longer than the ids it comes from"
        if not 0 <= self.prefix_offset <= self.read_offset <= window:
            return "the decode window's offsets are outside it"
        tail = list(prompt_token_ids[-window:]) + list(history_tail(window)) if window else []
        if self.prev_tokens != tokenizer.pieces(tail[len(tail) - window :], False):
            return "the decode window is not the pieces of the carried ids"
        return None


_snapshot_decoder = msgspec.msgpack.Decoder(SessionSnapshot)

# What a session costs besides the data ``size`` walks: the session, detokenizer and
# parser objects themselves (measured with tracemalloc, tests/test_memory.py).
_OBJECTS_BYTES = 1200
_NO_MESSAGES = msgspec.Raw(b"[]")
_NO_CHUNK = GenerateChunk(choices=[], request_id="")


def kept_chat_request(request: ChatRequest) -> ChatRequest:
    """What a hit reads of the chat request (decode and logprob options), without the
    messages (a ``Raw`` view pinning the whole body) or what the parser already took
    (tools, template fields); the fingerprint keeps the exact bytes to compare."""
    return msgspec.structs.replace(
        request,
        messages=_NO_MESSAGES,
        tools=None,
        documents=None,
        chat_template=None,
        chat_template_kwargs=None,
        stream_options=None,
    )


class StreamSession:
    def __init__(
        self, tokenizer: Tokenizer, parser: ChatStream, prompt_token_ids: list[int]
    ) -> None:
        window = DecodeWindow.seeded(tokenizer, prompt_token_ids, skip_special=False)
        self.detokenizer = Detokenizer(tokenizer, window, skip_special=False)
        self.parser = parser
        self.prompt_token_ids = prompt_token_ids
        self.output_tokens = 0  # the history's length
        # The history as ints; None while only ``_history`` holds it (read when asked).
        self._token_ids: list[int] | None = []
        self._chunk_lens: list[int] | None = []
        # The history as JSON; None until a full state or a Redis name first asks for it.
        self._history: HistoryJson | None = None
        self._digest = StreamDigest()  # names the history in a compact state
        # The history as json.dumps writes it, kept once a client re-encodes the state.
        self._dumps_history: HistoryJson | None = None
        # The request last answered, without its chunk and state (what stays put from
        # chunk to chunk), and the state its reply carried.
        self.answered: ChatStreamDerenderRequest | None = None
        self.carried: StreamState | None = None
        self.chat_request: ChatRequest | None = None
        # Whether its chunks' replies may be plain ones (``plain``): no token ids asked.
        self.plain_replies = False
        # The request bytes it continues, detached; set when it is first kept.
        self.fingerprint: Fingerprint | None = None
        # The stream's reply frame around its chunks' values (app/streams/reply.py).
        self.reply_head: ReplyHead | None = None
        self.frame: StateFrame | None = None  # a plain chunk's state (state_frame.py)
        self._meter = SizeMeter()

    @property
    def output_token_ids(self) -> list[int]:
        return self._decoded()[0]

    @property
    def output_chunk_lens(self) -> list[int]:
        return self._decoded()[1]

    def _decoded(self) -> tuple[list[int], list[int]]:
        """The history as ints, read from its JSON the first time a restored session
        is asked (O(history) once; a chunk's own work never asks)."""
        if self._token_ids is None or self._chunk_lens is None:
            self._token_ids, self._chunk_lens = self._json().decoded()
            self._meter.sized_at = None  # it holds them now: measured again
        return self._token_ids, self._chunk_lens

    def _json(self) -> HistoryJson:
        """The history as JSON: written from the ints when first asked, then grown."""
        if self._history is None:
            self._history = HistoryJson(COMPACT, *self._decoded())
            self._meter.sized_at = None  # it holds it now: measured again
        return self._history

    def answer(self, request: ChatStreamDerenderRequest, state: StreamState) -> None:
        """Remember the request just answered, and the state its reply carried: only
        what a hit reuses, and no request-owned object the session has its own of. The
        request is kept once: a stream's chunks differ in their chunk and state only."""
        self.carried = state
        if self.answered is None:
            assert request.chat_request is not None
            self.chat_request = kept_chat_request(request.chat_request)
            self.plain_replies = not self.chat_request.return_token_ids
            self.answered = msgspec.structs.replace(
                request,
                generate_chunk=_NO_CHUNK,
                stream_state=None,
                chat_request=self.chat_request,
                prompt_token_ids=self.prompt_token_ids,
            )

    def request_for(
        self, chunk: GenerateChunk, model: str | None, prompt_tokens: int | None
    ) -> ChatStreamDerenderRequest:
        """The request that continues the one last answered with ``chunk``: what a hit
        derenders, its context taken from the session, not from the body."""
        assert self.answered is not None
        return msgspec.structs.replace(
            self.answered,
            generate_chunk=chunk,
            model=model,
            stream_state=self.carried,
            prompt_tokens=prompt_tokens,
        )

    def size(self, carried: bytes) -> int:
        """Bytes this session keeps alive, with ``carried`` (the state bytes a hit must match)."""
        return self._meter.size(self, carried)

    def leave_store(self) -> None:
        """The session leaves the store for a holder that names it by its digest (a
        WebSocket connection): it lets go of the request bytes a kept session is compared
        with (up to the body limit), and is measured again without them."""
        self.fingerprint = None
        self._meter.fixed_bytes = None

    def snapshot(self) -> bytes:
        window = self.detokenizer.window
        saved = SessionSnapshot(
            self.parser.state.for_snapshot(),
            window.prev_tokens,
            window.prefix_offset,
            window.read_offset,
        )
        return msgspec.msgpack.encode(saved)

    @staticmethod
    def load_snapshot(snapshot: bytes) -> SessionSnapshot | None:
        """The snapshot's contents, or None when the bytes are not one."""
        try:
            return _snapshot_decoder.decode(snapshot)
        except msgspec.DecodeError:
            return None

    def resume(
        self,
        saved: SessionSnapshot,
        history: HistoryJson,
        ints: tuple[list[int], list[int]] | None = None,
    ) -> None:
        """Continue where ``saved`` was taken, after ``history`` (kept as it is), and
        ``ints``, the same history as token ids and chunk lengths when the caller has
        them (else they are read from the JSON only if asked for).

        The parser was built from ``saved.parser``; this restores the rest.
        """
        self.detokenizer.window = DecodeWindow(
            saved.prev_tokens, saved.prefix_offset, saved.read_offset
        )
        self.output_tokens = saved.parser.output_tokens
        self._history = history
        self._token_ids, self._chunk_lens = (list(ints[0]), list(ints[1])) if ints else (None, None)
        self._digest = StreamDigest()  # of the new history, taken when first asked

    def replay(self, token_ids: list[int], chunk_lens: Sequence[int]) -> None:
        """Feed an earlier stream's chunks again, as they first arrived."""
        start = 0
        for size in chunk_lens:
            chunk = token_ids[start : start + size]
            start += size
            self.feed(chunk, chunk, None)
            budget.check()

    def feed(
        self,
        token_ids: list[int],
        text_ids: list[int],
        finish_reason: str | None,
        text: str | None = None,
    ) -> tuple[Delta | None, str | None]:
        """Parse one chunk; ``text_ids`` are the ids whose text it shows (no stop token),
        ``text`` that text when it was decoded already (``ChatStream.plain`` was asked).

        A chunk with neither tokens nor a finish reason leaves the parser alone.
        """
        if not token_ids:
            if finish_reason is None:
                return None, None
            return self.parser.step("", token_ids, finish_reason, self.prompt_token_ids)
        if text is None:  # one id, most chunks: its step straight
            decoder = self.detokenizer
            text = decoder.step(text_ids[0]) if len(text_ids) == 1 else decoder.decode(text_ids)
        stepped = self.parser.step(text, token_ids, finish_reason, self.prompt_token_ids)
        self.grown(token_ids)
        return stepped

    def grown(self, token_ids: list[int]) -> None:
        """The history grown by a chunk the parser read (``feed``, or a plain chunk's
        step: ``ChatStream.plain``), in each form it is kept in."""
        count = len(token_ids)
        self.output_tokens += count
        history = self._token_ids
        if history is not None and self._chunk_lens is not None:
            history += token_ids
            self._chunk_lens.append(count)
        if self._history is not None:
            self._history.extend(token_ids)
        if self._dumps_history is not None:
            self._dumps_history.extend(token_ids)

    def history_json(self) -> tuple[Raw, Raw]:
        """``output_token_ids`` and ``output_chunk_lens`` as JSON, as msgspec encodes
        them, kept up to date chunk by chunk so a reply never re-encodes the history."""
        ids, lens = self._json().arrays()
        return Raw(ids), Raw(lens)

    def full_state(self, state: StreamState) -> bytes:
        """``state`` (this session's, after its last chunk: its history left to the
        session) as we encode it with the session's history, which is copied once into
        it, never encoded again."""
        return (self._history or self._json()).state(state, self.frame)

    def state_digest(self, state: StreamState) -> bytes:
        """What names ``state`` (this session's, after its last chunk) in a Redis
        snapshot's envelope, from the running digests of its history: O(chunk)."""
        return state_digest(compact_lifted(state), self._json().digest())

    def history_diverges(self, history: HistoryJson) -> bool:
        """Whether ``history`` continues this session's neither way (is neither an
        earlier nor a later point of it); a JSON written for it is not kept (the store may
        hand the session out meanwhile)."""
        return (self._history or HistoryJson(COMPACT, *self._decoded())).diverges(history)

    def compact_state(self, state: StreamState, context: bytes) -> CompactStreamState:
        """``state`` (this session's, after its last chunk) as a compact state: its
        history named by the session's digest under ``context`` (its fingerprint's)."""
        return compact(state, self._digest, context, self._decoded())

    def history_name(self, context: bytes, call_ids: list[str]) -> bytes:
        """The hex digest naming the history and ``call_ids`` under ``context`` (compact.py)."""
        ids, lens = self._token_ids, self._chunk_lens
        if ids is None or lens is None:  # a restored session's, until first read
            ids, lens = self._decoded()
        return self._digest.named(context, ids, lens, call_ids)

    def _dumps(self) -> HistoryJson:
        """The history as ``json.dumps`` writes it: built at the first call (a client
        that re-encodes the state), then grown by each chunk."""
        if self._dumps_history is None:
            self._dumps_history = HistoryJson(
                JSON_DUMPS, self.output_token_ids, self.output_chunk_lens
            )
            self._meter.sized_at = None  # it holds it now: measured again
        return self._dumps_history

    def continues(self, sent: bytes, history: LiftedHistory | None, kept: bytes) -> bool:
        """Whether ``sent`` is the state the last reply carried (``kept``, as we encoded
        it), as sent back or as ``json.dumps`` re-encodes it (a ``requests`` or
        ``aiohttp`` user): a byte comparison either way, never a decode.

        ``history``: the body's history arrays were lifted out of ``sent``
        (app/streams/state_json.py); the rest of it and the arrays are compared apart.
        """
        if history is None:
            return sent == kept or (_dumps_like(sent) and sent == self.json_dumps_echo())
        assert self.carried is not None
        state = self.carried
        # A one-chunk history reads the same in both encodings: try both.
        if self._json().holds(history) and sent == compact_lifted(state):
            return True
        if not _dumps_like(sent):
            return False
        dumps = self._dumps()
        return dumps.holds(history) and sent == json_dumps_echo(state, PLACEHOLDER, PLACEHOLDER)

    def json_dumps_echo(self) -> bytes:
        """The state the last reply carried, as a client re-encoding it with
        ``json.dumps`` defaults sends it back."""
        assert self.carried is not None
        return json_dumps_echo(self.carried, *self._dumps().arrays())


def _dumps_like(sent: bytes) -> bool:
    """Whether ``sent`` may be a ``json.dumps`` echo, which separates a state's items
    with ``", "``: our encoding never writes that (no spaces outside strings, and a
    string escapes its quotes). Checked before the echo's history is built, which costs
    O(history) the first time: a session a chunk behind (another replica answered the
    last chunk) is asked once, then replaced."""
    return b', "' in sent


class SessionBuilder:
    """Builds a parsed stream's session: fresh for a first chunk, rebuilt by replaying the
    carried history, or restored from a snapshot. Every way gives the same session."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        parsers: ParserFactory,
        default_chat_template_kwargs: dict[str, object] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.parsers = parsers
        self.default_chat_template_kwargs = default_chat_template_kwargs or {}

    def new(
        self, request: ChatStreamDerenderRequest, parser_state: ChatStreamState | None = None
    ) -> StreamSession:
        """A session at the start of the request's stream (or of ``parser_state``)."""
        chunk = request.generate_chunk
        chat_request = request.chat_request
        assert chat_request is not None and request.prompt_token_ids is not None
        options = parse_options(chat_request, self.default_chat_template_kwargs)
        index = chunk.choices[0].index if chunk.choices else 0
        parser = self.parsers.stream_for_request(
            options, f"{chunk.request_id}:{index}", parser_state
        )
        return StreamSession(self.tokenizer, parser, request.prompt_token_ids)

    def replayed(self, request: ChatStreamDerenderRequest) -> StreamSession:
        """The session rebuilt by replaying the carried history chunk by chunk, as it
        first arrived (``output_chunk_lens``), so the parser ends exactly where the
        previous chunk left it."""
        session = self.new(request)
        state = request.stream_state or StreamState()
        session.replay(state.output_token_ids, state.output_chunk_lens)
        return session

    def restored(
        self,
        request: ChatStreamDerenderRequest,
        snapshot: bytes,
        history: tuple[HistoryJson, int] | None = None,
    ) -> tuple[StreamSession | None, Outcome | None]:
        """The session continued from a snapshot, without replay, after the request's
        history: its state's ints, or ``history``, its JSON as sent (the snapshot was
        found by its digest) with its length. None with the reason when the bytes are
        not a snapshot (``CORRUPT``) or not one of this stream at this point
        (``OUT_OF_RANGE``): the caller replays."""
        saved = StreamSession.load_snapshot(snapshot)
        if saved is None:
            return None, Outcome.CORRUPT
        state = request.stream_state or StreamState()
        assert request.prompt_token_ids is not None
        tail: Callable[[int], Sequence[int]]
        if history is None:
            token_ids = state.output_token_ids
            count = len(token_ids)

            def tail(window: int) -> Sequence[int]:
                return token_ids[-window:]
        else:
            adopted, count = history
            tail = adopted.tail
        if saved.problem(self.tokenizer, request.prompt_token_ids, count, tail):
            return None, Outcome.OUT_OF_RANGE
        if not saved.parser.restored(count):
            return None, Outcome.OUT_OF_RANGE
        session = self.new(request, saved.parser)
        if history is None:
            ints = (state.output_token_ids, state.output_chunk_lens)
            session.resume(saved, HistoryJson(COMPACT, *ints), ints)
        else:
            session.resume(saved, history[0])
        return session, None


class SizeMeter:
    """What a session's size was last measured at: what stays put for its life once,
    the parser walked as it grows by a quarter, the whole as it grows by a sixteenth
    (16 tokens at least) or holds more (``sized_at`` cleared)."""

    __slots__ = ("fixed_bytes", "size_bytes", "sized_at", "walked_at", "walked_bytes")

    def __init__(self) -> None:
        self.fixed_bytes: int | None = None
        self.walked_bytes = self.size_bytes = 0
        self.walked_at: int | None = None
        self.sized_at: int | None = None

    def size(self, session: StreamSession, carried: bytes) -> int:
        tokens, last = session.output_tokens, self.sized_at
        fresh = last is not None and 0 <= tokens - last < max(16, last // 16)
        if not fresh or self.fixed_bytes is None:
            self.size_bytes, self.sized_at = self._measured(session, carried), tokens
        return self.size_bytes

    def _measured(self, session: StreamSession, carried: bytes) -> int:
        assert session.answered is not None
        if self.fixed_bytes is None:
            seen: set[int] = set()
            self.fixed_bytes = (
                _OBJECTS_BYTES
                + (deep_size(session.fingerprint, seen) if session.fingerprint is not None else 0)
                + deep_size(session.chat_request, seen)
                + deep_size(session.parser.options, seen)
                + int_list_bytes(session.prompt_token_ids)
            )
        tokens = session.output_tokens
        if self.walked_at is None or tokens - self.walked_at >= max(64, self.walked_at // 4):
            seen = {id(session._token_ids), id(session._chunk_lens), id(session.prompt_token_ids)}
            self.walked_bytes = (
                deep_size(session.parser.state, seen)
                + deep_size(session.detokenizer.window, seen)
                + deep_size(session.carried, seen)
                + deep_size(session.reply_head, seen)
                + deep_size(session.frame, seen)  # its encodings of the carried state
            )
            self.walked_at = tokens
        return (
            self.fixed_bytes
            + self.walked_bytes
            + sys.getsizeof(carried)
            + (int_list_bytes(session._token_ids) if session._token_ids is not None else 0)
            + sys.getsizeof(session._chunk_lens)
            + (session._history.size() if session._history is not None else 0)
            + (session._dumps_history.size() if session._dumps_history is not None else 0)
        )
