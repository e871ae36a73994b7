"""Any chunking of a stream decodes to the one-shot text (the plain-path core claim)."""

from __future__ import annotations

import itertools
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.streams.oneshot import OneShotDerenderer
from app.streams.plain_stream import PlainStreamDerenderer
from app.tokens.detokenizer import DecodeWindow, Detokenizer
from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    CompletionDerenderRequest,
    CompletionStreamDerenderRequest,
    GenerateChoice,
    GenerateChunk,
    GenerateResponse,
    GenerateStreamChoice,
    StreamState,
)

# Text that stresses byte-level tokens: CJK, emoji with skin tones and ZWJ joins,
# combining accents, flags, and plain ASCII.
PIECES = [
    "a",
    "the",
    " ",
    "\n",
    "é",
    "e\u0301",
    "ñ",
    "日本語",
    "晴れ",
    "你好",
    "한국어",
    "👍",
    "👍🏽",
    "👩‍👩‍👧",
    "🏳️‍🌈",
    "🇯🇵",
    "⛈️",
    "∑",
    "Ω",
    "\u200b",
    "  ",
    '{"',
    "<tool",
]
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map("".join)
# Raw byte-level tokens (ids 0-255 are single bytes), which may be partial UTF-8.
byte_tokens = st.lists(st.integers(0, 255), max_size=6)


def chunked(ids: list[int], cuts: list[int]) -> list[list[int]]:
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in itertools.pairwise(bounds)]


def stream_text(tokenizer: Tokenizer, ids: list[int], cuts: list[int], seed: list[int]) -> str:
    state: StreamState | None = None
    parts = []
    for part in chunked(ids, cuts):
        request = CompletionStreamDerenderRequest(
            generate_chunk=GenerateChunk([GenerateStreamChoice(0, token_ids=part)]),
            stream_state=state,
            prompt_token_ids=seed,
        )
        chunk, state = PlainStreamDerenderer(tokenizer).completion(request, "m")
        parts.append(chunk.choices[0].text)
    return "".join(parts)


def one_shot_text(tokenizer: Tokenizer, ids: list[int], seed: list[int]) -> str:
    request = CompletionDerenderRequest(
        generate_responses=[GenerateResponse([GenerateChoice(0, token_ids=ids)])],
        prompt_token_ids=[seed],
    )
    return OneShotDerenderer(tokenizer).completion(request, "m").choices[0].text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, extra=byte_tokens, cuts=st.lists(st.integers(0, 200), max_size=12))
def test_any_chunking_gives_one_shot_text(
    tokenizer: Tokenizer, text: str, extra: list[int], cuts: list[int]
) -> None:
    ids = tokenizer.encode(text) + extra
    seed = tokenizer.encode("<|im_start|>assistant\n")
    streamed = stream_text(tokenizer, ids, cuts, seed)
    assert streamed == one_shot_text(tokenizer, ids, seed)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, cuts=st.lists(st.integers(0, 200), max_size=12))
def test_valid_text_round_trips_without_replacement_chars(
    tokenizer: Tokenizer, text: str, cuts: list[int]
) -> None:
    ids = tokenizer.encode(text)
    streamed = stream_text(tokenizer, ids, cuts, [])
    assert streamed == unicodedata.normalize("NFC", text)
    assert "\ufffd" not in streamed


def test_partial_character_is_held_back(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("🪼")
    assert len(ids) > 1
    detokenizer = Detokenizer(tokenizer, DecodeWindow([]), skip_special=True)
    texts = [detokenizer.decode([i]) for i in ids]
    assert texts[:-1] == [""] * (len(ids) - 1)
    assert texts[-1] == "🪼"


def test_window_stays_small(tokenizer: Tokenizer) -> None:
    detokenizer = Detokenizer(tokenizer, DecodeWindow([]), skip_special=True)
    for token_id in tokenizer.encode("word " * 200):
        detokenizer.decode([token_id])
        assert len(detokenizer.window.prev_tokens) <= 8
        assert detokenizer.window.prefix_offset == 0


def test_special_tokens_follow_skip_flag(tokenizer: Tokenizer) -> None:
    ids = [9707, 151645, 0]
    skipping = Detokenizer(tokenizer, DecodeWindow([]), skip_special=True)
    keeping = Detokenizer(tokenizer, DecodeWindow([]), skip_special=False)
    assert skipping.decode(ids) == "Hello!"
    assert keeping.decode(ids) == "Hello<|im_end|>!"


def test_out_of_vocabulary_and_negative_ids_decode_to_nothing(tokenizer: Tokenizer) -> None:
    detokenizer = Detokenizer(tokenizer, DecodeWindow([]), skip_special=True)
    assert detokenizer.decode([9707, 10**7, -3, 0]) == "Hello!"


def _reference_step(tokenizer: Tokenizer, window: DecodeWindow, token_id: int) -> str:
    """The incremental decode step as first written: the whole window decoded per id."""
    prev, prefix, read = window.prev_tokens, window.prefix_offset, window.read_offset
    new = [tokenizer.piece(token_id) or ""] if 0 <= token_id < tokenizer.vocab_size else [""]
    start = min(prefix, read, len(prev))
    pieces = prev[start:] + new
    prefix_text = tokenizer.tokens_to_string(pieces[prefix - start : read - start])
    full_text = tokenizer.tokens_to_string(pieces[prefix - start :])
    text = ""
    if len(full_text) > len(prefix_text) and not full_text.endswith("\ufffd"):
        text = full_text[len(prefix_text) :]
        prefix, read = read, len(prev) + len(new)
    window.prev_tokens = (prev + new)[prefix:]
    window.read_offset, window.prefix_offset = read - prefix, 0
    return text


# Single-byte pieces (byte-level BPE maps byte b to one character): lead bytes,
# continuation bytes and ASCII, so runs of them form valid, cut and invalid UTF-8.
_BYTES = [0x80, 0x9F, 0xA9, 0xBF, 0xC3, 0xE2, 0xF0, 0xF4, 0xFF, 0x41, 0x0A]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_long_unfinished_runs_decode_as_the_whole_window_does(
    tokenizer: Tokenizer, data: st.DataObject
) -> None:
    """The bounded tail check emits exactly what decoding the whole window emits."""
    byte_ids = [tokenizer.vocabulary.id_of(_byte_piece(b)) for b in _BYTES]
    word_ids = tokenizer.encode("".join(PIECES))
    ids = data.draw(st.lists(st.sampled_from(byte_ids + word_ids[:40]), max_size=120))
    window = DecodeWindow.seeded(tokenizer, word_ids[:9], skip_special=False)
    reference = DecodeWindow(list(window.prev_tokens), window.prefix_offset, window.read_offset)
    detokenizer = Detokenizer(tokenizer, window, skip_special=False)
    for token_id in ids:
        assert detokenizer.decode([token_id]) == _reference_step(tokenizer, reference, token_id)
        assert window == reference


def _byte_piece(byte: int) -> str:
    """Byte-level BPE's character for one byte (GPT-2's printable remapping)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    if byte in printable:
        return chr(byte)
    return chr(256 + [b for b in range(256) if b not in printable].index(byte))


def test_whole_texts_are_what_the_decoder_adds(tokenizer: Tokenizer) -> None:
    """Every id the table decodes alone adds, after settled and after unfinished bytes
    alike, exactly the text the backend's decoder gives it."""
    unfinished = _byte_piece(0xE2) + _byte_piece(0x82)  # a cut three-byte character
    whole = 0
    for token_id in range(tokenizer.vocab_size):
        found = tokenizer.whole_text(token_id)
        if found is None:
            continue
        whole += 1
        text, piece = found
        assert piece == tokenizer.piece(token_id)
        assert tokenizer.tokens_to_string([piece]) == text
        assert tokenizer.tokens_to_string(["Hi", unfinished, piece]) == "Hi\ufffd" + text
    # Most of the vocabulary is whole characters; the rest (cut characters) is not.
    assert tokenizer.vocab_size // 2 < whole < tokenizer.vocab_size


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), skip=st.booleans())
def test_table_steps_decode_as_the_whole_window_does(
    tokenizer: Tokenizer, data: st.DataObject, skip: bool
) -> None:
    """Words, special tokens, cut characters and unknown ids, with special tokens kept
    or skipped: every step emits what decoding the window emits, window included."""
    byte_ids = [tokenizer.vocabulary.id_of(_byte_piece(b)) for b in _BYTES]
    word_ids = tokenizer.encode("".join(PIECES) + "<|im_end|><think>\ufffd")
    pool = byte_ids + word_ids + [tokenizer.vocab_size + 3, -1]
    ids = data.draw(st.lists(st.sampled_from(pool), max_size=80))
    window = DecodeWindow.seeded(tokenizer, word_ids[:9], skip_special=skip)
    reference = DecodeWindow(list(window.prev_tokens), window.prefix_offset, window.read_offset)
    detokenizer = Detokenizer(tokenizer, window, skip_special=skip)
    special = tokenizer.special_ids if skip else frozenset()
    for token_id in ids:
        expected = "" if token_id in special else None
        if expected is None:
            expected = _reference_step(tokenizer, reference, token_id)
        else:
            _reference_skip(tokenizer, reference)
        assert detokenizer.decode([token_id]) == expected
        assert window == reference


def _reference_skip(tokenizer: Tokenizer, window: DecodeWindow) -> None:
    """The reference step for a skipped special token: no piece joins the window."""
    prev, prefix, read = window.prev_tokens, window.prefix_offset, window.read_offset
    start = min(prefix, read, len(prev))
    pieces = prev[start:]
    prefix, read = prefix - start, read - start
    prefix_text = tokenizer.tokens_to_string(pieces[prefix:read])
    full_text = tokenizer.tokens_to_string(pieces[prefix:])
    if len(full_text) > len(prefix_text) and not full_text.endswith("\ufffd"):
        prefix, read = read, len(pieces)
    window.prev_tokens = pieces[prefix:]
    window.read_offset, window.prefix_offset = read - prefix, 0
