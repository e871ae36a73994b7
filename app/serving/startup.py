"""What the operator reads at start-up: parser flags that cannot work (before the
tokenizer loads), the settings in force, and flags that do nothing.

A server that starts silently with a flag that has no effect costs its user an hour
of reading raw markup; one line in the log costs nothing. Secrets never reach it: the
API key is reported as required or not, a Redis URL without its password.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from app.serving.settings import Settings
from app.serving.sizes import human_size
from parsers.registry import ParserConfigError, named_parsers

logger = logging.getLogger("derender_server")


def redacted_url(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def check_parser_flags(settings: Settings) -> None:
    """Refuse parser flags that no tokenizer could make work, in the seconds before one
    loads: unknown names, a tool-call choice without its parser, and a format read whole
    (gpt-oss's Harmony) paired with another family's parser. Whether the tokenizer has
    a parser's markers is checked once it is loaded (parsers/registry.py)."""
    if settings.enable_auto_tool_choice and settings.tool_call_parser is None:
        raise ParserConfigError(
            "--enable-auto-tool-choice requires --tool-call-parser NAME (as in vLLM); "
            "add one, or drop --enable-auto-tool-choice"
        )
    named_parsers(
        settings.tool_call_parser, settings.reasoning_parser, settings.enable_auto_tool_choice
    )


def ineffective_flags(settings: Settings) -> list[str]:
    """Warnings for flag combinations that start fine but change nothing."""
    if settings.tool_call_parser is not None and not settings.enable_auto_tool_choice:
        return [
            f"--tool-call-parser {settings.tool_call_parser} is inactive without "
            "--enable-auto-tool-choice (as in vLLM): tool calls come back as raw markup "
            "in content. Add --enable-auto-tool-choice to parse them."
        ]
    return []


def configuration(settings: Settings, max_model_len: int) -> list[str]:
    """The settings in force, a line per concern."""
    tools = settings.tool_call_parser or "none"
    if settings.tool_call_parser is not None:
        tools += " (active)" if settings.enable_auto_tool_choice else " (inactive)"
    cache = (
        f"stream cache: up to {settings.stream_cache_size} sessions, "
        f"{human_size(settings.stream_cache_max_bytes)}, {settings.stream_cache_ttl:g} s idle"
        if settings.stream_cache_size
        else "stream cache: off (every chunk replays its history)"
    )
    redis = (
        f"redis: {redacted_url(settings.redis_url)} (ttl {settings.redis_ttl} s, "
        f"timeout {settings.redis_timeout_ms:g} ms, snapshots up to "
        f"{human_size(settings.redis_max_snapshot_bytes)})"
        if settings.redis_url
        else "redis: off"
    )
    return [
        f"model: {settings.model}"
        + (f", tokenizer: {settings.tokenizer}" if settings.tokenizer else "")
        + f", served as {', '.join(settings.served_names)}, max model len {max_model_len}",
        f"parsers: reasoning {settings.reasoning_parser or 'none'}, tool calls {tools}",
        cache,
        redis,
        f"api key: {'required' if settings.api_key else 'not required'}",
    ]


def log_start_up(settings: Settings, max_model_len: int) -> None:
    for line in configuration(settings, max_model_len):
        logger.info("%s", line)
    for warning in ineffective_flags(settings):
        logger.warning("%s", warning)
