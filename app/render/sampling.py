"""Sampling parameters as vLLM 0.33.0 derives them, serialized as its engine reads them.

Priority is the request's value, then the model's ``generation_config.json``, then
OpenAI's default. The wire form is vLLM's ``SamplingParams`` encoded with
``omit_defaults``: a field at its declared default is left out, where "at its default"
means what msgspec means (the same object, or an empty default collection). So a float
that went through the request (always a fresh object) is always sent, while ``n=1`` or
``top_k=0`` are not; the table below says which fields are which.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.wire.errors import InvalidParameter

# The generation_config.json keys vLLM reads, and ``max_new_tokens`` as ``max_tokens``.
_GENERATION_KEYS = (
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "max_new_tokens",
    "skip_special_tokens",
)

# OpenAI's defaults for the fields a request may leave to the model.
OPENAI_DEFAULTS: dict[str, float | int] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}

_SAMPLING_EPS = 1e-5
_MIN_TEMPERATURE = 1e-2
MAX_N_SEQUENCES = 16384


def generation_defaults(
    model_dir: Path | None, read: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """The model's sampling defaults (vLLM's ``get_diff_sampling_param``)."""
    config = read(model_dir / "generation_config.json") if model_dir is not None else {}
    found = {key: config[key] for key in _GENERATION_KEYS if config.get(key) is not None}
    if "max_new_tokens" in found:
        found["max_tokens"] = found.pop("max_new_tokens")
    return found


def _always(value: Any) -> bool:
    return True


def _not(default: Any) -> Callable[[Any], bool]:
    return lambda value: value != default


# SamplingParams' public fields in declaration order, with when each is sent.
_FIELDS: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("n", _not(1)),
    ("presence_penalty", _always),
    ("frequency_penalty", _always),
    ("repetition_penalty", _always),
    ("temperature", _always),
    ("watermarking", _not(None)),
    ("top_p", _always),
    ("top_k", _not(0)),
    ("min_p", _always),
    ("seed", _not(None)),
    ("stop", _always),
    ("stop_token_ids", _always),
    ("ignore_eos", _not(False)),
    ("max_tokens", _not(16)),
    ("min_tokens", _not(0)),
    ("logprobs", _not(None)),
    ("prompt_logprobs", _not(None)),
    ("prompt_logprob_start", _not(None)),
    ("logprob_token_ids", _not(None)),
    ("flat_logprobs", _not(False)),
    ("detokenize", _not(True)),
    ("skip_special_tokens", _not(True)),
    ("spaces_between_special_tokens", _not(True)),
    ("include_stop_str_in_output", _not(False)),
    ("output_kind", _not(0)),
    ("stream_interval", _not(None)),
    ("skip_clone", _not(False)),
    ("output_text_buffer_length", _not(0)),
    ("structured_outputs", _not(None)),
    ("logit_bias", _not(None)),
    ("allowed_token_ids", _not(None)),
    ("extra_args", _not(None)),
    ("bad_words", _always),
    ("skip_reading_prefix_cache", _always),
    ("thinking_token_budget", _not(None)),
    ("repetition_detection", _not(None)),
    ("routed_experts_prompt_start", _not(0)),
)

# RequestOutputKind: a stream gets deltas, a one-shot request only the final output.
DELTA, FINAL_ONLY = 1, 2


def merged(request_values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Request value, else the model's default, else OpenAI's."""
    return {
        name: value
        if (value := request_values.get(name)) is not None
        else defaults.get(name, fallback)
        for name, fallback in OPENAI_DEFAULTS.items()
    }


def merged_stop_ids(asked: list[int] | None, defaults: dict[str, Any]) -> list[int] | None:
    """The request's stop ids followed by the model's (gpt-oss's call stop), once each."""
    default_ids = defaults.get("stop_token_ids")
    if not default_ids:
        return asked
    if not asked:
        return list(default_ids)
    return list(dict.fromkeys([*asked, *default_ids]))


def sampling_params(fields: dict[str, Any]) -> dict[str, Any]:
    """vLLM's SamplingParams for ``fields`` (from_optional's arguments, Nones filled),
    checked as it checks them, in its wire form."""
    params = _normalized(fields)
    check(params)
    if params["temperature"] < _SAMPLING_EPS:  # greedy: vLLM resets these to defaults
        for name in ("top_p", "top_k", "min_p"):
            del params[name]
        if params.get("n", 1) > 1:
            raise _fail(f"n must be 1 when using greedy sampling, got {params['n']}.")
    return {name: params[name] for name, sent in _FIELDS if name in params and sent(params[name])}


# StructuredOutputsParams' fields with their defaults, as it is sent (all of them).
_STRUCTURED_FIELDS: dict[str, Any] = {
    "json": None,
    "regex": None,
    "choice": None,
    "grammar": None,
    "json_object": None,
    "disable_any_whitespace": False,
    "disable_additional_properties": False,
    "whitespace_pattern": None,
    "structural_tag": None,
    "_backend": None,
    "_backend_was_auto": False,
}


def structured(given: dict[str, Any]) -> dict[str, Any]:
    """Structured-output constraints passed through, in the engine's full shape."""
    return {**_STRUCTURED_FIELDS, **{k: v for k, v in given.items() if not k.startswith("_")}}


def _normalized(fields: dict[str, Any]) -> dict[str, Any]:
    params = dict(fields)
    if 0 < params["temperature"] < _MIN_TEMPERATURE:
        params["temperature"] = _MIN_TEMPERATURE
    if params.get("seed") == -1:
        params["seed"] = None
    stop = params.get("stop")
    params["stop"] = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    stop_ids = params.get("stop_token_ids")
    params["stop_token_ids"] = [] if stop_ids is None else list(dict.fromkeys(stop_ids))
    bad = params.get("bad_words")
    params["bad_words"] = [] if bad is None else list(dict.fromkeys(bad))
    if params["stop"] and not params.get("include_stop_str_in_output"):
        params["output_text_buffer_length"] = max(len(s) for s in params["stop"]) - 1
    params["skip_reading_prefix_cache"] = params.get("prompt_logprobs") is not None
    bias = params.get("logit_bias")
    if bias is not None:
        params["logit_bias"] = _clamped_bias(bias)
    return params


def _clamped_bias(bias: dict[str, float]) -> dict[str, float]:
    clamped, invalid = {}, []
    for token, value in bias.items():
        try:
            clamped[str(int(token))] = min(100.0, max(-100.0, value))
        except ValueError:
            invalid.append(token)
    if invalid:
        raise InvalidParameter(
            "logit_bias contains key(s) that cannot be converted to integer token IDs: "
            f"{invalid!r}",
            "logit_bias",
            invalid,
        )
    return clamped


def _fail(message: str, param: str | None = None, value: object = None) -> InvalidParameter:
    return InvalidParameter(message, param, value)


def check(p: dict[str, Any]) -> None:
    """SamplingParams' own checks, with its messages."""
    n = p.get("n", 1)
    if n < 1:
        raise _fail(f"n must be at least 1, got {n}.")
    if n > MAX_N_SEQUENCES:
        raise _fail(
            f"n must be at most {MAX_N_SEQUENCES}, got {n}. To increase this limit, set "
            "the VLLM_MAX_N_SEQUENCES environment variable."
        )
    for name in ("presence_penalty", "frequency_penalty"):
        if not -2.0 <= p[name] <= 2.0:
            raise _fail(f"{name} must be in [-2, 2], got {p[name]}.")
    _check_ranges(p)
    _check_counts(p)
    if any(not s for s in p["stop"]):
        raise _fail("stop cannot contain an empty string.")
    if any(not w for w in p["bad_words"]):
        raise _fail(f"bad_words cannot contain an empty string. Got bad_words={p['bad_words']}")


def _check_ranges(p: dict[str, Any]) -> None:
    repetition, temperature = p["repetition_penalty"], p["temperature"]
    if not math.isfinite(repetition):
        raise _fail(f"repetition_penalty must be a finite number, got {repetition}.")
    if repetition <= 0.0:
        raise _fail(f"repetition_penalty must be greater than zero, got {repetition}.")
    if not math.isfinite(temperature):
        raise _fail(
            f"temperature must be a finite number, got {temperature}.", "temperature", temperature
        )
    if temperature < 0.0:
        raise _fail(
            f"temperature must be non-negative, got {temperature}.", "temperature", temperature
        )
    if temperature > 2.0:
        raise _fail(
            f"temperature must be in [0, 2], got {temperature}.", "temperature", temperature
        )
    if not 0.0 < p["top_p"] <= 1.0:
        raise _fail(f"top_p must be in (0, 1], got {p['top_p']}.", "top_p", p["top_p"])
    if p["top_k"] < -1:
        raise _fail(f"top_k must be 0 (disable), or at least 1, got {p['top_k']}.")
    if not 0.0 <= p["min_p"] <= 1.0:
        raise _fail(f"min_p must be in [0, 1], got {p['min_p']}.")


def _check_counts(p: dict[str, Any]) -> None:
    max_tokens, min_tokens = p.get("max_tokens"), p.get("min_tokens", 0)
    if max_tokens is not None and max_tokens < 1:
        raise _fail(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
    if min_tokens < 0:
        raise _fail(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if max_tokens is not None and min_tokens > max_tokens:
        raise _fail(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}."
        )
    for name in ("logprobs", "prompt_logprobs"):
        value = p.get(name)
        if value is not None and value != -1 and value < 0:
            raise _fail(f"{name} must be non-negative or -1, got {value}.", name, value)


def check_output_room(max_model_len: int, asked: int | None, param: str) -> None:
    """Asking for more output tokens than the whole context holds is refused up front."""
    if asked is not None and asked > max_model_len:
        raise InvalidParameter(
            f"{param}={asked} cannot be greater than max_model_len={max_model_len}. Please "
            "request fewer output tokens.",
            param,
            asked,
        )


def check_prompt_length(max_model_len: int, prompt_len: int) -> None:
    """A prompt that leaves no room for output (vLLM counts at most one token past it)."""
    if prompt_len > max_model_len:
        counted = max_model_len + 1
        raise InvalidParameter(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"prompt contains at least {counted} input tokens, which exceeds this limit even "
            "without any output tokens. Please reduce the length of the input prompt.",
            "input_tokens",
            counted,
        )


def max_tokens(
    max_model_len: int, asked: int | None, prompt_len: int, defaults: dict[str, Any]
) -> int:
    """The output budget: what is asked (else the model's default), within the context."""
    check_prompt_length(max_model_len, prompt_len)
    fallback = asked if asked is not None else defaults.get("max_tokens")
    room = max_model_len - prompt_len
    return room if fallback is None else min(room, fallback)
