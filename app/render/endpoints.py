"""The render endpoints: decode, check the model, render off the event loop, reply."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.body import decode_body, read_body
from app.errors import DerenderError
from app.failures import failure
from app.protocol import encoder
from app.render.requests import ChatRenderRequest, CompletionRenderRequest
from app.render.service import RenderService
from app.validation import check_model

CHAT_RENDER_PATH = "/v1/chat/completions/render"
COMPLETIONS_RENDER_PATH = "/v1/completions/render"
_REQUEST_ID = b"x-request-id"


def render_routes(render: RenderService) -> dict[str, Callable[[Request], Awaitable[Response]]]:
    """Handlers by path, for Starlette's POST routes."""

    async def chat(request: Request) -> Response:
        async def answer(body: bytes, header_id: str | None) -> Any:
            asked = decode_body(body, ChatRenderRequest, CHAT_RENDER_PATH)
            check_model(asked.model, render.service.limits)
            return await render.run("chat", render.chat.render, asked, header_id)

        return await _respond(render, "chat_render", request, answer)

    async def completions(request: Request) -> Response:
        async def answer(body: bytes, header_id: str | None) -> Any:
            asked = decode_body(body, CompletionRenderRequest, COMPLETIONS_RENDER_PATH)
            check_model(asked.model, render.service.limits)
            return await render.run("completions", render.completion.render, asked, header_id)

        return await _respond(render, "completions_render", request, answer)

    return {CHAT_RENDER_PATH: chat, COMPLETIONS_RENDER_PATH: completions}


async def _respond(
    render: RenderService,
    endpoint: str,
    request: Request,
    answer: Callable[[bytes, str | None], Awaitable[Any]],
) -> Response:
    """The reply, or the error the request earned (our own failure logged and counted)."""
    body = b""
    try:
        headers = dict(request.scope["headers"])
        body = await read_body(headers, request.receive, render.settings.max_request_bytes)
        header = headers.get(_REQUEST_ID)
        result = await answer(body, None if header is None else header.decode("latin-1"))
    except DerenderError as exc:
        return exc.response()
    except Exception as exc:
        return failure(exc, render.service.metrics, endpoint, body).response()
    return Response(encoder.encode(result), media_type="application/json")
