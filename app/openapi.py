"""The OpenAPI document of the HTTP face, generated from the wire structs so that it
cannot drift from what the server decodes and encodes."""

from __future__ import annotations

from typing import Any

import msgspec

from app.protocol import (
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
from app.wire_docs import describe

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
)


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
    # On the wire a chat stream reply's state is the StreamState it encodes.
    schemas["ChatStreamReply"]["properties"]["stream_state"] = _ref("StreamState")
    describe(schemas)
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
