"""The ASGI application: the derender endpoints on a direct lane, the rest on Starlette.

A derender POST is read under the size limit, its ``stream`` flag and fields viewed
once (``BodyView``), and handed to its endpoint (app/transports/endpoints.py); whatever the
endpoint raises becomes its response here: the client's mistake a 4xx that says
what to fix, our failure a 500 that is logged with its traceback and counted.
Health, models, metrics, the OpenAPI document and routing errors go through
Starlette.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.render.endpoints import RENDER_PATHS, render_endpoints
from app.render.service import RenderService
from app.serving.auth import ApiKeyGuard
from app.serving.failures import failure
from app.serving.service import DerenderService
from app.serving.settings import Settings
from app.serving.startup import check_parser_flags
from app.streams.chunk_path import json_response
from app.streams.compact import wants_compact
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from app.transports.batch import BATCH_SUFFIX, frame_too_large
from app.transports.batch_http import BatchEndpoint
from app.transports.endpoints import ChatEndpoint, CompletionsEndpoint
from app.transports.socket_streams import Lane, ParsedChatLane, PlainLane
from app.transports.websocket import SOCKET_SUFFIX, SocketConnection, refuse_socket
from app.wire.advisories import Advisory, advise, named
from app.wire.body import PROTOCOL_FIELDS, Received, read_body, received
from app.wire.docs_page import docs_endpoint
from app.wire.errors import BodyTooLarge, DerenderError, RoutingError
from app.wire.openapi import openapi_document
from app.wire.protocol import encoder
from app.wire.routing import STREAM_ID_HEADER

_STREAM_ID_KEY = STREAM_ID_HEADER.lower().encode()  # ASGI header names are lower case
CHAT_PATH = "/v1/chat/completions/derender"
COMPLETIONS_PATH = "/v1/completions/derender"

# An endpoint: a request as received, to a response.
Handler = Callable[[Received], Awaitable[Response]]


def _ignored(request: Received) -> str:
    return (
        f"the request's fields {named(request.unknown_fields)} are not the protocol's and were "
        "ignored (its fields: "
        f"{', '.join(sorted(PROTOCOL_FIELDS))})."
    )


class DerenderApp:
    """The ASGI app: POSTs to the two derender paths are answered directly, the rest
    (health, models, metrics, lifespan, errors) by Starlette.

    Once a chunk's parsing costs O(chunk), routing, middleware and request objects
    cost as much as the chunk itself; the direct lane skips them.
    """

    def __init__(self, service: DerenderService, routes: Starlette) -> None:
        self.service = service
        self.routes = routes
        self.state = routes.state
        self._direct: dict[str, tuple[str, Handler]] = {
            CHAT_PATH: ("chat", ChatEndpoint(service)),
            COMPLETIONS_PATH: ("completions", CompletionsEndpoint(service)),
        }
        chat = self._direct[CHAT_PATH][1]
        assert isinstance(chat, ChatEndpoint)
        compact = {CHAT_PATH: chat.compact} if chat.parsed else {}
        self._batches = {
            path + BATCH_SUFFIX: BatchEndpoint(service, endpoint, handle, compact.get(path))
            for path, (endpoint, handle) in self._direct.items()
        }
        self._lanes: dict[str, Lane] = {
            CHAT_PATH + SOCKET_SUFFIX: (
                ParsedChatLane(chat.chunks) if chat.parsed else PlainLane(service, False)
            ),
            COMPLETIONS_PATH + SOCKET_SUFFIX: PlainLane(service, True),
        }
        self._renders = render_endpoints(RenderService(service))
        key = service.settings.api_key
        self._guard = ApiKeyGuard(key) if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] == "http" and self._guard is not None and not self._guard.allows(scope):
            await self._guard.refuse(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            direct = self._direct.get(scope["path"])
            if direct is not None:
                await self._respond(scope, receive, send, *direct)
                return
            render = self._renders.get(scope["path"])
            if render is not None:
                await render(scope, receive, send)
                return
            batch = self._batches.get(scope["path"])
            if batch is not None:
                await self._respond_batch(scope, receive, send, batch)
                return
        await self.routes(scope, receive, send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket handshake: a connection of a derender route, else refused."""
        lane = self._lanes.get(scope["path"])
        if lane is None or (self._guard is not None and not self._guard.allows(scope)):
            await receive()  # the handshake
            await send(refuse_socket())
            return
        connection = SocketConnection(self.service, lane)
        try:
            await connection.serve(receive, send)
        finally:
            connection.close()

    async def _respond(
        self, scope: Scope, receive: Receive, send: Send, endpoint: str, handle: Handler
    ) -> None:
        service = self.service
        started = time.perf_counter()
        mode = "unknown"
        body = b""
        request: Received | None = None
        try:
            headers = dict(scope["headers"])
            body = await read_body(headers, receive, service.settings.max_request_bytes)
            stream_id = headers.get(_STREAM_ID_KEY)
            stream = None if stream_id is None else stream_id.decode("latin-1")
            request = received(body, endpoint, stream, wants_compact(headers))
            mode = "stream" if request.view.stream else "oneshot"
            response = await handle(request)
        except ClientDisconnect:
            return
        except Exception as exc:
            response = failure(exc, service.metrics, endpoint, body).response()
        if request is not None and request.unknown_fields:  # a refusal may be their doing
            advise(response, service.metrics, Advisory.UNKNOWN_FIELDS, _ignored(request))
        service.metrics.observe(endpoint, mode, response.status_code, time.perf_counter() - started)
        await response(scope, receive, send)

    async def _respond_batch(
        self, scope: Scope, receive: Receive, send: Send, batch: BatchEndpoint
    ) -> None:
        """A batch frame: refused whole (a 4xx) when it cannot be read or is over a
        bound, else a 200 whose entries answer each chunk, an error included."""
        service = self.service
        body = b""
        try:
            headers = dict(scope["headers"])
            limit = service.settings.batch_max_bytes
            try:
                body = await read_body(headers, receive, limit)
            except BodyTooLarge:
                raise frame_too_large(limit) from None
            response = await batch(body)
        except ClientDisconnect:
            return
        except DerenderError as exc:
            service.metrics.observe(batch.endpoint, "batch", exc.status, 0.0)
            response = exc.response()
        except Exception as exc:
            response = failure(exc, service.metrics, batch.endpoint, body).response()
        await response(scope, receive, send)


def build_app(settings: Settings) -> DerenderApp:
    """Check the parser flags, load the tokenizer, check the parsers against it, and
    build the app. A flag no tokenizer could make work fails before the tokenizer's
    seconds of loading.

    Raises TokenizerLoadError or ParserConfigError with a message for the operator.
    """
    check_parser_flags(settings)
    return create_app(settings, load_tokenizer(settings.model, settings.tokenizer))


def create_app(settings: Settings, tokenizer: Tokenizer) -> DerenderApp:
    """Build the ASGI app around an already loaded tokenizer."""
    service = DerenderService(settings, tokenizer)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            if service.store.cache.enabled:
                tasks.start_soon(service.store.sweep_forever)
            yield
            tasks.cancel_scope.cancel()
        await service.store.close()

    routes = [
        # Reached only by methods other than POST: Starlette answers 405.
        Route(CHAT_PATH, _post_only, methods=["POST"]),
        Route(COMPLETIONS_PATH, _post_only, methods=["POST"]),
        Route(CHAT_PATH + BATCH_SUFFIX, _post_only, methods=["POST"]),
        Route(COMPLETIONS_PATH + BATCH_SUFFIX, _post_only, methods=["POST"]),
        *(Route(path, _post_only, methods=["POST"]) for path in RENDER_PATHS),
        Route("/health", _health, methods=["GET"]),
        Route("/v1/models", _models(service), methods=["GET"]),
        Route("/metrics", _metrics(service), methods=["GET"]),
        Route("/openapi.json", _openapi(settings), methods=["GET"]),
        Route("/docs", docs_endpoint(secured=bool(settings.api_key)), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _routing_error}
    )
    app.state.service = service
    return DerenderApp(service, app)


async def _health(request: Request) -> Response:
    return Response(status_code=200)


def _models(service: DerenderService) -> Callable[[Request], Awaitable[Response]]:
    settings = service.settings
    data = [
        {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "derender-server",
            "root": settings.model,
            "parent": None,
            "max_model_len": service.max_model_len,
        }
        for name in settings.served_names
    ]

    async def models(request: Request) -> Response:
        return json_response({"object": "list", "data": data})

    return models


def _metrics(service: DerenderService) -> Callable[[Request], Awaitable[Response]]:
    async def metrics(request: Request) -> Response:
        return Response(service.metrics.render(), media_type="text/plain; version=0.0.4")

    return metrics


def _openapi(settings: Settings) -> Callable[[Request], Awaitable[Response]]:
    document = encoder.encode(openapi_document(secured=bool(settings.api_key)))

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    return openapi


async def _routing_error(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 as OpenAI-style errors that name the routes to use."""
    assert isinstance(exc, HTTPException)
    method, path = request.method, request.url.path
    headers = exc.headers or {}
    derender_paths = (CHAT_PATH, COMPLETIONS_PATH, *RENDER_PATHS)
    if exc.status_code == 405 and path.removesuffix(BATCH_SUFFIX) in derender_paths:
        message = f"{method} is not allowed on {path}: send a POST with a JSON body."
    elif exc.status_code == 405:
        message = f"{method} is not allowed on {path}: use {headers.get('Allow', 'GET')}."
    elif exc.status_code == 404:
        message = (
            f"there is no route {path}: the derender endpoints are POST {CHAT_PATH} and "
            f"POST {COMPLETIONS_PATH}, the render endpoints POST {' and POST '.join(RENDER_PATHS)}."
        )
    else:
        message = exc.detail
    response = RoutingError(exc.status_code, message).response()
    response.headers.update(headers)
    return response


async def _post_only(request: Request) -> Response:
    raise AssertionError("POSTs to the derender and render paths never reach Starlette")
