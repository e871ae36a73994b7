"""DeepSeek-V4's prompt encoder: how it is chosen, its bounds, and the refusals whose
words are ours. What vLLM renders is pinned by the D1 goldens
(tests/test_render_golden.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.render.conversation import conversation
from app.render.deepseek_v4 import DeepseekV4Encoder
from app.render.prompt_encoders import prompt_encoder
from app.render.template import RenderTimeout
from tests.support.apps import AppFactory, build_app

CHAT = "/v1/chat/completions/render"
COMPLETIONS = "/v1/completions/render"
USER = {"role": "user", "content": "hi"}
_FLAGS = [
    "--model", "deepseek", "--reasoning-parser", "deepseek_v4",
    "--tool-call-parser", "deepseek_v4", "--enable-auto-tool-choice",
]  # fmt: skip


@pytest.fixture(scope="module")
def deepseek() -> Iterator[TestClient]:
    with TestClient(build_app("deepseek", _FLAGS)) as client:
        yield client


@pytest.mark.parametrize(
    ("config", "chosen"),
    [
        ({"architectures": ["DeepseekV4ForCausalLM"]}, True),
        ({"architectures": ["DeepseekV4ForConditionalGeneration"]}, True),
        ({"architectures": ["Qwen3ForCausalLM", "DeepseekV4ForCausalLM"]}, False),
        ({"model_type": "deepseek_v4"}, False),  # vLLM goes by the architecture
        ({"architectures": "DeepseekV4ForCausalLM"}, False),
        ({}, False),
    ],
)
def test_the_encoder_is_chosen_by_the_first_architecture(
    config: dict[str, Any], chosen: bool
) -> None:
    assert isinstance(prompt_encoder(config, 1.0), DeepseekV4Encoder) is chosen


def test_the_bundled_deepseek_renders_without_a_template(deepseek: TestClient) -> None:
    reply = deepseek.post(CHAT, json={"messages": [USER], "reasoning_effort": "none"})
    assert reply.status_code == 200, reply.text
    # <｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>
    assert reply.json()["token_ids"] == [0, 128803, 6366, 128804, 128822]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"messages": [{"role": "user", "content": "hi", "task": "nope"}]},
            "Invalid task: 'nope'. Valid tasks are: "
            "['action', 'query', 'authority', 'domain', 'title', 'read_url']",
        ),
        (
            {"messages": [USER], "chat_template_kwargs": {"conversation": []}},
            "Found unexpected chat template kwargs from request: {'conversation'}",
        ),
        (
            {"messages": [USER], "chat_template_kwargs": {"tools": 5}},
            "the tools given to DeepSeek-V4's prompt encoder must be a list.",
        ),
        (
            {"messages": [USER], "chat_template_kwargs": {"tools": ["x"]}},
            "each tool given to DeepSeek-V4's prompt encoder needs a function.",
        ),
    ],
)
def test_refusals_are_the_clients(deepseek: TestClient, body: dict[str, Any], message: str) -> None:
    reply = deepseek.post(CHAT, json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["message"] == message


def test_a_suffix_needs_a_fill_in_the_middle_format(make_app: AppFactory) -> None:
    with TestClient(make_app([])) as client:  # Qwen3: a template, no FIM format
        reply = client.post(COMPLETIONS, json={"prompt": "a", "suffix": "b"})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["message"] == "suffix is only supported for models with FIM completion rendering"
    assert error["param"] == "suffix"


def _long_conversation(turns: int) -> list[dict[str, Any]]:
    """Turns of a question, a call and its result: every message kind that folds."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        call = {
            "id": f"c{turn}",
            "type": "function",
            "function": {"name": "f", "arguments": '{"x": [1, 2], "y": "z"}'},
        }
        messages += [
            {"role": "user", "content": f"q{turn}"},
            {"role": "assistant", "content": "", "reasoning": "r", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{turn}", "content": "ok"},
        ]
    return messages


def test_encoding_is_one_pass(deepseek: TestClient) -> None:
    """Thousands of messages cost milliseconds each way; the text grows with them."""
    texts = {}
    for turns in (500, 2_000):
        body = {"messages": _long_conversation(turns), "tools": [_TOOL], "max_tokens": 1}
        started = time.perf_counter()
        reply = deepseek.post(CHAT, json=body)
        assert reply.status_code == 200, reply.text
        assert time.perf_counter() - started < 10
        texts[turns] = len(reply.json()["token_ids"])
    assert texts[2_000] < 4.5 * texts[500]


def test_a_long_render_stops_at_the_deadline() -> None:
    """The encoder checks the deadline between messages, inline or on a thread."""
    encoder = DeepseekV4Encoder(timeout=0.0)
    messages = conversation(_long_conversation(100), encoder.content_format)
    with pytest.raises(RenderTimeout, match="--render-timeout"):
        encoder.render(messages, {})


_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


_ANY = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2))
_CALL = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.text(max_size=3)},
            optional={"arguments": st.one_of(st.just('{"a": [1, {"b": null}]}'), _ANY)},
        ),
    },
    optional={"id": st.one_of(st.text(max_size=3), _ANY)},
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(
            ["system", "user", "assistant", "tool", "developer", "latest_reminder", "critic"]
        )
    },
    optional={
        "content": st.one_of(
            st.text(max_size=8),
            st.none(),
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})),
        ),
        "task": st.one_of(st.sampled_from(["query", "action", "title", "bad"]), _ANY),
        "reasoning": st.one_of(st.text(max_size=5), _ANY),
        "tool_calls": st.lists(_CALL, max_size=2),
        "tool_call_id": st.one_of(st.sampled_from(["a", "b"]), _ANY),
        "tools": st.one_of(st.just([_TOOL]), _ANY),
    },
)
_KWARGS = st.fixed_dictionaries(
    {},
    optional={
        "thinking": _ANY,
        "enable_thinking": st.booleans(),
        "reasoning_effort": st.one_of(st.sampled_from(["none", "max", "low", "xhigh"]), _ANY),
        "drop_thinking": st.booleans(),
        "tools": st.one_of(st.just([_TOOL]), _ANY),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(_MESSAGE, min_size=1, max_size=6), kwargs=_KWARGS)
def test_any_conversation_renders_or_is_refused(
    deepseek: TestClient, messages: list[dict[str, Any]], kwargs: dict[str, Any]
) -> None:
    """Whatever shape a conversation has, the answer is a render or a 4xx, never ours."""
    body = {"messages": messages, "chat_template_kwargs": kwargs, "max_tokens": 1}
    reply = deepseek.post(CHAT, json=body)
    assert reply.status_code in (200, 400), reply.text
