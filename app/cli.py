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

from app.bundled_qwen3 import BUNDLED_NAME
from app.settings import Settings
from app.tokenizer import BUNDLED
from parsers.registry import REASONING_PARSERS, TOOL_PARSERS, listing

if TYPE_CHECKING:
    from app.metrics import Metrics

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


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: ...)`` unless the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


class ListParsers(argparse.Action):
    """``--list-parsers``: print every parser name served, with its family, and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(listing())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="derender-server",
        description="Token ids in, OpenAI chat/completion responses out (vLLM's derender API).",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--model",
        default=BUNDLED_NAME,
        help="a local model/tokenizer directory, a hub id already in the local cache, "
        f"or a bundled tokenizer: {', '.join(BUNDLED)}",
    )
    parser.add_argument(
        "--tokenizer", help="where the tokenizer comes from, if not --model (default: --model)"
    )
    parser.add_argument(
        "--served-model-name",
        nargs="+",
        default=[],
        help="names accepted in a request's model field; the first is echoed (default: --model)",
    )
    parser.add_argument(
        "--max-model-len", type=_positive_int, help="context length (default: the model's)"
    )
    parser.add_argument(
        "--max-logprobs",
        type=int,
        default=20,
        help="most top logprob candidates per position (-1: no limit)",
    )
    parser.add_argument(
        "--max-n-sequences",
        type=_positive_int,
        default=int(os.environ.get("VLLM_MAX_N_SEQUENCES", _DEFAULTS.max_n_sequences)),
        help="most generate responses in a request and choices in a response "
        "(default: $VLLM_MAX_N_SEQUENCES, else %(default)s)",
    )
    parser.add_argument(
        "--tool-call-parser",
        metavar="NAME",
        help=f"tool-call parser, one of {', '.join(TOOL_PARSERS)}; it needs "
        "--enable-auto-tool-choice, as in vLLM (default: none, tool calls stay content)",
    )
    parser.add_argument(
        "--reasoning-parser",
        metavar="NAME",
        help=f"reasoning parser, one of {', '.join(REASONING_PARSERS)} "
        "(default: none, reasoning stays content)",
    )
    parser.add_argument(
        "--list-parsers",
        action=ListParsers,
        help="print every parser name served, with its model family, aliases, the "
        "tokenizer it needs and its golden transcripts, and exit",
    )
    parser.add_argument(
        "--enable-auto-tool-choice",
        action="store_true",
        help="parse tool calls out of the output with --tool-call-parser",
    )
    parser.add_argument(
        "--default-chat-template-kwargs",
        type=_json_object,
        default={},
        help="JSON object merged under each request's chat_template_kwargs",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_positive_int,
        default=_DEFAULTS.max_request_bytes,
        help="largest request body accepted (413 beyond it)",
    )
    parser.add_argument(
        "--max-chat-request-bytes",
        type=_positive_int,
        default=_DEFAULTS.max_chat_request_bytes,
        help="largest chat_request (the original chat request, as sent) accepted",
    )
    parser.add_argument(
        "--max-tools",
        type=_positive_int,
        default=_DEFAULTS.max_tools,
        help="most tools a chat_request may declare (OpenAI's limit)",
    )
    parser.add_argument(
        "--max-json-depth",
        type=_positive_int,
        default=_DEFAULTS.max_json_depth,
        help="deepest nesting of free-form JSON (tool parameters, chat_template_kwargs, "
        "documents, stream_options, kv_transfer_params)",
    )
    parser.add_argument(
        "--allow-out-of-vocab",
        action="store_true",
        help="decode token ids outside the vocabulary to nothing, as vLLM does, instead "
        "of refusing them",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("DERENDER_API_KEY"),  # never shown: the help says "(default"
        help="require 'Authorization: Bearer KEY' on every route but /health "
        "(default: $DERENDER_API_KEY; unset: no key)",
    )
    parser.add_argument(
        "--inline-tokens",
        type=int,
        default=_DEFAULTS.inline_tokens,
        help="requests that decode or replay at most this many tokens run on the event "
        "loop; larger ones go to the worker pool",
    )
    parser.add_argument(
        "--replay-workers",
        type=_positive_int,
        default=_DEFAULTS.replay_workers,
        help="threads that decode large requests and replay long stream histories off "
        "the event loop",
    )
    parser.add_argument(
        "--max-request-cpu-seconds",
        type=_positive_float,
        default=_DEFAULTS.max_request_cpu_seconds,
        help="CPU seconds one request may spend decoding, parsing or replaying before it "
        "is stopped with a 422 and its stream session dropped",
    )
    parser.add_argument(
        "--stream-cache-size",
        type=int,
        default=_DEFAULTS.stream_cache_size,
        help="live stream sessions kept between chunks, on WebSocket connections too "
        "(0: none, every chunk replays)",
    )
    parser.add_argument(
        "--stream-cache-max-bytes",
        type=_positive_int,
        default=_DEFAULTS.stream_cache_max_bytes,
        help="bytes the kept sessions, WebSocket connections' included, may keep alive "
        "(each measured when it is kept)",
    )
    parser.add_argument(
        "--stream-cache-ttl",
        type=float,
        default=_DEFAULTS.stream_cache_ttl,
        help="seconds an unused session is kept",
    )
    parser.add_argument(
        "--redis-url",
        help="share session snapshots across replicas through this Redis "
        "(e.g. redis://127.0.0.1:6379/0); off by default",
    )
    parser.add_argument(
        "--redis-secret",
        default=os.environ.get("DERENDER_REDIS_SECRET"),
        help="key of the HMAC that authenticates snapshots; replicas sharing a Redis "
        "share it (default: $DERENDER_REDIS_SECRET; unset: a random key per process, "
        "so snapshots are private to the process that wrote them)",
    )
    parser.add_argument(
        "--redis-ttl",
        type=_positive_int,
        default=_DEFAULTS.redis_ttl,
        help="seconds a session snapshot is kept in Redis",
    )
    parser.add_argument(
        "--redis-timeout-ms",
        type=_positive_float,
        default=_DEFAULTS.redis_timeout_ms,
        help="bound on each Redis call (connect included); a slower call counts as a miss",
    )
    parser.add_argument(
        "--redis-max-snapshot-bytes",
        type=_positive_int,
        default=_DEFAULTS.redis_max_snapshot_bytes,
        help="larger session snapshots are not written to Redis",
    )
    parser.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=10.0,
        help="seconds a client has to send a request's headers (408 and close after)",
    )
    parser.add_argument(
        "--body-timeout",
        type=_positive_float,
        default=60.0,
        help="seconds a client has to send a request's body once its headers are in "
        "(the connection is closed after)",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive_int,
        default=1000,
        help="open connections served at once; one more is answered 503 and closed",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=_positive_int,
        default=_DEFAULTS.max_response_bytes,
        help="largest one-shot response sent; a larger one is refused with a 400",
    )
    parser.add_argument(
        "--ws-max-streams",
        type=_positive_int,
        default=_DEFAULTS.ws_max_streams,
        help="open streams one WebSocket connection may carry; one more is refused",
    )
    parser.add_argument(
        "--ws-max-connections",
        type=_positive_int,
        default=256,
        help="open WebSocket connections served at once, apart from --max-connections; "
        "one more handshake is answered 503",
    )
    parser.add_argument(
        "--ws-idle-timeout",
        type=_positive_float,
        default=_DEFAULTS.ws_idle_timeout,
        help="seconds a WebSocket connection may go without a message before it is closed",
    )
    parser.add_argument(
        "--batch-max-entries",
        type=_positive_int,
        default=_DEFAULTS.batch_max_entries,
        help="chunks one batch frame may carry (WebSocket or HTTP); a larger frame is refused",
    )
    parser.add_argument(
        "--batch-max-bytes",
        type=_positive_int,
        default=_DEFAULTS.batch_max_bytes,
        help="largest batch frame accepted (WebSocket or HTTP; 413 beyond it); each of its "
        "chunks is still bounded by --max-request-bytes",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="least severe log messages shown",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log a line per request (off by default: a stream sends one request per chunk)",
    )
    return parser


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
    from app.server import build_app
    from app.startup import log_start_up
    from app.tokenizer import TokenizerLoadError
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
    from app.connections import limited_http
    from app.socket_connections import fair_websockets

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
