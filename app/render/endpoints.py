"""The render endpoints, answered on the app's direct lane (app/serving/server.py): read the
body, decode, check the model, render, reply; whatever is raised becomes the response.

A render costs a tenth of a millisecond for a short prompt, less than Starlette's
routing and a thread hop would, so a small body is rendered inline; a larger one goes
to the render threads under ``--render-timeout``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.render.requests import ChatRenderRequest, CompletionRenderRequest
from app.render.service import RenderService
from app.serving.failures import failure
from app.wire.body import read_body
from app.wire.body_errors import too_deep
from app.wire.errors import DerenderError, InvalidBody
from app.wire.protocol import encoder
from app.wire.validation import check_depth, check_model

CHAT_RENDER_PATH = "/v1/chat/completions/render"
COMPLETIONS_RENDER_PATH = "/v1/completions/render"
T = TypeVar("T")
RENDER_PATHS = (CHAT_RENDER_PATH, COMPLETIONS_RENDER_PATH)
_REQUEST_ID = b"x-request-id"


_AT = re.compile(r" - at `\$(.*)`$")
_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


def decode_request(body: bytes, kind: type[T]) -> T:
    """The body as the endpoint's request; not JSON, or not its shape, is a 400 that
    names the field (``param`` as ``body.<path>``) in the decoder's words."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        request: T = decoder.decode(body)
    except msgspec.ValidationError as exc:
        problem = str(exc)
        at = _AT.search(problem)
        param = "body" + re.sub(r"\[(\d+)\]", r".\1", at.group(1)) if at else None
        raise InvalidBody(f"1 validation error:\n  {problem}", param) from None
    except msgspec.DecodeError as exc:
        raise InvalidBody(f"the body is not a JSON object: {exc}.") from None
    except RecursionError:
        raise too_deep() from None
    return request


# Fields of either request that hold free-form JSON, which the template and the
# encoder walk recursively.
_FREE_FORM = (
    "messages",
    "tools",
    "tool_choice",
    "chat_template_kwargs",
    "documents",
    "structured_outputs",
    "response_format",
    "kv_transfer_params",
    "ec_transfer_params",
    "vllm_xargs",
    "stream_options",
    "prompt",
)


def _free_form(request: object) -> list[tuple[str, Any]]:
    return [(name, getattr(request, name)) for name in _FREE_FORM if hasattr(request, name)]


class RenderEndpoint:
    """One render path: its request type and the renderer that answers it."""

    def __init__(
        self,
        render: RenderService,
        endpoint: str,
        kind: type[ChatRenderRequest] | type[CompletionRenderRequest],
        answer: Callable[[Any, str | None], Any],
    ) -> None:
        self.render = render
        self.endpoint = endpoint
        self.kind = kind
        self.answer = answer
        self.path = CHAT_RENDER_PATH if kind is ChatRenderRequest else COMPLETIONS_RENDER_PATH

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        render = self.render
        body = b""
        try:
            headers = dict(scope["headers"])
            body = await read_body(headers, receive, render.settings.max_request_bytes)
            header = headers.get(_REQUEST_ID)
            request = decode_request(body, self.kind)
            check_depth(_free_form(request), render.settings.max_json_depth)
            check_model(request.model, render.service.limits)
            header_id = None if header is None else header.decode("latin-1")
            result = await render.run(self.endpoint, len(body), self.answer, request, header_id)
            response = Response(encoder.encode(result), media_type="application/json")
        except ClientDisconnect:
            return
        except DerenderError as exc:
            response = exc.response()
        except Exception as exc:
            response = failure(exc, render.service.metrics, self.endpoint, body).response()
        await response(scope, receive, send)


def render_endpoints(render: RenderService) -> dict[str, RenderEndpoint]:
    """The endpoints by path."""
    return {
        CHAT_RENDER_PATH: RenderEndpoint(
            render, "chat_render", ChatRenderRequest, render.chat.render
        ),
        COMPLETIONS_RENDER_PATH: RenderEndpoint(
            render, "completions_render", CompletionRenderRequest, render.completion.render
        ),
    }
