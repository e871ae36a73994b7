"""A response template's delimiters, compiled once at start-up and matched as text grows.

vLLM's response-template parser (``vllm/parser/chat_parsing``) finds a region's opener
and closer with the ``regex`` module: leftmost match, held back while it may still be
partial or grow. A backtracking search over held text costs quadratic time on hostile
output, so here each delimiter is a small automaton run thread by thread (a Pike VM):
every character is read once per thread alive on it, and threads are bounded by the
pattern's size. Priority order among threads gives the same match a backtracking engine
gives (leftmost, then the first alternative, greedy loops).

The patterns read are the regular subset templates use: literals and escapes, classes
(``[...]``, ``\\s \\w \\d`` and their negations, ``.``), groups ``(?:...)`` and named
``(?P<name>...)``, alternation, and ``* + ?`` (greedy or lazy). Anything else (anchors,
lookaround, back-references, counted or possessive repeats) is refused at start-up, as is
a pattern that matches the empty string.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from msgspec import Struct, field

_CHAR_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v"}


class PatternError(ValueError):
    """A pattern outside the subset this server reads."""


@dataclass(frozen=True, slots=True)
class CharSet:
    """Characters a step accepts: ``chars`` plus ``kinds`` (``s``, ``w``, ``d``,
    ``any``), or everything but them when ``negated``."""

    chars: frozenset[str]
    kinds: frozenset[str] = frozenset()
    negated: bool = False

    def accepts(self, ch: str) -> bool:
        if ch in self.chars:
            return not self.negated
        for kind in self.kinds:
            if _kind(kind, ch):
                return not self.negated
        return self.negated


def _kind(kind: str, ch: str) -> bool:
    if kind == "any":
        return True
    if kind == "w":
        return ch.isalnum() or ch == "_"
    if kind == "d":
        return ch.isdecimal()
    return ch.isspace()


@dataclass(frozen=True, slots=True)
class Instruction:
    """One program step: ``char`` (read a character of ``charset``, go to ``targets[0]``),
    ``split`` (go to each of ``targets``, in priority order), ``save`` (note the position
    in group slot ``slot``, go to ``targets[0]``) or ``match``."""

    op: str
    targets: tuple[int, ...] = ()
    charset: CharSet | None = None
    slot: int = -1


_MATCH = Instruction("match")


@dataclass(frozen=True, slots=True)
class Pattern:
    """A compiled delimiter: its program, its named groups (slot pairs by name), and
    whether it is a list of literals (a literal match at the text's end is final unless
    another literal extends it)."""

    source: str
    program: tuple[Instruction, ...]
    groups: tuple[str, ...]
    literal: bool
    can_extend: bool
    # How to skip text no match can start in; None when any character may lead one.
    skip: Skip | None


@dataclass(frozen=True, slots=True)
class Skip:
    """Where a match may start. A match reads characters ``lead`` matches (a leading
    loop such as ``\\s*``; None: none) and then one of ``first`` (a class searched in
    bulk), so none starts before the run of ``lead`` characters just ahead of the next
    ``first`` character."""

    first: re.Pattern[str]
    lead: re.Pattern[str] | None


def literal_pattern(literals: list[str]) -> Pattern:
    """Literals, the longest tried first (as vLLM orders them)."""
    ordered = sorted(literals, key=len, reverse=True)
    source = "|".join(_escape(text) for text in ordered)
    can_extend = any(a != b and a.startswith(b) for a in literals for b in literals)
    pattern = compile_pattern(source)
    return Pattern(source, pattern.program, (), True, can_extend, pattern.skip)


def _escape(text: str) -> str:
    return "".join("\\" + ch if not ch.isalnum() and ch != "_" else ch for ch in text)


def compile_pattern(source: str) -> Pattern:
    """``source`` compiled, or PatternError naming what it uses that is not read."""
    parser = _Parser(source)
    node = parser.alternation()
    if parser.at < len(source):
        raise PatternError(f"unbalanced ')' at {parser.at} in {source!r}")
    builder = _Builder(parser.groups)
    start = builder.emit(node, builder.reserve_match())
    program = builder.finish(start)
    if _matches_empty(program):
        raise PatternError(f"{source!r} matches the empty string")
    skip = _skip(program)
    return Pattern(source, program, tuple(parser.groups), False, False, skip)


# Syntax tree: ("lit", CharSet) | ("cat", [nodes]) | ("alt", [nodes])
# | ("rep", node, min, max (None: unbounded), greedy) | ("group", name|None, node)
Node = tuple[object, ...]


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.at = 0
        self.groups: list[str] = []

    def _peek(self) -> str | None:
        return self.source[self.at] if self.at < len(self.source) else None

    def _refuse(self, what: str) -> PatternError:
        return PatternError(f"{what} at {self.at} in {self.source!r} is not read")

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self) -> Node:
        items: list[Node] = []
        while (ch := self._peek()) is not None and ch not in "|)":
            atom = self.atom()
            items.append(self.quantified(atom))
        return ("cat", items)

    def quantified(self, atom: Node) -> Node:
        ch = self._peek()
        if ch not in ("*", "+", "?"):
            if ch == "{":
                raise self._refuse("a counted repeat")
            return atom
        self.at += 1
        greedy = self._peek() != "?"
        if not greedy:
            self.at += 1
        if self._peek() in ("*", "+", "?", "{"):
            raise self._refuse("a possessive or repeated repeat")
        low = 1 if ch == "+" else 0
        high = 1 if ch == "?" else None
        return ("rep", atom, low, high, greedy)

    def atom(self) -> Node:
        ch = self.source[self.at]
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("lit", self.char_class())
        if ch == "\\":
            return ("lit", self.escape(in_class=False))
        if ch == ".":
            self.at += 1
            return ("lit", CharSet(frozenset(), frozenset({"any"})))
        if ch in "^$":
            raise self._refuse("an anchor")
        if ch in "*+?{":
            raise self._refuse("a repeat of nothing")
        self.at += 1
        return ("lit", CharSet(frozenset(ch)))

    def group(self) -> Node:
        rest = self.source[self.at :]
        name: str | None = None
        if rest.startswith("(?:"):
            self.at += 3
        elif rest.startswith("(?P<"):
            end = rest.find(">")
            if end < 0:
                raise self._refuse("an unnamed group")
            name = rest[4:end]
            if not name.isidentifier() or name in self.groups:
                raise self._refuse(f"the group name {name!r}")
            self.groups.append(name)
            self.at += end + 1
        elif rest.startswith("(?"):
            raise self._refuse("a group kind other than (?:...) and (?P<name>...)")
        else:
            self.at += 1
        node = self.alternation()
        if self._peek() != ")":
            raise self._refuse("an unclosed group")
        self.at += 1
        return ("group", name, node)

    def escape(self, *, in_class: bool) -> CharSet:
        if self.at + 1 >= len(self.source):
            raise self._refuse("a trailing backslash")
        ch = self.source[self.at + 1]
        self.at += 2
        lower = ch.lower()
        if lower in ("s", "w", "d"):
            return CharSet(frozenset(), frozenset({lower}), ch.isupper())
        if ch in _CHAR_ESCAPES:
            return CharSet(frozenset(_CHAR_ESCAPES[ch]))
        if ch.isalnum():
            self.at -= 2
            raise self._refuse(f"the escape \\{ch}")
        return CharSet(frozenset(ch))

    def char_class(self) -> CharSet:
        self.at += 1
        negated = self._peek() == "^"
        if negated:
            self.at += 1
        chars: set[str] = set()
        kinds: set[str] = set()
        first = True
        while True:
            ch = self._peek()
            if ch is None:
                raise self._refuse("an unclosed class")
            if ch == "]" and not first:
                self.at += 1
                break
            first = False
            if ch == "\\":
                part = self.escape(in_class=True)
                if part.negated:
                    raise self._refuse("a negated escape inside a class")
                chars |= part.chars
                kinds |= part.kinds
                continue
            self.at += 1
            ranged = self._peek() == "-" and self.at + 1 < len(self.source)
            if ranged and self.source[self.at + 1] != "]":
                high = self.source[self.at + 1]
                if high == "\\" or ord(high) < ord(ch) or ord(high) - ord(ch) > 4096:
                    raise self._refuse("a range")
                chars |= {chr(c) for c in range(ord(ch), ord(high) + 1)}
                self.at += 2
                continue
            chars.add(ch)
        return CharSet(frozenset(chars), frozenset(kinds), negated)


class _Builder:
    """Emits instructions back to front: each node is compiled knowing its successor."""

    def __init__(self, groups: list[str]) -> None:
        self.program: list[Instruction | None] = []
        self.groups = groups

    def reserve_match(self) -> int:
        self.program.append(_MATCH)
        return 0

    def _add(self, instruction: Instruction | None) -> int:
        self.program.append(instruction)
        return len(self.program) - 1

    def emit(self, node: Node, after: int) -> int:
        kind = node[0]
        if kind == "lit":
            return self._add(Instruction("char", (after,), node[1]))  # type: ignore[arg-type]
        if kind == "cat":
            items: list[Node] = node[1]  # type: ignore[assignment]
            for item in reversed(items):
                after = self.emit(item, after)
            return after
        if kind == "alt":
            branches: list[Node] = node[1]  # type: ignore[assignment]
            starts = tuple(self.emit(branch, after) for branch in branches)
            return self._add(Instruction("split", starts))
        if kind == "group":
            name = node[1]
            if name is None:
                return self.emit(node[2], after)  # type: ignore[arg-type]
            slot = 2 * self.groups.index(name)  # type: ignore[arg-type]
            close = self._add(Instruction("save", (after,), slot=slot + 1))
            body = self.emit(node[2], close)  # type: ignore[arg-type]
            return self._add(Instruction("save", (body,), slot=slot))
        # ("rep", atom, low, high, greedy): a greedy repeat tries the atom first.
        atom: Node = node[1]  # type: ignore[assignment]
        low, high, greedy = node[2], node[3], node[4]

        def choice(body: int) -> Instruction:
            return Instruction("split", (body, after) if greedy else (after, body))

        if high == 1:  # x?
            return self._add(choice(self.emit(atom, after)))
        loop = self._add(None)  # the split that repeats, filled once the body exists
        body = self.emit(atom, loop)
        self.program[loop] = choice(body)
        return body if low == 1 else loop

    def finish(self, start: int) -> tuple[Instruction, ...]:
        # Put the start first so a program reads from instruction 0.
        order = [start] + [i for i in range(len(self.program)) if i != start]
        renumber = {old: new for new, old in enumerate(order)}

        def moved(instruction: Instruction | None) -> Instruction:
            assert instruction is not None
            targets = tuple(renumber[t] for t in instruction.targets)
            return dataclasses.replace(instruction, targets=targets)

        return tuple(moved(self.program[old]) for old in order)


def _skip(program: tuple[Instruction, ...]) -> Skip | None:
    """The first steps of a match split in two: those that come back to where a match
    starts (a leading loop) and the rest, whose characters are searched as one class (a
    single class searched is linear). None when one of those is a negated class or any
    character."""
    start = _closure(program, 0)
    first = CharSet(frozenset())
    lead: list[str] = []
    for pc in sorted(start):
        step = program[pc]
        charset = step.charset
        assert charset is not None
        if _closure(program, step.targets[0]) == start:
            lead.append(_class(charset))
            continue
        if charset.negated or "any" in charset.kinds:
            return None
        first = CharSet(first.chars | charset.chars, first.kinds | charset.kinds)
    return Skip(re.compile(_class(first)), re.compile("|".join(lead)) if lead else None)


def joined_skip(patterns: Sequence[Pattern]) -> Skip | None:
    """Where any of ``patterns`` may start (an alternation of one-character classes:
    still one step per character), or None when one may start anywhere."""
    skips = [pattern.skip for pattern in patterns]
    if not skips or any(skip is None for skip in skips):
        return None
    first = "|".join(skip.first.pattern for skip in skips if skip is not None)
    lead = "|".join(skip.lead.pattern for skip in skips if skip is not None and skip.lead)
    return Skip(re.compile(first), re.compile(lead) if lead else None)


def _class(charset: CharSet) -> str:
    """``charset`` as a one-character regular expression (a class: read in one step, so
    searched linearly; ``re``'s ``\\s \\w \\d`` on text are ``str.isspace``, ``isalnum``
    or ``_``, and ``isdecimal``, as CharSet reads them)."""
    if "any" in charset.kinds:
        body = "\\s\\S"
    else:
        body = "".join(re.escape(ch) for ch in sorted(charset.chars))
        body += "".join("\\" + kind for kind in sorted(charset.kinds))
    return "[" + ("^" if charset.negated else "") + body + "]"


def _closure(program: tuple[Instruction, ...], pc: int) -> frozenset[int]:
    """The character and match steps reached from ``pc`` without reading."""
    reached: set[int] = set()
    seen: set[int] = set()
    stack = [pc]
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        step = program[pc]
        if step.op in ("split", "save"):
            stack.extend(step.targets)
        else:
            reached.add(pc)
    return frozenset(reached)


def _matches_empty(program: tuple[Instruction, ...]) -> bool:
    seen: set[int] = set()
    stack = [0]
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        step = program[pc]
        if step.op == "match":
            return True
        if step.op in ("split", "save"):
            stack.extend(step.targets)
    return False


class Found(Struct, array_like=True):
    """A complete match: where it starts and ends, and its group slots (-1: unset)."""

    start: int
    end: int
    slots: list[int]


class Thread(Struct, array_like=True):
    pc: int
    start: int
    slots: list[int]


class ScanState(Struct):
    """One pattern's search from ``origin``, read up to ``read``: its live threads in
    priority order and the best complete match so far (a live thread outranks it)."""

    origin: int = 0
    read: int = 0
    threads: list[Thread] = field(default_factory=list)
    found: Found | None = None


def start_scan(at: int) -> ScanState:
    return ScanState(origin=at, read=at)


class Scanner:
    """Runs one pattern's search over text that grows; ``text`` starts at absolute
    position ``base``."""

    def __init__(self, pattern: Pattern, state: ScanState) -> None:
        self.pattern = pattern
        self.s = state

    def _add(
        self, out: list[Thread], seen: set[int], pc: int, start: int, slots: list[int], at: int
    ) -> bool:
        """Follow ``pc``'s empty steps into ``out``; True when one reaches a match (then
        the threads after it in priority can never win, and are not added)."""
        program = self.pattern.program
        stack: list[tuple[int, list[int]]] = [(pc, slots)]
        while stack:
            pc, slots = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            step = program[pc]
            if step.op == "char":
                out.append(Thread(pc, start, slots))
            elif step.op == "split":
                stack.extend((t, slots) for t in reversed(step.targets))
            elif step.op == "save":
                copied = list(slots)
                copied[step.slot] = at
                stack.append((step.targets[0], copied))
            else:
                self.s.found = Found(start, at, slots)
                return True
        return False

    def read(self, text: str, base: int, end: int, limit: int) -> None:
        """Advance the search over ``text`` (which ends at absolute position ``end``):
        each position before ``limit`` seeds a search (lowest in priority) until a match
        is found; threads that started before ``limit`` are followed past it until they
        end, and every position they pass seeds one too, so the search has always seeded
        every position it has read (one read later never skips a start). The search
        stops once nothing can outrank its match."""
        s = self.s
        pattern = self.pattern
        program = pattern.program
        slots0 = [-1] * (2 * len(pattern.groups))
        at = s.read
        threads = s.threads
        # Characters a step (seed included) leaves the threads unchanged by: a run of
        # them, such as white space a leading ``\s*`` loop reads, is passed over.
        steady: set[str] = set()
        while at < end:
            early = bool(threads) and min(t.start for t in threads) < limit
            if s.found is None and at >= limit and not early:
                break  # read and seeded up to here: a later read seeds on from here
            if steady:
                stop = end if s.found is not None or early else min(end, limit)
                at = _past_run(text, base, at, stop, "".join(steady))
                if at == stop:
                    continue
            before, found = list(threads), s.found
            if found is None:
                if not threads and pattern.skip is not None:
                    at = _next_start(pattern.skip, text, base, at, min(end, limit))
                    if at == min(end, limit):
                        continue
                self._add(threads, {t.pc for t in threads}, 0, at, slots0, at)
            elif not threads:
                break
            ch = text[at - base]
            nxt: list[Thread] = []
            seen: set[int] = set()
            for thread in threads:
                step = program[thread.pc]
                charset = step.charset
                assert charset is not None
                if charset.accepts(ch) and self._add(
                    nxt, seen, step.targets[0], thread.start, thread.slots, at + 1
                ):
                    break
            if s.found is found and nxt == before:
                steady.add(ch)
            else:
                steady.clear()
            threads = nxt
            at += 1
        s.threads = threads
        s.read = at

    def result_start(self, eos: bool) -> int | None:
        """Where this search's leftmost result so far starts (a running thread outranks
        a match, unless the text has ended), or None."""
        s = self.s
        if s.threads and not eos:
            return min(t.start for t in s.threads)
        return s.found.start if s.found is not None else None

    def captures(self, text: str, base: int) -> dict[str, str]:
        found = self.s.found
        assert found is not None
        out: dict[str, str] = {}
        for index, name in enumerate(self.pattern.groups):
            lo, hi = found.slots[2 * index], found.slots[2 * index + 1]
            if lo >= 0 and hi >= 0:
                out[name] = text[lo - base : hi - base]
        return out


def _next_start(skip: Skip, text: str, base: int, at: int, bound: int) -> int:
    """The first position from ``at`` where a match may start, or ``bound`` when none
    before it may (a leading loop's run that reaches ``bound`` may start one that ends
    past it). Characters walked back over are then read forward once, so the search
    stays linear."""
    hit = skip.first.search(text, at - base, bound - base)
    start = bound if hit is None else hit.start() + base
    lead = skip.lead
    if lead is not None:
        while start > at and lead.match(text, start - 1 - base):
            start -= 1
    return start


def _past_run(text: str, base: int, at: int, stop: int, chars: str) -> int:
    """The first position from ``at`` (before ``stop``) of a character not in ``chars``,
    or ``stop``. Read in pieces that double, so a short run costs little more than its
    length and a long one is stripped at C speed."""
    size = 16
    while at < stop:
        piece = text[at - base : min(stop, at + size) - base]
        rest = len(piece.lstrip(chars))
        at += len(piece) - rest
        if rest:
            break
        size *= 2
    return at


def search_all(pattern: Pattern, text: str) -> list[tuple[Found, dict[str, str]]]:
    """Every match in ``text``, left to right without overlap (``finditer``), with its
    groups that took part."""
    matches = []
    at = 0
    while at < len(text):
        scanner = Scanner(pattern, start_scan(at))
        scanner.read(text, 0, len(text), len(text))
        found = scanner.s.found
        if found is None:
            break
        matches.append((found, scanner.captures(text, 0)))
        at = found.end
    return matches
