"""The streaming marker engine behind the marker-format parsers (Qwen3, DeepSeek).

Three stages turn ``(delta_text, delta_token_ids)`` into events:

- the scanner finds marker tokens by id and splits the delta's text around them,
  deferring a marker whose text the detokenizer has not released yet;
- the lexer finds markers spelled in text, holding back a tail that may still
  grow into one (``<``, ``</thi``);
- the state machine maps markers to transitions (reasoning, content, tool call
  name, arguments) and text to the current state's events.

A format is a declaration (``Format``): its transition table, which states' text
becomes which events, and in which states a call is open. Qwen3's is the one vLLM
0.33.0's engine runs; others declare their own table on the same three stages.

Everything that survives between deltas is in ``EngineState``: plain data, so an
engine can be snapshotted and restored mid-stream. Work per delta is proportional
to the delta plus the (few-character) held tail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from msgspec import Struct, field

from parsers import budget
from parsers.types import PlainText

# Terminal names.
THINK_START = "THINK_START"
THINK_END = "THINK_END"
TOOL_START = "TOOL_START"
TOOL_END = "TOOL_END"
FUNC_PREFIX = "FUNC_PREFIX"
FUNC_END = "FUNC_END"
PARAM_START = "PARAM_START"
PARAM_END = "PARAM_END"
CLOSE_ANGLE = "CLOSE_ANGLE"
DROP = "DROP"

# States.
REASONING = "reasoning"
CONTENT = "content"
# A message's header (Inkling's role marker to its content-kind marker): its text is
# held, dropped when a block opens, and content where a transition says so (or at the
# end). A format with headers keeps a ``HeaderEngineState``.
HEADER = "message_header"
TOOL_PREAMBLE = "tool_preamble"
TOOL_NAME = "tool_name"
TOOL_ARGS = "tool_args"
TOOL_BETWEEN = "tool_between"
TOOL_STATES = frozenset({TOOL_PREAMBLE, TOOL_NAME, TOOL_ARGS, TOOL_BETWEEN})

# Event kinds.
TEXT = "text"
REASONING_TEXT = "reasoning"
REASONING_END = "reasoning_end"
CALL_START = "call_start"
CALL_NAME = "call_name"
CALL_ARGS = "call_args"
CALL_END = "call_end"

# What text in each state is, for every format whose calls are a name then arguments.
STATE_EVENTS = {
    CONTENT: TEXT,
    REASONING: REASONING_TEXT,
    TOOL_NAME: CALL_NAME,
    TOOL_ARGS: CALL_ARGS,
}


class Transition(NamedTuple):
    next_state: str
    events: tuple[str, ...]


# Think markup as every think-marker format reads it: ``<think>`` inside reasoning
# stays there, ``</think>`` ends it, and one in content is dropped.
THINK_TRANSITIONS = {
    (REASONING, THINK_START): Transition(REASONING, ()),
    (REASONING, THINK_END): Transition(CONTENT, (REASONING_END,)),
    (CONTENT, THINK_END): Transition(CONTENT, ()),
}
# The same where ``<think>`` in content opens reasoning (again): GLM, DSML, Mistral.
REOPENING_THINK = {(CONTENT, THINK_START): Transition(REASONING, ()), **THINK_TRANSITIONS}

# Qwen3's grammar: (state, terminal) -> transition.
TRANSITIONS: dict[tuple[str, str], Transition] = {
    **THINK_TRANSITIONS,
    (REASONING, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (CONTENT, TOOL_START): Transition(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (CONTENT, FUNC_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
    (TOOL_PREAMBLE, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (TOOL_PREAMBLE, FUNC_PREFIX): Transition(TOOL_NAME, ()),
    (TOOL_NAME, CLOSE_ANGLE): Transition(TOOL_ARGS, ()),
    (TOOL_NAME, FUNC_END): Transition(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_NAME, TOOL_END): Transition(CONTENT, (CALL_END,)),
    (TOOL_NAME, TOOL_START): Transition(TOOL_PREAMBLE, (CALL_END, CALL_START)),
    (TOOL_NAME, FUNC_PREFIX): Transition(TOOL_NAME, (CALL_END, CALL_START)),
    (TOOL_ARGS, FUNC_END): Transition(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_ARGS, FUNC_PREFIX): Transition(TOOL_NAME, (CALL_END, CALL_START)),
    (TOOL_ARGS, PARAM_START): Transition(TOOL_ARGS, (CALL_ARGS,)),
    (TOOL_ARGS, PARAM_END): Transition(TOOL_ARGS, (CALL_ARGS,)),
    (TOOL_BETWEEN, TOOL_END): Transition(CONTENT, ()),
    (TOOL_BETWEEN, TOOL_START): Transition(TOOL_PREAMBLE, (CALL_START,)),
    (TOOL_BETWEEN, FUNC_PREFIX): Transition(TOOL_NAME, (CALL_START,)),
}


class Format:
    """A marker format's state machine as data: one table per family, no code.

    ``call_states`` are the states in which ``finish`` closes an open call.
    ``body_array``: a call region's text is one JSON array of calls (Granite's), split
    into a call per element by the engine state (an ``ArrayEngineState``).
    """

    def __init__(
        self,
        transitions: dict[tuple[str, str], Transition],
        state_events: dict[str, str],
        call_states: frozenset[str],
        *,
        body_array: bool = False,
    ) -> None:
        self.transitions = transitions
        self.state_events = state_events
        self.call_states = call_states
        self.body_array = body_array
        self.tool_terminals = frozenset(
            t
            for (s, t), tr in transitions.items()
            if tr.next_state in call_states or s in call_states
        )
        # Markers that leave the calls (MiniMax's closer may end an inner call, not
        # its wrapper, so exits are read off the transitions).
        self.exit_terminals = frozenset(
            t
            for (s, t), tr in transitions.items()
            if s in call_states and tr.next_state not in call_states
        )
        self.reasoning_markup = self._reasoning_markup()

    def _reasoning_markup(self) -> frozenset[str]:
        """The markers that pass through as text when no reasoning parser reads the
        output: those that only ever move between reasoning and content and mean
        nothing else. One marker that also closes other blocks (Inkling's
        ``<|end_message|>``) leaves none, as in vLLM."""
        plain = (CONTENT, REASONING)
        markers = frozenset(
            t
            for (s, t), tr in self.transitions.items()
            if REASONING in (s, tr.next_state) and tr.next_state not in self.call_states
        )
        for (s, t), tr in self.transitions.items():
            if t in markers and (
                s not in plain
                or tr.next_state not in plain
                or not set(tr.events) <= {REASONING_END}
            ):
                return frozenset()
        return markers


QWEN3_FORMAT = Format(TRANSITIONS, STATE_EVENTS, TOOL_STATES)


class Event(NamedTuple):
    kind: str
    value: str
    call: int


class Grammar:
    """A format's literals and marker ids for one tokenizer, computed once.

    Literals are lexed from text (a terminal may have several spellings, several
    tokens long); ``token_terminals`` are found by token id. A format whose markers
    are all tokens passes no literals, and then text is never held back as a
    possible marker.
    """

    def __init__(
        self,
        literals: Mapping[str, str | tuple[str, ...]],
        token_terminals: dict[str, str],
        drops: Iterable[str],
        token_ids: dict[str, int],
        token_text: Callable[[int], str],
        markup: Format = QWEN3_FORMAT,
    ) -> None:
        self.format = markup
        table = [
            (text, name)
            for name, spelled in literals.items()
            for text in ((spelled,) if isinstance(spelled, str) else spelled)
        ]
        table += [(text, DROP) for text in sorted(set(drops))]
        self.literals = table
        self.first_chars = frozenset(text[0] for text, _ in table if text)
        # A literal's terminal (the first listed wins), and by first character the
        # literals' lengths, longest first: a position is matched with one lookup per
        # length, however many literals (a tokenizer may have a thousand to drop).
        self.by_text: dict[str, str] = {}
        lengths: dict[str, set[int]] = {}
        for text, name in table:
            self.by_text.setdefault(text, name)
            lengths.setdefault(text[0], set()).add(len(text))
        self.lengths = {c: tuple(sorted(ls, reverse=True)) for c, ls in lengths.items()}
        self.prefixes = frozenset(text[:i] for text, _ in table for i in range(1, len(text)))
        self.longest = max((len(text) for text, _ in table), default=0)
        self.first_char_re = re.compile(
            "[" + "".join(re.escape(c) for c in sorted(self.first_chars)) + "]"
            if self.first_chars
            else "(?!)"
        )
        self.id_terminals = {
            token_id: name
            for name, text in token_terminals.items()
            if (token_id := token_ids.get(text)) is not None
        }
        self.id_terminals.update(
            (token_id, DROP) for text in drops if (token_id := token_ids.get(text)) is not None
        )
        self.id_terminal_names = frozenset(self.id_terminals.values())
        self.marker_ids = frozenset(self.id_terminals)  # asked of every chunk: a set
        # Plain text (``MarkerEngine.plain``) with nothing held or deferred.
        self.plain_text = PlainText(self.marker_ids, self.first_chars)
        self.token_text = token_text


class Piece(NamedTuple):
    """A lexed piece: ``terminal`` is None for plain text."""

    terminal: str | None
    text: str


class EngineState(Struct):
    state: str
    tool_index: int = -1
    ever_had_token_ids: bool = False
    held: str = ""
    deferred: list[tuple[str, str]] = field(default_factory=list)
    deferred_text: str = ""
    # How much of deferred_text was already searched for the first deferred marker.
    deferred_searched: int = 0
    # Reasoning-only mode: inside tool markup that passes through as content.
    in_skipped_calls: bool = False

    def hold_header(self, text: str) -> None:
        """Header text is held only by the state of a format with message headers."""
        raise TypeError("a format with message headers keeps a HeaderEngineState")

    def take_header(self) -> str:
        """The header text held so far, no longer held."""
        return ""

    def array_text(self, text: str) -> list[Event]:
        """A call region's text split into calls, by the state of an array format."""
        raise TypeError("a format with array call bodies keeps an ArrayEngineState")

    def call_open(self) -> bool:
        """Whether the stream's end leaves a call open (an array's: inside an element)."""
        return True


class HeaderEngineState(EngineState):
    """The state of a format with message headers (``HEADER``): the header's text, in
    the pieces it came in, while it is read."""

    header: list[str] = field(default_factory=list)

    def hold_header(self, text: str) -> None:
        self.header.append(text)

    def take_header(self) -> str:
        header = "".join(self.header)
        self.header = []
        return header


class MarkerEngine:
    """Feeds deltas through scanner, lexer and state machine into events.

    ``skip_tools`` is the reasoning-only mode (tool markup passes through as
    content); ``skip_reasoning`` passes think markup through as text.
    """

    def __init__(
        self,
        grammar: Grammar,
        state: EngineState,
        *,
        skip_tools: bool = False,
        skip_reasoning: bool = False,
    ) -> None:
        self.grammar = grammar
        self.s = state
        self.skip_tools = skip_tools
        self.skip_reasoning = skip_reasoning

    # ------------------------------------------------------------------ feeding

    def plain(self, text: str, token_ids: Sequence[int]) -> bool:
        """Whether the delta is plain text, the current state's text whole (the fast
        path): nothing held or deferred, no marker id, and no character a literal
        marker could start with. A family's parser may then skip the events."""
        s = self.s
        if token_ids and not s.ever_had_token_ids:
            s.ever_had_token_ids = True
        grammar = self.grammar
        return (
            bool(text)
            and not s.held
            and not s.deferred
            and grammar.marker_ids.isdisjoint(token_ids)
            and grammar.first_chars.isdisjoint(text)
        )

    def plain_text(self, token_ids: Sequence[int]) -> PlainText | None:
        """What ``plain`` passes while the engine stands as it is (None: nothing, a
        marker is held or deferred), asked with the ids of a delta it reads next."""
        s = self.s
        if token_ids and not s.ever_had_token_ids:
            s.ever_had_token_ids = True
        if s.held or s.deferred:
            return None
        return self.grammar.plain_text

    def plain_kind(self) -> str | None:
        """The event kind plain text is in the current state (None: none, it is dropped)."""
        return self.grammar.format.state_events.get(self.s.state)

    def feed(self, text: str, token_ids: Sequence[int]) -> list[Event]:
        if self.plain(text, token_ids):
            return self._text(text)
        has_marker_id = not self.grammar.marker_ids.isdisjoint(token_ids)
        events: list[Event] = []
        for piece in budget.paced(self._scan(text, token_ids, has_marker_id)):
            if piece.terminal is None:
                events += self._lexed(self._lex(piece.text, final=False))
            else:
                events += self._lexed(self._lex("", final=True))
                events += self._terminal(piece.terminal, piece.text)
        return events

    def finish(self) -> list[Event]:
        """Release everything held; close an open call or open reasoning."""
        s = self.s
        events: list[Event] = []
        pending: list[Piece] = []
        if s.deferred_text:
            pending.append(Piece(None, s.deferred_text))
        pending += [Piece(terminal, text) for terminal, text in s.deferred]
        s.deferred_text = ""
        s.deferred_searched = 0
        s.deferred = []
        for piece in pending:
            if piece.terminal is None:
                events += self._lexed(self._lex(piece.text, final=False))
            else:
                events += self._lexed(self._lex("", final=True))
                events += self._terminal(piece.terminal, piece.text)
        events += self._lexed(self._lex("", final=True))
        if s.state in self.grammar.format.call_states:
            if s.tool_index >= 0 and s.call_open():
                events.append(Event(CALL_END, "", s.tool_index))
            s.state = CONTENT
        elif s.state == REASONING:
            events.append(Event(REASONING_END, "", s.tool_index))
            s.state = CONTENT
        elif s.state == HEADER:
            header = s.take_header()
            if header:
                events.append(Event(TEXT, header, s.tool_index))
            s.state = CONTENT
        return events

    # ------------------------------------------------------------------ scanner

    def _scan(self, text: str, token_ids: Sequence[int], has_marker_id: bool) -> list[Piece]:
        """Split the delta at marker tokens found by id."""
        s = self.s
        items: list[Piece] = []
        if s.deferred:
            items, text = self._resolve_deferred(text)
        if not has_marker_id:
            if text:
                items.append(Piece(None, text))
            return items
        id_terminals = self.grammar.id_terminals
        token_text = self.grammar.token_text
        results: list[Piece] = []
        run: list[str] = []
        for token_id in token_ids:
            terminal = id_terminals.get(token_id)
            if terminal is None:
                run.append(token_text(token_id))
                continue
            if "".join(run):
                results.append(Piece(None, "".join(run)))
            run = []
            results.append(Piece(terminal, token_text(token_id)))
        if "".join(run):
            results.append(Piece(None, "".join(run)))
        if text:
            return items + self._realign(text, results)
        # No text to check the pieces against: wait for the markers' text.
        s.deferred += [(p.terminal, p.text) for p in results if p.terminal is not None]
        return items

    def _resolve_deferred(self, text: str) -> tuple[list[Piece], str]:
        """Place deferred markers in the text released since; stop at the first still missing.

        The first marker was already looked for in part of the carried text, which is
        not searched again (but for an overlap a marker could straddle).
        """
        s = self.s
        deferred = s.deferred
        # The only reference: += grows the carried text in place, not copied per chunk.
        remaining, s.deferred_text = s.deferred_text, ""
        remaining += text
        items: list[Piece] = []
        start = 0
        for k, (terminal, marker) in enumerate(deferred):
            search_from = max(0, s.deferred_searched - len(marker) + 1) if k == 0 else start
            pos = remaining.find(marker, search_from)
            if pos < 0:
                s.deferred_text = remaining[start:]
                s.deferred_searched = len(s.deferred_text)
                s.deferred = deferred[k:] if k else deferred
                return items, ""
            if pos > start:
                items.append(Piece(None, remaining[start:pos]))
            items.append(Piece(terminal, marker))
            start = pos + len(marker)
        s.deferred_text = ""
        s.deferred_searched = 0
        s.deferred = []
        return items, remaining[start:]

    def _realign(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """Reconcile per-token texts with the detokenized delta text."""
        if not pieces:
            return [Piece(None, text)]
        joined = "".join(p.text for p in pieces)
        if not joined:
            return [Piece(None, text), *pieces]
        pos = text.find(joined)
        if pos > 0:
            return [Piece(None, text[:pos]), *pieces]
        if pos == 0:
            return pieces
        return self._anchor(text, pieces)

    def _anchor(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """Rebuild the split from the delta text, using the markers as anchors."""
        anchors = [p for p in pieces if p.terminal is not None]
        if not anchors:
            return [Piece(None, text)]
        positions = [-1] * len(anchors)
        end = len(text)
        # A marker missing from text[:end] is missing from any shorter prefix too.
        missing_below: dict[str, int] = {}
        for i in range(len(anchors) - 1, -1, -1):
            marker = anchors[i].text
            if missing_below.get(marker, -1) >= end:
                continue
            pos = text.rfind(marker, 0, end)
            if pos >= 0:
                positions[i] = end = pos
            else:
                missing_below[marker] = end
        s = self.s
        rebuilt: list[Piece] = []
        consumed = 0
        for i, anchor in enumerate(anchors):
            pos = positions[i]
            if pos >= consumed:
                if pos > consumed:
                    rebuilt.append(Piece(None, text[consumed:pos]))
                rebuilt.append(anchor)
                consumed = pos + len(anchor.text)
                continue
            later = any(p >= 0 for p in positions[i + 1 :])
            if not later and consumed < len(text) and anchor.terminal != DROP:
                s.deferred_text += text[consumed:]
                consumed = len(text)
            s.deferred.append((anchor.terminal or "", anchor.text))
        if consumed < len(text):
            rebuilt.append(Piece(None, text[consumed:]))
        return rebuilt

    # ------------------------------------------------------------------ lexer

    def _lex(self, text: str, final: bool) -> list[Piece]:
        """Markers spelled in text; a tail that may grow into one is held.

        Scans by index over one buffer (the short held tail plus the delta), so each
        character is looked at a bounded number of times.
        """
        s = self.s
        grammar = self.grammar
        if not final and not s.held and grammar.first_chars.isdisjoint(text):
            return [Piece(None, text)]
        buffer = s.held + text
        size = len(buffer)
        pos = 0
        pieces: list[Piece] = []
        while pos < size:
            best = self._longest_literal(buffer, pos)
            # A tail that is the start of a longer literal may still grow into it.
            if not final and size - pos < grammar.longest and buffer[pos:] in grammar.prefixes:
                break
            if best is not None:
                pieces.append(Piece(best[1], best[0]))
                pos += len(best[0])
                continue
            end = self._text_end(buffer, pos)
            pieces.append(Piece(None, buffer[pos:end]))
            pos = end
        s.held = buffer[pos:]
        return pieces

    def _longest_literal(self, buffer: str, pos: int) -> tuple[str, str] | None:
        """The longest literal at ``pos`` and its terminal, if any starts there."""
        by_text = self.grammar.by_text
        for length in self.grammar.lengths.get(buffer[pos], ()):
            text = buffer[pos : pos + length]
            if len(text) == length and (name := by_text.get(text)) is not None:
                return text, name
        return None

    def _text_end(self, buffer: str, start: int) -> int:
        """Where text from ``start`` stops: the next position a marker could start at."""
        grammar = self.grammar
        size = len(buffer)
        search = grammar.first_char_re.search
        match = search(buffer, start + 1)
        while match is not None:
            i = match.start()
            near_end = size - i < grammar.longest
            if self._longest_literal(buffer, i) is not None or (
                near_end and buffer[i:] in grammar.prefixes
            ):
                return i
            match = search(buffer, i + 1)
        return size

    def _lexed(self, pieces: list[Piece]) -> list[Event]:
        # Once ids are flowing, markers that have token ids count only by id.
        by_id = self.grammar.id_terminal_names if self.s.ever_had_token_ids else frozenset()
        events: list[Event] = []
        for piece in budget.paced(pieces):
            if piece.terminal is None or piece.terminal in by_id:
                if piece.text:
                    events += self._text(piece.text)
            else:
                events += self._terminal(piece.terminal, piece.text)
        return events

    # ------------------------------------------------------------------ state machine

    def _text(self, text: str) -> list[Event]:
        if self.s.state == HEADER:
            self.s.hold_header(text)
            return []
        if self.s.state == TOOL_ARGS and self.grammar.format.body_array:
            return self.s.array_text(text)
        kind = self.plain_kind()
        return [Event(kind, text, self.s.tool_index)] if kind is not None else []

    def _skips(self, terminal: str, transition: Transition) -> bool:
        """Reasoning-only mode: whether tool markup passes through as text.

        A closer outside any skipped call markup (MiniMax's ``</minimax:tool_call>``
        in content) is not tool markup there: its own transition applies.
        """
        s = self.s
        markup = self.grammar.format
        opener = transition.next_state in markup.call_states
        closer = terminal in markup.exit_terminals
        if closer and not opener and not s.in_skipped_calls:
            return False
        if opener:
            s.in_skipped_calls = True
        elif closer:
            s.in_skipped_calls = False
        return True

    def _terminal(self, terminal: str, text: str) -> list[Event]:
        s = self.s
        markup = self.grammar.format
        transition = markup.transitions.get((s.state, terminal))
        if transition is None:
            if terminal == DROP:
                return []
            if self.skip_tools and terminal in markup.exit_terminals:
                s.in_skipped_calls = False
            return self._text(text)
        if self.skip_reasoning and terminal in markup.reasoning_markup:
            return self._text(text)
        if (
            self.skip_tools
            and terminal in markup.tool_terminals
            and self._skips(terminal, transition)
        ):
            # The marker passes as text; leaving a header drops what it held.
            leaving_header = s.state == HEADER
            if leaving_header:
                s.take_header()
            if REASONING_END in transition.events:
                s.state = CONTENT
                return [Event(REASONING_END, text, s.tool_index), Event(TEXT, text, s.tool_index)]
            if leaving_header:
                s.state = CONTENT
            return self._text(text)
        header = s.take_header() if s.state == HEADER else None
        s.state = transition.next_state
        events = []
        for kind in transition.events:
            if kind == CALL_START:
                s.tool_index += 1
            value = header if header is not None and kind == TEXT else text
            if kind == TEXT and not value:
                continue
            events.append(Event(kind, value, s.tool_index))
        return events
