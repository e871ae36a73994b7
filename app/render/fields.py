"""The request fields both render endpoints turn into sampling parameters the same way."""

from __future__ import annotations

from typing import Any

from app.render import sampling
from app.render.requests import Sampling


def request_fields(
    request: Sampling,
    generation: dict[str, Any],
    *,
    max_tokens: int,
    logprobs: int | None,
    prompt_logprobs: int | None,
    skip_special: bool | None,
) -> dict[str, Any]:
    """from_optional's arguments for ``request``: its values over the model's defaults."""
    values = {name: getattr(request, name) for name in sampling.OPENAI_DEFAULTS}
    if skip_special is None:
        skip_special = generation.get("skip_special_tokens", True)
    return {
        "n": request.n,
        **sampling.merged(values, generation),
        "seed": request.seed,
        "stop": request.stop,
        "stop_token_ids": sampling.merged_stop_ids(request.stop_token_ids, generation),
        "logprobs": logprobs,
        "prompt_logprobs": prompt_logprobs,
        "ignore_eos": request.ignore_eos,
        "max_tokens": max_tokens,
        "min_tokens": request.min_tokens,
        "skip_special_tokens": skip_special,
        "spaces_between_special_tokens": request.spaces_between_special_tokens,
        "include_stop_str_in_output": request.include_stop_str_in_output,
        "output_kind": sampling.DELTA if request.stream else sampling.FINAL_ONLY,
        "stream_interval": request.stream_interval,
        "structured_outputs": structured_outputs(request),
        "logit_bias": request.logit_bias,
        "bad_words": request.bad_words,
        "thinking_token_budget": request.thinking_token_budget,
        "allowed_token_ids": request.allowed_token_ids,
        "extra_args": _extra_args(request),
        "skip_clone": True,
    }


def structured_outputs(request: Sampling) -> dict[str, Any] | None:
    """Structured-output constraints, passed through as given (``response_format``
    mapped to the field vLLM maps it to)."""
    if request.structured_outputs is not None:
        return sampling.structured(request.structured_outputs)
    fmt = request.response_format
    kind = fmt.get("type") if fmt else None
    if kind == "json_object":
        return sampling.structured({"json_object": True})
    if kind == "json_schema":
        assert fmt is not None
        return sampling.structured({"json": (fmt.get("json_schema") or {}).get("schema")})
    return None


def stream_options(request: Sampling) -> dict[str, Any] | None:
    """The stream's options with their defaults filled in, for a stream only."""
    if not request.stream or request.stream_options is None:
        return None
    return {"include_usage": False, "continuous_usage_stats": False, **request.stream_options}


def _extra_args(request: Sampling) -> dict[str, Any] | None:
    extra = dict(request.vllm_xargs or {})
    if request.kv_transfer_params:
        extra["kv_transfer_params"] = request.kv_transfer_params
    if request.ec_transfer_params:
        extra["ec_transfer_params"] = request.ec_transfer_params
    return extra or None


def hoisted(params: dict[str, Any]) -> tuple[Any, Any]:
    """Transfer params travel as top-level fields, not inside ``extra_args``."""
    extra = params.get("extra_args")
    if not extra:
        return None, None
    extra = dict(extra)
    kv, ec = extra.pop("kv_transfer_params", None), extra.pop("ec_transfer_params", None)
    if extra:
        params["extra_args"] = extra
    else:
        del params["extra_args"]
    return kv, ec
