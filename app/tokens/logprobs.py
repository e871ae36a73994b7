"""Logprob resolution: generate's token ids into OpenAI token strings and bytes.

A byte-level token that holds part of a UTF-8 character decodes to U+FFFD on its
own. As vLLM's engine does, such a token is decoded again behind up to four of the
preceding sampled ids and the text they already produced is cut off, so the token
carries the characters it completes (or "" when it completes none).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.tokens.tokenizer import Tokenizer
from app.wire.protocol import (
    LOGPROB_CONTEXT_WINDOW,
    ChatLogProb,
    ChatLogProbs,
    ChatLogProbsContent,
    CompletionLogProbs,
    GenerateLogProb,
    GenerateLogProbs,
)

_REPLACEMENT = "\ufffd"
_PLACEHOLDER_PREFIX = "token_id:"


def context_tail(context: Sequence[int], token_ids: Sequence[int]) -> list[int]:
    """The sampled ids carried to the next chunk for U+FFFD repair."""
    tail = [*context, *token_ids]
    del tail[:-LOGPROB_CONTEXT_WINDOW]  # in place: a slice would be a second list
    return tail


def chat_top_limit(logprobs: bool | None, top_logprobs: int | None, return_all: bool) -> int | None:
    """How many candidates chat keeps per position (None keeps all)."""
    if not logprobs or return_all or top_logprobs == -1:
        return None
    return top_logprobs or 0


def completion_top_limit(logprobs: int | None, return_all: bool) -> int | None:
    """How many candidates completions keep per position (None keeps all)."""
    if return_all or logprobs is None or logprobs == -1:
        return None
    return max(logprobs + 1, 0)


def _entry_id(entry: GenerateLogProb) -> int | None:
    """The integer id of an entry, from ``token_id`` or a ``token_id:N`` placeholder."""
    if entry.token_id is not None:
        return entry.token_id
    token = entry.token or ""
    if token.startswith(_PLACEHOLDER_PREFIX):
        digits = token[len(_PLACEHOLDER_PREFIX) :]
        if digits.isdecimal() and len(digits) <= 20:  # int() refuses >4300 digits
            return int(digits)
    return None


class LogprobResolver:
    """Resolves one choice's logprobs, keeping the sampled-id context across calls."""

    def __init__(self, tokenizer: Tokenizer, context: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self.context = list(context)

    def resolve(self, logprobs: GenerateLogProbs, top_limit: int | None) -> ChatLogProbs:
        if logprobs.content is None:
            return ChatLogProbs(None)
        content = []
        for entry in logprobs.content:
            tops = entry.top_logprobs if top_limit is None else entry.top_logprobs[:top_limit]
            token, token_bytes = self._token_string(entry)
            top_resolved = []
            for top in tops:
                top_token, top_bytes = self._token_string(top)
                top_resolved.append(ChatLogProb(top_token, top.logprob, top_bytes))
            content.append(
                ChatLogProbsContent(token, entry.logprob, token_bytes, tuple(top_resolved))
            )
            token_id = _entry_id(entry)
            if token_id is not None:
                self.context.append(token_id)
        return ChatLogProbs(content)

    def _token_string(self, entry: GenerateLogProb) -> tuple[str, tuple[int, ...] | None]:
        token_id = _entry_id(entry)
        if token_id is None:  # a non-placeholder string is kept verbatim
            return entry.token or "", None
        if self._tokenizer.piece(token_id) is None:
            return "", None
        text = self._tokenizer.decode_one(token_id)
        if text.endswith(_REPLACEMENT):
            text = self._repair(token_id)
        return text, tuple(text.encode("utf-8", errors="replace"))

    def _repair(self, token_id: int) -> str:
        """Decode ``token_id`` behind the shortest context that completes its bytes."""
        decode = self._tokenizer.decode
        context = self.context
        for size in range(1, min(len(context), LOGPROB_CONTEXT_WINDOW) + 1):
            before = context[-size:]
            full = decode([*before, token_id])
            if full.endswith(_REPLACEMENT):
                continue
            # The context's own trailing partial bytes belong to this token's text.
            clean_end = len(before)
            while clean_end > 0 and decode([before[clean_end - 1]]).endswith(_REPLACEMENT):
                clean_end -= 1
            prefix = decode(before[:clean_end]) if clean_end else ""
            if full.startswith(prefix):
                return full[len(prefix) :]
            common = 0
            for a, b in zip(prefix, full, strict=False):
                if a != b:
                    break
                common += 1
            return full[common:]
        return ""


def to_completion_logprobs(
    resolved: ChatLogProbs, source: GenerateLogProbs, text_offset: int = 0
) -> CompletionLogProbs:
    """Flatten resolved logprobs into the completions shape with absolute offsets.

    A position whose generate entry had no candidates reports ``null``; one whose
    candidates were all cut reports ``{}``.
    """
    result = CompletionLogProbs([], [], [], [])
    if resolved.content is None:
        return result
    offset = text_offset
    for entry, origin in zip(resolved.content, source.content or (), strict=False):
        result.text_offset.append(offset)
        result.tokens.append(entry.token)
        result.token_logprobs.append(entry.logprob)
        result.top_logprobs.append(
            {top.token: top.logprob for top in entry.top_logprobs} if origin.top_logprobs else None
        )
        offset += len(entry.token)
    return result
