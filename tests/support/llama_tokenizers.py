"""Llama 3.1 and Llama 4 tokenizers for the tests, built from the ``llama-models`` package.

Meta's PyPI package ``llama-models`` ships each generation's vocabulary as tiktoken
ranks (``llama3/tokenizer.model``, ``llama4/tokenizer.model``) and lists its special
tokens, in id order after the ranks, in the matching ``tokenizer.py``. Their licence
is Meta's community licence, so nothing of them is committed or bundled: this module
builds a Hugging Face model directory (``tokenizer.json``, ``tokenizer_config.json``,
``config.json``) at test time from the installed package, the way a user's real
model directory looks, and caches it beside the bundled tokenizers. Every special
token is ``special`` as in Meta's own Hugging Face files, so ``skip_special_tokens``
drops ``<|python_tag|>`` and ``<|python_start|>`` from the text.

``python -m tests.support.llama_tokenizers FAMILY DIR`` writes the same directory into DIR
(the golden recorder runs it with the project's Python, so the ids match the suite's).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.tokens.bundled import built_once

# Bump when the built files change, so stale caches are rebuilt.
_BUILD_VERSION = 1

# A minimal chat template of our own in the Llama 3 header format (vLLM needs one to
# render prompts; derender itself never renders). Tools go in the system turn as JSON.
_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if tools %}{{ '<|HS|>system<|HE|>\\n\\nYou may call these functions:\\n' }}"
    "{%- for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{%- endfor %}{{ '<|EOT|>' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{ '<|HS|>' + message['role'] + '<|HE|>\\n\\n' }}"
    "{%- if message['content'] is string %}{{ message['content'] }}{%- endif %}"
    "{{ '<|EOT|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|HS|>assistant<|HE|>\\n\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class LlamaFamily:
    """Where one generation's vocabulary lives in ``llama-models`` and its model facts."""

    module: str  # the package's tokenizer module
    header_start: str
    header_end: str
    end_of_turn: str
    stop_tokens: tuple[str, ...]
    config: dict[str, Any]


FAMILIES = {
    "llama3": LlamaFamily(
        module="llama_models.llama3.tokenizer",
        header_start="<|start_header_id|>",
        header_end="<|end_header_id|>",
        end_of_turn="<|eot_id|>",
        stop_tokens=("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
        config={
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "max_position_embeddings": 131072,
            "vocab_size": 128256,
        },
    ),
    "llama4": LlamaFamily(
        module="llama_models.llama4.tokenizer",
        header_start="<|header_start|>",
        header_end="<|header_end|>",
        end_of_turn="<|eot|>",
        stop_tokens=("<|end_of_text|>", "<|eom|>", "<|eot|>"),
        config={
            "architectures": ["Llama4ForCausalLM"],
            "model_type": "llama4_text",
            "max_position_embeddings": 131072,
            "vocab_size": 202048,
        },
    ),
}


def llama_tokenizer_dir(family: str) -> Path:
    """The cached model directory of ``family`` (``llama3``, ``llama4``), built once."""
    return built_once(
        f"{family}-test-fixture", _BUILD_VERSION, lambda out: _build(FAMILIES[family], out)
    )


def write_llama_tokenizer(family: str, folder: Path) -> Path:
    """Copy the model directory of ``family`` into ``folder``; returns ``folder``."""
    shutil.copytree(llama_tokenizer_dir(family), folder, dirs_exist_ok=True)
    return folder


def _build(family: LlamaFamily, out: Path) -> None:
    import importlib

    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    meta = importlib.import_module(family.module).Tokenizer.get_instance()
    ranks = Path(sys.modules[family.module].__file__ or "").parent / "tokenizer.model"
    specials = sorted(meta.special_tokens.items(), key=lambda item: item[1])
    backend = TikTokenConverter(
        vocab_file=str(ranks), pattern=meta.model._pat_str, additional_special_tokens=[]
    ).converted()
    first = backend.get_vocab_size()
    if first != specials[0][1]:
        raise RuntimeError(f"{ranks} holds {first} ranks; its specials start at {specials[0][1]}")
    backend.add_special_tokens(
        [AddedToken(token, normalized=False, special=True) for token, _ in specials]
    )
    for token, token_id in specials:
        if backend.token_to_id(token) != token_id:
            raise RuntimeError(f"{token} did not land at id {token_id}")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|begin_of_text|>",
        eos_token=family.end_of_turn,
        clean_up_tokenization_spaces=False,
        model_max_length=family.config["max_position_embeddings"],
    )
    tokenizer.chat_template = (
        _CHAT_TEMPLATE.replace("<|HS|>", family.header_start)
        .replace("<|HE|>", family.header_end)
        .replace("<|EOT|>", family.end_of_turn)
    )
    tokenizer.save_pretrained(str(out))
    for name in ("special_tokens_map.json", "chat_template.jinja"):
        # Only tokenizer.json, tokenizer_config.json and config.json: the template
        # stays inside tokenizer_config.json, as in Meta's directories.
        if (out / name).exists():
            (out / name).unlink()
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    if "chat_template" not in config:
        config["chat_template"] = tokenizer.chat_template
        (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    ids = dict(meta.special_tokens)
    model_config = family.config | {
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": [ids[token] for token in family.stop_tokens],
    }
    (out / "config.json").write_text(json.dumps(model_config, indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in FAMILIES:
        sys.exit(f"usage: python -m tests.support.llama_tokenizers {{{','.join(FAMILIES)}}} DIR")
    print(write_llama_tokenizer(sys.argv[1], Path(sys.argv[2])))
