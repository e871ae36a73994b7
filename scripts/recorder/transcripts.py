"""One configuration's transcripts: each scenario rendered, derendered one-shot and as
streams through the oracle, and written as the suite's golden records."""

from __future__ import annotations

import random
from typing import Any

from recorder.common import (
    ASK_SUM,
    ASK_WEATHER,
    CHAT,
    MAX_MODEL_LEN,
    RENDER,
    SYSTEM,
    THINK,
    TOOLS,
    Config,
    Scenario,
    _chat,
)
from recorder.oracle import post_json

# --- building records --------------------------------------------------------------


class Recorder:
    def __init__(self, config: Config, url: str, tokenizer: Any) -> None:
        self.config = config
        self.url = url
        self.tokenizer = tokenizer
        self.served = config.served
        self.flags = ["--served-model-name", self.served, "--max-model-len", str(MAX_MODEL_LEN)]
        self.flags += config.flags
        self.records: list[dict[str, Any]] = []

    def base(self, scenario: str, kind: str, suffix: str = "") -> dict[str, Any]:
        name = f"{self.config.name}.{scenario}"
        return {
            "id": f"{name}/{kind}{suffix}",
            "scenario": name,
            "config": self.config.name,
            "server_flags": self.flags,
            "kind": kind,
            "endpoint": CHAT,
            "model": self.served,
        }

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render(self, chat_request: dict[str, Any]) -> tuple[str, list[int]]:
        # Rendering refuses stream_options on a non-streaming request; the prompt
        # does not depend on them.
        render = {k: v for k, v in chat_request.items() if k != "stream_options"}
        status, body = post_json(self.url, RENDER, render)
        if status == 400 and body.get("error", {}).get("param") == "tool_choice":
            # A parser that cannot force calls at render time (vLLM's ``hf``) refuses a
            # required or named tool_choice there; derender reads the output all the
            # same, and the prompt does not depend on tool_choice.
            render["tool_choice"] = "auto"
            status, body = post_json(self.url, RENDER, render)
        if status != 200:
            raise RuntimeError(f"render failed: {status} {body}")
        return body["request_id"], body["token_ids"]

    def scenario(self, s: Scenario) -> None:
        request_id, prompt = self.render(s.chat_request)
        rng = random.Random(f"{self.config.name}.{s.name}")
        choices = []
        for index, text in enumerate(s.outputs):
            stop = s.stop_token if s.stop_token is not None else self.config.eos
            ids = self.encode(text + (stop if s.finish == "stop" else ""))
            choice: dict[str, Any] = {"index": index, "token_ids": ids, "finish_reason": s.finish}
            if s.logprobs:
                choice["logprobs"] = {"content": [self.logprob(t, s.logprobs, rng) for t in ids]}
            choices.append(choice)
        context = {
            "prompt_token_ids": prompt,
            "prompt_tokens": len(prompt),
            "chat_request": s.chat_request,
        }
        if s.one_shot:
            record = self.base(s.name, "chat") | context
            record["request"] = {
                "model": self.served,
                "generate_response": {"request_id": request_id, "choices": choices},
                "prompt_tokens": len(prompt),
                "prompt_token_ids": prompt,
                "chat_request": s.chat_request,
            }
            status, body = post_json(self.url, CHAT, record["request"])
            record["expected"] = {"status": status, "body": body}
            record["notes"] = s.notes
            self.records.append(record)
        usage = None
        if s.usage_chunk:
            completion = sum(len(c["token_ids"]) for c in choices)
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
            }
        stream_context = context | {"chat_request": s.chat_request | {"stream": True}}
        for chunking in self.config.chunkings:
            chunks, lanes = self.chunks(request_id, choices, chunking, usage)
            record = self.base(s.name, "chat_stream", f"#{chunking}") | stream_context
            record |= {"chunking": chunking, "chunks": chunks, "lanes": lanes}
            record["expected"] = self.stream(record)
            record["notes"] = s.notes
            self.records.append(record)

    @staticmethod
    def logprob(token_id: int, top: int, rng: random.Random) -> dict[str, Any]:
        chosen = round(-rng.uniform(0.0, 3.0), 4)
        candidates = [{"token_id": token_id, "logprob": chosen, "rank": 1}]
        for rank in range(2, top + 1):
            other = rng.randrange(100, 128000)
            candidates.append(
                {
                    "token_id": other,
                    "logprob": round(chosen - rng.uniform(0.1, 4.0), 4),
                    "rank": rank,
                }
            )
        return {"token_id": token_id, "logprob": chosen, "rank": 1, "top_logprobs": candidates}

    @staticmethod
    def chunks(
        request_id: str,
        choices: list[dict[str, Any]],
        chunking: str,
        usage: dict[str, Any] | None,
    ) -> tuple[list[dict[str, Any]], list[int]]:
        """Split every choice's ids; interleave the choices; a usage-only chunk last."""
        rng = random.Random(16)
        per_choice = []
        for choice in choices:
            ids = choice["token_ids"]
            pieces = []
            start = 0
            while start < len(ids):
                size = {"t1": 1, "t3": 3}.get(chunking) or rng.randint(1, 6)
                pieces.append((start, min(start + size, len(ids))))
                start += size
            chunks = []
            for number, (begin, end) in enumerate(pieces):
                last = number == len(pieces) - 1
                part: dict[str, Any] = {
                    "index": choice["index"],
                    "token_ids": ids[begin:end],
                    "finish_reason": choice["finish_reason"] if last else None,
                }
                if "logprobs" in choice:
                    part["logprobs"] = {"content": choice["logprobs"]["content"][begin:end]}
                chunks.append({"request_id": request_id, "choices": [part]})
            per_choice.append(chunks)
        ordered: list[dict[str, Any]] = []
        lanes: list[int] = []
        for round_ in range(max(len(c) for c in per_choice)):
            for index, chunks in enumerate(per_choice):
                if round_ < len(chunks):
                    ordered.append(chunks[round_])
                    lanes.append(index)
        if usage is not None:
            ordered.append({"request_id": request_id, "choices": [], "usage": usage})
            lanes.append(0)
        return ordered, lanes

    def stream(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """Post every chunk, threading vLLM's own state per lane; states only at a lane's end."""
        states: dict[int, Any] = {}
        expected: list[dict[str, Any]] = []
        last_call = {lane: i for i, lane in enumerate(record["lanes"])}
        for i, (chunk, lane) in enumerate(zip(record["chunks"], record["lanes"], strict=True)):
            body: dict[str, Any] = {"stream": True, "model": self.served, "generate_chunk": chunk}
            if lane in states:
                body["stream_state"] = states[lane]
            for key in ("prompt_tokens", "prompt_token_ids", "chat_request"):
                body[key] = record[key]
            status, reply = post_json(self.url, CHAT, body)
            if status != 200:
                expected.append({"status": status, "body": reply})
                continue
            states[lane] = reply["stream_state"]
            entry = {"status": 200, "chunk": reply["chunk"]}
            if last_call[lane] == i:
                entry["stream_state"] = reply["stream_state"]
            expected.append(entry)
        return expected

    def error(self, name: str, notes: str, body: dict[str, Any], **fields: Any) -> None:
        record = self.base(name, "error") | fields
        record["request"] = body
        status, reply = post_json(self.url, CHAT, body)
        if status == 200:
            raise RuntimeError(f"{name}: expected an error, got 200")
        record["expected"] = {"status": status, "body": reply}
        record["notes"] = notes
        self.records.append(record)

    def errors(self) -> None:
        parsed = bool(self.config.flags)
        chat_request = _chat([ASK_SUM], chat_template_kwargs=THINK) | {"model": self.served}
        request_id, prompt = self.render(chat_request)
        ids = self.encode("391." + self.config.eos)
        response = {
            "request_id": request_id,
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}],
        }
        context = {"prompt_token_ids": prompt, "prompt_tokens": len(prompt)}
        self.error(
            "err_wrong_model",
            "unknown model name -> 404",
            {"model": "no-such-model", "generate_response": response, **context},
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
        )
        chunk = {
            "request_id": request_id,
            "choices": [
                {"index": 0, "token_ids": ids[:2], "finish_reason": None},
                {"index": 1, "token_ids": ids[:2], "finish_reason": None},
            ],
        }
        self.error(
            "err_two_choices_stream",
            "two choices in one stream chunk",
            {
                "stream": True,
                "model": self.served,
                "generate_chunk": chunk,
                **context,
                "chat_request": chat_request | {"stream": True},
            },
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
            chat_request=chat_request | {"stream": True},
        )
        if not parsed:
            return
        self.error(
            "err_missing_chat_request",
            "parser configured, chat_request missing (non-streaming)",
            {"model": self.served, "generate_response": response, **context},
            prompt_token_ids=prompt,
            prompt_tokens=len(prompt),
        )
        single = {"request_id": request_id, "choices": [chunk["choices"][0]]}
        self.error(
            "err_missing_prompt_ids_stream",
            "parser configured, prompt_token_ids missing on a streaming call",
            {
                "stream": True,
                "model": self.served,
                "generate_chunk": single,
                "chat_request": chat_request | {"stream": True},
            },
            chat_request=chat_request | {"stream": True},
        )
        if "--tool-call-parser" in self.config.flags:
            named = _chat(
                [SYSTEM, ASK_WEATHER],
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "no_such_tool"}},
            ) | {"model": self.served}
            self.error(
                "err_named_tool_not_in_tools",
                "named tool_choice that matches no tool (chat_request validation)",
                {
                    "model": self.served,
                    "generate_response": response,
                    **context,
                    "chat_request": named,
                },
                prompt_token_ids=prompt,
                prompt_tokens=len(prompt),
                chat_request=named,
            )
