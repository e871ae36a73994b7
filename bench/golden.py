"""The golden transcripts recorded from vLLM 0.33.0 (tests/golden/), read as data.

The soak replays their streams as a client would; only the reading and the request
body are needed here (the suite's comparison rules are not bench's business).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "tests" / "golden"
# The request fields a recorded stream sends with every chunk, when it has them.
CONTEXT_FIELDS = ("prompt_tokens", "prompt_token_ids", "chat_request", "completion_request")


def load_cases(config: str) -> list[dict[str, Any]]:
    """Every recorded case of a configuration (``C1`` ...), as JSON."""
    with gzip.open(GOLDEN_DIR / f"golden-{config}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def stream_body(case: dict[str, Any], chunk: dict[str, Any], state: Any) -> dict[str, Any]:
    """The request a recorded stream sends with ``chunk``, after a reply's ``state``."""
    omit = set(case.get("omit") or ())
    body: dict[str, Any] = {"stream": True}
    if case.get("model") is not None and "model" not in omit:
        body["model"] = case["model"]
    body["generate_chunk"] = chunk
    if state is not None:
        body["stream_state"] = state
    for key in CONTEXT_FIELDS:
        if case.get(key) is not None and key not in omit:
            body[key] = case[key]
    return body
