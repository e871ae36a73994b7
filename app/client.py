"""Drive one streamed chat through a derender tier, as an orchestrator does.

Each generate chunk is one POST to ``/v1/chat/completions/derender``. The reply's
``stream_state`` goes into the next call byte for byte (it is never decoded into
objects and rebuilt), and every call carries ``X-Derender-Stream-Id`` so a balancer
hashing on it keeps the stream on the process that holds its session.

    python -m app.client http://127.0.0.1:8000     # a short demo stream, chunk by chunk
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from typing import Any

import httpx
import msgspec

from app.routing import STREAM_ID_HEADER

CHAT_PATH = "/v1/chat/completions/derender"
CACHE_HEADER = "x-derender-cache"

# The demo stream, Qwen3 token ids for a chat that says "Hi": the prompt as the chat
# template renders it, and an output with reasoning and an answer.
DEMO_PROMPT_IDS = (151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198)
DEMO_OUTPUT_IDS = (
    151667, 198, 785, 1196, 2727, 23811, 11, 773, 358, 40786, 1105, 1182, 624, 151668,
    271, 9707, 0, 2585, 646, 358, 1492, 498, 3351, 30, 151645,
)  # fmt: skip


class _Reply(msgspec.Struct):
    stream_state: msgspec.Raw


_decode_reply = msgspec.json.Decoder(_Reply).decode


def split(token_ids: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """Cut an output into generate chunks, cycling through ``sizes`` tokens each."""
    if not sizes or min(sizes) < 1:
        raise ValueError("chunk sizes must be positive")
    cycle = itertools.cycle(sizes)
    chunks: list[list[int]] = []
    start = 0
    while start < len(token_ids):
        size = next(cycle)
        chunks.append(list(token_ids[start : start + size]))
        start += size
    return chunks


class ChatStream:
    """One stream: its request id, what every chunk repeats, and the state to thread.

    ``route=False`` leaves the header off, as a client unaware of the convention
    would; the responses are the same, only the balancer can no longer keep the
    stream on one process.
    """

    def __init__(
        self,
        http: httpx.Client,
        request_id: str,
        *,
        chat_request: dict[str, Any],
        prompt_token_ids: Sequence[int],
        route: bool = True,
    ) -> None:
        self.http = http
        self.request_id = request_id
        self._chat_request = msgspec.Raw(msgspec.json.encode(chat_request))
        self._prompt_token_ids = msgspec.Raw(msgspec.json.encode(list(prompt_token_ids)))
        self._headers = {"content-type": "application/json"}
        if route:
            self._headers[STREAM_ID_HEADER] = request_id
        self._state: msgspec.Raw | None = None

    def send(self, token_ids: Sequence[int], finish_reason: str | None = None) -> httpx.Response:
        """Derender one generate chunk; raises ``httpx.HTTPStatusError`` on an error reply."""
        choice = {"index": 0, "token_ids": list(token_ids), "finish_reason": finish_reason}
        body: dict[str, Any] = {
            "stream": True,
            "generate_chunk": {"request_id": self.request_id, "choices": [choice]},
            "chat_request": self._chat_request,
            "prompt_token_ids": self._prompt_token_ids,
        }
        if self._state is not None:
            body["stream_state"] = self._state
        response = self.http.post(
            CHAT_PATH, content=msgspec.json.encode(body), headers=self._headers
        )
        response.raise_for_status()
        self._state = _decode_reply(response.content).stream_state
        return response

    def run(
        self, output_ids: Sequence[int], sizes: Sequence[int] = (1,), finish_reason: str = "stop"
    ) -> list[httpx.Response]:
        """Send a whole output chunk by chunk; the last chunk carries ``finish_reason``."""
        *body, last = split(output_ids, sizes) or [[]]
        return [*(self.send(chunk) for chunk in body), self.send(last, finish_reason)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Stream a short demo chat through derender.")
    parser.add_argument("url", help="the server or balancer, e.g. http://127.0.0.1:8000")
    parser.add_argument("--request-id", default="demo-stream")
    parser.add_argument("--chunk-tokens", type=int, default=1, help="tokens per chunk")
    parser.add_argument("--no-header", action="store_true", help=f"leave {STREAM_ID_HEADER} off")
    args = parser.parse_args(argv)
    text = {"reasoning": "", "content": ""}
    chunks = split(DEMO_OUTPUT_IDS, [args.chunk_tokens])
    try:
        with httpx.Client(base_url=args.url, timeout=30) as http:
            stream = ChatStream(
                http,
                args.request_id,
                chat_request={"messages": [{"role": "user", "content": "Hi"}]},
                prompt_token_ids=DEMO_PROMPT_IDS,
                route=not args.no_header,
            )
            for number, chunk in enumerate(chunks, 1):
                reply = stream.send(chunk, "stop" if number == len(chunks) else None)
                delta = reply.json()["chunk"]["choices"][0]["delta"]
                cache = reply.headers.get(CACHE_HEADER, "-")
                shown = {key: delta[key] for key in text if delta.get(key)}
                print(f"chunk {number:>2}  cache {cache:<4}  {shown}")
                for key, value in shown.items():
                    text[key] += value
    except httpx.HTTPStatusError as exc:
        print(f"{exc}\n{exc.response.text}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    for key, value in text.items():
        print(f"{key}: {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
