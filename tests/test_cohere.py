"""Cohere Command's filter where the shared harnesses do not look: where a call's
parameters end by serde_json's rules, citation spans, and the held text staying bounded.

The expected values are what vLLM 0.33.0's filter (``cohere_melody`` 0.15.3) gives for
the same text; the golden transcripts H1-H3 pin the rest.
"""

from __future__ import annotations

import time

import pytest

from parsers.families.cohere_reader import (
    FIRST_SECTION,
    REREAD_FREE,
    REREAD_PER_CHAR,
    CohereFilter,
    CohereState,
    Pieces,
)
from parsers.readers.serdejson import SerdeJson, SerdeJsonState

CALL = '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": '
NEXT = ', {"tool_call_id": "1", "tool_name": "g", "parameters": {"b": 1}}]<|END_ACTION|>'


def read(text: str, chunks: int = 0) -> list[Pieces]:
    """The filter's writes over ``text`` (whole, or ``chunks`` characters at a time)."""
    f = CohereFilter("cmd3", CohereState(section="answer"))
    size = chunks or len(text)
    return [f.write(text[i : i + size]) for i in range(0, len(text), size)] + [f.flush()]


def arguments(pieces: list[Pieces]) -> list[str]:
    calls: dict[int, str] = {}
    for piece in pieces:
        for call in piece.ordered_calls():
            calls[call.index] = calls.get(call.index, "") + call.arguments
    return [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize(
    ("parameters", "ends"),
    [
        ('{"a": 1}', True),
        ('{"a": "\\ud800\\udc00"}', True),
        ('{"a": ' + "[" * 126 + "]" * 126 + "}", True),
        ('{"a": NaN}', False),  # Python's json reads it, serde_json does not
        ('{"a": -Infinity}', False),
        ('{"a": 1e400}', False),  # out of a double's range
        ('{"a": "\\ud800"}', False),  # an unpaired surrogate escape
        ('{"a": "\\udc00"}', False),
        ('{"a": "\\ud800\\u0041"}', False),
        ('{"a": ' + "[" * 127 + "]" * 127 + "}", False),  # 128 deep
    ],
)
def test_parameters_end_where_serde_json_reads_one_value(parameters: str, ends: bool) -> None:
    """Parameters serde_json never reads run to the block's end (the next call is text)."""
    got = arguments(read(CALL + parameters + NEXT))
    if ends:
        assert got == [parameters, '{"b": 1}']
    else:
        assert got == [parameters + NEXT.removesuffix("<|END_ACTION|>")]


def test_a_scalar_ends_at_its_first_digit() -> None:
    state = SerdeJsonState()
    assert SerdeJson(state).first_end("12, ") == 1


@pytest.mark.parametrize("chunks", [0, 1, 3])
def test_citations_are_spans_of_their_sections_text(chunks: int) -> None:
    text = (
        "<|START_THINKING|>Look <co>up</co: 0:[1]>.<|END_THINKING|>"
        "<|START_RESPONSE|>Hello <co>x</co: 0:[1]> there.<|END_RESPONSE|>"
    )
    pieces = read(text, chunks)
    spans = [(c.start, c.end, c.text, c.thinking) for p in pieces for c in p.citations]
    assert spans == [(5, 7, "up", True), (6, 7, "x", False)]
    assert "".join(p.content or "" for p in pieces) == "Hello x there."
    assert "".join(p.reasoning or "" for p in pieces) == "Look up."


def test_white_space_and_marker_starts_are_held_not_read_again() -> None:
    """A storm of spaces or of '<' is held; each write looks at what it added."""
    f = CohereFilter("cmd3", CohereState(section="answer"))
    f.write("x")
    for _ in range(2000):
        f.write(" ")
    assert f.s.held == "" and "".join(f.s.unread) == " " * 2000 and f.s.blank
    f.write("<")
    f.write("<")
    assert f.s.scanned == len(f.s.held)
    assert f.write("y").content == " " * 2000 + "<<y"


# Held text that grows with the output: an open citation, a closing tag that never ends,
# an action block whose call never starts.
GROWING = {
    "open citation": ("<co>", "cited text and "),
    "half closing tag": ("<co>", "cited text </co"),
    "junk in an action block": ("<|START_ACTION|>[", 'junk "x" {y} \\n '),
}


def _cost_per_chunk(head: str, unit: str, chunks: int) -> float:
    """CPU seconds per chunk streaming ``unit`` ``chunks`` times after ``head``."""
    best = float("inf")
    for _ in range(3):
        f = CohereFilter("cmd3", CohereState(section="answer"))
        f.write(head)
        start = time.process_time()
        for _ in range(chunks):
            f.write(unit)
        f.flush()
        best = min(best, time.process_time() - start)
    return best / chunks


@pytest.mark.parametrize("shape", GROWING)
def test_held_text_costs_linear_time(shape: str) -> None:
    """Four times the chunks cost about four times as much: held text is not read
    again per chunk past the re-read budget (docs/parity.md, cohere-reread-budget)."""
    head, unit = GROWING[shape]
    small = _cost_per_chunk(head, unit, 2_000)
    large = _cost_per_chunk(head, unit, 8_000)
    assert large < 2.5 * small


@pytest.mark.parametrize("shape", ["open citation", "junk in an action block"])
def test_a_stream_past_the_budget_is_read_whole_at_its_end(shape: str) -> None:
    """The chunks past the budget are read as one write at the end (text cut after a
    closing tag's start reads differently by the cut: cohere-held-text)."""
    head, unit = GROWING[shape]
    end = "</co: 0:[1]> done." if "co>" in head else "]<|END_ACTION|>"
    text = head + unit * 10_000 + end
    f = CohereFilter("cmd3", CohereState(section="answer"))
    streamed = [f.write(text[i : i + 4]) for i in range(0, len(text), 4)]
    assert f.s.starved and f.s.reread <= REREAD_PER_CHAR * len(text) + REREAD_FREE
    streamed.append(f.flush())
    whole = read(text)
    assert _content(streamed) == _content(whole)
    assert [c.text for p in streamed for c in p.citations] == [
        c.text for p in whole for c in p.citations
    ]


def _content(pieces: list[Pieces]) -> str:
    return "".join(p.content or "" for p in pieces)


def test_citations_of_ordinary_length_stream_without_budget() -> None:
    """Held text within the window costs nothing: many long citations still stream."""
    text = "".join("Text. <co>" + "cited " * 100 + "</co: 0:[1]>" for _ in range(50))
    f = CohereFilter("cmd3", CohereState(section="answer"))
    pieces = [f.write(text[i : i + 4]) for i in range(0, len(text), 4)]
    assert not f.s.starved and f.s.reread == 0
    assert len([c for p in pieces for c in p.citations]) == 50


# What ends a run of blank tokens: the output's end, a marker, text that thinking's
# opening trims; each (preset, what came before the run, what ends it; None: the end).
BLANK_RUN_ENDS = {
    "the output's end": ("cmd3", "", None),
    "the output's end, in Command 4's thinking": ("cmd4", "", None),
    "an action block": ("cmd3", "", "<|START_ACTION|>"),
    "the end of thinking": ("cmd3", "<|START_THINKING|>", "<|END_THINKING|>Hi"),
    "text after thinking opened": ("cmd3", "<|START_THINKING|>", "Hi"),
}


def _blank_run_costs(preset: str, head: str, end: str | None) -> tuple[float, float]:
    """CPU seconds writing 8,000 blank chunks after ``head``, and then ending them."""
    best = (float("inf"), float("inf"))
    for _ in range(3):
        f = CohereFilter(preset, CohereState(section=FIRST_SECTION[preset]))
        f.write(head)
        start = time.process_time()
        for _ in range(8_000):
            f.write("\n" + " " * 99)
        written = time.process_time()
        pieces = f.flush() if end is None else f.write(end)
        ended = time.process_time()
        assert (pieces.content or "") + (pieces.reasoning or "") in ("", "Hi")  # run dropped
        best = min(best, (written - start, ended - written), key=lambda cost: cost[1])
    return best


@pytest.mark.parametrize("ending", BLANK_RUN_ENDS)
def test_the_chunk_that_ends_a_blank_run_reads_it_once_at_most(ending: str) -> None:
    """The chunk that ends a long run of white space costs well under what writing the
    run did: it drops the run unread, or passes over it once in C. Each chunk is cheap
    and the whole stream linear either way, so only this ratio shows a chunk that reads
    the run character by character (several times the cost of writing it: a quarter
    second a chunk at bench hostile's 32,768 blank tokens)."""
    writing, ending_cost = _blank_run_costs(*BLANK_RUN_ENDS[ending])
    assert ending_cost < writing / 2, f"{ending_cost * 1e3:.2f} ms after {writing * 1e3:.1f} ms"


# One write holding many units: citations, calls (parameters that open an object, and
# ones that do not) and sections. A character wider than a byte makes a copy per unit
# (of the text after it, or of what was read before it) dearer, so one shows at these
# sizes.
WIDE = "\U0001f600"
MANY = {
    "citations": ("", f"Text <co>{('cited ' + WIDE + ' ') * 8}</co: 0:[1]> "),
    "calls": (
        "<|START_ACTION|>[",
        f'{{"tool_call_id": "0", "tool_name": "f", "parameters": {{"a": "{WIDE}"}}}}, ',
    ),
    "calls with scalar parameters": (
        "<|START_ACTION|>[",
        f'{{"tool_call_id": "{WIDE}", "tool_name": "f", "parameters": 1}}, ',
    ),
    "sections": ("", f"<|START_THINKING|>{('thought ' + WIDE + ' ') * 8}<|END_THINKING|>"),
}


def _one_write(head: str, unit: str, units: int) -> tuple[float, Pieces]:
    """CPU seconds per unit reading ``head`` and ``units`` units as one write and the
    end, and what the write gave."""
    text = head + unit * units
    best = float("inf")
    for _ in range(3):
        f = CohereFilter("cmd3", CohereState(section="answer"))
        start = time.process_time()
        pieces = f.write(text)
        f.flush()
        best = min(best, time.process_time() - start)
    return best / units, pieces


@pytest.mark.parametrize("shape", MANY)
def test_one_write_of_many_units_costs_linear_time(shape: str) -> None:
    """Eight times the units in one write (a one-shot output, or one large chunk) cost
    about eight times as much: each is read on from a cursor, not from a copy of the
    text after the one before, and the text read is joined once, not grown per unit."""
    head, unit = MANY[shape]
    small, pieces = _one_write(head, unit, 1_000)
    large, _ = _one_write(head, unit, 8_000)
    assert len(pieces.citations) == (1_000 if shape == "citations" else 0)
    assert len(pieces.calls) == (1_000 if "calls" in shape else 0)
    assert large < 2.5 * small
