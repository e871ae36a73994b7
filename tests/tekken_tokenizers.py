"""Mistral test tokenizers: Hugging Face directories converted from a tekken file.

``mistral-common`` (a dev dependency) ships Mistral's real tekken vocabulary
(``tekken_240911.json``: Mistral-Nemo's, tokenizer version v3, 1,000 control tokens
then the byte-level ranks). transformers' tekken converter turns it into a fast
tokenizer with the same ids, so:

- ``mistral_v3`` is that real tokenizer: ``[TOOL_CALLS]`` at id 9, no ``[ARGS]`` and
  no ``[THINK]``, the layout of Mistral's pre-v11 models (calls as a JSON array);
- ``mistral_v13`` is a synthetic test tokenizer: the same ranks with four filler
  control tokens renamed to Magistral's v13 layout (``[ARGS]`` 32, ``[CALL_ID]`` 33,
  ``[THINK]`` 34, ``[/THINK]`` 35), for the ``name[ARGS]{...}`` calls and
  ``[THINK]`` reasoning of newer models.

The directory holds only tokenizer.json, tokenizer_config.json (with a minimal
Mistral-style chat template, which vLLM needs to render) and config.json.
``python -m tests.tekken_tokenizers VARIANT DIR`` writes one (the golden recorder
runs it, so recorded ids are the suite's ids).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.bundled import built_once

VARIANTS = ("mistral_v3", "mistral_v13")

# Magistral's v13 control tokens, by id, in place of <SPECIAL_32>..<SPECIAL_35>.
_V13_CONTROLS = {32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"}

# Bump when the written files change, so cached copies are rebuilt.
_BUILD_VERSION = 2

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


def tekken_file() -> Path:
    """The real tekken vocabulary shipped by ``mistral-common``."""
    import mistral_common

    return Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"


def write_tekken_tokenizer(variant: str, folder: Path) -> Path:
    """Write the ``variant`` tokenizer directory into ``folder`` and return it."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Mistral test tokenizer {variant!r}; one of {VARIANTS}")
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.mistral.tokenizer import MistralConverter

    converter = MistralConverter(str(tekken_file()))
    if variant == "mistral_v13":
        _rename_controls(converter, _V13_CONTROLS)
    backend = converter.converted()
    controls = [str(t.content) for t in converter.additional_special_tokens]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=[
            c for c in controls if c not in ("<s>", "</s>", "<unk>", "<pad>")
        ],
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
    for token_id, text in _V13_CONTROLS.items():
        found = backend.token_to_id(text)
        if variant == "mistral_v13" and found != token_id:
            raise RuntimeError(f"{text} did not land at id {token_id}")
    return folder


def _rename_controls(converter: object, renames: dict[int, str]) -> None:
    """Give filler control tokens their v13 names, keeping their ids."""
    from tokenizers import AddedToken

    specials = converter.additional_special_tokens  # type: ignore[attr-defined]
    vocab = converter._precomputed_vocab  # type: ignore[attr-defined]
    for token_id, text in renames.items():
        old = str(specials[token_id].content)
        del vocab[old]
        vocab[text] = token_id
        specials[token_id] = AddedToken(text, special=True)


def tekken_tokenizer_dir(variant: str) -> Path:
    """The cached test tokenizer directory for ``variant`` (built once, then reused)."""
    return built_once(
        f"test-{variant.replace('_', '-')}",
        _BUILD_VERSION,
        lambda out: write_tekken_tokenizer(variant, out),
    )


if __name__ == "__main__":  # python -m tests.tekken_tokenizers VARIANT DIR
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.tekken_tokenizers {mistral_v3,mistral_v13} DIR")
    print(write_tekken_tokenizer(sys.argv[1], Path(sys.argv[2])))
