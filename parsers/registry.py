"""Parser names as vLLM spells them, and the start-up checks on them."""

from __future__ import annotations

from collections.abc import Callable

REASONING_PARSERS = frozenset({"qwen3", "deepseek_r1"})

# Aliases map to the parser they share an implementation with.
TOOL_PARSERS = {
    "hermes": "hermes",
    "qwen3_json": "hermes",
    "qwen3_coder": "qwen3_coder",
    "qwen3_xml": "qwen3_coder",
    "xlam": "xlam",
    "pythonic": "pythonic",
    "llama3_json": "llama3_json",
}

# Tool parsers that need a marker token in the vocabulary to work at all.
_REQUIRED_TOKENS = {"llama3_json": "<|python_tag|>"}


class ParserConfigError(ValueError):
    """A parser flag that cannot work with this server or tokenizer."""


def check_parser_flags(
    tool_parser: str | None,
    reasoning_parser: str | None,
    has_token: Callable[[str], bool],
) -> None:
    """Fail start-up on an unknown parser name or one the tokenizer cannot serve."""
    if reasoning_parser is not None and reasoning_parser not in REASONING_PARSERS:
        known = ", ".join(sorted(REASONING_PARSERS))
        raise ParserConfigError(
            f"unknown --reasoning-parser {reasoning_parser!r}; choose one of: {known}"
        )
    if tool_parser is None:
        return
    if tool_parser not in TOOL_PARSERS:
        known = ", ".join(sorted(TOOL_PARSERS))
        raise ParserConfigError(
            f"unknown --tool-call-parser {tool_parser!r}; choose one of: {known}"
        )
    marker = _REQUIRED_TOKENS.get(TOOL_PARSERS[tool_parser])
    if marker is not None and not has_token(marker):
        raise ParserConfigError(
            f"--tool-call-parser {tool_parser} cannot be used with this tokenizer: "
            f"it has no {marker!r} token to mark tool calls."
        )
