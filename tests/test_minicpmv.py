"""MiniCPM-V reasoning (``minicpmv``): Qwen3's format with reserved markers dropped, its
thinking switch, and the newline recovery vLLM 0.33.0 applies after every parser (goldens
M5 and M6 record it)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.tokens.tokenizer import Tokenizer
from parsers.families.minicpmv_newlines import NewlineState, recover, recover_whole
from parsers.registry import ParserFactory
from tests.support.streams import PROMPT, options, run, stream

OFF = {"enable_thinking": False}
NL = "\\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"a{NL}b\\r\\nc\\rd", "a\nb\nc\nd"),
        (
            f"`a{NL}b` ```x{NL}y``` $p{NL}q$ $$r{NL}s$$",
            f"`a{NL}b` ```x{NL}y``` $p{NL}q$ $$r{NL}s$$",
        ),
        (f"\\(a{NL}b\\) \\[c{NL}d\\]{NL}", f"\\(a{NL}b\\) \\[c{NL}d\\]\n"),
        ("\\\\n \\\\\\n \\x \\", "\\\\n \\\\\\n \\x \\"),
        ("no escapes", "no escapes"),
    ],
)
def test_a_whole_text_recovers_newlines_outside_code_and_latex(text: str, expected: str) -> None:
    assert recover_whole(text) == expected


def test_any_split_recovers_what_the_whole_text_does() -> None:
    rng = random.Random(7)
    alphabet = ["\\", "n", "r", "`", "$", "(", ")", "[", "]", "a"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        cuts = sorted(rng.sample(range(len(text) + 1), min(3, len(text) + 1)))
        state = NewlineState()
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        out = "".join(recover(state, piece, False) for piece in pieces)
        assert out + recover(state, "", True) == recover(NewlineState(), text, True), text


def test_a_long_backslash_run_is_held_as_a_count() -> None:
    """One backslash per piece: the held run grows by a count, never re-read."""
    state = NewlineState()
    assert all(recover(state, "\\", False) == "" for _ in range(10_000))
    assert (state.run, state.held) == (10_000, "")
    assert recover(state, "n", False) == "\\" * 10_000 + "n"


@pytest.mark.parametrize(
    ("kwargs", "text", "expected"),
    [
        (
            {},
            f"Plan{NL}it<reserved_12>.</think>An<|reserved_13|>swer{NL}.",
            ("Plan\nit.", "Answer\n."),
        ),
        ({}, "Plan only", ("Plan only", None)),
        (OFF, f"Answer{NL}<think>hidden</think>two<reserved_14>", (None, "Answer\ntwo")),
        (OFF, "<think>only hidden</think>", (None, None)),
    ],
)
def test_one_shot_drops_markers_and_recovers_newlines(
    tokenizer: Tokenizer, kwargs: dict[str, Any], text: str, expected: tuple[Any, Any]
) -> None:
    factory = ParserFactory(None, "minicpmv", True, tokenizer.vocabulary)
    parsed = factory.for_request(options(chat_template_kwargs=kwargs)).parse(
        text, tokenizer.encode(PROMPT), "seed"
    )
    assert (parsed.reasoning, parsed.content) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"Plan{NL}it \\</think>n then `a{NL}b` $x{NL}$ done\\",
        "Thinking \\\\\\",
        f"A<reserved_12>{NL}</think>" + "<tool_call>\n<function=count>\n<parameter=n>\n3\n"
        "</parameter>\n</function>\n</tool_call>" + f"after{NL}",
    ],
)
def test_every_chunking_and_restore_point_stream_the_same(tokenizer: Tokenizer, text: str) -> None:
    factory = ParserFactory("qwen3_coder", "minicpmv", True, tokenizer.vocabulary)
    ids = tokenizer.encode(text)
    for finish in ("stop", "length"):
        folded, expected = run(tokenizer, factory, options(), [[i] for i in ids], finish)
        whole, _ = run(tokenizer, factory, options(), [ids], finish)
        assert whole == folded
        for cut in range(len(ids) + 1):
            assert (
                stream(tokenizer, factory, options(), [[i] for i in ids], finish, cut) == expected
            )


def test_thinking_off_streams_the_answer_without_its_think_span(tokenizer: Tokenizer) -> None:
    factory = ParserFactory(None, "minicpmv", True, tokenizer.vocabulary)
    ids = tokenizer.encode(f"Answer{NL}<think>hidden</think>two")
    folded, _ = run(
        tokenizer, factory, options(chat_template_kwargs=OFF), [[i] for i in ids], "stop"
    )
    # The prompt closes reasoning: what follows is content as written, newlines recovered.
    assert (folded.reasoning, folded.content) == ("", "Answer\n<think>hidden</think>two")
