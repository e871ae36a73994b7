"""Muse (Muse Spark, Muse Glimmer): ``muse``, ``musespark1x`` and ``muse_glimmer``.

A Muse turn is channel-scoped messages (parsers/families/muse_frames.py): ``to=self``
(and, for Spark, a header with no recipient) is reasoning, ``to=user`` the answer,
``to=commentary`` (Spark) an update shown as content, ``to=developer`` dropped, and a
message to any other recipient a tool channel whose ATEM markup holds the calls
(parsers/families/muse_atem.py).

vLLM 0.33.0's reasoning parser streams reasoning and content until a tool channel
holds call markup; then it hands the tool parser everything from that channel's
header on, with what it has not sent yet re-framed in front
(``to=self<|message|>...<|eom|>``, ``to=commentary<|message|>...<|eom|>``). The tool
parser reads that text as a turn of its own: reasoning, content, and each call whole
once its closing tag is in. Neither parser needs a token of its own: both read text.

Where vLLM's classification shrinks text it already sent (a header glued to the text
before it, without whitespace or a boundary), its stream stops or repeats; ours sends
each channel's growth only (docs/parity.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from msgspec import Struct, field

from parsers.families.muse_atem import (
    CallFailed,
    CallReader,
    InvokeScanner,
    reasoning_hold,
    tool_hold,
)
from parsers.families.muse_channels import Chunk, Sent, settle, visible
from parsers.families.muse_frames import (
    ASSISTANT,
    CALLS_OPEN,
    INVOKE_OPEN,
    START,
    WHITESPACE,
    Frame,
    Segmenter,
    frames,
    has_atem,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.types import Delta, ExtractedToolCalls, FunctionCall, Vocabulary

# The reasoning parser's recipients that are no tool channel.
NOT_TOOLS = (None, "self", "user", "commentary", "developer")
READING = (None, "self")
SHOWN = ("user", "commentary")


@dataclass(frozen=True)
class Dialect:
    """How the tool parser reads recipients: Spark's, or Glimmer's compatibility."""

    reasoning: tuple[str | None, ...]
    content: tuple[str | None, ...]
    not_tools: tuple[str, ...]
    keep_strings: bool

    def is_tool(self, recipient: str | None) -> bool:
        return recipient is not None and recipient not in self.not_tools


SPARK = Dialect(READING, SHOWN, ("self", "user", "commentary", "developer"), True)
GLIMMER = Dialect(("self",), (None, "user"), ("self", "user"), False)


def _is_tool(recipient: str | None) -> bool:
    return recipient not in NOT_TOOLS


def _current_turn(text: str) -> str:
    """The text from the assistant turn after the last other role's ``<|start|>``."""
    last_role = -1
    at = text.find(START)
    while at >= 0:
        role = at + len(START)
        end = role
        while end < len(text) and text[end] not in WHITESPACE and text[end] != "<":
            end += 1
        after = role + len(ASSISTANT)
        assistant = text.startswith(ASSISTANT, role) and (
            after == len(text) or text[after] in WHITESPACE or text[after] == "<"
        )
        if end > role and not assistant:
            last_role = end
        at = text.find(START, max(end, at + 1))
    if last_role < 0:
        return text
    start = text.find(START + ASSISTANT, last_role)
    return text[start:] if start >= 0 else ""


class MuseReasoning:
    """vLLM's one-shot reading: reasoning from ``to=self`` and recipient-less messages;
    content from the answer and commentary, or, when a tool channel holds calls, every
    message but reasoning and ``to=developer`` with its framing (the tool parser's
    input)."""

    def __init__(self, token_text: Callable[[int], str]) -> None:
        self.token_text = token_text

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        """Whether the prompt's own assistant turn already opened a tool channel."""
        text = _current_turn("".join(map(self.token_text, prompt_token_ids)))
        return any(_is_tool(f.recipient) and has_atem(body) for f, body in frames(text, False))

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        found = frames(text, False)
        if not found:
            return None, text or None
        reasoning = "".join(body for f, body in found if f.recipient in READING) or None
        if any(_is_tool(f.recipient) and has_atem(body) for f, body in found):
            starts = [f.start for f, _ in found[1:]] + [len(text)]
            content = "".join(
                text[f.start : stop]
                for (f, _), stop in zip(found, starts, strict=True)
                if f.recipient not in (None, "self", "developer")
            )
        else:
            content = "".join(body for f, body in found if f.recipient in SHOWN)
        return reasoning, content or None


class MuseReasoningState(Struct, tag="muse"):
    frames: Segmenter = field(default_factory=lambda: Segmenter(False))
    reasoning: Sent = field(default_factory=Sent)
    content: Sent = field(default_factory=Sent)
    markup_from: int = 0
    handed_off: bool = False


class MuseReasoningStream:
    """The reasoning side of a stream (the module docstring says what it sends)."""

    engine_based = False

    def __init__(self, parser: MuseReasoning, state: MuseReasoningState) -> None:
        self.parser = parser
        self.state = state

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return self.parser.is_reasoning_end(prompt_token_ids)

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.handed_off

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return []

    def finish(self) -> Delta | None:
        return None

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        ended: list[tuple[Frame, str]] = []
        for frame, body in state.frames.feed(text):
            if _is_tool(frame.recipient) and has_atem(body):
                return self._hand_off(frame, ended)
            ended.append((frame, body))
        current = state.frames.current
        if current is not None and _is_tool(current.recipient) and self._markup(current):
            return self._hand_off(current, ended)
        reasoning = self._grow(state.reasoning, ended, READING)
        content = self._grow(state.content, ended, SHOWN)
        if reasoning or content:
            return Delta(content=content or None, reasoning=reasoning or None)
        return None

    def _markup(self, current: Frame) -> bool:
        """Whether the growing tool channel's body now holds call markup (read once)."""
        segmenter = self.state.frames
        stop = segmenter.body_stop(current)
        start = max(self.state.markup_from - len(CALLS_OPEN) + 1, current.body_start)
        self.state.markup_from = stop
        return segmenter.find(CALLS_OPEN, start, stop) or segmenter.find(INVOKE_OPEN, start, stop)

    def _chunk(self, ended: list[tuple[Frame, str]], recipients: tuple[str | None, ...]) -> Chunk:
        current = self.state.frames.current
        if current is not None and current.recipient not in recipients:
            current = None
        bodies = [body for f, body in ended if f.recipient in recipients]
        return Chunk(self.state.frames, bodies, current)

    def _grow(
        self, channel: Sent, ended: list[tuple[Frame, str]], recipients: tuple[str | None, ...]
    ) -> str:
        """What the channel grew by (vLLM sends only growth of what it sent)."""
        chunk = self._chunk(ended, recipients)
        growing = chunk.current is not None and chunk.current.body_end < 0
        shown, text = visible(channel, chunk, reasoning_hold if growing else None, False)
        if text:
            channel.sent = shown
        settle(channel, chunk, None)
        return text

    def _hand_off(self, tool: Frame, ended: list[tuple[Frame, str]]) -> Delta:
        """The tool channel's text with what was not sent re-framed in front."""
        state = self.state
        if ended and not ended[-1][0].by_boundary:
            frame, body = ended[-1]
            ended[-1] = (frame, body[: len(body) - reasoning_hold(body[-256:])])
        pending = ""
        for channel, recipients, header in (
            (state.reasoning, READING, "to=self"),
            (state.content, SHOWN, "to=commentary"),
        ):
            bodies = "".join(body for f, body in ended if f.recipient in recipients)
            unsent = bodies[max(channel.sent - channel.done, 0) :]
            if unsent:
                pending += f"{header}<|message|>{unsent}<|eom|>"
        handed = pending + state.frames.since(tool.start)
        state.handed_off = True
        state.frames = Segmenter(False)
        return Delta(content=handed)


class MuseTools:
    """vLLM's one-shot reading of calls and content (the module docstring)."""

    supports_required_and_named = False

    def __init__(self, dialect: Dialect, reader: CallReader) -> None:
        self.dialect = dialect
        self.reader = reader

    def extract(self, text: str, id_seed: str) -> ExtractedToolCalls:
        found = frames(text, True)
        if not has_atem(text):
            return ExtractedToolCalls(False, [], self._content(text, found))
        bodies = [body for f, body in found if self.dialect.is_tool(f.recipient)]
        scanned = "\n".join(bodies) if bodies else ("" if found else text)
        calls: list[FunctionCall] = []
        try:
            for invoke in InvokeScanner().feed(scanned):
                call = self.reader.call(invoke)
                if call is not None:
                    calls.append(call)
        except CallFailed:
            return ExtractedToolCalls(False, [], text)
        return ExtractedToolCalls(bool(calls), calls, self._content(text, found))

    def _content(self, text: str, found: list[tuple[Frame, str]]) -> str | None:
        shown = "".join(body for f, body in found if f.recipient in self.dialect.content)
        if shown:
            return shown
        if not found:
            return text or None
        return None


class MuseToolState(Struct, tag="muse_tools"):
    frames: Segmenter = field(default_factory=lambda: Segmenter(True))
    reasoning: Sent = field(default_factory=Sent)
    content: Sent = field(default_factory=Sent)
    calls: InvokeScanner = field(default_factory=InvokeScanner)
    fed: int = 0
    bodies: int = 0
    counted: int = -1
    found: int = 0
    sent_calls: int = 0
    failed: bool = False


class MuseToolStream:
    """The tool side of a stream: each channel's growth, each call whole once closed."""

    engine_based = False
    supports_required_and_named = False

    def __init__(self, tools: MuseTools, id_seed: str, state: MuseToolState) -> None:
        self.dialect = tools.dialect
        self.reader = tools.reader
        self.id_seed = id_seed
        self.state = state

    def finish(self) -> Delta | None:
        return None

    def remaining_arguments(self) -> str:
        return ""

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        state = self.state
        if state.failed:
            return None
        segmenter = state.frames
        headless = segmenter.headers == 0
        ended = segmenter.feed(text)
        try:
            calls = self._calls(text, ended, headless)
        except CallFailed:
            state.failed = True
            return None
        shown = [
            self._shown(channel, ended, recipients)
            for channel, recipients in (
                (state.content, self.dialect.content),
                (state.reasoning, self.dialect.reasoning),
            )
        ]
        (content_len, content), (reasoning_len, reasoning) = shown
        if not content and not reasoning and not calls:
            return None
        state.content.sent = content_len
        state.reasoning.sent = reasoning_len
        deltas = [
            opening_call_delta(self.id_seed, index, call.name, call.arguments)
            for index, call in calls
        ]
        state.sent_calls = state.found
        return Delta(content=content or None, reasoning=reasoning or None, tool_calls=deltas)

    def _shown(
        self, channel: Sent, ended: list[tuple[Frame, str]], recipients: tuple[str | None, ...]
    ) -> tuple[int, str]:
        current = self.state.frames.current
        if current is not None and current.recipient not in recipients:
            current = None
        mine = [(f, body) for f, body in ended if f.recipient in recipients]
        chunk = Chunk(self.state.frames, [body for _, body in mine], current)
        last_open: bool | None = None
        if current is not None:
            last_open = not current.by_boundary
        elif mine:
            last_open = not mine[-1][0].by_boundary
        growing = channel.open if last_open is None else last_open
        result = visible(channel, chunk, tool_hold if growing else None, True)
        finished = [body for _, body in mine]
        settle(channel, Chunk(self.state.frames, finished, None), last_open)
        return result

    def _calls(
        self, text: str, ended: list[tuple[Frame, str]], headless: bool
    ) -> list[tuple[int, FunctionCall]]:
        """Calls this chunk completed, numbered as vLLM's list of every call numbers them."""
        state = self.state
        segmenter = state.frames
        pieces: list[str] = []
        if segmenter.headers == 0:
            pieces.append(text)
        else:
            if headless:
                state.calls = InvokeScanner()
                state.found = 0
            tool_frames = [(f, body) for f, body in ended if self.dialect.is_tool(f.recipient)]
            current = segmenter.current
            if current is not None and self.dialect.is_tool(current.recipient):
                tool_frames.append((current, ""))
            for frame, body in tool_frames:
                pieces.extend(self._body_piece(frame, body))
        new: list[tuple[int, FunctionCall]] = []
        for piece in pieces:
            for invoke in state.calls.feed(piece):
                call = self.reader.call(invoke)
                if call is None:
                    continue
                if state.found >= state.sent_calls:
                    new.append((state.found, call))
                state.found += 1
        return new

    def _body_piece(self, frame: Frame, body: str) -> list[str]:
        """What of a tool body the call scanner has not read (a newline joins bodies)."""
        state = self.state
        pieces = []
        if state.counted != frame.start:
            state.counted = frame.start
            state.fed = frame.body_start
            if state.bodies:
                pieces.append("\n")
            state.bodies += 1
        offset = state.fed - frame.body_start
        growing = frame is state.frames.current
        piece = state.frames.body(frame, offset) if growing else body[offset:]
        state.fed += len(piece)
        pieces.append(piece)
        return pieces


def _reasoning_stream(
    parser: MuseReasoning, request: Request, kept: object
) -> tuple[MuseReasoningStream, MuseReasoningState]:
    state = reuse(kept, MuseReasoningState)
    return MuseReasoningStream(parser, state), state


def _tools(dialect: Dialect) -> Callable[[Request], MuseTools]:
    def build(request: Request) -> MuseTools:
        return MuseTools(dialect, CallReader(request.options, dialect.keep_strings))

    return build


def _tool_stream(
    dialect: Dialect,
) -> Callable[[None, Request, object], tuple[MuseToolStream, MuseToolState]]:
    def build(_: None, request: Request, kept: object) -> tuple[MuseToolStream, MuseToolState]:
        state = reuse(kept, MuseToolState)
        return MuseToolStream(_tools(dialect)(request), request.id_seed, state), state

    return build


def _prepare_reasoning(name: str, vocab: Vocabulary) -> MuseReasoning:
    return MuseReasoning(vocab.token_text)


FAMILY = Family(
    title="Muse Spark, Muse Glimmer",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("muse",),
            aliases={"musespark1x": "muse"},
            engine_based=False,
            states=(MuseReasoningState,),
            prepare=_prepare_reasoning,
            one_shot=lambda parser, request: parser,
            stream=_reasoning_stream,
            golden=("J1",),
        ),
    ),
    tools=(
        Tools(
            names=("muse",),
            aliases={"musespark1x": "muse"},
            engine_based=False,
            states=(MuseToolState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: _tools(SPARK)(request),
            stream=_tool_stream(SPARK),
            golden=("J1", "J2"),
        ),
    ),
)
