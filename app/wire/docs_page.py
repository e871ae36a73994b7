"""``GET /docs``: the OpenAPI document as one self-contained HTML page.

The server runs offline, so no Swagger UI from a CDN; the page is rendered here, once,
from the same document /openapi.json serves: every operation with its request and reply
schemas, then every schema as a table of its fields.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from app.wire.openapi import openapi_document

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; }
code, td.type { font-family: ui-monospace, monospace; font-size: 13px; }
table { border-collapse: collapse; width: 100%; margin: .5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
.method { font-weight: bold; text-transform: uppercase; }
"""


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: dict[str, Any]) -> str:
    """A field's type in a few characters, with links to the schemas it refers to."""
    if "$ref" in schema:
        name = escape(_ref_name(schema["$ref"]))
        return f'<a href="#{name}">{name}</a>'
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_type(option) for option in schema[key])
    if "enum" in schema:
        return " | ".join(escape(repr(value)) for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        return f"object of {_type(values)}" if isinstance(values, dict) else "object"
    return escape(str(kind))


def _operation(path: str, method: str, operation: dict[str, Any]) -> str:
    body = operation.get("requestBody", {}).get("content", {})
    requests = [_type(media["schema"]) for media in body.values()]
    rows = "".join(
        f"<tr><td>{escape(code)}</td><td>{escape(reply['description'])}</td>"
        f"<td class=type>{' '.join(_type(m['schema']) for m in reply.get('content', {}).values())}"
        "</td></tr>"
        for code, reply in operation["responses"].items()
    )
    sent = f"<p>Body: {' '.join(requests)}</p>" if requests else ""
    return (
        f"<h3><span class=method>{escape(method)}</span> <code>{escape(path)}</code></h3>"
        f"<p>{escape(operation['summary'])}</p>{sent}"
        f"<table><tr><th>status</th><th>meaning</th><th>body</th></tr>{rows}</table>"
    )


def _schema(name: str, schema: dict[str, Any]) -> str:
    required = set(schema.get("required", ()))
    rows = "".join(
        f"<tr><td><code>{escape(field)}</code>{' (required)' if field in required else ''}</td>"
        f"<td class=type>{_type(prop)}</td><td>{escape(prop.get('description', ''))}</td></tr>"
        for field, prop in schema.get("properties", {}).items()
    )
    about = f"<p>{escape(schema['description'])}</p>" if "description" in schema else ""
    return (
        f'<h3 id="{escape(name)}">{escape(name)}</h3>{about}'
        f"<table><tr><th>field</th><th>type</th><th>description</th></tr>{rows}</table>"
    )


def docs_page(document: dict[str, Any]) -> str:
    """The whole page for an OpenAPI ``document``."""
    info = document["info"]
    operations = "".join(
        _operation(path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    )
    schemas = "".join(
        _schema(name, schema) for name, schema in document["components"]["schemas"].items()
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>{escape(info['title'])} API</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(info['title'])} {escape(info['version'])}</h1>"
        f"<p>{escape(info['description'])} The machine-readable document is "
        '<a href="/openapi.json">/openapi.json</a>.</p>'
        f"<h2>Operations</h2>{operations}<h2>Schemas</h2>{schemas}</body></html>"
    )


def docs_endpoint(*, secured: bool) -> Callable[[Request], Awaitable[Response]]:
    """The /docs handler; the page is rendered once, when the app is built."""
    page = docs_page(openapi_document(secured=secured))

    async def docs(request: Request) -> Response:
        return HTMLResponse(page)

    return docs
