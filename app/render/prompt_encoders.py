"""Models vLLM renders without a chat template: their prompt encoders, by architecture.

vLLM 0.33.0 picks a renderer from the model's architecture (its tokenizer mode); for
the ones in this table it writes the prompt in Python rather than from a template, and
so does this server. A model not in the table renders with its chat template.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from app.render.deepseek_v4 import DeepseekV4Encoder
from app.render.template import ContentFormat


class PromptEncoder(Protocol):
    """Writes a model's prompt text from vLLM's conversation and the template kwargs."""

    content_format: ContentFormat

    def render(self, conversation: list[dict[str, Any]], kwargs: dict[str, Any]) -> str: ...

    def fill_in_middle(self, prompt: str, suffix: str) -> str:
        """A completion's text and suffix as the model's fill-in-the-middle prompt."""
        ...


# The architecture a model's config.json names first, to its encoder (given the
# render timeout).
ENCODERS: dict[str, Callable[[float], PromptEncoder]] = {
    "DeepseekV4ForCausalLM": DeepseekV4Encoder,
    "DeepseekV4ForConditionalGeneration": DeepseekV4Encoder,
}


def prompt_encoder(config: dict[str, Any], timeout: float) -> PromptEncoder | None:
    """The encoder for the model a config.json describes, or None (a chat template)."""
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        return None
    make = ENCODERS.get(architectures[0]) if isinstance(architectures[0], str) else None
    return make(timeout) if make is not None else None
