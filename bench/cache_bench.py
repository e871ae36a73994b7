"""One parsed stream over HTTP, session cache on versus off (pure replay), in one run.

Two real server processes (qwen3 reasoning + hermes tools) are started; the same
generated output (reasoning, an answer, tool calls) is streamed through each one
token per chunk, the client threading ``stream_state`` as vLLM's clients do. A third
process, ``bench.echo_app`` on the same uvicorn configuration, receives the same
request bodies and echoes them: the HTTP floor no handler can go below. Reported:
total server CPU (read from the server process), per-chunk latency p50 around an
early and a late position, and their ratios. Absolute times are specific
to the machine; the ratios are the claim.

    python -m bench.cache_bench                  # 4,096 tokens
    python -m bench.cache_bench --tokens 300     # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

from app.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
JSON = {"content-type": "application/json"}
FLAGS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]
PROMPT = (
    "<|im_start|>user\nPlan a weekend in Lisbon and book it.<|im_end|>\n<|im_start|>assistant\n"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_hotel",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def build_output(tokens: int, tokenizer: Any) -> list[int]:
    """Reasoning, then an answer, then tool calls, about ``tokens`` tokens long."""
    thought = "Compare fares, weather and hotels near Alfama before deciding. "
    call = '<tool_call>\n{"name": "book_hotel", "arguments": {"city": "Lisbon"}}\n</tool_call>'
    answer = "Here is the plan for your weekend in Lisbon. "
    ids: list[int] = tokenizer._hf.encode("<think>\n")
    unit = tokenizer._hf.encode(thought)
    while len(ids) < tokens * 3 // 4:
        ids += unit
    ids += tokenizer._hf.encode("\n</think>\n\n" + answer * 4)
    call_ids = tokenizer._hf.encode(call)
    while len(ids) + len(call_ids) < tokens:
        ids += call_ids
    return ids[:tokens]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(command: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``command`` with ``--port`` appended and wait for its /health."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, *command, "--port", str(port)], cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not start")


def run_stream(
    base: str, pid: int, ids: list[int], prompt: list[int], label: str
) -> dict[str, Any]:
    chat_request = {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "Plan"}],
        "tools": TOOLS,
    }
    latencies: list[float] = []
    bodies: list[bytes] = []
    state = None
    cpu_before = cpu_seconds(pid)
    url = f"{base}/v1/chat/completions/derender"
    with httpx.Client(timeout=300) as client:
        for position, token in enumerate(ids):
            last = position == len(ids) - 1
            body: dict[str, Any] = {
                "stream": True,
                "generate_chunk": {
                    "request_id": f"bench-{label}",
                    "choices": [
                        {
                            "index": 0,
                            "token_ids": [token],
                            "finish_reason": "stop" if last else None,
                        }
                    ],
                },
                "prompt_token_ids": prompt,
                "chat_request": chat_request,
            }
            if state is not None:
                body["stream_state"] = state
            bodies.append(msgspec.json.encode(body))
            started = time.perf_counter()
            reply = client.post(url, content=bodies[-1], headers=JSON)
            latencies.append(time.perf_counter() - started)
            reply.raise_for_status()
            state = msgspec.json.decode(reply.content)["stream_state"]
            if position % 256 == 0:
                print(f"  {label}: token {position}/{len(ids)}", file=sys.stderr, flush=True)
    return {"cpu_s": cpu_seconds(pid) - cpu_before, "latencies": latencies, "bodies": bodies}


def run_floor(base: str, pid: int, bodies: list[bytes]) -> dict[str, Any]:
    """Send the recorded request bodies to the echo app: the cost of HTTP alone."""
    latencies: list[float] = []
    cpu_before = cpu_seconds(pid)
    with httpx.Client(timeout=300) as client:
        for position, body in enumerate(bodies):
            started = time.perf_counter()
            client.post(f"{base}/", content=body, headers=JSON).raise_for_status()
            latencies.append(time.perf_counter() - started)
            if position % 256 == 0:
                print(f"  HTTP floor: token {position}/{len(bodies)}", file=sys.stderr, flush=True)
    return {"cpu_s": cpu_seconds(pid) - cpu_before, "latencies": latencies}


def p50_around(latencies: list[float], position: int, window: int = 32) -> float:
    lo = max(0, position - window // 2)
    return statistics.median(latencies[lo : lo + window])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer("qwen3")
    ids = build_output(args.tokens, tokenizer)
    prompt = tokenizer._hf.encode(PROMPT)
    early, late = max(args.tokens // 16, 16), args.tokens - max(args.tokens // 40, 16)
    server = ["-m", "app", "--log-level", "warning", "--max-model-len", "40000", *FLAGS]
    echo = ["-m", "uvicorn", "bench.echo_app:app", "--loop", "uvloop", "--http", "httptools",
            "--log-level", "warning", "--lifespan", "off"]  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    bodies: list[bytes] = []
    for label, command in (
        ("cache on", server),
        ("cache off", [*server, "--stream-cache-size", "0"]),
        ("HTTP floor", echo),
    ):
        process, base = start_server(command)
        try:
            if label == "HTTP floor":
                run = run_floor(base, process.pid, bodies)
            else:
                run = run_stream(base, process.pid, ids, prompt, label)
                bodies = run.pop("bodies")
        finally:
            process.terminate()
            process.wait(timeout=30)
        run["p50_early_ms"] = 1000 * p50_around(run["latencies"], early)
        run["p50_late_ms"] = 1000 * p50_around(run["latencies"], late)
        results[label] = run
    on, off, floor = results["cache on"], results["cache off"], results["HTTP floor"]
    print(f"\n{args.tokens}-token qwen3 + hermes stream, one token per chunk, over HTTP")
    columns = ("server CPU s", f"p50 @{early} ms", f"p50 @{late} ms", "late/early")
    print(f"{'mode':<12}" + "".join(f"{c:>16}" for c in columns))
    for label, run in results.items():
        ratio = run["p50_late_ms"] / run["p50_early_ms"]
        print(
            f"{label:<12}{run['cpu_s']:>14.2f}{run['p50_early_ms']:>16.2f}{run['p50_late_ms']:>16.2f}{ratio:>12.2f}"
        )
    print(f"\nserver CPU, cache on / cache off: 1/{off['cpu_s'] / max(on['cpu_s'], 1e-9):.0f}")
    print(f"server CPU, HTTP floor / cache off: 1/{off['cpu_s'] / max(floor['cpu_s'], 1e-9):.0f}")
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        label: {k: v for k, v in run.items() if k != "latencies"} for label, run in results.items()
    }
    path = args.out / "cache_bench.json"
    path.write_text(
        json.dumps({"tokens": args.tokens, "early": early, "late": late, **summary}, indent=2)
    )
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
