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
``oss-harmony`` fork vLLM 0.33.0 runs). Feeding it every token costs ~30 µs a token
outside a message's text, and a header is read only at its ``<|message|>``, so one
chunk paid for the whole header; the framing (take ``<|start|>``, keep a header's
tokens, decode a message's text, end at a stop token) is read by harmony_reader.py
beside this module and a header's text by harmony_header.py, its rules kept as the
package's and checked against it. ``HarmonyState`` carries the reader's
state as plain data: between messages it holds nothing, in a header that header's token
ids (vLLM keeps the same list to recover a broken header), in a message its header and
any unfinished character. A restored stream continues from it without reading a token
again; per chunk the work is the chunk's tokens, and a long chunk stops between slices
of them once the request's CPU budget is spent (parsers/budget.py).

The encoding loads offline: its ``o200k_base`` ranks are written from the server's own
tokenizer (byte-level pieces back to bytes) and checked against o200k_base's published
sha256, so a tokenizer that is not gpt-oss's is refused at start-up.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from parsers import budget
from parsers.families.harmony_header import MessageHeader
from parsers.families.harmony_reader import OPENED, TEXT, TOOK, Framing, HarmonyReader, ReaderState
from parsers.family import Family, ParserUnavailable, Whole, reuse
from parsers.ids import opening_call_delta
from parsers.types import Delta, DeltaToolCall, FunctionCall, Vocabulary

O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_BASE_RANKS = 199998

MESSAGE = "<|message|>"
START = "<|start|>"
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
    missing = [t for t in (START, MESSAGE, *_STOPS) if vocab.id_of(t) is None]
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
        start_id, message_id = vocab.id_of(START), vocab.id_of(MESSAGE)
        assert start_id is not None and message_id is not None  # harmony_encoding checks
        self.framing = Framing(self.encoding, start_id, message_id)

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
    """Plain data: the reader's state and the next tool-call index."""

    reader: ReaderState = field(default_factory=ReaderState)
    next_call: int = 0


def _reading(header: MessageHeader | None) -> tuple[str, str | None]:
    """What an open message's text is, and its recipient."""
    if header is None:
        return IGNORED, None
    recipient = normalize_recipient(header.recipient)
    return message_kind(header.channel, recipient), recipient


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
        self._reader: HarmonyReader | None = None

    @property
    def reader(self) -> HarmonyReader:
        """The live reader, on the state's (a restored stream's continues from it)."""
        if self._reader is None:
            self._reader = HarmonyReader(self.grammar.framing, self.s.reader)
        return self._reader

    # ------------------------------------------------------------------ streamed

    def step(self, text: str, token_ids: Sequence[int], finished: bool) -> Delta | None:
        """The delta of one chunk (read by id: its text is not needed): its reasoning,
        content and tool-call pieces."""
        reader = self.reader
        s = self.s
        kind, recipient = _reading(reader.header)
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[DeltaToolCall] = []
        for token_id in budget.paced(token_ids):
            outcome = reader.process(token_id)
            if outcome == TEXT:
                text = reader.delta
                if not text:
                    continue
                if kind == REASONING:
                    if self.reasoning:
                        reasoning.append(text)
                elif kind == CONTENT:
                    content.append(text)
                elif kind == TOOL and self.tools:
                    self._arguments(text, calls)
            elif outcome == OPENED:
                kind, recipient = _reading(reader.header)
                if kind == TOOL and self.tools:
                    assert recipient is not None
                    name = function_name(recipient)
                    calls.append(opening_call_delta(self.id_seed, s.next_call, name, ""))
                    s.next_call += 1
            elif outcome != TOOK:
                # ENDED, or REFUSED: the open message is dropped, <|start|> awaited.
                kind = IGNORED
        if finished:
            recovered = self._close()
            if recovered:
                content.append(recovered)
            s.next_call = 0
        text = "".join(content)
        thought = "".join(reasoning)
        if not text and not thought and not calls:
            return None
        return Delta(content=text or None, reasoning=thought or None, tool_calls=calls)

    def _arguments(self, text: str, calls: list[DeltaToolCall]) -> None:
        """Text of the open call: onto this chunk's piece of it, else a piece of its own."""
        if calls:
            calls[-1].arguments = (calls[-1].arguments or "") + text
        else:
            calls.append(DeltaToolCall(index=self.s.next_call - 1, arguments=text))

    def _close(self) -> str | None:
        """End of output: an open message is complete, or the raw text of a header the
        package cannot complete is returned (vLLM's recovery)."""
        cut_off = self.reader.close()
        return self.grammar.decode(cut_off) if cut_off is not None else None

    # ------------------------------------------------------------------ one-shot

    def parse(
        self, text: str, token_ids: Sequence[int]
    ) -> tuple[str | None, str | None, list[FunctionCall]]:
        """A whole output (read by id): reasoning, content and tool calls, each message
        joined by newlines.

        Each output (each choice) is read by a fresh reader.
        """
        self.s = HarmonyState()
        reader = self._reader = HarmonyReader(self.grammar.framing, self.s.reader, keep_text=True)
        for token_id in budget.paced(token_ids):
            reader.process(token_id)
        recovered = self._close()
        messages: list[tuple[str | None, str | None, str | None, str]] = []
        for header, text in reader.messages:
            if header.role == "assistant":
                recipient = normalize_recipient(header.recipient)
                messages.append((header.channel, recipient, header.content_type, text))
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


# ---------------------------------------------------------------------------- the family


def _grammar(_: str, vocab: Vocabulary) -> HarmonyGrammar:
    try:
        return HarmonyGrammar(vocab)
    except HarmonyUnavailable as exc:
        raise ParserUnavailable(str(exc)) from None


def _stream(
    grammar: HarmonyGrammar, reasoning: bool, tools: bool, id_seed: str, kept: object
) -> tuple[HarmonyStream, HarmonyState]:
    state = reuse(kept, HarmonyState)
    stream = HarmonyStream(grammar, reasoning=reasoning, tools=tools, id_seed=id_seed, state=state)
    return stream, state


# One parser reads gpt-oss's whole output by token id: its two names combine only with
# each other, and the tokenizer must be o200k_harmony (checked against its digest).
FAMILY = Family(
    title="gpt-oss (Harmony)",
    tokenizer="bundled gpt-oss (quicktok-v1 package: o200k_harmony)",
    whole=Whole(
        reasoning=("openai_gptoss",),
        tools=("openai",),
        states=(HarmonyState,),
        prepare=_grammar,
        build=_stream,
        golden=("G1",),
    ),
)
