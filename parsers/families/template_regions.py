"""An assistant message read region by region with its response template, as text grows.

What vLLM's ``ResponseParser`` does, step for step: outside any explicit region the
openers of every field (and the implicit field's closer) are searched; inside one, only
its closer. The earliest delimiter that can no longer change is taken (the longest on a
tie, an opener before a closer, then by field name); text before a delimiter that may
still be partial, or still grow, is held. Text goes to the open region as it is read;
the implicit field opens on its first character. A region's value is read when it
closes (template_values.py).

Each delimiter's search keeps its threads between chunks (template_patterns.py), so a
character is read once per search that is running over it; the text kept is only what
is held (a delimiter's possible start onward) and the body of an open call region.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from msgspec import Struct, field

from parsers.families.response_template import Field, Template
from parsers.families.template_patterns import (
    Pattern,
    Scanner,
    ScanState,
    Skip,
    joined_skip,
    start_scan,
)
from parsers.families.template_values import Malformed, coerce_calls, region_value

# The first stretch each delimiter search reads before the searches are compared.
_FIRST_STRETCH = 64


class Event(NamedTuple):
    """``chunk``: text read into ``field``; ``open``/``close``/``malformed``: a region's
    bounds, with the delimiter text it consumed (from the end of the prompt on);
    ``value``: a closed region's value."""

    kind: str
    field: str
    text: str
    value: Any = None


class Watch(NamedTuple):
    """A delimiter search: its key in the state's scans, whether it opens or closes,
    its field, and its pattern."""

    key: str
    kind: str
    field: Field
    pattern: Pattern


class Searches(NamedTuple):
    """The delimiter searches while a region is open, and where any of them may start
    (None: anywhere)."""

    watch: list[Watch]
    skip: Skip | None


class RegionState(Struct, tag="template_regions"):
    """Everything the reader keeps: the held text (from absolute position ``base``),
    the reading position, where the prompt's text ends, the open region and its
    captures and body (kept only for regions read as a value), and each running
    delimiter search by ``kind:field``."""

    text: str = ""
    base: int = 0
    pos: int = 0
    prompt_end: int = 0
    current: str | None = None
    opened: bool = False
    captures: dict[str, str] = {}
    body: list[str] = field(default_factory=list)
    scans: dict[str, ScanState] = {}
    started: bool = False


class RegionReader:
    """Reads text into region events with ``template``; ``properties`` are the request's
    tools' parameter properties by name (string arguments are coerced to them)."""

    def __init__(
        self, template: Template, properties: dict[str, dict[str, Any]], state: RegionState
    ) -> None:
        self.template = template
        self.properties = properties
        self.s = state
        # The searches to run by open region (None: none open), built on first use.
        self._watches: dict[str | None, Searches] = {}
        if not state.started:
            state.started = True
            state.current = template.implicit

    @property
    def end(self) -> int:
        return self.s.base + len(self.s.text)

    def prompt(self, prefix: str) -> None:
        """Read the prompt's part of the message (its text after the last start anchor,
        or all of it without one); its events are the prompt's, not the output's."""
        last = -1
        for anchor in self.template.anchors:
            at = prefix.rfind(anchor)
            if at >= 0:
                last = max(last, at + len(anchor))
        tail = prefix[last:] if last >= 0 else prefix
        if not tail:
            return
        self._append(tail)
        self._process([], eos=False)
        self.s.prompt_end = self.end
        self._trim()

    def feed(self, text: str) -> list[Event]:
        events: list[Event] = []
        self._append(text)
        self._process(events, eos=False)
        self._trim()
        return events

    def finish(self) -> list[Event]:
        events: list[Event] = []
        self._process(events, eos=True)
        self._trim()
        return events

    @property
    def read_output(self) -> bool:
        """Whether any output text has been read past the prompt's."""
        return self.end > self.s.prompt_end

    def _append(self, text: str) -> None:
        """Held text that waits on a delimiter grows in place, not copied per chunk."""
        s = self.s
        held, s.text = s.text, ""  # the only reference: += grows it in place
        held += text
        s.text = held

    def _trim(self) -> None:
        """Drop text before the reading position: nothing reads it again."""
        s = self.s
        if s.pos > s.base:
            s.text = s.text[s.pos - s.base :]
            s.base = s.pos

    def _watch(self) -> Searches:
        current = self.s.current
        searches = self._watches.get(current)
        if searches is None:
            watch = self._searches(current)
            searches = self._watches[current] = Searches(
                watch, joined_skip([w.pattern for w in watch])
            )
        return searches

    def _searches(self, current: str | None) -> list[Watch]:
        """The delimiter searches while ``current`` is open, keyed ``kind:field``."""
        template = self.template
        if current is not None and current != template.implicit:
            f = template.field(current)
            return [Watch(f"close:{f.name}", "close", f, f.closer)] if f.closer else []
        watch = [
            Watch(f"open:{f.name}", "open", f, f.opener)
            for f in template.fields
            if f.opener is not None
        ]
        if template.implicit is not None:
            implicit = template.field(template.implicit)
            if implicit.closer is not None:
                watch.append(Watch(f"close:{implicit.name}", "close", implicit, implicit.closer))
        return watch

    def _scan(self, searches: Searches, eos: bool) -> tuple[tuple[str, Field, Scanner] | None, int]:
        """The delimiter to take now (or None) and where held text starts."""
        s = self.s
        end = self.end
        hold = end
        watch = searches.watch
        if not eos and self._plain(searches):
            for key, _, _, _ in watch:
                state = s.scans.get(key)
                if state is None:
                    state = s.scans[key] = start_scan(s.pos)
                state.read = end
            return None, end
        best: tuple[str, Field, Scanner] | None = None
        best_key: tuple[int, int, int, str] | None = None
        scanners = []
        for key, kind, f, pattern in watch:
            state = s.scans.get(key)
            if state is None:
                state = s.scans[key] = start_scan(s.pos)
            scanners.append((kind, f, pattern, Scanner(pattern, state)))
        # Read every search a doubling stretch at a time until one has a result: the
        # text past the first delimiter is read again after it is taken, so reading far
        # beyond it would cost the rest of the text per delimiter. A result is the
        # leftmost once every search without a match has read past its start (a search
        # may have read further than another, following a thread that began before the
        # stretch's end); until then every search reads to just past it.
        limit, stretch = min(end, s.pos + _FIRST_STRETCH), _FIRST_STRETCH
        while True:
            for _, _, _, scanner in scanners:
                scanner.read(s.text, s.base, end, limit)
            if limit >= end:
                break
            starts = [x for _, _, _, sc in scanners if (x := sc.result_start(eos)) is not None]
            if starts:
                first = min(starts)
                if all(sc.s.found is not None or sc.s.read > first for *_, sc in scanners):
                    break
                limit = first + 1
            else:
                stretch *= 2
                limit = min(end, limit + stretch)
        for kind, f, pattern, scanner in scanners:
            state = scanner.s
            found = state.found
            if not eos:
                if state.threads:
                    hold = min(hold, min(t.start for t in state.threads))
                    continue
                if (
                    found is not None
                    and found.end == end
                    and (not pattern.literal or pattern.can_extend)
                ):
                    hold = min(hold, found.start)
                    continue
            if found is None:
                continue
            rank = (found.start, found.start - found.end, 0 if kind == "open" else 1, f.name)
            if best_key is None or rank < best_key:
                best_key, best = rank, (kind, f, scanner)
        if best is not None and best[2].s.found is not None and best[2].s.found.start >= hold:
            best = None
        return best, hold

    def _plain(self, searches: Searches) -> bool:
        """Whether the text from the reading position is plain to every search: each
        idle there, and no character of it where one may start (so each would read it
        to the end and stay idle)."""
        s = self.s
        skip = searches.skip
        if skip is None or s.pos == self.end:
            return False
        for key, _, _, _ in searches.watch:
            state = s.scans.get(key)
            if state is not None and (
                state.threads or state.found is not None or state.read != s.pos
            ):
                return False
        at = s.pos - s.base
        if skip.first.search(s.text, at) is not None:
            return False
        return skip.lead is None or skip.lead.match(s.text, len(s.text) - 1) is None

    def _process(self, events: list[Event], eos: bool) -> None:
        s = self.s
        while True:
            best, hold = self._scan(self._watch(), eos)
            if best is not None:
                kind, f, scanner = best
                found = scanner.s.found
                assert found is not None
                if found.start > s.pos:
                    self._accumulate(events, s.text[s.pos - s.base : found.start - s.base])
                captures = scanner.captures(s.text, s.base)
                s.pos = found.end
                s.scans = {}
                if kind == "open":
                    self._close(events, found.start, found.start)
                    s.current = f.name
                    s.captures = captures
                    s.body = []
                    s.opened = True
                    events.append(Event("open", f.name, self._span(found.start, found.end)))
                else:
                    self._close(events, found.start, found.end)
                continue
            if eos:
                if s.pos < self.end:
                    self._accumulate(events, s.text[s.pos - s.base :])
                    s.pos = self.end
                self._close(events, s.pos, s.pos)
                return
            if hold > s.pos:
                self._accumulate(events, s.text[s.pos - s.base : hold - s.base])
                s.pos = hold
            return

    def _span(self, start: int, end: int) -> str:
        """A delimiter's text from the end of the prompt on."""
        s = self.s
        start = max(start, s.prompt_end)
        return s.text[start - s.base : end - s.base] if end > start else ""

    def _accumulate(self, events: list[Event], text: str) -> None:
        s = self.s
        if not text or s.current is None:
            return
        if not s.opened:
            events.append(Event("open", s.current, ""))
            s.opened = True
        f = self.template.field(s.current)
        if f.content != "text":
            s.body.append(text)
        visible = text[max(0, s.prompt_end - s.pos) :]
        if visible:
            events.append(Event("chunk", s.current, visible))

    def _close(self, events: list[Event], start: int, end: int) -> None:
        s = self.s
        name = s.current
        if name is not None and s.opened:
            f = self.template.field(name)
            span = self._span(start, end)
            if f.content == "text":
                events.append(Event("close", name, span))
            else:
                try:
                    value = region_value("".join(s.body), f, s.captures)
                    if self.properties:
                        value = coerce_calls(value, self.properties)
                    events.append(Event("close", name, span, value))
                except Malformed:
                    events.append(Event("malformed", name, span))
        s.current = self.template.implicit
        s.captures = {}
        s.body = []
        s.opened = False
