"""Streamed parsing of one chat choice: vLLM's ``parse_delta`` plus its stream processor.

Per chunk: the reasoning parser runs until reasoning ends (in the prompt or in the
output), then the tool parser reads what follows, else text passes through as
content. On top, the processor applies ``tool_choice`` and ``parallel_tool_calls``
and resolves ``finish_reason``. All of it keeps its state in ``ChatStreamState``,
plain data that snapshots to bytes and restores to a parser that continues exactly
as the original would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

import msgspec
from msgspec import Struct

from parsers.families import REASONING_STATES, TOOL_STATES, WHOLE_STATES
from parsers.family import WholeStream, WholeWithRequest
from parsers.forced import RequiredCalls, RequiredState, named_call_delta
from parsers.rewrite import Rewrites
from parsers.types import ANY_TEXT, Delta, ParseOptions, PlainText


class ReasoningStream(Protocol):
    engine_based: bool

    def is_reasoning_end(self, prompt_token_ids: Sequence[int]) -> bool: ...

    def stream(self, text: str, token_ids: Sequence[int]) -> Delta | None: ...

    def ended_by(self, token_ids: Sequence[int]) -> bool: ...

    def content_ids(self, token_ids: list[int]) -> list[int]: ...

    def finish(self) -> Delta | None: ...


@runtime_checkable
class ContinuesPrompt(Protocol):
    """A reasoning parser that starts reading where the prompt leaves off (Inkling:
    inside thinking, text or a message header), told so when the prompt leaves
    reasoning open, as vLLM's ``adjust_initial_state_from_prompt`` is."""

    def continue_prompt(self, prompt_token_ids: Sequence[int]) -> None: ...


@runtime_checkable
class ReadsPlain(Protocol):
    """A section's parser (reasoning, or tool calls) that tells plain text apart: the
    text its ``stream`` reads as its section's text alone, in most chunks. ``ChatStream``
    then steps such a chunk without a delta to build (``ChatStream.plain``)."""

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """What reads as plain text to the parser as it stands, asked with the ids of a
        chunk it reads next (by this answer or by ``stream``); None: no text is plain
        now. ``stream`` gives a chunk of such text exactly that text as its section's
        (reasoning for a reasoning parser, content for a tool parser) and nothing else,
        and leaves the parser as it stands (a reasoning parser's reasoning still open;
        its ``check``, if any, keeps of each such chunk what ``stream`` would), so the
        answer holds until the parser reads a chunk otherwise. Asking changes only what
        reading that chunk would set as well."""
        ...


# Where a plain chunk's text goes: the delta field it is alone in (``ChatStream.plain``).
Section = Literal["reasoning", "content"]
# ``ChatStream.plain``: a chunk's text and ids to the section it is plain text of, if any.
PlainCheck = Callable[[str, list[int]], "Section | None"]


class ToolStream(Protocol):
    engine_based: bool
    supports_required_and_named: bool

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None: ...

    def finish(self) -> Delta | None: ...

    def remaining_arguments(self) -> str: ...


# What the families' streams keep (parsers/families/__init__.py): a union of tagged structs at
# run time, so a snapshot decodes to the family's own state; any struct to mypy.
if TYPE_CHECKING:
    ReasoningState = Struct
    ToolState = Struct
    WholeState = Struct
else:
    ReasoningState = REASONING_STATES
    ToolState = TOOL_STATES
    WholeState = WHOLE_STATES


class ChatStreamState(Struct):
    prompt_checked: bool = False
    reasoning_ended: bool = False
    tool_phase_started: bool = False
    output_tokens: int = 0
    tools_streamed: bool = False
    reasoning: ReasoningState | None = None
    tools: ToolState | None = None
    forced_announced: bool = False
    required: RequiredState | None = None
    # A format read whole (named for the first, gpt-oss's Harmony).
    harmony: WholeState | None = None

    def for_snapshot(self) -> ChatStreamState:
        """A copy of this state as a snapshot keeps it: what grows with the stream but a
        restore rebuilds (``restored``) stays out, so a snapshot's size does not grow
        with it. A tool parser leaves out the calls it is done with (``Settling``)."""
        if not isinstance(self.tools, Settling):
            return self
        return msgspec.structs.replace(self, tools=self.tools.for_snapshot())

    def restored(self, history_tokens: int) -> bool:
        """Make a state a snapshot kept whole again, in place, for a carried history of
        ``history_tokens`` ids; False when its counts do not fit that history."""
        return not isinstance(self.tools, Settling) or self.tools.restored(history_tokens)


@runtime_checkable
class Settling(Protocol):
    """A parser state that keeps what it is done with (only counted from then on): a
    snapshot leaves it out, and a restore puts stand-ins back in its place."""

    def for_snapshot(self) -> Self:
        """A copy without what no step reads again."""
        ...

    def restored(self, history_tokens: int) -> bool:
        """Put the stand-ins back, in place; False when the counts cannot be right for
        a history of ``history_tokens`` ids."""
        ...


def _any_text(token_ids: Sequence[int]) -> PlainText:
    """Content that passes through as it is: any text is plain."""
    return ANY_TEXT


def _never_plain(text: str, token_ids: list[int]) -> None:
    """``ChatStream.plain`` of a stream whose chunks' deltas are read after their
    section's parser: no chunk is plain text alone."""
    return None


def _plain_check(state: ChatStreamState, section: Section, looks: PlainText) -> PlainCheck:
    """``ChatStream.plain`` while the section's parser stands as it did when it told
    what ``looks`` plain: a chunk of such text is stepped (counted) as ``step`` would
    step it, which leaves the parser as it stands. Made for what the test needs: a
    character or two are looked for one by one and a chunk's one id alone (``in``
    costs less than a set's ``isdisjoint``)."""
    ids, chars, check = looks
    if check is not None:
        return _checked(state, section, looks)
    if not ids and not chars:
        return _any(state, section)
    if not chars or len(chars) > 2:
        return _disjoint(state, section, looks)
    return _chars_and_ids(state, section, looks)


def _checked(state: ChatStreamState, section: Section, looks: PlainText) -> PlainCheck:
    """Text none of whose ids or characters ``looks`` names, that its check passes."""
    ids, chars, check = looks
    assert check is not None

    def plain_checked(text: str, token_ids: list[int]) -> Section | None:
        if (
            text
            and token_ids
            and ids.isdisjoint(token_ids)
            and chars.isdisjoint(text)
            and check(text)
        ):
            state.output_tokens += len(token_ids)
            return section
        return None

    return plain_checked


def _any(state: ChatStreamState, section: Section) -> PlainCheck:
    """Any text."""

    def plain_any(text: str, token_ids: list[int]) -> Section | None:
        if text and token_ids:
            state.output_tokens += len(token_ids)
            return section
        return None

    return plain_any


def _disjoint(state: ChatStreamState, section: Section, looks: PlainText) -> PlainCheck:
    """Text none of whose ids or characters ``looks`` names, tested as sets."""
    ids, chars, _ = looks

    def plain_sets(text: str, token_ids: list[int]) -> Section | None:
        if text and token_ids and ids.isdisjoint(token_ids) and chars.isdisjoint(text):
            state.output_tokens += len(token_ids)
            return section
        return None

    return plain_sets


def _chars_and_ids(state: ChatStreamState, section: Section, looks: PlainText) -> PlainCheck:
    """Text without one or two characters (looked for one by one) and, where ``looks``
    names ids, none of them (a chunk's one id alone)."""
    ids, chars, _ = looks
    first, second = min(chars), max(chars)  # the same character where there is one
    if not ids:  # the parser reads no marker by id

        def plain_chars(text: str, token_ids: list[int]) -> Section | None:
            if text and token_ids and first not in text and second not in text:
                state.output_tokens += len(token_ids)
                return section
            return None

        return plain_chars

    def plain_ids(text: str, token_ids: list[int]) -> Section | None:
        count = len(token_ids)
        if (
            text
            and first not in text
            and second not in text
            and (token_ids[0] not in ids if count == 1 else count and ids.isdisjoint(token_ids))
        ):
            state.output_tokens += count
            return section
        return None

    return plain_ids


class ChatStream:
    """One choice's streamed parse; ``step`` once per chunk, in the producer's chunking."""

    def __init__(
        self,
        options: ParseOptions,
        reasoning: ReasoningStream | None,
        tools: ToolStream | None,
        *,
        engine_based: bool,
        keep_tool_calls: bool,
        id_seed: str,
        state: ChatStreamState,
        harmony: WholeStream | None = None,
    ) -> None:
        self.options = options
        # A format read whole: reasoning, content and calls (gpt-oss's Harmony, Cohere's).
        self.harmony = harmony
        self.id_seed = id_seed
        self.reasoning = reasoning
        self.tools = tools
        # A family's rewrite of every delta, applied last (MiniCPM-V's newlines).
        self.rewrite = reasoning if isinstance(reasoning, Rewrites) else None
        # A format read whole that reads the prompt (asked once: a protocol check is slow).
        self.reads_prompt = harmony if isinstance(harmony, WholeWithRequest) else None
        self.engine_based = engine_based
        self.keep_tool_calls = keep_tool_calls
        self.state = state
        # Nothing reads a mid-stream chunk's delta after its section's parser: no format
        # read whole, no reasoning hidden, no rewrite (``step`` skips ``_parse`` then).
        self.lean = harmony is None and self.rewrite is None and options.include_reasoning
        self.first_call_only = options.parallel_tool_calls is False
        # The tool parser's own stream, when ``_tool_delta`` comes down to it (no
        # ``tool_choice`` of "none", or one the stream processor forces).
        forced = options.named_tool is not None or options.tool_choice == "required"
        self.tool_stream = (
            tools.stream
            if tools is not None
            and options.tool_choice != "none"
            and not (tools.supports_required_and_named and forced)
            else None
        )
        # What the sections' parsers read as plain text (``ReadsPlain``), where a chunk's
        # parse is theirs alone.
        self.plain_reasoning = (
            reasoning.plain_text if self.lean and isinstance(reasoning, ReadsPlain) else None
        )
        self.plain_tools = self._plain_tools() if self.lean else None
        # ``plain`` once a chunk was read otherwise: the parsers are asked anew.
        self.plain_anew: PlainCheck = self._plain_anew if self.lean else _never_plain
        # The section a mid-stream chunk without a finish is plain text of, its delta
        # that text alone in that field (most chunks): the chunk is then stepped as
        # ``step`` steps it, and no delta is built. None: it is not such a chunk, or its
        # section cannot tell; nothing is stepped (``step`` reads it). A check made for
        # the section's parser as it stands (``_plain_check``) until ``step`` reads a
        # chunk, not a method: a chunk's one call.
        self.plain: PlainCheck = self.plain_anew

    def snapshot(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    def step(
        self,
        text: str,
        token_ids: list[int],
        finish_reason: str | None,
        prompt_token_ids: Sequence[int] | None,
    ) -> tuple[Delta | None, str | None]:
        """Parse one chunk; returns its delta (None: nothing yet) and finish_reason."""
        state = self.state
        self.plain = self.plain_anew  # what the parsers read as plain text may change
        delta: Delta | None
        if finish_reason is None and self.lean and token_ids and state.prompt_checked:
            # What ``_parse`` does then, without the steps that do nothing.
            delta = self._sections(text, token_ids)
        elif text or token_ids or state.output_tokens:
            delta = self._parse(text, token_ids, prompt_token_ids, finish_reason is not None)
        else:
            delta = Delta()
        if delta is not None and delta.tool_calls:
            if self.keep_tool_calls:
                state.tools_streamed = True
            else:
                delta.tool_calls = []
                if not delta.content and not delta.reasoning:
                    delta = None
        state.output_tokens += len(token_ids)
        if delta is not None and self.first_call_only:
            delta.tool_calls = [call for call in delta.tool_calls if call.index == 0]
        if finish_reason is not None:
            finish_reason = finish_reason or "stop"
            forced_name = self.options.named_tool is not None
            if state.tools_streamed and finish_reason == "stop" and not forced_name:
                finish_reason = "tool_calls"
        return delta, finish_reason

    def _plain_tools(self) -> Callable[[Sequence[int]], PlainText | None] | None:
        """What reads as plain content once reasoning ended, where ``_tool_delta`` comes
        down to the tool parser's stream or to passing content through."""
        tools, choice = self.tools, self.options.tool_choice
        if tools is None or (self.tool_stream is None and choice != "none"):
            return None  # no tool parser, or calls the stream processor forces
        if choice == "none" and not self.engine_based:
            return _any_text
        return tools.plain_text if isinstance(tools, ReadsPlain) else None

    def _plain_anew(self, text: str, token_ids: list[int]) -> Section | None:
        """``plain`` at the stream's start and after a chunk read otherwise: the
        section's parser tells what reads as plain text now, and the check made of its
        answer is ``plain`` from then on, until ``step`` reads a chunk."""
        state = self.state
        if not (text and token_ids and state.prompt_checked):
            return None
        section: Section = "content"
        read_by_tools = False
        # As ``_sections`` goes.
        if self.reasoning is not None and not state.reasoning_ended:
            section = "reasoning"
            ask = self.plain_reasoning
        elif self.tools is not None and state.reasoning_ended:
            read_by_tools = True
            ask = self.plain_tools
        else:
            ask = _any_text
        looks = ask(token_ids) if ask is not None else None
        if looks is None:
            return None
        plain = self.plain = _plain_check(state, section, looks)
        if read_by_tools:
            state.tool_phase_started = True  # as the chunk read otherwise would set it
        return plain(text, token_ids)

    def _parse(
        self,
        text: str,
        token_ids: list[int],
        prompt_token_ids: Sequence[int] | None,
        finished: bool,
    ) -> Delta | None:
        state = self.state
        if self.harmony is not None:
            reads_prompt = self.reads_prompt
            prompt = None if state.prompt_checked else prompt_token_ids
            if reads_prompt is not None and prompt is not None:
                state.prompt_checked = True
                reads_prompt.continue_prompt(prompt)
            return self._hide_reasoning(self.harmony.step(text, token_ids, finished))
        reasoning = self.reasoning
        if not state.prompt_checked and prompt_token_ids is not None:
            state.prompt_checked = True
            if reasoning is None or reasoning.is_reasoning_end(prompt_token_ids):
                state.reasoning_ended = True
            elif isinstance(reasoning, ContinuesPrompt):
                reasoning.continue_prompt(prompt_token_ids)
        delta = self._sections(text, token_ids)
        if finished:
            delta = self._finish(delta)
        delta = self._hide_reasoning(delta)
        if self.rewrite is not None:
            delta = self.rewrite.rewrite_delta(delta, finished)
        return delta

    def _sections(self, text: str, token_ids: list[int]) -> Delta | None:
        """The chunk read by the reasoning parser while reasoning lasts, then by the tool
        parser once it ended, else passed through as content."""
        state = self.state
        reasoning = self.reasoning
        if reasoning is not None and not state.reasoning_ended:
            delta = reasoning.stream(text, token_ids)
            if not reasoning.ended_by(token_ids):
                return delta
            return self._reasoning_ended(reasoning, delta, text, token_ids)
        if self.tools is not None and state.reasoning_ended:
            state.tool_phase_started = True
            if self.tool_stream is not None:
                return self.tool_stream(text, token_ids)
            return self._tool_delta(text, token_ids)
        return Delta(content=text)

    def _reasoning_ended(
        self, reasoning: ReasoningStream, delta: Delta | None, text: str, token_ids: list[int]
    ) -> Delta | None:
        """The chunk that ended reasoning (its reasoning parser's ``delta``): what
        follows the end goes to the tool parser, or stays the delta's content."""
        state = self.state
        state.reasoning_ended = True
        token_ids = reasoning.content_ids(token_ids)
        flushed = reasoning.finish() if reasoning.engine_based else None
        text = ((delta.content if delta else None) or "") + (
            (flushed.content if flushed else None) or ""
        )
        if self.engine_based:
            if self.tools is not None:
                if delta is not None:
                    delta.content = None
            elif text:
                delta = delta or Delta()
                delta.content = text
        if self.tools is None:
            return delta
        state.tool_phase_started = True
        carried = delta.reasoning if delta is not None else None
        delta = self._tool_delta(text, token_ids)
        if carried:
            if delta is None:
                delta = Delta(reasoning=carried)
            elif not delta.reasoning:
                delta.reasoning = carried
        return delta

    def _hide_reasoning(self, delta: Delta | None) -> Delta | None:
        if delta is not None and not self.options.include_reasoning:
            delta.reasoning = None
            if not delta.content and not delta.tool_calls and not delta.citations:
                delta = None
        return delta

    def _tool_delta(self, text: str, token_ids: list[int]) -> Delta | None:
        tools = self.tools
        if tools is None:
            return None
        if self.options.tool_choice == "none":
            # vLLM asks whether the whole pair is engine-based, not the tool parser.
            if not self.engine_based:
                return Delta(content=text) if text else None
            delta = tools.stream(text, token_ids)
            if delta is not None:
                delta.tool_calls = []
            return delta
        if tools.supports_required_and_named:
            state = self.state
            named = self.options.named_tool
            if named is not None:
                delta = named_call_delta(text, named, state.forced_announced, self.id_seed)
                state.forced_announced = True
                return delta
            if self.options.tool_choice == "required":
                if state.required is None or self.engine_based:
                    # vLLM's engine-based streams keep no text between chunks: each
                    # chunk's text is read as the whole JSON array.
                    state.required = RequiredState()
                delta, state.forced_announced = RequiredCalls(self.id_seed, state.required).stream(
                    text
                )
                return delta
        return tools.stream(text, token_ids)

    def _finish(self, delta: Delta | None) -> Delta | None:
        """The last chunk: unstreamed arguments, then whatever the parsers still hold."""
        if self.tools is not None and delta is not None and delta.tool_calls:
            last = delta.tool_calls[-1]
            last.arguments = (last.arguments or "") + self.tools.remaining_arguments()
        holders: list[ReasoningStream | ToolStream] = []
        if self.reasoning is not None and not self.state.reasoning_ended:
            holders.append(self.reasoning)
        if self.tools is not None:
            holders.append(self.tools)
        for parser in holders:
            flushed = parser.finish()
            if flushed is None:
                continue
            if delta is None:
                delta = flushed
                continue
            if flushed.content:
                delta.content = (delta.content or "") + flushed.content
            if flushed.reasoning:
                delta.reasoning = (delta.reasoning or "") + flushed.reasoning
            delta.tool_calls += flushed.tool_calls
        return delta
