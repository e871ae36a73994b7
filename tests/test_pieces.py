"""Responses encoded in pieces are byte for byte what one encode call gives."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from app.streams.pieces import SLICE, encode_pieces, encode_response, free_in_slices
from app.wire.protocol import (
    ChatChoice,
    ChatCompletion,
    ChatLogProb,
    ChatLogProbs,
    ChatLogProbsContent,
    ChatMessage,
    GenerateChoice,
    GenerateLogProbs,
    GenerateLogProbsContent,
    GenerateResponse,
    Usage,
    encoder,
)

texts = st.text(alphabet=st.sampled_from(["a", "\0", '"', "\\", "é", "\n", "\x1f"]), max_size=8)


@st.composite
def choices(draw: st.DrawFn, index: int) -> ChatChoice:
    size = draw(st.sampled_from([0, 1, SLICE - 1, SLICE, SLICE + 1, 2 * SLICE + 3]))
    token = draw(texts)
    tops = tuple(ChatLogProb(t, -1.0, None) for t in draw(st.lists(texts, max_size=2)))
    entry = ChatLogProbsContent(token, -0.5, tuple(token.encode()), tops)
    logprobs = draw(st.sampled_from([None, ChatLogProbs(None), ChatLogProbs([entry] * size)]))
    message = ChatMessage(
        role="assistant", content=draw(texts), refusal=None, annotations=None, audio=None,
        function_call=None, reasoning=draw(texts),
    )  # fmt: skip
    return ChatChoice(index, message, logprobs, "length", None, [7] * size or None)


@given(st.integers(0, 3).flatmap(lambda n: st.tuples(*(choices(i) for i in range(n)))), texts)
def test_pieces_join_to_one_encode_call(drawn: tuple[ChatChoice, ...], request_id: str) -> None:
    completion = ChatCompletion(
        id=request_id, object="chat.completion", created=1, model="m\0",
        choices=list(drawn), service_tier=None, system_fingerprint=None,
        usage=Usage.of(1, 2), prompt_logprobs=None, prompt_token_ids=[1] * (SLICE + 5),
        prompt_text=None, kv_transfer_params={"k\0": [1, {"v": "\0"}]},
        ec_transfer_params=None, metrics=None,
    )  # fmt: skip
    whole = encoder.encode(completion)
    assert b"".join(encode_pieces(completion)) == whole
    envelope = msgspec.structs.replace(completion, choices=[])
    assert b"".join(encode_response(envelope, iter(drawn))) == whole


def test_long_lists_are_encoded_in_slices() -> None:
    entry = ChatLogProbsContent("a", -0.5, (97,), ())
    pieces = encode_pieces(ChatLogProbs([entry] * (3 * SLICE)))
    assert max(map(len, pieces)) <= len(encoder.encode([entry] * SLICE))


def test_free_in_slices_empties_the_decoded_logprobs() -> None:
    content = [GenerateLogProbsContent(token_id=1)] * (2 * SLICE + 1)
    gen = GenerateResponse([GenerateChoice(0, token_ids=[1], logprobs=GenerateLogProbs(content))])
    free_in_slices([gen])
    assert content == [] and gen.choices[0].token_ids == [1]
