"""Synthetic test tokenizers for families whose real vocabulary is not available offline.

Each is the bundled Qwen3 tokenizer with the family's marker tokens added after
Qwen3's own (a token Qwen3 already has keeps its id), written to a directory that
holds only ``tokenizer.json`` and ``tokenizer_config.json``, the latter with a
minimal ChatML chat template so vLLM can render prompts for the golden recorder.
The ids are not the family's real ids; the markers are single tokens as in the
real vocabularies, which is what the parsers read.

    python -m tests.support.synthetic_tokenizers FAMILY DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import AddedToken
from tokenizers import Tokenizer as HfTokenizer

from app.bundled_qwen3 import bundled_qwen3_dir

FAMILY_TOKENS: dict[str, tuple[str, ...]] = {
    "minimax_m2": ("<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"),
}

# ChatML turns; tools listed as JSON in a system turn; the generation prompt opens
# reasoning with "<think>\n" (closed at once when enable_thinking or thinking is false).
CHAT_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if (enable_thinking is defined and not enable_thinking)"
    " or (thinking is defined and not thinking) %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)


def write_synthetic_tokenizer(family: str, folder: Path) -> Path:
    """Write ``family``'s synthetic tokenizer into ``folder`` (created if needed)."""
    tokens = FAMILY_TOKENS[family]
    source = bundled_qwen3_dir()
    hf = HfTokenizer.from_file(str(source / "tokenizer.json"))
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t in tokens])
    folder.mkdir(parents=True, exist_ok=True)
    hf.save(str(folder / "tokenizer.json"))
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = CHAT_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in FAMILY_TOKENS:
        sys.exit(
            f"usage: python -m tests.support.synthetic_tokenizers {{{','.join(FAMILY_TOKENS)}}} DIR"
        )
    print(write_synthetic_tokenizer(sys.argv[1], Path(sys.argv[2])))
