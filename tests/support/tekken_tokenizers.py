"""Mistral test tokenizers: Hugging Face directories converted from a tekken file.

``mistral-common`` (a dev dependency) ships Mistral's real tekken vocabulary
(``tekken_240911.json``: Mistral-Nemo's, tokenizer version v3, 1,000 control tokens
then the byte-level ranks); app/tokens/tekken.py converts it with the same ids, so:

- ``mistral_v3`` is that real tokenizer: ``[TOOL_CALLS]`` at id 9, no ``[ARGS]`` and
  no ``[THINK]``, the layout of Mistral's pre-v11 models (calls as a JSON array);
- ``mistral_v13`` is a synthetic test tokenizer: the same ranks with four filler
  control tokens renamed to Magistral's v13 layout (``[ARGS]`` 32, ``[CALL_ID]`` 33,
  ``[THINK]`` 34, ``[/THINK]`` 35), for the ``name[ARGS]{...}`` calls and
  ``[THINK]`` reasoning of newer models.

``python -m tests.support.tekken_tokenizers VARIANT DIR`` writes one (the golden recorder
runs it, so recorded ids are the suite's ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.tokens.bundled import built_once
from app.tokens.tekken import MAGISTRAL_CONTROLS, write_tekken_tokenizer

VARIANTS = {"mistral_v3": {}, "mistral_v13": MAGISTRAL_CONTROLS}

# Bump when the written files change, so cached copies are rebuilt.
_BUILD_VERSION = 3


def tekken_file() -> Path:
    """The real tekken vocabulary shipped by ``mistral-common``."""
    import mistral_common

    return Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"


def write_variant(variant: str, folder: Path) -> None:
    """Write the ``variant`` test tokenizer directory into ``folder``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Mistral test tokenizer {variant!r}; one of {list(VARIANTS)}")
    write_tekken_tokenizer(tekken_file(), folder, VARIANTS[variant])


def tekken_tokenizer_dir(variant: str) -> Path:
    """The cached test tokenizer directory for ``variant`` (built once, then reused)."""
    return built_once(
        f"test-{variant.replace('_', '-')}", _BUILD_VERSION, lambda out: write_variant(variant, out)
    )


if __name__ == "__main__":  # python -m tests.support.tekken_tokenizers VARIANT DIR
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.support.tekken_tokenizers {mistral_v3,mistral_v13} DIR")
    write_variant(sys.argv[1], Path(sys.argv[2]))
