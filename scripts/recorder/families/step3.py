"""Step-3 (``step3`` reasoning and ``steptml`` calls) on a synthetic tokenizer."""

from __future__ import annotations

from recorder.common import (
    ASK_WEATHER,
    PLAN,
    QWEN3_EOS,
    SYSTEM,
    TIME,
    TOOLS,
    WEATHER,
    Config,
    Scenario,
    _chat,
    _parsers,
    engine_family_scenarios,
    plain_scenarios,
    served_as,
)
from recorder.formats import step3_calls

STEP3 = "step3"  # the synthetic tokenizer's family (Qwen3's vocabulary, ChatML)
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def _calls() -> list[Scenario]:
    """What the Step-3 calls add: text after the block, a call typed other than
    ``function``, values cast by the schema, a call with no parameters."""
    weather = [SYSTEM, ASK_WEATHER]
    typed = ("get_weather", {"city": " Paris ", "days": " 12 ", "unit": "celsius"})
    return [
        Scenario(
            "text_after_block",
            "content, the block of two calls, then more content",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [f"Checking.\n{step3_calls([WEATHER, TIME])}\nDone."],
        ),
        Scenario(
            "other_call_type",
            "a call typed other than function (one-shot skips it)",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [step3_calls([WEATHER], kind="plugin")],
        ),
        Scenario(
            "typed_values",
            "values cast by the schema: spaces, an integer, one that does not cast",
            _chat(weather, tools=TOOLS),
            [
                f"{PLAN}</think>"
                + step3_calls([typed, ("get_weather", {"city": "Rome", "days": "twelve"})])
            ],
        ),
        Scenario(
            "no_parameters",
            "a call with no parameters, then one with",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [step3_calls([("get_time", {}), TIME])],
        ),
        Scenario(
            "block_never_closed",
            "the block's calls end but the block does not",
            _chat(weather, tools=TOOLS, **NO_THINK),
            [step3_calls([WEATHER]).removesuffix("<｜tool_calls_end｜>")],
        ),
    ]


CONFIGS = [
    Config(
        "E3",
        _parsers(STEP3, STEP3),
        STEP3,
        engine_family_scenarios(STEP3, STEP3) + served_as(STEP3, _calls()),
        eos=QWEN3_EOS,
        served=STEP3,
    ),
    Config(
        "E4",
        _parsers(STEP3, None),
        STEP3,
        served_as(STEP3, plain_scenarios(step3_calls)),
        eos=QWEN3_EOS,
        served=STEP3,
    ),
]
SYNTHETIC = {STEP3: None}
