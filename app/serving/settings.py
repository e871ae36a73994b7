"""Server settings, resolved once from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Settings:
    model: str = "qwen3"
    tokenizer: str | None = None
    served_model_names: tuple[str, ...] = ()
    max_model_len: int | None = None
    max_logprobs: int = 20
    max_n_sequences: int = 16384
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    enable_auto_tool_choice: bool = False
    default_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    chat_template: str | None = None
    trust_request_chat_template: bool = False
    render_timeout: float = 30.0
    max_render_chars: int = 4 * 1024 * 1024
    system_start_date: str | None = None
    max_request_bytes: int = 32 * 1024 * 1024
    max_chat_request_bytes: int = 8 * 1024 * 1024
    max_tools: int = 128
    max_json_depth: int = 64
    allow_out_of_vocab: bool = False
    api_key: str | None = None
    inline_tokens: int = 64
    replay_workers: int = 2
    max_request_cpu_seconds: float = 10.0
    stream_cache_size: int = 4096
    stream_cache_max_bytes: int = 1024 * 1024 * 1024
    stream_cache_ttl: float = 300.0
    redis_url: str | None = None
    redis_secret: str | None = None
    redis_ttl: int = 300
    redis_timeout_ms: float = 50.0
    redis_max_snapshot_bytes: int = 1024 * 1024
    max_response_bytes: int = 64 * 1024 * 1024
    ws_max_streams: int = 256
    ws_idle_timeout: float = 300.0
    batch_max_entries: int = 1024
    batch_max_bytes: int = 4 * 1024 * 1024

    @property
    def served_names(self) -> tuple[str, ...]:
        return self.served_model_names or (self.model,)
