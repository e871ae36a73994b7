"""Mistral's tekken vocabulary files as Hugging Face tokenizer directories.

Mistral ships its tokenizers as ``tekken.json`` (byte-level BPE ranks after a block
of control tokens); the server loads Hugging Face fast tokenizers. transformers'
tekken converter recovers the merges with the same ids, so a tekken file becomes a
directory the server (and vLLM, in its ``hf`` tokenizer mode) loads like any other:
tokenizer.json, tokenizer_config.json (with a minimal Mistral chat template, which
vLLM needs to render) and config.json.

``renames`` gives filler control tokens (``<SPECIAL_n>``) the names a newer layout
uses, keeping their ids; ``MAGISTRAL_CONTROLS`` is Magistral's (tokenizer v13).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Magistral's v13 control tokens by id: [ARGS] calls and [THINK] reasoning.
MAGISTRAL_CONTROLS = {32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"}

_NAMED_SPECIALS = ("<s>", "</s>", "<unk>", "<pad>")
_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}[INST]{{ message['content'] }}[/INST]"
    "{% elif message['role'] == 'system' %}[SYSTEM_PROMPT]{{ message['content'] }}"
    "[/SYSTEM_PROMPT]"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] or '' }}{{ eos_token }}"
    "{% endif %}{% endfor %}"
)
_CONFIG = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "max_position_embeddings": 131072,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "vocab_size": 131072,
}


def write_tekken_tokenizer(
    tekken: Path, folder: Path, renames: Mapping[int, str] | None = None
) -> None:
    """Convert ``tekken`` into a tokenizer directory at ``folder``."""
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.mistral.tokenizer import MistralConverter

    converter = MistralConverter(str(tekken))
    _rename_controls(converter, renames or {})
    backend = converter.converted()
    controls = [str(t.content) for t in converter.additional_special_tokens]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=[c for c in controls if c not in _NAMED_SPECIALS],
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    for extra in folder.iterdir():
        if extra.name not in ("tokenizer.json", "tokenizer_config.json"):
            extra.unlink()
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = _CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    (folder / "config.json").write_text(json.dumps(_CONFIG, indent=2))
    for token_id, text in (renames or {}).items():
        if backend.token_to_id(text) != token_id:
            raise RuntimeError(f"{text} did not land at id {token_id}")


def _rename_controls(converter: Any, renames: Mapping[int, str]) -> None:
    """Give filler control tokens new names, keeping their ids."""
    from tokenizers import AddedToken

    specials = converter.additional_special_tokens
    vocab = converter._precomputed_vocab
    for token_id, text in renames.items():
        del vocab[str(specials[token_id].content)]
        vocab[text] = token_id
        specials[token_id] = AddedToken(text, special=True)


if __name__ == "__main__":  # python -m app.tokens.tekken TEKKEN_JSON DIR
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m app.tokens.tekken TEKKEN_JSON DIR")
    write_tekken_tokenizer(Path(sys.argv[1]), Path(sys.argv[2]))
