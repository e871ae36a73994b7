"""Why a body was refused as the endpoint's JSON, in words a client can act on.

The decoder says what it met (``Object missing required field `generate_response```);
a client needs to know what to send instead. The commonest mistakes are at the top
level, where each endpoint takes one of two bodies (one-shot or ``"stream": true``)
and the decoder only sees the one the ``stream`` flag picked: a chunk sent without
``"stream": true``, the other endpoint's field, or an engine reply not wrapped at all.
Those get a message of their own; deeper problems keep the decoder's words, which
name the field and the type it takes, followed by what that field should hold.

All of this runs only once decoding has failed, so its cost never touches a good
request.
"""

from __future__ import annotations

import re

import msgspec

from app.wire.errors import InvalidBody

CHAT = "chat"
COMPLETIONS = "completions"

# What each endpoint takes, one-shot and streamed.
_BODIES = {
    CHAT: '`generate_response` (the engine\'s whole reply), or `"stream": true` with one '
    "`generate_chunk`",
    COMPLETIONS: "`generate_responses` (the engine's replies, one per prompt), or "
    '`"stream": true` with one `generate_chunk`',
}
_ONE_SHOT_FIELD = {CHAT: "generate_response", COMPLETIONS: "generate_responses"}
_PATHS = {CHAT: "/v1/chat/completions/derender", COMPLETIONS: "/v1/completions/derender"}

# What a field should hold, by its name.
_SEND = {
    "stream": "true with one `generate_chunk`, or false (the default) with a whole reply",
    "generate_response": "the engine's whole reply: an object with `choices`",
    "generate_responses": "the engine's replies, one per prompt: a list of objects with `choices`",
    "generate_chunk": "one chunk of the engine's streamed reply: an object with `choices`",
    "choices": "the engine reply's `choices`: a list of objects with `index` and `token_ids`",
    "index": "the choice's `index`, an integer (0 for the first choice)",
    "token_ids": "the ids the engine generated: a list of integers >= 0",
    "prompt_token_ids": "the prompt's ids as /render returned them: a list of integers >= 0",
    "output_mode": '"tokens" or leave it out: derender reads token ids, not text',
    "chat_request": "the chat request that was sent to /render, unchanged: an object with "
    "`messages`",
    "completion_request": "the completion request that was sent to /render, unchanged: an "
    "object with `prompt`",
    "prompt_tokens": "the prompt's token count: an integer (on /v1/completions/derender a "
    "list, one count per prompt)",
    "model": "a served model name (GET /v1/models lists them), or leave it out",
    "logprobs": "the engine's logprobs: an object with `content`, or null",
}
_ORIGINAL = ("chat_request", "completion_request")
STATE = (
    "the `stream_state` the previous chunk's reply returned, unchanged (leave it out on a "
    "stream's first chunk)"
)

_AT = re.compile(r" - at `\$(.*)`$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MISSING = re.compile(r"^Object missing required field `([^`]*)`")


class _TopLevel(msgspec.Struct):
    """Which of the fields that tell the bodies apart a body carries (empty: absent)."""

    generate_response: msgspec.Raw = msgspec.Raw()
    generate_responses: msgspec.Raw = msgspec.Raw()
    generate_chunk: msgspec.Raw = msgspec.Raw()
    choices: msgspec.Raw = msgspec.Raw()

    def has(self, name: str) -> bool:
        return len(getattr(self, name)) > 0


_top_level = msgspec.json.Decoder(_TopLevel)


def malformed(body: bytes, problem: str, endpoint: str) -> InvalidBody:
    """A body that is not JSON at all (or not UTF-8, or cut short)."""
    if not body.strip():
        detail = f"the request body is empty. Send a JSON object with {_BODIES[endpoint]}."
    elif problem == "Input data was truncated":
        detail = (
            f"{problem}: the body ends inside its JSON (after {len(body)} bytes). Send the "
            "whole JSON object, and a Content-Length that matches it."
        )
    elif problem.startswith("Invalid UTF-8"):
        return not_utf8()
    else:
        detail = f"{problem}. Send a JSON object with {_BODIES[endpoint]}."
    return InvalidBody(f"1 validation error:\n  JSON decode error: {detail}")


def not_utf8(param: str | None = None) -> InvalidBody:
    return InvalidBody(
        "1 validation error:\n  JSON decode error: Invalid UTF-8 encoded string. Send the "
        "body as UTF-8 text.",
        param,
    )


def too_deep() -> InvalidBody:
    return InvalidBody(
        "1 validation error:\n  JSON decode error: the body nests too deeply to decode. "
        "Send JSON nested at most --max-json-depth levels (64 by default) in its free-form "
        "fields (tool parameters, chat_template_kwargs, kv_transfer_params)."
    )


def invalid(body: bytes, problem: str, endpoint: str, streamed: bool) -> InvalidBody:
    """A JSON body the endpoint's schema refuses, with what to send instead."""
    match = _AT.search(problem)
    if match is None:
        return _top_level_problem(body, problem, endpoint, streamed)
    path = match.group(1)
    param = "body" + re.sub(r"\[(\d+)\]", r".\1", path)
    missing = _MISSING.match(problem)
    names = _NAME.findall(path) or [""]
    if names[0] == "stream_state":
        hint: str | None = STATE
    elif names[0] in _ORIGINAL:  # OpenAI's fields, whose names clash with the engine's
        hint = _SEND[names[0]]
    else:
        hint = _SEND.get(missing.group(1) if missing else names[-1])
    detail = f"{problem}. Send {hint}." if hint else problem
    return InvalidBody(f"1 validation error:\n  {detail}", param)


def _top_level_problem(body: bytes, problem: str, endpoint: str, streamed: bool) -> InvalidBody:
    """Problems the decoder reports without a path: the body as a whole."""
    if problem.startswith("Expected `object`"):
        detail = f"{problem}: the body must be a JSON object with {_BODIES[endpoint]}."
        return InvalidBody(f"1 validation error:\n  {detail}")
    missing = _MISSING.match(problem)
    if missing is None:  # a rule between fields, in its own words
        return InvalidBody(f"1 validation error:\n  {problem}")
    try:
        sent = _top_level.decode(body)
    except msgspec.DecodeError:
        sent = _TopLevel()
    detail, param = _wrong_body(sent, endpoint, streamed)
    return InvalidBody(f"1 validation error:\n  {detail}", param)


def _wrong_body(sent: _TopLevel, endpoint: str, streamed: bool) -> tuple[str, str]:
    """The message and param for a body that lacks the field its ``stream`` flag needs."""
    one_shot = _ONE_SHOT_FIELD[endpoint]
    other = COMPLETIONS if endpoint == CHAT else CHAT
    other_field = _ONE_SHOT_FIELD[other]
    if sent.has(other_field):
        return (
            f"`{other_field}` is a field of {_PATHS[other]}; this endpoint takes "
            f"{_BODIES[endpoint]}.",
            "body." + other_field,
        )
    if sent.has("choices"):
        wrapped = "[<reply>]" if endpoint == COMPLETIONS else "<reply>"
        return (
            "the body looks like an engine reply itself; derender takes it wrapped: "
            f'{{"{one_shot}": {wrapped}}}, or {{"stream": true, "generate_chunk": <chunk>}} '
            "for one streamed chunk.",
            "body." + one_shot,
        )
    if streamed:
        if sent.has(one_shot):
            return (
                f'`"stream": true` takes one `generate_chunk`, not `{one_shot}`: send the '
                f"chunk as `generate_chunk`, or leave `stream` out to derender a whole "
                f"`{one_shot}`.",
                "body.generate_chunk",
            )
        return (
            '`generate_chunk` is required with `"stream": true`: send one chunk of the '
            "engine's streamed reply as `generate_chunk` (an object with `choices`).",
            "body.generate_chunk",
        )
    if sent.has("generate_chunk"):
        return (
            f'`generate_chunk` is sent with `"stream": true`: add `"stream": true` to derender '
            f"one streamed chunk, or send the engine's whole reply as `{one_shot}`.",
            "body.stream",
        )
    return (f"`{one_shot}` is required: send {_BODIES[endpoint]}.", "body." + one_shot)
