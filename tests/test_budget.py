"""The CPU budget reaches inside a parser step: a chunk or one-shot output of many tokens
is stopped between slices of them once the request's budget is spent (app/serving/budget.py
through parsers/budget.py), not only between chunks; within a budget it can meet, the
same step runs to its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.serving.budget import CpuBudgetExceeded, run_within
from parsers.registry import ParserFactory
from parsers.types import ParseOptions
from tests.support.tokenizers import bundled_tokenizer


def _stopped_then_whole(step: Callable[..., Any], fresh: Callable[..., Any], *args: Any) -> Any:
    """``step`` stopped by a spent budget; then ``fresh`` (a new parser's same step) run
    within a generous one, its result."""
    with pytest.raises(CpuBudgetExceeded):
        run_within(0.0, step, *args)
    return run_within(60.0, fresh, *args)


def test_a_harmony_step_and_parse_stop_inside_once_the_budget_is_spent() -> None:
    tokenizer = bundled_tokenizer("gpt-oss")
    factory = ParserFactory("openai", "openai_gptoss", True, tokenizer.vocabulary)
    options = ParseOptions(tool_choice="auto")
    ids = list(tokenizer.encode("<|channel|>final<|message|>" + "word " * 5000))
    step = factory.stream_for_request(options, "seed").step
    fresh = factory.stream_for_request(options, "seed").step
    delta, _ = _stopped_then_whole(step, fresh, "", ids, None, [])
    assert delta is not None and delta.content == "word " * 5000
    parse = factory.for_request(options).parse
    parsed = _stopped_then_whole(parse, factory.for_request(options).parse, "", [], "s", ids)
    assert parsed.content == "word " * 5000


def test_a_marker_engine_step_stops_inside_once_the_budget_is_spent() -> None:
    tokenizer = bundled_tokenizer("qwen3")
    factory = ParserFactory(None, "qwen3", False, tokenizer.vocabulary)
    options = ParseOptions()
    # Markers spelled in the text, thousands of them in one step.
    text = "<think>a</think>b" * 3000
    step = factory.stream_for_request(options, "seed").step
    fresh = factory.stream_for_request(options, "seed").step
    delta, _ = _stopped_then_whole(step, fresh, text, [], None, [])
    assert delta is not None and (delta.reasoning or "") + (delta.content or "")
