"""The OpenAPI document of the HTTP face, generated from the wire structs so that it
cannot drift from what the server decodes and encodes."""

from __future__ import annotations

from typing import Any

import msgspec

from app.render.requests import ChatRenderRequest, CompletionRenderRequest
from app.serving.settings import Settings
from app.wire.protocol import (
    ChatCompletion,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    CompactChatStreamRequest,
    CompactStreamState,
    Completion,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    CompletionStreamReply,
    ErrorBody,
    StreamState,
)
from app.wire.wire_docs import describe

_REF = "#/components/schemas/{name}"
_ERRORS = {
    "400": "the request is invalid or over a limit; the message says what to fix",
    "401": "the API key is missing or wrong (only with --api-key)",
    "404": "the model is not served",
    "413": "the body is over --max-request-bytes",
}
_STATE_REQUIRED = (
    "(X-Derender-State: compact) no live session continues the compact stream_state sent: "
    "re-send the chunk in full; error.code is stream_state_required"
)
_COMPACT_HEADER = {
    "name": "X-Derender-State",
    "in": "header",
    "required": False,
    "description": "compact: a parsed chat stream's replies carry a CompactStreamState, and "
    "its chunks may send one back without prompt_token_ids and chat_request "
    "(docs/transports.md)",
    "schema": {"type": "string", "enum": ["compact"]},
}


_SCHEMAS = (
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    ChatCompletion,
    ChatStreamReply,
    Completion,
    CompletionStreamReply,
    ErrorBody,
    StreamState,
    CompactChatStreamRequest,
    CompactStreamState,
    ChatRenderRequest,
    CompletionRenderRequest,
)

# vLLM's GenerateRequest, as /render answers it (app/render/chat.py builds it).
_GENERATE_REQUEST = {
    "type": "object",
    "description": "The engine's input, as vLLM 0.33.0's /render gives it: request_id, "
    "token_ids, sampling_params, and for chat reasoning_ended, reasoning_parser_kwargs and "
    "parse_context (what derender later reads).",
    "required": ["request_id", "token_ids", "sampling_params"],
}


def _render(summary: str, request: str, many: bool) -> dict[str, Any]:
    """A render path: one request in, a GenerateRequest (a list for completions) out."""
    reply = {"type": "array", "items": _ref("GenerateRequest")} if many else _ref("GenerateRequest")
    responses = {"200": _json(reply, "the engine's input")}
    responses.update({code: _json(_ref("ErrorBody"), text) for code, text in _ERRORS.items()})
    responses["422"] = _json(_ref("ErrorBody"), "rendering ran past --render-timeout")
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(request)}},
            },
            "responses": responses,
        }
    }


def _render_paths() -> dict[str, Any]:
    return {
        "/v1/chat/completions/render": _render(
            "A chat completion request into the engine's GenerateRequest",
            "ChatRenderRequest",
            many=False,
        ),
        "/v1/completions/render": _render(
            "A completion request into one GenerateRequest per prompt",
            "CompletionRenderRequest",
            many=True,
        ),
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _derender(summary: str, requests: list[str], replies: list[str]) -> dict[str, Any]:
    responses = {"200": _json({"oneOf": [_ref(name) for name in replies]}, "the derendered reply")}
    responses.update({code: _json(_ref("ErrorBody"), text) for code, text in _ERRORS.items()})
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"oneOf": [_ref(name) for name in requests]}}
                },
            },
            "responses": responses,
        }
    }


def _compact(path: dict[str, Any]) -> dict[str, Any]:
    """The chat path with the compact state's header, request and 409."""
    post = path["post"]
    post["parameters"] = [_COMPACT_HEADER]
    post["requestBody"]["content"]["application/json"]["schema"]["oneOf"].append(
        _ref("CompactChatStreamRequest")
    )
    post["responses"]["409"] = _json(_ref("ErrorBody"), _STATE_REQUIRED)
    return path


def _frame(entries: list[str], description: str) -> dict[str, Any]:
    """A batch frame whose entries are the named chunk bodies."""
    return {
        "type": "object",
        "description": description,
        "required": ["batch"],
        "properties": {
            "batch": {
                "type": "array",
                "maxItems": Settings().batch_max_entries,
                "description": "One streamed chunk body per entry, at most "
                "--batch-max-entries entries and --batch-max-bytes bytes in all.",
                "items": {"oneOf": [_ref(name) for name in entries]},
            }
        },
    }


# What names the stream an entry's reply answers.
_ENTRY_STREAM = {
    "request_id": {
        "type": ["string", "null"],
        "description": "The entry's generate_chunk.request_id (null when it names none).",
    },
    "index": {
        "type": ["integer", "null"],
        "description": "The entry's choice index (null when it names none).",
    },
}


def _batch_schemas() -> dict[str, Any]:
    """A batch frame and its reply (docs/transports.md), per route, by hand: their
    entries are the routes' own chunk bodies and replies."""
    return {
        "ChatBatchRequest": _frame(
            ["ChatStreamDerenderRequest", "CompactChatStreamRequest"],
            "Chunks of many chat streams, each answered as a POST with X-Derender-State: compact.",
        ),
        "CompletionBatchRequest": _frame(
            ["CompletionStreamDerenderRequest"], "Chunks of many text completion streams."
        ),
        "BatchReply": {
            "type": "object",
            "description": "One reply per entry, in the entries' order.",
            "required": ["batch"],
            "properties": {
                "batch": {
                    "type": "array",
                    "description": "Each entry's chunk and state, or its own error.",
                    "items": {"oneOf": [_ref("BatchChunkReply"), _ref("BatchErrorReply")]},
                }
            },
        },
        "BatchChunkReply": {
            "type": "object",
            "description": "An entry's chunk and the state to send with its stream's next one.",
            "required": ["request_id", "index", "chunk", "stream_state"],
            "properties": {
                **_ENTRY_STREAM,
                "chunk": {
                    "oneOf": [_ref("ChatCompletionChunk"), _ref("CompletionChunk")],
                    "description": "The chunk, as the route's single POST gives it.",
                },
                "stream_state": {
                    "oneOf": [_ref("CompactStreamState"), _ref("StreamState")],
                    "description": "Compact for a parsed chat stream, else the full state.",
                },
            },
        },
        "BatchErrorReply": {
            "type": "object",
            "description": "An entry refused or failed; the other entries are answered. "
            "error.code stream_state_required: re-send that chunk in full.",
            "required": ["request_id", "index", "error"],
            "properties": {**_ENTRY_STREAM, "error": _ref("ErrorInfo")},
        },
    }


def _batch(summary: str, request: str) -> dict[str, Any]:
    frame_errors = {
        "400": "the frame is not a batch, its batch is not a list, or it has more entries "
        "than --batch-max-entries",
        "401": _ERRORS["401"],
        "413": "the frame is over --batch-max-bytes",
    }
    responses = {"200": _json(_ref("BatchReply"), "each entry's reply, in order")}
    responses.update({code: _json(_ref("ErrorBody"), text) for code, text in frame_errors.items()})
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(request)}},
            },
            "responses": responses,
        }
    }


def _get(summary: str, content: dict[str, Any] | None, secured: bool) -> dict[str, Any]:
    response: dict[str, Any] = {"description": summary}
    if content is not None:
        response["content"] = content
    operation: dict[str, Any] = {"summary": summary, "responses": {"200": response}}
    if secured:
        operation["responses"]["401"] = _json(_ref("ErrorBody"), _ERRORS["401"])
    else:
        operation["security"] = []
    return {"get": operation}


def openapi_document(*, secured: bool) -> dict[str, Any]:
    """The document; ``secured`` when the server requires an API key."""
    _, schemas = msgspec.json.schema_components(
        _SCHEMAS,
        ref_template=_REF,
    )
    # On the wire a chat stream reply's chunk and state are the structs they encode.
    schemas["ChatStreamReply"]["properties"]["chunk"] = _ref("ChatCompletionChunk")
    schemas["ChatStreamReply"]["properties"]["stream_state"] = _ref("StreamState")
    describe(schemas)
    schemas.update(_batch_schemas())
    schemas["GenerateRequest"] = _GENERATE_REQUEST
    json_object = {"application/json": {"schema": {"type": "object"}}}
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "derender-server",
            "version": "0.1.0",
            "description": "Token ids in, OpenAI chat/completion responses out "
            "(vLLM 0.33.0's derender API).",
        },
        "paths": {
            "/v1/chat/completions/derender": _compact(
                _derender(
                    "A generate response into a chat completion, or one streamed chunk",
                    ["ChatDerenderRequest", "ChatStreamDerenderRequest"],
                    ["ChatCompletion", "ChatStreamReply"],
                )
            ),
            "/v1/completions/derender": _derender(
                "Generate responses into a text completion, or one streamed chunk",
                ["CompletionDerenderRequest", "CompletionStreamDerenderRequest"],
                ["Completion", "CompletionStreamReply"],
            ),
            "/v1/chat/completions/derender/batch": _batch(
                "Chunks of many chat streams in one frame (docs/transports.md)",
                "ChatBatchRequest",
            ),
            "/v1/completions/derender/batch": _batch(
                "Chunks of many text completion streams in one frame", "CompletionBatchRequest"
            ),
            **_render_paths(),
            "/health": _get("the server is up", None, secured=False),
            "/v1/models": _get("the served model names", json_object, secured),
            "/metrics": _get(
                "Prometheus metrics", {"text/plain": {"schema": {"type": "string"}}}, secured
            ),
            "/openapi.json": _get("this document", json_object, secured),
            "/docs": _get(
                "this document as a page: operations and schemas",
                {"text/html": {"schema": {"type": "string"}}},
                secured,
            ),
        },
        "components": {"schemas": schemas},
    }
    if secured:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
