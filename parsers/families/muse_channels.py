"""What of a Muse channel (reasoning, content) a stream has sent, and what it may send.

vLLM's Muse parsers classify the whole text on every chunk and send what grew past a
cursor. Here a channel is counted instead: ``done`` is its length over the messages
read to their end, ``sent`` how much went out; a chunk reads only the messages it
ended and the one still growing, whose tail is held back while it may turn out to be
framing. The held tail is read from a window of ``TAIL_WINDOW`` characters.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct

from parsers.families.muse_atem import TAIL_WINDOW
from parsers.families.muse_frames import Frame, Segmenter


class Sent(Struct):
    """One channel: its length over finished messages, what went out, and (the tool
    parser's reading, which holds back the joined channel's tail) the last characters
    of its finished text and whether its last message was left open."""

    done: int = 0
    sent: int = 0
    tail: str = ""
    open: bool = False


class Chunk:
    """The channel's messages one chunk reads: those it ended, then the growing one."""

    def __init__(self, frames: Segmenter, ended: list[str], current: Frame | None) -> None:
        self.frames = frames
        self.ended = "".join(ended)
        self.current = current
        self.current_length = 0
        if current is not None:
            self.current_length = frames.body_stop(current) - current.body_start

    def total(self, channel: Sent) -> int:
        return channel.done + len(self.ended) + self.current_length

    def text_from(self, channel: Sent, start: int) -> str:
        """The channel's text from ``start`` (at least its kept tail's start) to now."""
        done = channel.done
        if start < done:
            kept = done - len(channel.tail)
            head = channel.tail[max(start, kept) - kept :]
            return head + self.ended + self._current(0)
        into = start - done
        if into < len(self.ended):
            return self.ended[into:] + self._current(0)
        return self._current(into - len(self.ended))

    def _current(self, offset: int) -> str:
        if self.current is None:
            return ""
        return self.frames.body(self.current, offset)


def visible(
    channel: Sent, chunk: Chunk, hold: Callable[[str], int] | None, whole_channel: bool
) -> tuple[int, str]:
    """How long the channel may be shown now, and its text past ``sent``.

    ``hold`` reads the tail held back while it grows (None: nothing held); it reads the
    growing message's body, or the whole channel's end (``whole_channel``)."""
    total = chunk.total(channel)
    window = max(total - TAIL_WINDOW, 0)
    if not whole_channel:
        body_start = total - chunk.current_length
        window = max(window, body_start)
    start = min(channel.sent, window)
    text = chunk.text_from(channel, start)
    start = total - len(text)
    held = hold(text[max(window - start, 0) :]) if hold is not None else 0
    shown = total - held
    if shown <= channel.sent:
        return shown, ""
    return shown, text[channel.sent - start : shown - start]


def settle(channel: Sent, chunk: Chunk, last_open: bool | None) -> None:
    """Count the messages the chunk ended as the channel's finished text."""
    if chunk.ended:
        channel.done += len(chunk.ended)
        channel.tail = (channel.tail + chunk.ended)[-TAIL_WINDOW:]
    if last_open is not None:
        channel.open = last_open
