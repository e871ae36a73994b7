"""``python -m app.examples [FAMILY] [--model DIR] [--url URL] [--chunk-tokens N]``:
stream one family's quick start and print its deltas; without FAMILY, list them with
the command that starts a server for each. A family whose vocabulary is not bundled
takes ``--model DIR``, the model's own directory."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO, cast

import httpx

from app.examples.families import EXAMPLES, Example
from app.serving.cli import parse_options
from app.serving.server import create_app
from app.tokens.tokenizer import Tokenizer, load_tokenizer
from app.transports.client import DerenderClient

_IN_PROCESS_URL = "http://in-process"


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.examples", description=__doc__)
    parser.add_argument("family", nargs="?", choices=sorted(EXAMPLES), help="a quick start")
    parser.add_argument(
        "--model",
        metavar="DIR",
        help="the model (or tokenizer) directory whose vocabulary the family's model writes; "
        "required where none is bundled, and the same --model the server at --url was given",
    )
    parser.add_argument(
        "--url",
        help="a running server started with the family's flags (default: an app built in "
        "this process with them)",
    )
    parser.add_argument("--chunk-tokens", type=int, default=4, help="token ids per chunk")
    args = parser.parse_args(argv)
    if args.family is None:
        for name, example in EXAMPLES.items():
            print(f"{name:18} {example.family}", file=out)
            print(f"{'':18} scripts/serve {' '.join(example.flags())}", file=out)
        return
    example = EXAMPLES[args.family]
    if not example.bundled and args.model is None:
        parser.error(
            f"{args.family}: no tokenizer of {example.family} is bundled; give --model DIR, "
            "a local directory of that model (its tokenizer files suffice)"
        )
    run(example, args.url, args.chunk_tokens, out, model=args.model)


def run(
    example: Example,
    url: str | None,
    chunk_tokens: int,
    out: TextIO,
    tokenizer: Tokenizer | None = None,
    model: str | None = None,
) -> None:
    """Tokenize the example's prompt and output with ``model``'s tokenizer (else the
    bundled one; ``tokenizer`` if given is that one, loaded already), stream the output
    ``chunk_tokens`` ids a chunk, and print every delta, then the calls the stream made."""
    model = model or example.tokenizer
    tokenizer = tokenizer or load_tokenizer(model)
    prompt_ids = tokenizer.encode(example.prompt)
    output_ids = tokenizer.encode(example.output)
    print(f"{example.family}: {len(output_ids)} output token ids", file=out)
    calls: dict[int, dict[str, str]] = {}
    with _client(example.flags(model), url, tokenizer) as client:
        stream = client.stream(
            "quickstart",
            chat_request=example.chat_request(model),
            prompt_token_ids=prompt_ids,
        )
        for reply in stream.run(output_ids, sizes=[chunk_tokens]):
            choice = reply.chunk["choices"][0]
            _print_delta(choice["delta"], calls, out)
            if choice.get("finish_reason"):
                print(f"finish_reason: {choice['finish_reason']}", file=out)
    for call in calls.values():
        print(f"called {call['name']}({call['arguments']})", file=out)


@contextlib.contextmanager
def _client(flags: list[str], url: str | None, tokenizer: Tokenizer) -> Iterator[DerenderClient]:
    """A client of ``url``, or of an app built here with ``flags``."""
    if url is not None:
        with DerenderClient(url) as client:
            yield client
        return
    from starlette.testclient import TestClient

    settings = parse_options(flags).settings
    app = create_app(settings, tokenizer)
    with TestClient(app, base_url=_IN_PROCESS_URL) as http:
        # Starlette's TestClient is an httpx.Client that calls the app in process.
        yield DerenderClient(_IN_PROCESS_URL, http=cast(httpx.Client, http))


def _print_delta(delta: dict[str, Any], calls: dict[int, dict[str, str]], out: TextIO) -> None:
    if delta.get("reasoning"):
        print(f"reasoning: {delta['reasoning']!r}", file=out)
    if delta.get("content"):
        print(f"content:   {delta['content']!r}", file=out)
    for call in delta.get("tool_calls") or []:
        function = call.get("function") or {}
        name, arguments = function.get("name") or "", function.get("arguments") or ""
        print(f"tool call {call['index']}: {name}{arguments}", file=out)
        entry = calls.setdefault(call["index"], {"name": "", "arguments": ""})
        entry["name"] += name
        entry["arguments"] += arguments


if __name__ == "__main__":
    try:
        main()
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        sys.exit(f"python -m app.examples: {exc}")
