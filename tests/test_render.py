"""The render side's own bounds and parts: request templates, limits, metrics, the fast
tokenizer path. What vLLM answers is pinned by tests/test_render_golden.py."""

from __future__ import annotations

import sys
import time
import unicodedata
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.render.fast_encode import fast_encoder
from app.tokens.tokenizer import Tokenizer
from tests.support.apps import AppFactory

CHAT = "/v1/chat/completions/render"
COMPLETIONS = "/v1/completions/render"
USER = [{"role": "user", "content": "hi"}]
LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"


def _post(make_app: AppFactory, flags: list[str], path: str, body: dict[str, Any]) -> Any:
    with TestClient(make_app(flags)) as client:
        return client.post(path, json=body)


def test_request_template_needs_the_flag(make_app: AppFactory) -> None:
    body = {"messages": USER, "chat_template": "{{ messages[0]['content'] }}!"}
    refused = _post(make_app, [], CHAT, body)
    assert refused.status_code == 400
    assert "--trust-request-chat-template" in refused.json()["error"]["message"]
    trusted = _post(make_app, ["--trust-request-chat-template"], CHAT, body)
    assert trusted.status_code == 200
    assert trusted.json()["token_ids"] == [6023, 0]  # "hi!"


def test_template_errors_are_the_clients(make_app: AppFactory) -> None:
    body = {"messages": USER, "chat_template": "{{ raise_exception('no such role') }}"}
    reply = _post(make_app, ["--trust-request-chat-template"], CHAT, body)
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == "no such role"


@pytest.mark.parametrize("content", ["x", "x" * 8192])  # rendered inline, on a thread
def test_a_slow_template_is_stopped(make_app: AppFactory, content: str) -> None:
    """The template's own loops stop at the deadline: inline, nothing else could stop
    it, and a thread left running would keep a core busy after the reply."""
    body = {"messages": [{"role": "user", "content": content}], "chat_template": LOOPING}
    flags = ["--trust-request-chat-template", "--render-timeout", "0.3"]
    started = time.monotonic()
    reply = _post(make_app, flags, CHAT, body)
    assert reply.status_code == 422
    assert "--render-timeout" in reply.json()["error"]["message"]
    assert time.monotonic() - started < 10


def test_rendered_length_is_bounded(make_app: AppFactory) -> None:
    body = {"messages": [{"role": "user", "content": "word " * 400}]}
    reply = _post(make_app, ["--max-render-chars", "1000"], CHAT, body)
    assert reply.status_code == 400
    assert "--max-render-chars" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (CHAT, {"messages": "hi"}, "body.messages"),
        (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
        (CHAT, {"messages": USER, "temperature": -1}, "temperature"),
        (COMPLETIONS, {"prompt": [1, "a"]}, None),
        (COMPLETIONS, {"prompt": []}, None),
        (
            CHAT,
            {"messages": USER, "chat_template_kwargs": {"a": [[[[[[[[[[1]]]]]]]]]]}},
            "chat_template_kwargs",
        ),
    ],
)
def test_bad_requests_are_400s(
    make_app: AppFactory, path: str, body: dict[str, Any], param: str | None
) -> None:
    reply = _post(make_app, ["--max-json-depth", "8"], path, body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_render_metrics(make_app: AppFactory) -> None:
    with TestClient(make_app([])) as client:
        client.post(CHAT, json={"messages": USER})
        client.post(COMPLETIONS, json={"prompt": ["a b", "c"]})
        text = client.get("/metrics").text
    assert 'derender_render_seconds_count{endpoint="chat_render"} 1.0' in text
    assert 'derender_render_prompt_tokens_total{endpoint="completions_render"} 3.0' in text


def test_methods_other_than_post_are_refused(make_app: AppFactory) -> None:
    with TestClient(make_app([])) as client:
        assert client.get(CHAT).status_code == 405


@settings(max_examples=25, deadline=None)
@given(text=st.text(max_size=200))
@example(text="\U00010942:A")  # a letter to quicktok's Unicode 17, unassigned to tokenizers'
def test_fast_encoder_gives_the_tokenizers_ids(tokenizer: Tokenizer, text: str) -> None:
    encode = _fast(tokenizer)
    marked = f"<|im_start|>user\n{text}<think>{text}</think><|im_end|>"
    assert encode(marked) == tokenizer.encode(marked)


def test_the_fast_encoder_agrees_on_every_character_python_assigns(tokenizer: Tokenizer) -> None:
    """The fast encoder leaves to transformers only the characters Python's Unicode tables
    leave unassigned: every other one, followed by ``:A`` (which splits from a letter
    before it, not from a symbol), gets the same ids from both."""
    encode = _fast(tokenizer)
    assigned = [
        chr(code)
        for code in range(0x80, sys.maxunicode + 1)
        if unicodedata.category(chr(code)) not in ("Cn", "Cs")
    ]
    for start in range(0, len(assigned), 4096):
        text = "".join(f"{char}:A " for char in assigned[start : start + 4096])
        assert encode(text) == tokenizer.encode(text), f"near U+{ord(assigned[start]):04X}"


_encoders: dict[int, Any] = {}


def _fast(tokenizer: Tokenizer) -> Any:
    """The Qwen3 tokenizer's fast path (it must have one), built once."""
    found = _encoders.get(id(tokenizer))
    if found is None:
        found = _encoders[id(tokenizer)] = fast_encoder(tokenizer)
    assert found is not None
    return found
