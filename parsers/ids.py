"""Deterministic tool-call ids in vLLM's formats.

An id is derived from a seed that names the stream and choice plus the call's
index, so a replay, a retry or another replica produces the same id.
"""

from __future__ import annotations

import hashlib

from parsers.types import DeltaToolCall


def _hex16(seed: str, index: int) -> str:
    return hashlib.blake2b(f"{seed}\x00{index}".encode(), digest_size=8).hexdigest()


def chat_tool_call_id(seed: str, index: int) -> str:
    """vLLM's default format: ``chatcmpl-tool-`` and 16 hex digits."""
    return f"chatcmpl-tool-{_hex16(seed, index)}"


def xlam_tool_call_id(seed: str, index: int) -> str:
    """xLAM's format: ``call_<index>_`` and 16 hex digits."""
    return f"call_{index}_{_hex16(seed, index)}"


_ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def mistral_tool_call_id(seed: str, index: int) -> str:
    """Mistral's format: 9 letters and digits (what Mistral's own validator accepts)."""
    digest = hashlib.blake2b(f"{seed}\x00{index}".encode(), digest_size=9).digest()
    return "".join(_ALPHANUMERIC[byte % len(_ALPHANUMERIC)] for byte in digest)


def opening_call_delta(
    seed: str, index: int, name: str | None, arguments: str | None = None
) -> DeltaToolCall:
    """The first streamed piece of call ``index``: the only one with its id and type."""
    return DeltaToolCall(
        id=chat_tool_call_id(seed, index),
        type="function",
        index=index,
        name=name,
        arguments=arguments,
    )


def hunyuan_tool_call_id(seed: str, index: int) -> str:
    """Hunyuan-A13B's one-shot format: ``call_`` and 16 hex digits."""
    return f"call_{_hex16(seed, index)}"
