"""Tokenizer loading (offline only) and the few operations derender needs.

The wrapper keeps vLLM's semantics for a Hugging Face fast tokenizer: vocab pieces
by id (special ones dropped when skipping), pieces joined through the backend's
decoder, and whole-id decoding for logprob strings. Pieces are precomputed into a
list, so the per-token path is a list index instead of a call into transformers; a
byte-level vocabulary also gives each id's bytes, so a token that is whole characters
is decoded without calling the backend's decoder at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from app.tokens import bundled_deepseek, bundled_deepseek_r1, bundled_gptoss, bundled_qwen3
from parsers.types import Vocabulary

# transformers announces at import that PyTorch is missing; this server never needs it.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

# Config keys that bound the context length, as vLLM reads them; the smallest wins.
_CONTEXT_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


# Names that load a tokenizer built from an installed package, not a directory.
BUNDLED: dict[str, Callable[[], Path]] = {
    bundled_qwen3.BUNDLED_NAME: bundled_qwen3.bundled_qwen3_dir,
    bundled_deepseek.BUNDLED_NAME: bundled_deepseek.bundled_deepseek_dir,
    bundled_deepseek_r1.BUNDLED_NAME: bundled_deepseek_r1.bundled_deepseek_r1_dir,
    bundled_gptoss.BUNDLED_NAME: bundled_gptoss.bundled_gptoss_dir,
}


def _response_template(hf: Any) -> dict[str, Any] | None:
    """The tokenizer configuration's ``response_template``, where vLLM looks for it."""
    template = getattr(hf, "response_template", None)
    if not isinstance(template, dict):
        template = (getattr(hf, "init_kwargs", None) or {}).get("response_template")
    return template if isinstance(template, dict) else None


class TokenizerLoadError(Exception):
    """The tokenizer or model directory cannot be found or used."""


class Tokenizer:
    """A loaded fast tokenizer plus the model facts derender reads."""

    def __init__(
        self,
        hf: Any,
        *,
        default_max_model_len: int,
        model_eos_token_ids: Iterable[int],
    ) -> None:
        self._hf = hf
        backend = hf.backend_tokenizer
        self.vocab_size: int = len(hf)
        token_ids: dict[str, int] = backend.get_vocab(with_added_tokens=True)
        pieces: list[str | None] = [None] * self.vocab_size
        for piece, token_id in token_ids.items():
            if 0 <= token_id < self.vocab_size:
                pieces[token_id] = piece
        self._pieces = pieces
        self.special_ids: frozenset[int] = frozenset(hf.all_special_ids)
        self._token_texts: dict[int, str] = {}
        self.vocabulary = Vocabulary(
            token_ids,
            frozenset(hf.all_special_tokens),
            self.token_text,
            encode=self._encode,
            decode=self.decode_prompt,
            response_template=_response_template(hf),
        )
        decoder = backend.decoder
        self._join = decoder.decode if decoder is not None else " ".join
        self.eos_token_id: int | None = hf.eos_token_id
        eos_ids = set(model_eos_token_ids)
        if self.eos_token_id is not None:
            eos_ids.add(self.eos_token_id)
        self.model_eos_token_ids: frozenset[int] = frozenset(eos_ids)
        self.default_max_model_len = default_max_model_len
        self.space_marker = _leading_space_marker(backend)
        self._byte_level = _component_type(decoder) == "ByteLevel"
        # ``whole_text`` by id, worked out as ids are first met.
        self.whole_texts = WholeTexts(self._whole_of, self.vocab_size)

    def _encode(self, text: str) -> list[int]:
        """The ids of ``text``, no special tokens added (read once, at start-up)."""
        ids: list[int] = self._hf.encode(text, add_special_tokens=False)
        return ids

    @property
    def hf(self) -> Any:
        """The transformers tokenizer (the render side applies its chat template)."""
        return self._hf

    def piece(self, token_id: int) -> str | None:
        """The vocab piece of an id, or None when the id has none."""
        if 0 <= token_id < self.vocab_size:
            return self._pieces[token_id]
        return None

    def pieces(self, token_ids: Sequence[int], skip_special: bool) -> list[str]:
        """Pieces of ids (unknown ids as ""), leaving out special ones when skipping."""
        special = self.special_ids if skip_special else ()
        return [self.piece(t) or "" for t in token_ids if t not in special]

    def tokens_to_string(self, pieces: list[str]) -> str:
        """Join pieces into text the way the backend's decoder does."""
        text: str = self._join(pieces)
        return text

    def whole_text(self, token_id: int) -> tuple[str, str] | None:
        """The text an id adds after any settled text, with its piece, when the decoder
        is byte-level and the id's bytes are whole UTF-8 characters (not ending in
        U+FFFD); else None, and only decoding the window can tell.

        Byte-level decoding maps each piece's characters to bytes and decodes all of
        them at once, replacing what is not UTF-8; bytes that are valid on their own
        start at a character boundary, so appended to any bytes they decode to this
        text after what those decode to (app/tokens/detokenizer.py relies on it).
        """
        return self.whole_texts[token_id]

    def _whole_of(self, token_id: int) -> tuple[str, str] | None:
        piece = self.piece(token_id)
        if not self._byte_level or not piece:
            return None
        try:
            text = piece_bytes(piece).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text.endswith("\ufffd"):
            return None
        return (piece if text == piece else text), piece

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` as a model writes it: special-token texts become their
        ids, and nothing (no BOS) is added around it. Benches and tests make outputs
        with it; derendering never encodes."""
        ids: list[int] = self._hf.encode(text, add_special_tokens=False)
        return ids

    def decode(self, token_ids: list[int]) -> str:
        """Decode ids to text with special tokens kept (logprob strings).

        Ids outside the vocabulary decode to nothing, as they do incrementally.
        """
        known = [t for t in token_ids if 0 <= t < self.vocab_size]
        text: str = self._hf.decode(known)
        return text

    def decode_prompt(self, token_ids: Sequence[int]) -> str:
        """Ids decoded together with special tokens kept and no clean-up, as vLLM's
        response-template parser decodes a prompt."""
        known = [t for t in token_ids if 0 <= t < self.vocab_size]
        text: str = self._hf.decode(
            known, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        return text

    def token_text(self, token_id: int) -> str:
        """One id decoded on its own, special tokens kept (cached: parsers ask often)."""
        if not 0 <= token_id < self.vocab_size:
            return ""
        text = self._token_texts.get(token_id)
        if text is None:
            text = self._token_texts[token_id] = self.decode([token_id])
        return text

    def decode_one(self, token_id: int) -> str:
        """One id as the engine's per-token detokenization shows it.

        Metaspace tokenizers drop the leading space of a lone piece on decode;
        it is restored from the raw piece so logprob strings match vLLM's.
        """
        text = self.decode([token_id]) or ""
        marker = self.space_marker
        if marker is None:
            return text
        raw = self.piece(token_id) or ""
        markers = len(raw) - len(raw.lstrip(marker))
        missing = markers - (len(text) - len(text.lstrip(" ")))
        return " " * missing + text if missing > 0 else text


class WholeTexts(dict[int, "tuple[str, str] | None"]):
    """``Tokenizer.whole_text`` by id, each worked out when first asked (an id out of the
    vocabulary is None, and not kept): the detokenizer reads it for every id, and a
    lookup costs less than a call."""

    def __init__(self, whole_of: Callable[[int], tuple[str, str] | None], size: int) -> None:
        super().__init__()
        self._whole_of = whole_of
        self._size = size

    def __missing__(self, token_id: int) -> tuple[str, str] | None:
        if not 0 <= token_id < self._size:
            return None
        found = self[token_id] = self._whole_of(token_id)
        return found


def _byte_chars() -> dict[str, int]:
    """Byte-level BPE's character for each byte (GPT-2's table): printable bytes stand
    for themselves, the others for the characters from U+0100 on, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {chr(byte): byte for byte in printable}
    others = [byte for byte in range(256) if byte not in chars.values()]
    chars.update((chr(256 + index), byte) for index, byte in enumerate(others))
    return chars


_BYTE_OF = _byte_chars()


def piece_bytes(piece: str) -> bytes:
    """A piece's bytes as the byte-level decoder reads them: each character's byte, or
    the piece's own UTF-8 when any character has none (an added token's text)."""
    try:
        return bytes([_BYTE_OF[char] for char in piece])
    except KeyError:
        return piece.encode("utf-8")


def _component_type(component: Any) -> str | None:
    """The ``type`` a tokenizers component (decoder, pre-tokenizer) serializes with."""
    if component is None:
        return None
    kind = json.loads(component.__getstate__()).get("type")
    return kind if isinstance(kind, str) else None


def _leading_space_marker(backend: Any) -> str | None:
    """The Metaspace replacement character, if the pre-tokenizer uses one."""
    pre = backend.pre_tokenizer
    if pre is None:
        return None
    config = json.loads(pre.__getstate__())
    candidates = (
        config.get("pretokenizers", [config]) if config.get("type") == "Sequence" else [config]
    )
    for entry in candidates:
        if entry.get("type") == "Metaspace":
            marker: str = entry.get("replacement", "\u2581")
            return marker
    return None


def resolve_model_dir(name: str, flag: str = "--model") -> Path:
    """A local directory for a model name: bundled, a path, or the local hub cache.
    ``flag`` names where the name came from, for the error that says what to fix."""
    bundled = BUNDLED.get(name)
    if bundled is not None:
        try:
            return bundled()
        except PermissionError as exc:
            raise TokenizerLoadError(
                f"cannot build or read the bundled {name!r} tokenizer: {_permission_problem(exc)} "
                "Make the cache readable (and writable, to build in it) by this user, or set "
                "DERENDER_CACHE_DIR to a directory it owns."
            ) from exc
        except (ImportError, RuntimeError, OSError) as exc:  # a missing or changed package
            raise TokenizerLoadError(
                f"cannot build the bundled {name!r} tokenizer: {exc}. scripts/install "
                "installs the package it is built from."
            ) from exc
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise TokenizerLoadError(
            f"{flag} {name}: a file, not a directory; point {flag} at the directory that holds it"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, OSError) as exc:
        raise TokenizerLoadError(
            f"{flag} {name}: no such directory, no model of that name in the local Hugging "
            "Face cache (this server never downloads), and no bundled tokenizer "
            f"({', '.join(BUNDLED)})"
        ) from exc


# What a directory holds when transformers can load a tokenizer from it (tokenizer.json
# a fast one; a tokenizer_config.json or a SentencePiece model one it converts).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


def _require_tokenizer_files(directory: Path, flag: str, name: str) -> None:
    """Refuse a directory without a tokenizer, by name: transformers would blame a
    missing package (sentencepiece, tiktoken) instead."""
    try:
        present = set(os.listdir(directory))
    except PermissionError as exc:
        raise TokenizerLoadError(
            f"cannot load a tokenizer from {directory}: {_permission_problem(exc)} "
            "Make the directory readable by this user."
        ) from exc
    if present.isdisjoint(TOKENIZER_FILES):
        raise TokenizerLoadError(
            f"{flag} {name}: no {', '.join(TOKENIZER_FILES[:-1])} or {TOKENIZER_FILES[-1]} "
            f"in {directory}; point {flag} at a model or tokenizer directory"
        )


def load_tokenizer(model: str, tokenizer: str | None = None) -> Tokenizer:
    """Load the tokenizer for ``model`` (or ``tokenizer``) without any network access."""
    model_dir = resolve_model_dir(model)
    flag, name = ("--tokenizer", tokenizer) if tokenizer else ("--model", model)
    tokenizer_dir = resolve_model_dir(name, flag) if tokenizer else model_dir
    _require_tokenizer_files(tokenizer_dir, flag, name)
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        config = read_json(model_dir / "config.json")
        generation = read_json(model_dir / "generation_config.json")
    except (OSError, ValueError) as exc:
        denied = _permission_cause(exc)
        if denied is not None:
            raise TokenizerLoadError(
                f"cannot load a tokenizer from {tokenizer_dir}: {_permission_problem(denied)} "
                "Make the directory readable by this user."
            ) from exc
        raise TokenizerLoadError(f"cannot load a tokenizer from {tokenizer_dir}: {exc}") from exc
    if getattr(hf, "backend_tokenizer", None) is None:
        raise TokenizerLoadError(
            f"{tokenizer_dir} has no fast tokenizer (tokenizer.json); derender-server needs one."
        )
    eos = generation.get("eos_token_id", config.get("eos_token_id"))
    eos_ids = [eos] if isinstance(eos, int) else [e for e in eos or () if isinstance(e, int)]
    return Tokenizer(
        hf,
        default_max_model_len=_default_max_model_len(config, hf),
        model_eos_token_ids=eos_ids,
    )


def _permission_cause(exc: BaseException) -> PermissionError | None:
    """The PermissionError behind ``exc``, if any (transformers wraps what it reads)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PermissionError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _permission_problem(exc: PermissionError) -> str:
    """Which path this process may not use, and who it runs as: a directory built by
    another user (root, at an image's build) is the usual cause, not a missing package."""
    return (
        f"permission denied on {exc.filename or 'a file in it'} for uid {os.geteuid()} "
        f"(gid {os.getegid()})."
    )


def _default_max_model_len(config: dict[str, Any], hf: Any) -> int:
    lengths = [v for k in _CONTEXT_LENGTH_KEYS if isinstance(v := config.get(k), int) and v > 0]
    if lengths:
        return min(lengths)
    limit = getattr(hf, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**9:
        return limit
    raise TokenizerLoadError("the model states no context length: pass --max-model-len.")


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}
