"""Olmo 3's tool calls (``olmo3``): pythonic calls, one per line, in ``<function_calls>``.

Olmo 3 writes ``<function_calls>`` then one call per line (``f(a=1)``, JSON's
``null``/``true``/``false`` allowed) then ``</function_calls>``, all in ordinary tokens.
vLLM 0.33.0 reads the lines as the ``pythonic`` list their stripped, non-empty lines
joined with ``", "`` make:

* one-shot: the first ``<function_calls>`` ... ``</function_calls>`` (stripped) is the
  body, else the whole output; its lines, joined and bracketed, must be a list of calls,
  else the whole output is content (text around the markers is dropped when they parse);
* streamed: an output not opening with ``<`` is content. One that does is parsed as the
  text after a leading ``<function_calls>`` (a ``</function_calls>`` ending the text so
  far left out): vLLM closes that text's open brackets (its closing heuristics read
  the text itself), joins its lines and reads the list as ``pythonic`` streams it.
  The text must parse both as Python and as the joined list, so an indented line, a
  line break inside brackets before anything but a closer, a quote left open at a line
  break, or anything after ``</function_calls>`` stops the calls for good; an output
  opening with ``<`` but not ``<function_calls>`` sends nothing at all.

The pythonic scanner (parsers/families/pythonic.py) reads the joined text, fed as the
lines arrive; the commas the join adds are hidden from its closing heuristics, which
see the text as written.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct, field

from parsers.families.pythonic import PythonicState, PythonicStream, PythonicTools
from parsers.family import Request, Tools, reuse
from parsers.types import Delta, ExtractedToolCalls, Vocabulary

OPEN = "<function_calls>"
CLOSE = "</function_calls>"
# ``str.splitlines`` breaks lines at these; Python's tokenizer only at \n and \r (and
# reads \f as a space): the others are no Python outside a string.
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_PYTHON_BREAKS = frozenset("\n\r\f")
_QUOTES = frozenset("'\"")


def joined_lines(text: str) -> str:
    """The list vLLM parses: ``text``'s stripped non-empty lines, comma-joined, bracketed."""
    return "[" + ", ".join(line.strip() for line in text.splitlines() if line.strip()) + "]"


class Olmo3Tools:
    supports_required_and_named = True

    def extract(self, content: str, id_seed: str) -> ExtractedToolCalls:
        body = content
        start = content.find(OPEN)
        if start >= 0:
            end = content.find(CLOSE, start + len(OPEN))
            if end >= 0:
                body = content[start + len(OPEN) : end].strip()
        found = PythonicTools().extract(joined_lines(body), id_seed)
        return found if found.tools_called else ExtractedToolCalls(False, [], content)


class Olmo3ToolState(Struct, tag="olmo3_tools"):
    """Where a streamed output stands; plain data, so it snapshots.

    ``phase``: ``start`` while the text so far is empty or a proper prefix of
    ``<function_calls>``, ``content`` (no ``<`` first), ``silent`` (a ``<`` that opens
    no ``<function_calls>``), ``calls`` once the body is read. The body's lines: whether
    the current one has shown content, and some earlier one did; the spaces after its
    last content (sent if more content follows on the line); whether it opened with a
    space, whether only a closer may come (a line break inside brackets), and whether a
    comma opened it (nothing may follow that but the closing marker). The body's
    open quote and bracket depth as vLLM's closing reads them; ``marker``: a
    ``</function_calls>`` (or the start of one) held out of the body.
    """

    phase: str = "start"
    head: str = ""
    line_content: bool = False
    any_line: bool = False
    spaces: list[str] = field(default_factory=list)
    indented: bool = False
    closer_only: bool = False
    comma_held: bool = False
    quote: str = ""
    backslashes: int = 0
    depth: int = 0
    marker: str = ""
    pythonic: PythonicState = field(default_factory=PythonicState)


class _Joined:
    """One chunk's part of the joined text, and which of its characters the join added."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.synthetic: set[int] = set()

    def add(self, text: str, *, synthetic: bool = False) -> None:
        if synthetic:
            self.synthetic.update(range(self.size, self.size + len(text)))
        self.parts.append(text)
        self.size += len(text)


class Olmo3ToolStream:
    """Olmo 3's calls streamed as vLLM streams them, at O(delta) per delta."""

    engine_based = False
    supports_required_and_named = True

    def __init__(
        self,
        id_seed: str,
        state: Olmo3ToolState | None = None,
        token_text: Callable[[int], str] | None = None,
    ) -> None:
        self.s = state if state is not None else Olmo3ToolState()
        self.pythonic = PythonicStream(id_seed, self.s.pythonic, token_text, implied_list=True)

    def stream(self, text: str, token_ids: list[int] | None = None) -> Delta | None:
        s = self.s
        if s.phase == "start":
            return self._start(text, token_ids)
        if s.phase == "content":
            return Delta(content=text)
        if s.phase == "silent":
            return None
        return self._read(text, self.pythonic.token_boundaries(text, token_ids))

    def finish(self) -> Delta | None:
        return self.pythonic.finish() if self.s.phase == "calls" else None

    def remaining_arguments(self) -> str:
        return self.pythonic.remaining_arguments() if self.s.phase == "calls" else ""

    def _start(self, text: str, token_ids: list[int] | None) -> Delta | None:
        s = self.s
        head = s.head + text
        if not head.startswith("<"):
            s.phase = "content" if head else "start"
            return Delta(content=text)
        if not head.startswith(OPEN):
            s.head, s.phase = (head, "start") if OPEN.startswith(head) else ("", "silent")
            return None
        skip = len(OPEN) - len(s.head)
        s.phase, s.head = "calls", ""
        self.pythonic.stream("[")  # the list the join brackets the lines in
        ends = self.pythonic.token_boundaries(text, token_ids)
        return self._read(text[skip:], [end - skip for end in ends if end > skip])

    def _read(self, text: str, boundaries: list[int]) -> Delta | None:
        """Join the body's lines as they come and let the pythonic scanner read them."""
        s = self.s
        joined = _Joined()
        ends: list[int] = []
        quiet: set[int] = set()
        parses = not self.pythonic.s.dead
        start = 0
        for end in boundaries:
            for ch in text[start:end]:
                parses = parses and self._char(ch, joined)
            start = end
            ends.append(joined.size)
            if not parses or (s.marker and s.marker != CLOSE):
                quiet.add(len(ends) - 1)
        body = "".join(joined.parts)
        self.pythonic.read(body, ends, frozenset(joined.synthetic), frozenset(quiet))
        if not parses:
            self.pythonic.s.dead = True
        if s.marker and s.marker != CLOSE:
            return None  # vLLM cannot parse text that ends in half the closing marker
        return self.pythonic.chunk_end()

    def _char(self, ch: str, joined: _Joined) -> bool:
        """One character of the body; False once vLLM can never parse the body again."""
        s = self.s
        if s.marker:
            if s.marker == CLOSE or not CLOSE.startswith(s.marker + ch):
                return False  # text after the closing marker, or a ``<`` in no call
            s.marker += ch
            return True
        if ch in _LINE_BREAKS:
            if not self._line_break(ch):
                return False
        elif ch.isspace():
            if s.line_content:
                s.spaces.append(ch)
            else:
                s.indented = True
        elif not self._content(ch, joined):
            return False
        self._track(ch)
        return True

    def _line_break(self, ch: str) -> bool:
        s = self.s
        if s.quote:
            # A one-line string open at a line break: vLLM strips the break off the
            # end of the text, and nothing may follow it.
            s.closer_only = s.closer_only or ch in "\r\n"
        elif ch not in _PYTHON_BREAKS:
            return False
        else:
            s.closer_only = s.closer_only or s.depth > 0 or ch == "\f"
        s.line_content, s.spaces, s.indented = False, [], False
        return True

    def _content(self, ch: str, joined: _Joined) -> bool:
        s = self.s
        if ch == "<" and not s.quote:
            s.marker = ch  # vLLM cuts a closing marker off the end of the text
            return True
        if s.comma_held or (s.closer_only and (s.quote or ch not in ")]}")):
            # Python reads no comma the join adds, nor a broken string; a comma
            # opening a line parses only while vLLM drops it from the end.
            return False
        if not s.quote and s.depth == 0:
            if ch == "," and not s.line_content:
                s.comma_held = True
                return True
            if (s.indented and not s.line_content) or ch in ")]}":
                return False  # an indented line, or a closer with nothing open
        if s.line_content:
            joined.add("".join(s.spaces))
        elif s.any_line:
            joined.add(", ", synthetic=True)
        joined.add(ch)
        s.line_content = s.any_line = True
        s.spaces, s.closer_only = [], False
        return True

    def _track(self, ch: str) -> None:
        """Follow the body's open quote and bracket depth, as vLLM's closing does."""
        s = self.s
        if s.marker:
            return
        if s.quote:
            if ch == s.quote and s.backslashes % 2 == 0:
                s.quote = ""
        elif ch in _QUOTES:
            s.quote = ch
        elif ch in "([{":
            s.depth += 1
        elif ch in ")]}":
            s.depth -= 1
        s.backslashes = s.backslashes + 1 if ch == "\\" else 0


# ------------------------------------------------------------------ the declaration

TokenText = Callable[[int], str]


def _stream(
    token_text: TokenText, request: Request, kept: object
) -> tuple[Olmo3ToolStream, Olmo3ToolState]:
    state = reuse(kept, Olmo3ToolState)
    return Olmo3ToolStream(request.id_seed, state, token_text), state


def _token_text(_: str, vocab: Vocabulary) -> TokenText:
    return vocab.token_text


TOOLS = Tools(
    names=("olmo3",),
    engine_based=False,
    states=(Olmo3ToolState,),
    prepare=_token_text,
    one_shot=lambda _, request: Olmo3Tools(),
    stream=_stream,
    golden=("B1", "B2"),
)
