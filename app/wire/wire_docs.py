"""What the derender wire fields mean, for the OpenAPI document and /docs.

The structs in app/wire/protocol.py say what a field is; this says what a client sends in it
and why. Kept beside the generator rather than on the structs so that the protocol
module stays the decoder's; ``describe`` fails loudly on a field that no longer exists,
and a test requires a description on every derender-level field.
"""

from __future__ import annotations

from typing import Any

_PROMPT_TOKEN_IDS = (
    "The prompt's token ids as the engine received them; counted in usage. In a stream, "
    "the same on every chunk: with the parser settings and the original request they "
    "identify the stream's kept session."
)
_STREAM_STATE_IN = (
    "Absent on a stream's first chunk; on every later chunk, the stream_state of the "
    "previous reply, unchanged (byte for byte is cheapest)."
)
_MODEL = (
    "Echoed as the reply's model; must be one of --served-model-name (default: the "
    "first served name)."
)
_PROMPT_TOKENS = "The prompt length for usage, when prompt_token_ids is not sent."
_CHAT_REQUEST = (
    "The original OpenAI chat completion request: its tools, tool_choice, stop, "
    "skip_special_tokens, logprobs and chat_template_kwargs decide how the output is "
    "rendered and parsed. In a stream, the same on every chunk."
)
_COMPLETION_REQUEST = (
    "The original OpenAI completion request: its stop, echo, logprobs and "
    "skip_special_tokens decide how the output is rendered. In a stream, the same on "
    "every chunk."
)
_GENERATE_CHUNK = (
    "One streamed chunk of the engine's /inference/v1/generate reply: each choice's token "
    "ids new since the previous chunk."
)

_ONE_SHOT = {
    "stream": "false or absent: the body carries whole generate responses.",
    "model": _MODEL,
    "prompt_tokens": _PROMPT_TOKENS,
    "prompt_token_ids": _PROMPT_TOKEN_IDS,
}
_STREAMED = {
    "generate_chunk": _GENERATE_CHUNK,
    "stream": "true: the body carries one generate chunk of a stream.",
    "model": _MODEL,
    "stream_state": _STREAM_STATE_IN,
    "prompt_tokens": _PROMPT_TOKENS,
    "prompt_token_ids": _PROMPT_TOKEN_IDS,
}
_GENERATE = {
    "choices": "One entry per generated sequence (a request with n > 1 has several).",
    "request_id": "The engine's request id; the chunks of one stream share it, and with "
    "a choice index it keys the stream's kept session.",
    "output_mode": "How the engine returned its output: token ids.",
    "usage": "Token counts as the engine reported them.",
    "prompt_token_ids": "The prompt's token ids, when the engine returns them.",
    "metrics": "The engine's timing and speculative-decoding figures, passed through.",
}
_GENERATE_CHOICE = {
    "index": "The choice's index; in a stream, it keys the choice's kept session.",
    "finish_reason": "Why generation ended (stop, length, ...); null until the last chunk.",
    "stop_reason": "The stop string or token id that ended generation, if one did.",
    "logprobs": "Logprobs of the generated tokens, when the original request asked for them.",
}
_REPLY = {
    "stream_state": "Send this, unchanged, as stream_state with the stream's next chunk.",
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "ChatDerenderRequest": {
        "generate_response": "The engine's complete /inference/v1/generate reply, to "
        "render as one chat completion.",
        "chat_request": _CHAT_REQUEST,
        **_ONE_SHOT,
    },
    "CompletionDerenderRequest": {
        "generate_responses": "The engine's complete generate replies, one per prompt, to "
        "render as one text completion.",
        "completion_request": _COMPLETION_REQUEST,
        **_ONE_SHOT,
        "prompt_tokens": "Each prompt's length for usage, when prompt_token_ids is not sent.",
        "prompt_token_ids": "Each prompt's token ids as the engine received them.",
    },
    "ChatStreamDerenderRequest": {**_STREAMED, "chat_request": _CHAT_REQUEST},
    "CompletionStreamDerenderRequest": {**_STREAMED, "completion_request": _COMPLETION_REQUEST},
    "GenerateResponse": {
        **_GENERATE,
        "prompt_logprobs": "Logprobs of the prompt tokens, when requested.",
        "kv_transfer_params": "Disaggregated-serving KV transfer parameters, passed through.",
    },
    "GenerateChunk": _GENERATE,
    "GenerateChoice": {**_GENERATE_CHOICE, "token_ids": "Every generated token id."},
    "GenerateStreamChoice": {
        **_GENERATE_CHOICE,
        "token_ids": "The generated token ids new in this chunk.",
    },
    "StreamState": {
        "prev_tokens": "The incremental detokenizer's window: the last token pieces.",
        "prefix_offset": "The detokenizer's prefix offset into prev_tokens.",
        "read_offset": "The detokenizer's read offset into prev_tokens.",
        "role_sent": "Whether a delta already carried the assistant role.",
        "logprob_context_token_ids": "The last output ids before this chunk, to decode "
        "logprob tokens in context.",
        "logprob_text_offset": "Characters of text emitted so far, for completion logprobs' "
        "text_offset.",
        "output_token_ids": "Every output token id so far: the history a replica without "
        "the stream's session replays.",
        "output_chunk_lens": "How many ids each earlier chunk carried; they sum to the "
        "length of output_token_ids.",
        "tools_streamed": "Whether tool-call deltas were sent (the finish_reason becomes "
        "tool_calls).",
        "last_tool_call_ids": "The ids of the tool calls sent so far, pinned so that a "
        "retry or replay reuses them.",
    },
    "ChatStreamReply": {
        "chunk": "The OpenAI chat.completion.chunk for this generate chunk.",
        **_REPLY,
    },
    "CompletionStreamReply": {
        "chunk": "The OpenAI text_completion chunk for this generate chunk.",
        **_REPLY,
    },
    "ErrorBody": {"error": "What went wrong."},
    "ErrorInfo": {
        "message": "What is wrong with the request and how to fix it.",
        "type": "The error's class, e.g. BadRequestError.",
        "param": "The field at fault, when one is.",
        "code": "The HTTP status.",
    },
}

SCHEMA_DESCRIPTIONS = {
    "ChatDerenderRequest": "A whole generate response to render as a chat completion.",
    "ChatStreamDerenderRequest": "One generate chunk of a streamed chat.",
    "CompletionDerenderRequest": "Whole generate responses to render as a text completion.",
    "CompletionStreamDerenderRequest": "One generate chunk of a streamed text completion.",
    "ChatStreamReply": "The chat chunk and the state to send with the next call.",
    "CompletionStreamReply": "The text completion chunk and the state to send with the next call.",
    "ErrorBody": "An OpenAI-style error.",
}


def describe(schemas: dict[str, Any]) -> None:
    """Add the descriptions above to msgspec's generated ``schemas``, in place."""
    for name, text in SCHEMA_DESCRIPTIONS.items():
        schemas[name]["description"] = text
    for name, fields in DESCRIPTIONS.items():
        properties = schemas[name]["properties"]
        for field_name, text in fields.items():
            properties[field_name]["description"] = text
