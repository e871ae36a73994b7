"""The two derender endpoints. Each handler reads top to bottom: decode, validate,
derender, reply; the body was read and its variant (``stream``) picked by the ASGI
app (app/serving/server.py), which also turns any error into its response."""

from __future__ import annotations

from msgspec import Raw
from starlette.responses import Response

from app.serving.service import DerenderService
from app.streams.chunk_path import Asked, ParsedChunks, json_response
from app.streams.compact import is_compact
from app.streams.compact_path import CompactChunks
from app.streams.pieces import free_in_slices
from app.wire.advisories import advise_on_state
from app.wire.body import Received, decode_body
from app.wire.errors import BadRequest
from app.wire.protocol import (
    BodyView,
    ChatDerenderRequest,
    ChatStreamDerenderRequest,
    ChatStreamReply,
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    CompletionStreamReply,
    encoder,
)
from app.wire.routing import check_stream_id
from app.wire.validation import (
    check_history,
    check_state_ids,
    chunk_tokens,
    validate_chat,
    validate_chat_stream,
    validate_completion,
    validate_completion_stream,
)

COMPACT_WITHOUT_HEADER = (
    "stream_state is a compact state (it has output_digest): send it with the header "
    "X-Derender-State: compact, or send the full state (docs/transports.md)."
)


class ChatEndpoint:
    """``POST /v1/chat/completions/derender``: one-shot, or one streamed chunk."""

    def __init__(self, service: DerenderService) -> None:
        self.service = service
        self.parsed = service.parsers.configured
        self.chunks = ParsedChunks(service)
        self.compact = CompactChunks(self.chunks)

    async def __call__(self, received: Received) -> Response:
        body, view = received.body, received.view
        if not view.stream:
            encoded = await self.service.run_one_shot(body, self._one_shot, body, view)
            return Response(encoded, media_type="application/json")
        asked: Asked | None = None  # the store was asked on the echoed lane
        if self.parsed:
            # Only our own encoding of a kept compact state could match a session's bytes
            # on the echoed lane, and it spells the key plainly: the byte search keeps
            # such a state off that lane; whether a state is compact is then decided by
            # decoding it (an escaped key is the same key).
            echoed = self.service.store.enabled and not received.compact
            if echoed and b'"output_digest"' not in bytes(view.stream_state):
                continued = await self.chunks.continue_echoed(received)
                if isinstance(continued, Response):
                    return continued
                asked = continued
            if is_compact(view.stream_state):
                if received.compact:
                    return await self.compact.answer(received)
                # Read as a full state it would lose its history.
                raise BadRequest(COMPACT_WITHOUT_HEADER, "stream_state")
        request = decode_body(body, ChatStreamDerenderRequest)
        if not self.parsed:  # a parsed chunk's history is checked where a replay reads it
            check_history(request.stream_state)
        check_stream_id(received.stream_id, request.generate_chunk.request_id)
        model = validate_chat_stream(request, view, self.service.limits)
        if self.parsed:
            response = await self.chunks.answer(request, model, view, received.compact, asked)
        else:
            check_state_ids(request.stream_state, self.service.limits)
            tokens = chunk_tokens(request.generate_chunk)
            reply, state = await self.service.run(
                tokens, self.service.plain_stream.chat, request, model
            )
            response = json_response(ChatStreamReply(reply, Raw(encoder.encode(state))))
        return advise_on_state(response, self.service.metrics, view.stream_state)

    def _one_shot(self, body: bytes, view: BodyView) -> bytes:
        request = decode_body(body, ChatDerenderRequest)
        model = validate_chat(request, view, self.service.limits)
        try:
            return self.service.encoded(self.service.one_shot.chat_lazily(request, model))
        finally:  # refused or failed too: the request is as large either way
            free_in_slices([request.generate_response])


class CompletionsEndpoint:
    """``POST /v1/completions/derender``: one-shot, or one streamed chunk."""

    def __init__(self, service: DerenderService) -> None:
        self.service = service

    async def __call__(self, received: Received) -> Response:
        body = received.body
        if not received.view.stream:
            encoded = await self.service.run_one_shot(body, self._one_shot, body)
            return Response(encoded, media_type="application/json")
        request = decode_body(body, CompletionStreamDerenderRequest)
        check_history(request.stream_state)
        check_stream_id(received.stream_id, request.generate_chunk.request_id)
        model = validate_completion_stream(request, self.service.limits)
        tokens = chunk_tokens(request.generate_chunk)
        derender = self.service.plain_stream.completion
        reply, state = await self.service.run(tokens, derender, request, model)
        response = json_response(CompletionStreamReply(reply, state))
        return advise_on_state(response, self.service.metrics, received.view.stream_state)

    def _one_shot(self, body: bytes) -> bytes:
        request = decode_body(body, CompletionDerenderRequest)
        model = validate_completion(request, self.service.limits)
        responses = request.generate_responses
        try:
            return self.service.encoded(self.service.one_shot.completion_lazily(request, model))
        finally:  # refused or failed too: the request is as large either way
            free_in_slices(responses)
