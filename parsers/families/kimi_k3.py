"""Kimi K3's parsers (``kimi_k3`` reasoning and tools): XTML channels, not Kimi K2's format.

K3 writes its turn as elements of three special tokens, ``<|open|>``, ``<|close|>`` and
``<|sep|>``: reasoning in ``think`` (the prompt usually opens it), the answer in
``response``, calls in ``tools`` (kimi_k3_tools.py), the turn closed by ``message``::

    reasoning<|close|>think<|sep|><|open|>response<|sep|>391.<|close|>response<|sep|>
    <|close|>message<|sep|>

Nothing of Kimi K2's section markers is shared, so this is its own declaration.
Reasoning runs to the first think closer in the text; as vLLM 0.33.0 streams it,
reasoning ends for the next parser only when the closer's three tokens are the newest
marker among the chunk's ids and the two before, text already past a closer stays
content meanwhile, and the reasoning sent is the text after the first think opener,
held back while its end may grow into a marker. Thinking is off when the kwarg
``thinking`` (else ``enable_thinking``) is false. vLLM composes the two parsers in its
own class: ``tool_choice: none`` runs the tool parser and drops its calls (as an
engine-based pair does: declared so), and without a tool parser the reasoning parser
unwraps the answer itself: the response opener and whatever preceded it, closers of
the response and the message are removed. vLLM recomputes all of this from the whole
text at every chunk; here each character is read once (docs/parity.md, kimi-k3-rescan).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from parsers.families.kimi_k3_markup import (
    CLOSE,
    OPEN,
    SEP,
    Tag,
    TagState,
    first,
    held_back,
    tail_of,
)
from parsers.families.kimi_k3_tools import (
    MESSAGE_CLOSE,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    KimiK3Tools,
    KimiK3ToolState,
    KimiK3ToolStream,
    unwrap,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.types import Delta, ParseOptions, Vocabulary

THINK_OPEN = Tag(OPEN, "think")
THINK_CLOSE = Tag(CLOSE, "think")
_THINK_MARKERS = (THINK_OPEN.exact, THINK_CLOSE.exact)
_WRAPPERS = (RESPONSE_OPEN.exact, RESPONSE_CLOSE.exact, MESSAGE_CLOSE.exact)
_LAST = max(len(marker) for marker in (*_THINK_MARKERS, *_WRAPPERS))
# How much text sent before a late opener is kept to compare with what follows it.
_EARLY = 4096


def _thinking(options: ParseOptions) -> bool:
    kwargs = options.chat_template_kwargs
    thinking = kwargs.get("thinking")
    if thinking is None:
        thinking = kwargs.get("enable_thinking", True)
    return bool(thinking)


class Markers:
    """The think markers as token ids (each is three tokens), when the tokenizer has
    K3's three special tokens; without them (a test stand-in) reasoning ends where the
    closer's text is read."""

    def __init__(self, vocab: Vocabulary) -> None:
        ids = [vocab.id_of(piece) for piece in (OPEN, CLOSE, SEP, "think")]
        found = [i for i in ids if i is not None]
        self.by_ids = len(found) == len(ids)
        opener, closer, sep, think = found if self.by_ids else (-1, -1, -1, -1)
        self.open_ids = [opener, think, sep]
        self.close_ids = [closer, think, sep]

    def closed_last(self, token_ids: Sequence[int]) -> bool:
        """Whether the newest think marker in ``token_ids`` is the closer."""
        if not self.by_ids:
            return False
        for at in range(len(token_ids) - 3, -1, -1):
            window = list(token_ids[at : at + 3])
            if window == self.close_ids:
                return True
            if window == self.open_ids:
                return False
        return False


def _after_reasoning(text: str, options: ParseOptions) -> str | None:
    """What follows reasoning, one-shot: as written when a tool parser will read the
    channels (the request has tools and a tool_choice other than none), else unwrapped."""
    if options.tools and options.tool_choice != "none":
        return text or None
    return unwrap(text) or None


class KimiK3Reasoning:
    """``kimi_k3`` reasoning of a whole output."""

    def __init__(self, markers: Markers, options: ParseOptions) -> None:
        self.markers = markers
        self.options = options
        self.thinking = _thinking(options)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return not self.thinking or self.markers.closed_last(prompt_token_ids)

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        if not self.thinking:
            return None, _after_reasoning(text, self.options)
        opener = first(THINK_OPEN, text)
        start = opener[1] if opener is not None else 0
        closer = first(THINK_CLOSE, text, start)
        if opener is None and closer is None and first(RESPONSE_OPEN, text) is not None:
            return None, _after_reasoning(text, self.options)
        if closer is not None:
            return text[start : closer[0]] or None, _after_reasoning(
                text[closer[1] :], self.options
            )
        return text[start:] or None, None


class Unwrapping(Struct):
    """The answer unwrapped as it streams: text before the response opener dropped
    once it comes, closers removed (a candidate's text held until it is known), the end
    held back while it may grow into a marker."""

    opener: TagState | None = field(default_factory=TagState)  # None once found
    opener_held: list[str] = field(default_factory=list)
    read: int = 0
    closes: TagState = field(default_factory=TagState)
    closes_held: list[str] = field(default_factory=list)
    closes_read: int = 0
    messages: TagState = field(default_factory=TagState)
    messages_held: list[str] = field(default_factory=list)
    messages_read: int = 0
    tail: str = ""  # unwrapped text not yet sent
    early: str | None = ""  # what was sent before an opener (up to _EARLY), else None


def _held(state: TagState, held: list[str], text: str, i: int, base: int) -> str:
    """What of the held text and ``text[i:]`` is sure not to be a tag, the rest held."""
    if state.stage == 0:
        out = "".join(held) + text[i:]
        held.clear()
        return out
    if state.start >= base + i:
        out = "".join(held) + text[i : state.start - base]
        held[:] = [text[state.start - base :]]
        return out
    held.append(text[i:])
    return ""


def _drop(tag: Tag, state: TagState, held: list[str], text: str, base: int) -> str:
    """``text`` without the ``tag``s that complete in it (vLLM's ``sub``)."""
    out: list[str] = []
    i = 0
    while (end := tag.scan(state, text, base, i)) >= 0:
        if state.start >= base + i:
            out += [*held, text[i : state.start - base]]
        held.clear()
        i = end
    out.append(_held(state, held, text, i, base))
    return "".join(out)


def _after_sent(ready: str, sent: str | None) -> str:
    """vLLM's delta of a text that restarted: what follows what was sent when it
    begins with it, else all of it (``sent`` None: too long to have been kept)."""
    if sent is not None and ready.startswith(sent):
        return ready[len(sent) :]
    return ready


class KimiK3ReasoningState(Struct, tag="kimi_k3_reasoning"):
    """Reasoning as it streams: the text read, the opener and closer looked for, what
    was sent, the last ids (a marker may straddle chunks), and the unwrapping."""

    read: int = 0
    opener: TagState | None = field(default_factory=TagState)  # None once found
    start: int = 0  # where reasoning begins (after the first opener)
    closer: TagState = field(default_factory=TagState)
    closed: bool = False  # a closer was read: the rest is content
    sent_to: int = 0  # the end of the reasoning sent
    unsent: str = ""  # the text from ``sent_to`` on
    early: str | None = ""  # the reasoning sent while no opener was read (up to _EARLY)
    last_ids: list[int] = field(default_factory=list)
    closing: bool = False  # this chunk's ids end reasoning
    ended: bool = False  # without a tool parser: reasoning ended, the answer is unwrapped
    unwrapping: Unwrapping = field(default_factory=Unwrapping)


class KimiK3ReasoningStream:
    """``kimi_k3`` reasoning streamed as vLLM 0.33.0 streams it. Without a tool parser it
    stays the stream's reader to the end, so the answer is unwrapped here."""

    engine_based = False

    def __init__(self, markers: Markers, request: Request, state: KimiK3ReasoningState) -> None:
        self.markers = markers
        self.thinking = bool(request.thinking)
        self.with_tools = request.with_tools
        self.state = state

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        ended = not self.thinking or self.markers.closed_last(prompt_token_ids)
        if self.with_tools:
            return ended
        self.state.ended = ended
        return False

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        s = self.state
        if s.ended:
            content = self._unwrapped(text)
            return Delta(content=content) if content else None
        window = [*s.last_ids, *token_ids]
        s.last_ids = window[-2:]
        closed = s.closed
        delta = Delta(content=text) if closed else self._read(text)
        if not self.thinking:
            s.closing = True
        elif self.markers.by_ids:
            s.closing = bool(token_ids) and self.markers.closed_last(window)
        else:
            s.closing = s.closed and not closed
        if s.closing and not self.with_tools:
            s.ended = True
            if delta is not None:
                delta.content = self._unwrapped(delta.content or "") or None
                if delta.content is None and delta.reasoning is None:
                    return None
        return delta

    def _read(self, text: str) -> Delta | None:
        """One chunk of reasoning: what it adds, and what follows a closer."""
        s = self.state
        base = s.read
        s.read += len(text)
        current = s.unsent + text  # the text from sent_to on
        moved = False
        if s.opener is not None and (end := THINK_OPEN.scan(s.opener, text, base)) >= 0:
            s.opener, s.start, moved = None, base + end, True
        closed = THINK_CLOSE.scan(s.closer, text, base)
        if closed >= 0:
            s.closed = True
            close_start = s.closer.start
            if moved:
                cut = max(close_start, s.start) - base
                reasoning = _after_sent(text[s.start - base : cut], s.early)
            else:
                reasoning = current[: max(close_start - s.sent_to, 0)]
            s.unsent, s.early = "", None
            return Delta(reasoning=reasoning or None, content=text[closed:] or None)
        if moved:
            ready = text[s.start - base :]
            held = held_back(ready[-_LAST:], _THINK_MARKERS)
            delta = _after_sent(ready[: len(ready) - held], s.early)
            s.early = None
        else:
            held = held_back(current[-_LAST:], _THINK_MARKERS)
            delta = current[: len(current) - held]
            if s.early is not None:
                s.early = s.early + delta if len(s.early) + len(delta) <= _EARLY else None
        s.sent_to = s.read - held
        s.unsent = current[len(current) - held :]
        return Delta(reasoning=delta) if delta else None

    def _unwrapped(self, text: str) -> str:
        """The answer's next piece, unwrapped (vLLM's ``strip_content_streaming``)."""
        u = self.state.unwrapping
        base = u.read
        u.read += len(text)
        if u.opener is None:
            return self._release(self._closers(text))
        end = RESPONSE_OPEN.scan(u.opener, text, base)
        if end < 0:
            sent = self._release(self._closers(_held(u.opener, u.opener_held, text, 0, base)))
            if u.early is not None:
                u.early = u.early + sent if len(u.early) + len(sent) <= _EARLY else None
            return sent
        early = u.early
        u.opener, u.opener_held, u.early = None, [], None
        u.closes, u.closes_held, u.closes_read = TagState(), [], 0
        u.messages, u.messages_held, u.messages_read, u.tail = TagState(), [], 0, ""
        return _after_sent(self._release(self._closers(text[end:])), early)

    def _closers(self, text: str) -> str:
        u = self.state.unwrapping
        base = u.closes_read
        u.closes_read += len(text)
        text = _drop(RESPONSE_CLOSE, u.closes, u.closes_held, text, base)
        base = u.messages_read
        u.messages_read += len(text)
        return _drop(MESSAGE_CLOSE, u.messages, u.messages_held, text, base)

    def _release(self, text: str) -> str:
        """What of the unwrapped text goes out: vLLM holds back the end of the whole
        text that may grow into a marker, the candidates still held included."""
        u = self.state.unwrapping
        ready = u.tail + text
        held = [*u.messages_held, *u.closes_held, *u.opener_held]
        after = sum(len(part) for part in held)
        end = (ready[-_LAST:] + tail_of(held, _LAST))[-_LAST:]
        cut = len(ready) - max(held_back(end, _WRAPPERS) - after, 0)
        u.tail = ready[cut:]
        return ready[:cut]

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.with_tools and self.state.closing

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return []  # the tool parser reads text only

    def finish(self) -> Delta | None:
        """At the end, the candidates still held go out but for the end vLLM holds
        back (it holds only that end, so its last chunk already carried them)."""
        u = self.state.unwrapping
        if not self.state.ended or self.with_tools:
            return None
        ready = u.tail + "".join([*u.messages_held, *u.closes_held, *u.opener_held])
        u.tail, u.messages_held, u.closes_held, u.opener_held = "", [], [], []
        content = ready[: len(ready) - held_back(ready[-_LAST:], _WRAPPERS)]
        if u.early is not None and u.opener is not None:
            u.early = u.early + content if len(u.early) + len(content) <= _EARLY else None
        return Delta(content=content) if content else None


# ---------------------------------------------------------------------------- the family


def _markers(_: str, vocab: Vocabulary) -> Markers:
    return Markers(vocab)


def _reasoning_stream(
    markers: Markers, request: Request, kept: object
) -> tuple[KimiK3ReasoningStream, KimiK3ReasoningState]:
    state = reuse(kept, KimiK3ReasoningState)
    return KimiK3ReasoningStream(markers, request, state), state


def _tools_stream(
    _: Markers, request: Request, kept: object
) -> tuple[KimiK3ToolStream, KimiK3ToolState]:
    state = reuse(kept, KimiK3ToolState)
    return KimiK3ToolStream(request.id_seed, state), state


FAMILY = Family(
    title="Kimi K3",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("kimi_k3",),
            engine_based=True,
            states=(KimiK3ReasoningState,),
            thinking=_thinking,
            prepare=_markers,
            one_shot=lambda markers, request: KimiK3Reasoning(markers, request.options),
            stream=_reasoning_stream,
            golden=("K2", "K3"),
        ),
    ),
    tools=(
        Tools(
            names=("kimi_k3",),
            engine_based=True,
            states=(KimiK3ToolState,),
            prepare=_markers,
            one_shot=lambda _, request: KimiK3Tools(),
            stream=_tools_stream,
            golden=("K2", "K5"),
        ),
    ),
)
