"""render: /render CPU per request, ours against vLLM's render server in one run.

Each server renders the same chat requests (a user turn of the given length in prompt
tokens, with and without tools) one at a time; the server's CPU over the timed
requests, read from /proc, divided by their number is the figure. Both load the same
model directory (the bundled ``qwen3``: Qwen3's tokenizer, chat template and sampling
defaults) with the same parser flags, and must render the same token ids.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.tokens.bundled_qwen3 import bundled_qwen3_dir
from bench.report import machine, progress, table, write
from bench.servers import Command, Target, cpu_seconds, running
from bench.workload import SERVER_FLAGS, TOOLS, qwen3

PATH = "/v1/chat/completions/render"
PROMPT_TOKENS = (100, 1000, 8000, 32000)
MAX_MODEL_LEN = 40000
# The acceptance bounds: our CPU per request over vLLM's, by prompt length.
BOUNDS = {100: 0.25, 32000: 0.5}


@dataclass(frozen=True, slots=True)
class Row:
    server: str
    prompt_tokens: int
    tools: bool
    cpu_ms: float  # server CPU per request
    p50_ms: float  # client-side latency
    rendered_tokens: int


def user_text(tokens: int) -> str:
    """A user turn of about ``tokens`` Qwen3 tokens (each word below is one)."""
    words = ("weather", " fares", " hotel", " Lisbon", " plan", " trip", " river", " day")
    return "".join(words[i % len(words)] for i in range(tokens)).strip()


def request(tokens: int, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "qwen3",
        "request_id": "bench",
        "messages": [{"role": "user", "content": user_text(tokens)}],
    }
    if tools:
        body["tools"] = TOOLS
    return body


def post(base: str, body: bytes) -> dict[str, Any]:
    asked = urllib.request.Request(
        base + PATH, data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(asked, timeout=300) as reply:
        result: dict[str, Any] = json.loads(reply.read())
        return result


def measure(
    name: str, target: Target, args: argparse.Namespace
) -> tuple[list[Row], dict[Any, Any]]:
    rows, ids = [], {}
    base = target.bases[0]
    for tokens in args.prompt_tokens:
        for tools in (False, True):
            body = json.dumps(request(tokens, tools)).encode()
            for _ in range(args.warmup):
                post(base, body)
            latencies: list[float] = []
            before, began = cpu_seconds(target), time.perf_counter()
            # enough requests that /proc's 10 ms CPU ticks are a small error
            while len(latencies) < args.requests or time.perf_counter() - began < args.seconds:
                started = time.perf_counter()
                rendered = post(base, body)
                latencies.append(time.perf_counter() - started)
            spent = cpu_seconds(target) - before
            ids[tokens, tools] = rendered["token_ids"]
            row = Row(name, tokens, tools, 1000 * spent / len(latencies),
                      1000 * statistics.median(latencies), len(rendered["token_ids"]))  # fmt: skip
            progress(
                f"{name}: {tokens} tokens{' + tools' if tools else ''}: {row.cpu_ms:.2f} ms CPU"
            )
            rows.append(row)
    return rows, ids


def servers(args: argparse.Namespace, model: Path) -> list[tuple[str, Command]]:
    flags = ["--max-model-len", str(MAX_MODEL_LEN), *SERVER_FLAGS]
    ours = [sys.executable, "-m", "app", "--model", str(model), "--served-model-name", "qwen3"]
    chosen = [("ours", Command([*ours, "--log-level", "warning", *flags]))]
    if args.vllm_python is not None:
        vllm = [str(args.vllm_python), "-m", "vllm.entrypoints.cli.main", "launch", "render"]
        vllm += [str(model), "--served-model-name", "qwen3", "--host", "127.0.0.1", *flags]
        vllm += ["--disable-uvicorn-access-log", "--uvicorn-log-level", "warning"]
        env = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        chosen.append(("vllm", Command(vllm, env, startup_s=300.0)))
    return chosen


def report(rows: list[Row], same_ids: bool) -> str:
    ours = {(r.prompt_tokens, r.tools): r for r in rows if r.server == "ours"}
    vllm = {(r.prompt_tokens, r.tools): r for r in rows if r.server == "vllm"}
    lines = []
    for key, row in ours.items():
        theirs = vllm.get(key)
        ratio = f"{row.cpu_ms / theirs.cpu_ms:.2f}x" if theirs else "-"
        rate = row.rendered_tokens / row.cpu_ms * 1000 if row.cpu_ms else 0.0
        lines.append([
            f"{key[0]}{' + tools' if key[1] else ''}", str(row.rendered_tokens),
            f"{row.cpu_ms:.2f}", f"{theirs.cpu_ms:.2f}" if theirs else "-", ratio,
            f"{row.p50_ms:.2f}", f"{theirs.p50_ms:.2f}" if theirs else "-", f"{rate:,.0f}",
        ])  # fmt: skip
    columns = ["prompt", "tokens", "ours CPU ms", "vLLM CPU ms", "ours/vLLM", "ours p50 ms",
               "vLLM p50 ms", "ours tokens/CPU s"]  # fmt: skip
    text = "## /render: server CPU per request\n\n" + table(columns, lines)
    if vllm:
        text += f"\n\nSame token ids on both servers: {'yes' if same_ids else 'NO'}."
    return text


def main(args: argparse.Namespace) -> int:
    model = args.model or bundled_qwen3_dir()
    qwen3()  # built before any timing
    rows: list[Row] = []
    seen: list[dict[Any, Any]] = []
    for name, command in servers(args, model):
        progress(f"starting {name}")
        with running([command]) as target:
            measured, ids = measure(name, target, args)
        rows += measured
        seen.append(ids)
    same = all(ids == seen[0] for ids in seen)
    write(args.out, "render", {"machine": machine(), "rows": rows}, report(rows, same))
    if not same:
        return 1
    return 0
