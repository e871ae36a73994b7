"""gpt-oss's Harmony output: reasoning ``openai_gptoss`` and tool calls ``openai``.

Harmony is messages on channels, read by token id, not markers in text::

    <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>commentary
    to=functions.NAME <|constrain|>json<|message|>{...}<|call|>

As in vLLM 0.33.0 (its ``HarmonyParser``): ``analysis`` is reasoning, ``final`` and a
``commentary`` with no recipient are content, a message to a function recipient is a
tool call (its recipient less ``functions.`` is the name, its text the arguments), and
anything else (other channels, built-in tools such as ``python``) is dropped. Reasoning
needs the reasoning parser configured, tool calls the tool parser; the other kind is
dropped. ``tool_choice`` does not steer the parse: the stream processor keeps or drops
the calls afterwards. One-shot, messages are joined with newlines and JSON arguments
re-serialized with Python's ``json.dumps``; a header cut off at the end of the output
is recovered as content (its raw text).

The message grammar is the ``openai-harmony`` package's ``StreamableParser`` (the
``oss-harmony`` fork vLLM 0.33.0 runs): it owns what counts as a header, a recipient,
a content type or an error, and we do not re-derive it. Its state lives in Rust and
cannot be carried as data, but it needs little to rebuild: between messages it holds
nothing, and within one it holds the message's tokens. So ``HarmonyState`` carries
whether the parser has left its first message and the open message's token ids (vLLM
keeps the same list to recover a broken header), and a restored stream replays that
one message, once, into a fresh parser. Every error the parser raises (a token where a
``<|start|>`` belongs, a header it cannot read) drops the open message and leaves it
waiting for ``<|start|>``; the state follows it there. A live session keeps its
parser; per chunk the work is the chunk's tokens. The package's ``messages`` property
re-serializes every message on each read, so it is read only at the end of a one-shot
parse or a stream; a message's completion is seen from the token that ends it.

The encoding loads offline: its ``o200k_base`` ranks are written from the server's own
tokenizer (byte-level pieces back to bytes) and checked against o200k_base's published
sha256, so a tokenizer that is not gpt-oss's is refused at start-up.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, FunctionCall, Vocabulary

O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_BASE_RANKS = 199998

MESSAGE = "<|message|>"
# Tokens that end a message: <|end|>, <|call|>, <|return|>.
_STOPS = ("<|end|>", "<|call|>", "<|return|>")
# Built-in tool recipients (and their namespaces) that are not function calls.
_BUILTIN_TOOLS = frozenset({"python", "browser", "container"})
_CONSTRAIN = "<|constrain|>"


class HarmonyUnavailable(ValueError):
    """The tokenizer is not gpt-oss's, or the Harmony package is missing."""


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character back to byte."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def o200k_ranks(vocab: Vocabulary) -> bytes:
    """The tokenizer's first 199,998 ids as ``o200k_base.tiktoken`` text, if they are o200k."""
    decoder = _byte_decoder()
    ranks: list[bytes | None] = [None] * O200K_BASE_RANKS
    for piece, token_id in vocab.token_ids.items():
        if 0 <= token_id < O200K_BASE_RANKS and piece not in vocab.special_tokens:
            try:
                ranks[token_id] = bytes(decoder[c] for c in piece)
            except KeyError:
                raise HarmonyUnavailable(
                    "the tokenizer is not byte-level BPE like gpt-oss's"
                ) from None
    lines = []
    for rank, raw in enumerate(ranks):
        if raw is None:
            raise HarmonyUnavailable(f"the tokenizer has no id {rank}, which gpt-oss's has")
        lines.append(base64.b64encode(raw) + b" %d\n" % rank)
    text = b"".join(lines)
    if hashlib.sha256(text).hexdigest() != O200K_BASE_SHA256:
        raise HarmonyUnavailable("the tokenizer's ranks are not o200k_base (gpt-oss's vocabulary)")
    return text


_encodings: dict[bytes, Any] = {}


def harmony_encoding(vocab: Vocabulary) -> Any:
    """The Harmony encoding for this tokenizer, loaded once per process without a download.

    The package reads ``o200k_base.tiktoken`` from ``$TIKTOKEN_ENCODINGS_BASE`` when set;
    the file is written there from the tokenizer's own ranks for the load, then removed.
    """
    try:
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding
    except ImportError:
        raise HarmonyUnavailable("the oss-harmony package is not installed") from None
    ranks = o200k_ranks(vocab)
    missing = [t for t in (MESSAGE, *_STOPS) if vocab.id_of(t) is None]
    if missing:
        raise HarmonyUnavailable(f"the tokenizer has no {' / '.join(missing)} token")
    key = hashlib.sha256(ranks).digest()
    if key not in _encodings:
        with tempfile.TemporaryDirectory(prefix="harmony-") as folder:
            (Path(folder) / "o200k_base.tiktoken").write_bytes(ranks)
            before = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = folder
            try:
                _encodings[key] = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
            finally:
                if before is None:
                    del os.environ["TIKTOKEN_ENCODINGS_BASE"]
                else:
                    os.environ["TIKTOKEN_ENCODINGS_BASE"] = before
    return _encodings[key]


class HarmonyGrammar:
    """What a Harmony parse needs of the tokenizer, computed once at start-up."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.encoding = harmony_encoding(vocab)
        self.message_id = vocab.id_of(MESSAGE)
        self.stop_ids = frozenset(vocab.id_of(t) for t in _STOPS)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Token text with special tokens kept and broken UTF-8 replaced, as HF decodes."""
        text: str = self.encoding.decode(token_ids, errors="replace")
        return text


def normalize_recipient(recipient: str | None) -> str | None:
    """A recipient without a content type an older Harmony misread into it."""
    if recipient is None:
        return None
    cut = recipient.find(_CONSTRAIN)
    if cut < 0:
        return recipient
    return recipient[:cut].rstrip() or None


def is_function_recipient(recipient: str) -> bool:
    """vLLM's chat rule: any recipient but markup, ``assistant`` and the built-in tools."""
    if not recipient or recipient.startswith("<|"):
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    if recipient == "assistant" or recipient in _BUILTIN_TOOLS:
        return False
    return recipient.split(".", 1)[0] not in _BUILTIN_TOOLS


# What a message's text is, by channel and recipient.
TOOL, REASONING, CONTENT, IGNORED = "tool", "reasoning", "content", "ignored"


def message_kind(channel: str | None, recipient: str | None) -> str:
    if recipient and is_function_recipient(recipient):
        return TOOL
    if channel == "analysis":
        return REASONING
    if channel == "final" or (channel == "commentary" and recipient is None):
        return CONTENT
    return IGNORED


def function_name(recipient: str) -> str:
    return recipient.removeprefix("functions.")


class HarmonyState(Struct, tag="harmony"):
    """Plain data: whether the parser has left its first message (ended or dropped on an
    error: a rebuilt one then waits for ``<|start|>``), the open message's tokens, and the
    next tool-call index. The Rust parser is rebuilt from it on restore."""

    past_first_message: bool = False
    in_content: bool = False
    message_tokens: list[int] = field(default_factory=list)
    next_call: int = 0


class _Piece(Struct):
    """What one token did: the text it added to the open message (and its channel and
    recipient), or that it ended a message."""

    channel: str | None
    recipient: str | None
    text: str
    ended: bool


class HarmonyStream:
    """One choice's Harmony parse, one chunk of token ids at a time.

    ``reasoning`` and ``tools`` say which parsers the server configured; the kinds of
    text the other would have read are dropped, as vLLM drops them.
    """

    engine_based = False

    def __init__(
        self,
        grammar: HarmonyGrammar,
        *,
        reasoning: bool,
        tools: bool,
        id_seed: str,
        state: HarmonyState | None = None,
    ) -> None:
        self.grammar = grammar
        self.reasoning = reasoning
        self.tools = tools
        self.id_seed = id_seed
        self.s = state if state is not None else HarmonyState()
        self._parser: Any = None

    @property
    def parser(self) -> Any:
        """The live Rust parser; rebuilt once from the state when a stream is restored."""
        if self._parser is None:
            from openai_harmony import HarmonyError, Role, StreamableParser

            role = None if self.s.past_first_message else Role.ASSISTANT
            parser = StreamableParser(self.grammar.encoding, role)
            # Only tokens the parser took are kept, so none fails again.
            for token_id in self.s.message_tokens:
                with contextlib.suppress(HarmonyError):
                    parser.process(token_id)
            self._parser = parser
        return self._parser

    def _feed(self, token_ids: Sequence[int]) -> list[_Piece]:
        from openai_harmony import HarmonyError

        parser = self.parser
        s = self.s
        message_id = self.grammar.message_id
        stop_ids = self.grammar.stop_ids
        pieces: list[_Piece] = []
        for token_id in token_ids:
            try:
                parser.process(token_id)
            except HarmonyError:
                # The parser dropped the open message and waits for <|start|>.
                s.in_content = False
                s.past_first_message = True
                s.message_tokens.clear()
                continue
            ended = False
            if s.in_content:
                # A stop token ends the message (the parser forgets its role then).
                ended = token_id in stop_ids and parser.current_role is None
            elif token_id == message_id:
                # Read right after the header closes, the state is small.
                s.in_content = parser.state_data["state"] == "Content"
            if ended:
                s.in_content = False
                s.past_first_message = True
                s.message_tokens.clear()
                pieces.append(_Piece(None, None, "", True))
                continue
            s.message_tokens.append(token_id)
            pieces.append(
                _Piece(
                    parser.current_channel,
                    normalize_recipient(parser.current_recipient),
                    parser.last_content_delta or "",
                    False,
                )
            )
        return pieces

    def _close(self) -> str | None:
        """End of output: the parser completes an open message, or the raw text of a
        header it cannot complete is returned (vLLM's recovery)."""
        from openai_harmony import HarmonyError

        s = self.s
        recovered = None
        try:
            self.parser.process_eos()
        except HarmonyError:
            recovered = self.grammar.decode(s.message_tokens)
        s.message_tokens.clear()
        s.in_content = False
        return recovered

    # ------------------------------------------------------------------ streamed

    def step(self, token_ids: Sequence[int], finished: bool) -> Delta | None:
        """The delta of one chunk: its reasoning, content and tool-call pieces."""
        recipient = normalize_recipient(self.parser.current_recipient)
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[DeltaToolCall] = []
        for piece in self._feed(token_ids):
            if piece.ended:
                recipient = None
                continue
            kind = message_kind(piece.channel, piece.recipient)
            if kind == REASONING and self.reasoning:
                reasoning.append(piece.text)
            elif kind == CONTENT:
                content.append(piece.text)
            elif kind == TOOL and self.tools:
                recipient = self._tool_piece(piece, recipient, calls)
        if finished:
            recovered = self._close()
            if recovered:
                content.append(recovered)
            self.s.next_call = 0
        text = "".join(content)
        thought = "".join(reasoning)
        if not text and not thought and not calls:
            return None
        return Delta(content=text or None, reasoning=thought or None, tool_calls=calls)

    def _tool_piece(
        self, piece: _Piece, recipient: str | None, calls: list[DeltaToolCall]
    ) -> str | None:
        """A new recipient opens a call (name and any text); the same one adds arguments."""
        assert piece.recipient is not None
        s = self.s
        if piece.recipient != recipient:
            name = function_name(piece.recipient)
            calls.append(opening_call_delta(self.id_seed, s.next_call, name, piece.text))
            s.next_call += 1
            return piece.recipient
        if piece.text:
            if calls:
                calls[-1].arguments = (calls[-1].arguments or "") + piece.text
            else:
                calls.append(DeltaToolCall(index=s.next_call - 1, arguments=piece.text))
        return recipient

    # ------------------------------------------------------------------ one-shot

    def parse(self, token_ids: Sequence[int]) -> tuple[str | None, str | None, list[FunctionCall]]:
        """A whole output: reasoning, content and tool calls, each message joined by newlines.

        Each output (each choice) is read by a fresh parser.
        """
        self.s = HarmonyState()
        self._parser = None
        self._feed(token_ids)
        recovered = self._close()
        messages: list[tuple[str | None, str | None, str | None, str]] = []
        for message in self.parser.messages:
            if message.author.role != "assistant" or not message.content:
                continue
            recipient = normalize_recipient(message.recipient)
            text = message.content[0].text
            messages.append((message.channel, recipient, message.content_type, text))
        if recovered is not None:
            messages.append(("final", None, None, recovered))
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[FunctionCall] = []
        for channel, recipient, content_type, text in messages:
            kind = message_kind(channel, recipient)
            if kind == REASONING and self.reasoning and text:
                reasoning.append(text)
            elif kind == CONTENT and text:
                content.append(text)
            elif kind == TOOL and self.tools:
                assert recipient is not None
                calls.append(FunctionCall(function_name(recipient), _arguments(text, content_type)))
        return "\n".join(reasoning) or None, "\n".join(content) or None, calls


def _arguments(text: str, content_type: str | None) -> str:
    """JSON arguments as Python's ``json.dumps`` writes them; other types as sent."""
    if content_type is not None and "json" not in content_type:
        return text
    try:
        return json.dumps(json.loads(text))
    except (ValueError, RecursionError):
        return text
