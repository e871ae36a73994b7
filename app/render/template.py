"""The chat template: found, compiled and applied the way vLLM applies it.

Rendering is transformers' own (``apply_chat_template``: jinja2's
ImmutableSandboxedEnvironment with transformers' extensions, filters and globals such as
``tojson``, ``raise_exception``, ``strftime_now`` and loop controls); this module only
picks the template, the kwargs it may see, and the shape messages take.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox

from app.wire.errors import BadRequest, DerenderError

ContentFormat = Literal["string", "openai"]

# Kwargs a request may never pass to the template: the template is already chosen and
# the rendered text is tokenized here.
_RESERVED = frozenset({"chat_template", "tokenize"})


class TemplateError(BadRequest):
    """The template refused the request (its ``raise_exception``), or failed on it."""


class RenderTimeout(DerenderError):
    """The template ran past ``--render-timeout`` and was stopped."""

    status = 422
    type = "UnprocessableEntityError"


_deadline = threading.local()  # when this thread's current rendering must stop


def _check_deadline() -> None:
    at: tuple[float, float] | None = getattr(_deadline, "at", None)
    if at is not None and time.monotonic() > at[0]:
        raise RenderTimeout(
            f"rendering the chat template took longer than {at[1]:g} s (--render-timeout); "
            "the template or the request is too large."
        )


class _Range(Sequence[int]):
    """jinja2's sandboxed ``range``, whose iteration stops at the render deadline: a
    template's loops multiply through ``range``, so a rendering that runs away does so
    here and its thread ends by itself instead of spinning after a timeout."""

    __slots__ = ("_inner",)

    def __init__(self, inner: range) -> None:
        self._inner = inner

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, index: Any) -> Any:
        item = self._inner[index]
        return _Range(item) if isinstance(item, range) else item

    def __iter__(self) -> Iterator[int]:
        for count, value in enumerate(self._inner):
            if not count & 1023:
                _check_deadline()
            yield value

    def __repr__(self) -> str:
        return repr(self._inner)


def _range(*args: int) -> _Range:
    return _Range(jinja2.sandbox.safe_range(*args))


class _GenerationTag(jinja2.ext.Extension):
    """transformers' ``{% generation %}`` tag, parsed only to read the variables."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 declares it an instance variable)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_noop"), [], [], body).set_lineno(lineno)


class ChatTemplate:
    """One template's source and what vLLM reads of it before rendering."""

    def __init__(self, source: str, hf: Any, timeout: float) -> None:
        self.source = source
        self._hf = hf
        self.timeout = timeout
        _bound_loops(source)

    @cached_property
    def _ast(self) -> jinja2.nodes.Template:
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_GenerationTag, jinja2.ext.loopcontrols],
        )
        return env.parse(self.source)

    @cached_property
    def variables(self) -> frozenset[str]:
        """The names the template reads from its context."""
        return frozenset(jinja2.meta.find_undeclared_variables(self._ast))

    @cached_property
    def content_format(self) -> ContentFormat:
        """``openai`` when the template loops over a message's content parts, else
        ``string`` (parts joined by newlines), as vLLM detects it."""
        return "openai" if any(_loops_over_content(self._ast)) else "string"

    @cached_property
    def _accepted(self) -> frozenset[str]:
        """Kwargs that reach the template: its variables, and apply_chat_template's own
        parameters (a tokenizer that takes them through ``**kwargs`` still reads them)."""
        signature = inspect.signature(type(self._hf).apply_chat_template)
        named = {
            p.name
            for p in signature.parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        }
        return frozenset((named | self.variables) - _RESERVED - {"self"})

    def kwargs_for(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request's kwargs the template may see (vLLM drops the rest silently)."""
        reserved = _RESERVED & kwargs.keys()
        if reserved:
            raise BadRequest(
                f"Found unexpected chat template kwargs from request: {set(sorted(reserved))}"
            )
        return {k: v for k, v in kwargs.items() if k in self._accepted}

    def render(
        self,
        conversation: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        kwargs: dict[str, Any],
    ) -> str:
        """The prompt text, within the deadline; a template's own refusal is the
        client's 400."""
        _deadline.at = (time.monotonic() + self.timeout, self.timeout)
        try:
            text = self._hf.apply_chat_template(
                conversation=conversation,
                tools=tools,
                chat_template=self.source,
                tokenize=False,
                **self.kwargs_for(kwargs),
            )
        except RenderTimeout:
            raise
        except _REFUSALS as exc:  # the template's own refusal, or its expressions on bad input
            raise TemplateError(_reason(exc)) from exc
        finally:
            _deadline.at = None
        assert isinstance(text, str)
        return text


# What rendering raises on a request the template cannot take: jinja2's errors (its
# ``raise_exception`` included) and its expressions failing on the request's values. Any
# other exception is ours: a 500, logged.
_REFUSALS = (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError)


def _bound_loops(source: str) -> None:
    """Give the environment transformers compiles ``source`` in (it caches one per
    template) the deadline-checking ``range``."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    _compile_jinja_template(source).environment.globals["range"] = _range


def _reason(exc: BaseException) -> str:
    """The most specific message in an error chain: the template's own, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, jinja2.TemplateError):
            return str(current)
        current = current.__cause__ or current.__context__
    return str(exc)


def _is_content(node: jinja2.nodes.Node) -> bool:
    if isinstance(node, jinja2.nodes.Getattr):
        return node.attr == "content"
    if isinstance(node, jinja2.nodes.Getitem):
        arg = node.arg
        return isinstance(arg, jinja2.nodes.Const) and arg.value == "content"
    return False


def _loops_over_content(ast: jinja2.nodes.Template) -> Iterator[bool]:
    for loop in ast.find_all(jinja2.nodes.For):
        if _is_content(loop.iter):
            yield True


def load_source(model_dir: Path | None, hf: Any, path: str | None) -> str | None:
    """The template to serve: ``--chat-template FILE``, else the tokenizer's own
    (``chat_template.jinja`` or ``tokenizer_config.json``), else none."""
    if path is not None:
        return Path(path).read_text(encoding="utf-8")
    own = getattr(hf, "chat_template", None)
    if isinstance(own, str):
        return own
    if model_dir is not None and (model_dir / "chat_template.jinja").is_file():
        return (model_dir / "chat_template.jinja").read_text(encoding="utf-8")
    return None
