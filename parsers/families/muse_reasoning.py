"""The reasoning side of a Muse stream, Spark's and Glimmer's, as vLLM 0.33.0's
``muse`` and ``muse_glimmer`` reasoning parsers stream it.

Both send the growth of two channels, reasoning and content (parsers/families/
muse_channels.py), a still-open body's tail held back while it may be framing, and hand
the stream to the tool parser once a tool channel holds call markup:

* Spark's hand-off is the text from that channel's header on, what it has not sent of
  either channel re-framed in front (``to=self<|message|>...<|eom|>``,
  ``to=commentary<|message|>...<|eom|>``), and nothing else in that chunk;
* Glimmer looks only after the last ``<|start|>assistant`` (a chunk holding a tool
  message and the answer after it hands nothing off), hands over from the tool
  channel's ``to=`` on, and keeps the chunk's reasoning but drops its content. Its
  content leaves out an answer holding call markup; once that leaves out text already
  sent, vLLM's content no longer extends what it sent and it sends no more of it until
  the stream's end, where it sends what lies past the length it sent.

When the stream ends in reasoning, both send the content past what they sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from msgspec import Struct, field

from parsers.families.muse_atem import reasoning_hold
from parsers.families.muse_channels import Chunk, Sent, settle, visible
from parsers.families.muse_frames import (
    CALLS_OPEN,
    INVOKE_OPEN,
    Frame,
    Reading,
    Segmenter,
    has_atem,
)
from parsers.families.muse_glimmer import GlimmerTurn
from parsers.types import Delta

# The reasoning parser's recipients that are no tool channel.
NOT_TOOLS = (None, "self", "user", "commentary", "developer")
READING = (None, "self")
SHOWN = ("user", "commentary")
# Whether the prompt's own assistant turn already handed off to the tool parser.
PromptEnds = Callable[[Sequence[int]], bool]


def is_tool(recipient: str | None) -> bool:
    return recipient not in NOT_TOOLS


def grow(
    frames: Segmenter, channel: Sent, ended: list[tuple[Frame, str]], current: Frame | None
) -> str:
    """What a channel grew by in one chunk (vLLM sends only growth of what it sent):
    ``ended`` the channel's messages the chunk ended, ``current`` its growing one."""
    chunk = Chunk(frames, [body for _, body in ended], current)
    growing = current is not None and current.body_end < 0
    shown, text = visible(channel, chunk, reasoning_hold if growing else None, False)
    if text:
        channel.sent = shown
    settle(channel, chunk, None)
    return text


def fallback(frames: Segmenter, channel: Sent, current: Frame | None) -> Delta | None:
    """At the end of a stream still in reasoning: the content past the length sent."""
    growing = current is not None and current.body_end < 0
    chunk = Chunk(frames, [], current)
    _, text = visible(channel, chunk, reasoning_hold if growing else None, False)
    return Delta(content=text) if text else None


def _mine(
    frames: Segmenter, ended: list[tuple[Frame, str]], recipients: tuple[str | None, ...]
) -> tuple[list[tuple[Frame, str]], Frame | None]:
    current = frames.current
    if current is not None and current.recipient not in recipients:
        current = None
    return [(f, body) for f, body in ended if f.recipient in recipients], current


def markup_since(frames: Segmenter, current: Frame, searched: int) -> bool:
    """Whether the growing body holds call markup, read from ``searched`` on."""
    stop = frames.body_stop(current)
    start = max(searched - len(CALLS_OPEN) + 1, current.body_start)
    return frames.find(CALLS_OPEN, start, stop) or frames.find(INVOKE_OPEN, start, stop)


class SparkState(Struct, tag="muse"):
    frames: Segmenter = field(default_factory=lambda: Segmenter(Reading.REASONING))
    reasoning: Sent = field(default_factory=Sent)
    content: Sent = field(default_factory=Sent)
    markup_from: int = 0
    handed_off: bool = False


class SparkStream:
    """Spark's reasoning side (the module docstring says what it sends)."""

    engine_based = False

    def __init__(self, prompt_ends: PromptEnds, state: SparkState) -> None:
        self.is_reasoning_end = prompt_ends
        self.state = state

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.handed_off

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return []

    def finish(self) -> Delta | None:
        frames = self.state.frames
        return fallback(frames, self.state.content, _mine(frames, [], SHOWN)[1])

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        frames = state.frames
        ended: list[tuple[Frame, str]] = []
        for frame, body in frames.feed(text):
            if is_tool(frame.recipient) and has_atem(body):
                return self._hand_off(frame, ended)
            ended.append((frame, body))
        current = frames.current
        if current is not None and is_tool(current.recipient):
            markup = markup_since(frames, current, state.markup_from)
            state.markup_from = frames.body_stop(current)
            if markup:
                return self._hand_off(current, ended)
        reasoning = grow(frames, state.reasoning, *_mine(frames, ended, READING))
        content = grow(frames, state.content, *_mine(frames, ended, SHOWN))
        if reasoning or content:
            return Delta(content=content or None, reasoning=reasoning or None)
        return None

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
        state.frames = Segmenter(Reading.REASONING)
        return Delta(content=handed)


class GlimmerState(Struct, tag="muse_glimmer"):
    frames: Segmenter = field(default_factory=lambda: Segmenter(Reading.GLIMMER))
    reasoning: Sent = field(default_factory=Sent)
    content: Sent = field(default_factory=Sent)
    markup_from: int = 0
    markup: bool = False
    stuck: bool = False
    turn: GlimmerTurn = field(default_factory=GlimmerTurn)
    handed_off: bool = False


class GlimmerStream:
    """Glimmer's reasoning side (the module docstring says what it sends)."""

    engine_based = False

    def __init__(self, prompt_ends: PromptEnds, state: GlimmerState) -> None:
        self.is_reasoning_end = prompt_ends
        self.state = state

    def ended_by(self, token_ids: Sequence[int]) -> bool:
        return self.state.handed_off

    def content_ids(self, token_ids: list[int]) -> list[int]:
        return []

    def finish(self) -> Delta | None:
        state = self.state
        current = _mine(state.frames, [], ("user",))[1]
        return fallback(state.frames, state.content, None if state.markup else current)

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None:
        state = self.state
        frames = state.frames
        ended = frames.feed(text)
        reasoning = grow(frames, state.reasoning, *_mine(frames, ended, ("self",)))
        content = self._content(ended)
        handed = state.turn.advance(frames, ended, text)
        if handed is not None:
            state.handed_off = True
            state.frames, state.turn = Segmenter(Reading.GLIMMER), GlimmerTurn()
            return Delta(content=handed, reasoning=reasoning or None)
        if reasoning or content:
            return Delta(content=content or None, reasoning=reasoning or None)
        return None

    def _content(self, ended: list[tuple[Frame, str]]) -> str:
        """The answers' growth: an answer holding call markup is no content."""
        state = self.state
        frames = state.frames
        mine, current = _mine(frames, ended, ("user",))
        kept: list[tuple[Frame, str]] = []
        start = state.content.done
        for frame, body in mine:
            if has_atem(body):
                state.stuck = state.stuck or state.content.sent > start
            else:
                kept.append((frame, body))
                start += len(body)
        if current is not None:
            if state.markup_from < current.body_start:
                state.markup = False
            state.markup = state.markup or markup_since(frames, current, state.markup_from)
            state.markup_from = frames.body_stop(current)
            if state.markup:
                state.stuck = state.stuck or state.content.sent > start
                current = None
        if state.stuck:
            settle(state.content, Chunk(frames, [body for _, body in kept], None), None)
            return ""
        return grow(frames, state.content, kept, current)
