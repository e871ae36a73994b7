"""``derender-server`` / ``python -m app``: flags named as vLLM names them."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.serving.settings import Settings
from app.serving.sizes import human_size, parse_size
from app.tokens.bundled_qwen3 import BUNDLED_NAME
from app.tokens.tokenizer import BUNDLED
from parsers.registry import REASONING_PARSERS, TOOL_PARSERS, listing

if TYPE_CHECKING:
    from app.serving.metrics import Metrics

_DEFAULTS = Settings()


@dataclass(frozen=True, slots=True)
class ServerOptions:
    settings: Settings
    host: str
    port: int
    log_level: str
    access_log: bool
    header_timeout: float
    body_timeout: float
    max_connections: int
    ws_max_connections: int


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def byte_size(text: str) -> int:
    """A positive size: bytes, or a number and a unit (``256MiB``, ``16M``)."""
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive size")
    return value


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: ...)`` unless the help already says it or there is none;
    a size reads as one (``256 MiB``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        if action.type is byte_size:
            return f"{text} (default: {human_size(action.default)})"
        return super()._get_help_string(action) or text


class ListParsers(argparse.Action):
    """``--list-parsers``: print every parser name served, with its family, and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(listing())
        parser.exit()


_SIZE = "SIZE"  # metavar of the size flags: bytes, or 256MiB, 16M, 1.5GiB


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="derender-server",
        description="Token ids in, OpenAI chat/completion responses out (vLLM's derender API). "
        f"A {_SIZE} is bytes or a number and a unit: 256MiB, 16M (K, M, G count in 1024s; "
        "KB, MB, GB in 1000s).",
        formatter_class=DefaultsHelpFormatter,
    )
    for add_flags in (
        _model_flags,
        _parser_flags,
        _session_flags,
        _redis_flags,
        _transport_flags,
        _limit_flags,
        _security_flags,
        _logging_flags,
    ):
        add_flags(parser)
    return parser


def _model_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model", "what the token ids are decoded with")
    group.add_argument(
        "--model",
        metavar="DIR_OR_NAME",
        default=BUNDLED_NAME,
        help="a local model/tokenizer directory, a hub id already in the local cache, "
        f"or a bundled tokenizer: {', '.join(BUNDLED)}",
    )
    group.add_argument(
        "--tokenizer",
        metavar="DIR_OR_NAME",
        help="where the tokenizer comes from, if not --model (default: --model)",
    )
    group.add_argument(
        "--served-model-name",
        metavar="NAME",
        nargs="+",
        default=[],
        help="names accepted in a request's model field; the first is echoed (default: --model)",
    )
    group.add_argument(
        "--max-model-len",
        metavar="TOKENS",
        type=_positive_int,
        help="context length (default: the model's)",
    )
    group.add_argument(
        "--default-chat-template-kwargs",
        metavar="JSON",
        type=_json_object,
        default={},
        help="JSON object merged under each request's chat_template_kwargs",
    )
    group.add_argument(
        "--chat-template",
        metavar="FILE",
        help="chat template for /render (default: the tokenizer's own)",
    )
    group.add_argument(
        "--trust-request-chat-template",
        action="store_true",
        help="let a /render request bring its own chat_template (refused by default, as vLLM)",
    )
    group.add_argument(
        "--render-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="wall time one chat template rendering may take before it is refused",
    )
    group.add_argument(
        "--max-render-chars",
        metavar="CHARS",
        type=_positive_int,
        default=4 * 1024 * 1024,
        help="longest prompt text a chat template may render before it is tokenized",
    )
    group.add_argument(
        "--system-start-date",
        metavar="YYYY-MM-DD",
        help="the conversation start date gpt-oss prompts state (vLLM's "
        "VLLM_SYSTEM_START_DATE; default: today)",
    )
    group.add_argument(
        "--allow-out-of-vocab",
        action="store_true",
        help="decode token ids outside the vocabulary to nothing, as vLLM does, instead "
        "of refusing them",
    )


def _parser_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "parsers", "reasoning and tool calls split out of the text, as vLLM's flags do"
    )
    group.add_argument(
        "--reasoning-parser",
        metavar="NAME",
        help=f"reasoning parser, one of {', '.join(REASONING_PARSERS)} "
        "(default: none, reasoning stays content)",
    )
    group.add_argument(
        "--tool-call-parser",
        metavar="NAME",
        help=f"tool-call parser, one of {', '.join(TOOL_PARSERS)}; it needs "
        "--enable-auto-tool-choice, as in vLLM (default: none, tool calls stay content)",
    )
    group.add_argument(
        "--enable-auto-tool-choice",
        action="store_true",
        help="parse tool calls out of the output with --tool-call-parser, which it requires",
    )
    group.add_argument(
        "--list-parsers",
        action=ListParsers,
        help="print every parser name served, with its model family, aliases, the "
        "tokenizer it needs and its golden transcripts, and exit",
    )


def _session_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sessions and cache", "stream sessions kept between chunks, so a chunk costs O(chunk)"
    )
    group.add_argument(
        "--stream-cache-size",
        metavar="N",
        type=int,
        default=_DEFAULTS.stream_cache_size,
        help="live stream sessions kept between chunks, on WebSocket connections too "
        "(0: none, every chunk replays)",
    )
    group.add_argument(
        "--stream-cache-max-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.stream_cache_max_bytes,
        help="memory the kept sessions, WebSocket connections' included, may keep alive "
        "(each measured when it is kept)",
    )
    group.add_argument(
        "--stream-cache-ttl",
        metavar="SECONDS",
        type=float,
        default=_DEFAULTS.stream_cache_ttl,
        help="seconds an unused session is kept",
    )
    group.add_argument(
        "--inline-tokens",
        metavar="TOKENS",
        type=int,
        default=_DEFAULTS.inline_tokens,
        help="requests that decode or replay at most this many tokens run on the event "
        "loop; larger ones go to the worker pool",
    )
    group.add_argument(
        "--replay-workers",
        metavar="N",
        type=_positive_int,
        default=_DEFAULTS.replay_workers,
        help="threads that decode large requests and replay long stream histories off "
        "the event loop",
    )


def _redis_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Redis", "session snapshots shared by replicas (optional)")
    group.add_argument(
        "--redis-url",
        metavar="URL",
        help="share session snapshots across replicas through this Redis "
        "(e.g. redis://127.0.0.1:6379/0); off by default",
    )
    group.add_argument(
        "--redis-secret",
        metavar="SECRET",
        default=os.environ.get("DERENDER_REDIS_SECRET"),
        help="key of the HMAC that authenticates snapshots; replicas sharing a Redis "
        "share it (default: $DERENDER_REDIS_SECRET; unset: a random key per process, "
        "so snapshots are private to the process that wrote them)",
    )
    group.add_argument(
        "--redis-ttl",
        metavar="SECONDS",
        type=_positive_int,
        default=_DEFAULTS.redis_ttl,
        help="seconds a session snapshot is kept in Redis",
    )
    group.add_argument(
        "--redis-timeout-ms",
        metavar="MS",
        type=_positive_float,
        default=_DEFAULTS.redis_timeout_ms,
        help="bound on each Redis call (connect included); a slower call counts as a miss",
    )
    group.add_argument(
        "--redis-max-snapshot-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.redis_max_snapshot_bytes,
        help="larger session snapshots are not written to Redis",
    )


def _transport_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "transports", "where clients connect, over HTTP and WebSocket"
    )
    group.add_argument(
        "--host", metavar="ADDRESS", default="127.0.0.1", help="address to listen on"
    )
    group.add_argument("--port", metavar="PORT", type=int, default=8000, help="port to listen on")
    group.add_argument(
        "--header-timeout",
        metavar="SECONDS",
        type=_positive_float,
        default=10.0,
        help="seconds a client has to send a request's headers (408 and close after)",
    )
    group.add_argument(
        "--body-timeout",
        metavar="SECONDS",
        type=_positive_float,
        default=60.0,
        help="seconds a client has to send a request's body once its headers are in "
        "(the connection is closed after)",
    )
    group.add_argument(
        "--max-connections",
        metavar="N",
        type=_positive_int,
        default=1000,
        help="open connections served at once; one more is answered 503 and closed",
    )
    group.add_argument(
        "--ws-max-connections",
        metavar="N",
        type=_positive_int,
        default=256,
        help="open WebSocket connections served at once, apart from --max-connections; "
        "one more handshake is answered 503",
    )
    group.add_argument(
        "--ws-max-streams",
        metavar="N",
        type=_positive_int,
        default=_DEFAULTS.ws_max_streams,
        help="open streams one WebSocket connection may carry; one more is refused",
    )
    group.add_argument(
        "--ws-idle-timeout",
        metavar="SECONDS",
        type=_positive_float,
        default=_DEFAULTS.ws_idle_timeout,
        help="seconds a WebSocket connection may go without a message before it is closed",
    )
    group.add_argument(
        "--batch-max-entries",
        metavar="N",
        type=_positive_int,
        default=_DEFAULTS.batch_max_entries,
        help="chunks one batch frame may carry (WebSocket or HTTP); a larger frame is refused",
    )
    group.add_argument(
        "--batch-max-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.batch_max_bytes,
        help="largest batch frame accepted (WebSocket or HTTP; 413 beyond it); each of its "
        "chunks is still bounded by --max-request-bytes",
    )


def _limit_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "limits", "what one request may ask for and cost (refused with a 4xx beyond)"
    )
    group.add_argument(
        "--max-request-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.max_request_bytes,
        help="largest request body accepted (413 beyond it)",
    )
    group.add_argument(
        "--max-chat-request-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.max_chat_request_bytes,
        help="largest chat_request (the original chat request, as sent) accepted",
    )
    group.add_argument(
        "--max-response-bytes",
        type=byte_size,
        metavar=_SIZE,
        default=_DEFAULTS.max_response_bytes,
        help="largest one-shot response sent; a larger one is refused with a 400",
    )
    group.add_argument(
        "--max-tools",
        metavar="N",
        type=_positive_int,
        default=_DEFAULTS.max_tools,
        help="most tools a chat_request may declare (OpenAI's limit)",
    )
    group.add_argument(
        "--max-json-depth",
        metavar="N",
        type=_positive_int,
        default=_DEFAULTS.max_json_depth,
        help="deepest nesting of free-form JSON (tool parameters, chat_template_kwargs, "
        "documents, stream_options, kv_transfer_params)",
    )
    group.add_argument(
        "--max-logprobs",
        metavar="N",
        type=int,
        default=20,
        help="most top logprob candidates per position (-1: no limit)",
    )
    group.add_argument(
        "--max-n-sequences",
        metavar="N",
        type=_positive_int,
        default=int(os.environ.get("VLLM_MAX_N_SEQUENCES", _DEFAULTS.max_n_sequences)),
        help="most generate responses in a request and choices in a response "
        "(default: $VLLM_MAX_N_SEQUENCES, else %(default)s)",
    )
    group.add_argument(
        "--max-request-cpu-seconds",
        metavar="SECONDS",
        type=_positive_float,
        default=_DEFAULTS.max_request_cpu_seconds,
        help="CPU seconds one request may spend decoding, parsing or replaying before it "
        "is stopped with a 422 and its stream session dropped",
    )


def _security_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("security")
    group.add_argument(
        "--api-key",
        metavar="KEY",
        default=os.environ.get("DERENDER_API_KEY"),  # never shown: the help says "(default"
        help="require 'Authorization: Bearer KEY' on every route but /health "
        "(default: $DERENDER_API_KEY; unset: no key)",
    )


def _logging_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("logging")
    group.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="least severe log messages shown",
    )
    group.add_argument(
        "--access-log",
        action="store_true",
        help="log a line per request (off by default: a stream sends one request per chunk)",
    )


def parse_options(argv: Sequence[str] | None = None) -> ServerOptions:
    args = build_parser().parse_args(argv)
    settings = Settings(
        model=args.model,
        tokenizer=args.tokenizer,
        served_model_names=tuple(args.served_model_name),
        max_model_len=args.max_model_len,
        max_logprobs=args.max_logprobs,
        max_n_sequences=args.max_n_sequences,
        tool_call_parser=args.tool_call_parser,
        reasoning_parser=args.reasoning_parser,
        enable_auto_tool_choice=args.enable_auto_tool_choice,
        default_chat_template_kwargs=args.default_chat_template_kwargs,
        chat_template=args.chat_template,
        trust_request_chat_template=args.trust_request_chat_template,
        render_timeout=args.render_timeout,
        max_render_chars=args.max_render_chars,
        system_start_date=args.system_start_date,
        max_request_bytes=args.max_request_bytes,
        max_chat_request_bytes=args.max_chat_request_bytes,
        max_tools=args.max_tools,
        max_json_depth=args.max_json_depth,
        allow_out_of_vocab=args.allow_out_of_vocab,
        api_key=args.api_key,
        inline_tokens=args.inline_tokens,
        replay_workers=args.replay_workers,
        max_request_cpu_seconds=args.max_request_cpu_seconds,
        stream_cache_size=max(args.stream_cache_size, 0),
        stream_cache_max_bytes=args.stream_cache_max_bytes,
        stream_cache_ttl=args.stream_cache_ttl,
        redis_url=args.redis_url,
        redis_secret=args.redis_secret,
        redis_ttl=args.redis_ttl,
        redis_timeout_ms=args.redis_timeout_ms,
        redis_max_snapshot_bytes=args.redis_max_snapshot_bytes,
        max_response_bytes=args.max_response_bytes,
        ws_max_streams=args.ws_max_streams,
        ws_idle_timeout=args.ws_idle_timeout,
        batch_max_entries=args.batch_max_entries,
        batch_max_bytes=args.batch_max_bytes,
    )
    return ServerOptions(
        settings,
        args.host,
        args.port,
        args.log_level,
        args.access_log,
        args.header_timeout,
        args.body_timeout,
        args.max_connections,
        args.ws_max_connections,
    )


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(argv)
    logging.basicConfig(
        level=options.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from app.serving.server import build_app
    from app.serving.startup import log_start_up
    from app.tokens.tokenizer import TokenizerLoadError
    from parsers.registry import ParserConfigError

    try:
        app = build_app(options.settings)
    except (TokenizerLoadError, ParserConfigError) as exc:
        sys.exit(f"derender-server: {exc}")
    log_start_up(options.settings, app.service.max_model_len)

    import uvicorn

    # What start-up built (imports, the tokenizer's tables) lives as long as the process,
    # yet each full pass of the garbage collector walked it again: about 0.2 s holding
    # the GIL on a 2-core box, while /health and every stream waited. Frozen, a full
    # pass walks only what requests have made since.
    gc.collect()
    gc.freeze()
    uvicorn.run(app, **uvicorn_options(options, app.service.metrics))


def uvicorn_options(options: ServerOptions, metrics: Metrics) -> dict[str, Any]:
    """How uvicorn serves the app, its connections counted in ``metrics``
    (bench/echo_app.py serves its floors the same way)."""
    from app.transports.connections import limited_http
    from app.transports.socket_connections import fair_websockets

    settings = options.settings
    websockets = fair_websockets(options.ws_max_connections, options.body_timeout, metrics)
    return {
        "host": options.host,
        "port": options.port,
        "log_level": options.log_level,
        "access_log": options.access_log,
        # Client addresses from a balancer's X-Forwarded-For are read only for the access
        # log, the one place that shows them: the middleware costs every chunk.
        "proxy_headers": options.access_log,
        "loop": "uvloop",
        # A message over the request limit (a batch frame over its own) is refused by the
        # app as one error reply (the connection stays); uvicorn's own limit, beyond it,
        # closes the connection.
        "ws_max_size": max(settings.max_request_bytes, settings.batch_max_bytes) + 1024 * 1024,
        # A chunk's message is a few hundred bytes: deflating it cost more CPU than the
        # rest of its answer (profiled, bench/README.md).
        "ws_per_message_deflate": False,
        "ws": websockets,
        "http": limited_http(
            options.header_timeout, options.body_timeout, options.max_connections, websockets.opened
        ),
    }
