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

This module holds the one-shot readings, the tool side of a stream and the declaration;
the reasoning side of a stream is parsers/families/muse_reasoning.py, Glimmer's own
reading of a whole output parsers/families/muse_glimmer.py, and what a channel has sent
parsers/families/muse_channels.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from msgspec import Struct, field

from parsers.families.muse_atem import (
    CallFailed,
    CallReader,
    InvokeScanner,
    tool_hold,
)
from parsers.families.muse_channels import Chunk, Sent, settle, visible
from parsers.families.muse_frames import (
    ASSISTANT,
    START,
    WHITESPACE,
    Frame,
    Reading,
    Segmenter,
    frames,
    has_atem,
)
from parsers.families.muse_glimmer import extract as glimmer_extract
from parsers.families.muse_glimmer import prompt_hands_off
from parsers.families.muse_reasoning import (
    READING,
    SHOWN,
    GlimmerState,
    GlimmerStream,
    SparkState,
    SparkStream,
    is_tool,
)
from parsers.family import Family, Reasoning, Request, Tools, reuse
from parsers.ids import opening_call_delta
from parsers.types import Delta, ExtractedToolCalls, FunctionCall


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
        return any(
            is_tool(f.recipient) and has_atem(body) for f, body in frames(text, Reading.REASONING)
        )

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        found = frames(text, Reading.REASONING)
        if not found:
            return None, text or None
        reasoning = "".join(body for f, body in found if f.recipient in READING) or None
        if any(is_tool(f.recipient) and has_atem(body) for f, body in found):
            starts = [f.start for f, _ in found[1:]] + [len(text)]
            content = "".join(
                text[f.start : stop]
                for (f, _), stop in zip(found, starts, strict=True)
                if f.recipient not in (None, "self", "developer")
            )
        else:
            content = "".join(body for f, body in found if f.recipient in SHOWN)
        return reasoning, content or None


class GlimmerReasoning:
    """Glimmer's one-shot reading (parsers/families/muse_glimmer.py)."""

    def __init__(self, token_text: Callable[[int], str]) -> None:
        self.token_text = token_text

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool:
        return prompt_hands_off("".join(map(self.token_text, prompt_token_ids)))

    def extract(
        self, text: str, prompt_token_ids: Sequence[int] | None
    ) -> tuple[str | None, str | None]:
        return glimmer_extract(text)


class MuseTools:
    """vLLM's one-shot reading of calls and content (the module docstring)."""

    supports_required_and_named = False

    def __init__(self, dialect: Dialect, reader: CallReader) -> None:
        self.dialect = dialect
        self.reader = reader

    def extract(self, text: str, id_seed: str) -> ExtractedToolCalls:
        found = frames(text, Reading.TOOL)
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
    frames: Segmenter = field(default_factory=lambda: Segmenter(Reading.TOOL))
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


def _spark_stream(
    parser: MuseReasoning, request: Request, kept: object
) -> tuple[SparkStream, SparkState]:
    state = reuse(kept, SparkState)
    return SparkStream(parser.is_reasoning_end, state), state


def _glimmer_stream(
    parser: GlimmerReasoning, request: Request, kept: object
) -> tuple[GlimmerStream, GlimmerState]:
    state = reuse(kept, GlimmerState)
    return GlimmerStream(parser.is_reasoning_end, state), state


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


FAMILY = Family(
    title="Muse Spark, Muse Glimmer",
    tokenizer="model directory",
    reasoning=(
        Reasoning(
            names=("muse",),
            aliases={"musespark1x": "muse"},
            engine_based=False,
            states=(SparkState,),
            prepare=lambda name, vocab: MuseReasoning(vocab.token_text),
            one_shot=lambda parser, request: parser,
            stream=_spark_stream,
            golden=("J1",),
        ),
        Reasoning(
            names=("muse_glimmer",),
            engine_based=False,
            states=(GlimmerState,),
            prepare=lambda name, vocab: GlimmerReasoning(vocab.token_text),
            one_shot=lambda parser, request: parser,
            stream=_glimmer_stream,
            golden=("J3",),
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
        Tools(
            names=("muse_glimmer",),
            engine_based=False,
            states=(MuseToolState,),
            prepare=lambda name, vocab: None,
            one_shot=lambda _, request: _tools(GLIMMER)(request),
            stream=_tool_stream(GLIMMER),
            golden=("J3", "J4"),
        ),
    ),
)
