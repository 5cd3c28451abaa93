"""What a model call's recorded events say about it: provider, model, usage, finish reasons.

Three shapes reach the log: the proxy and the ``messages`` importer put the request's settings in
``meta["request"]`` and the reply's (``model``, ``usage``, ``finish_reason``/``stop_reason``,
``reply_id``, ``latency_ms``) in ``meta["reply"]``; the Claude Code importer puts the provider's
usage counts flat in meta (``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``...) with
the API ``message_id``; the adapters record the model's items with no call metadata at all.
"""

from __future__ import annotations

from typing import Any

from engine.otel import attributes as A

__all__ = ["provider_of", "call_attributes", "usage_attributes"]

# model-name prefixes -> gen_ai.provider.name (well-known values of the convention)
_PREFIXES = (
    (("gpt-", "o1", "o3", "o4", "chatgpt", "text-davinci", "codex-"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gcp.gemini"),
    (("mistral", "codestral", "magistral"), "mistral_ai"),
    (("deepseek",), "deepseek"),
    (("grok",), "x_ai"),
    (("command",), "cohere"),
)


def provider_of(api: Any, model: Any, by: str, meta: dict[str, Any]) -> str:
    """``gen_ai.provider.name``: the API the call went to, else what the model's name or the recording
    tool says, else ``unknown`` (the attribute is required; the convention allows custom values)."""
    if api in ("openai", "anthropic"):
        return api
    if isinstance(model, str):
        lowered = model.lower()
        for prefixes, provider in _PREFIXES:
            if lowered.startswith(prefixes):
                return provider
    if by.startswith("claude-code") or str(meta.get("message_id", "")).startswith("msg_"):
        return "anthropic"
    if by.startswith("codex"):
        return "openai"
    return "unknown"


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def usage_attributes(usage: Any, flat: dict[str, Any] | None = None) -> dict[str, int]:
    """``gen_ai.usage.*`` from an OpenAI or Anthropic ``usage`` object (or Claude Code's flat keys).
    The convention's input tokens include cached ones: Anthropic reports them apart, so they are
    added up here."""
    out: dict[str, int] = {}
    source = usage if isinstance(usage, dict) else (flat or {})
    prompt = _int(source.get("prompt_tokens"))
    if prompt is not None:  # OpenAI Chat Completions (input_tokens/output_tokens: the Responses API)
        out[A.INPUT_TOKENS] = prompt
        details = source.get("prompt_tokens_details")
        if isinstance(details, dict) and _int(details.get("cached_tokens")) is not None:
            out[A.CACHE_READ_TOKENS] = details["cached_tokens"]
    else:
        base = _int(source.get("input_tokens"))
        read = _int(source.get("cache_read_input_tokens"))
        created = _int(source.get("cache_creation_input_tokens"))
        if base is not None:
            out[A.INPUT_TOKENS] = base + (read or 0) + (created or 0)
        if read is not None:
            out[A.CACHE_READ_TOKENS] = read
        if created is not None:
            out[A.CACHE_CREATION_TOKENS] = created
        details = source.get("input_tokens_details")
        if isinstance(details, dict) and _int(details.get("cached_tokens")) is not None:
            out[A.CACHE_READ_TOKENS] = details["cached_tokens"]
    completion = _int(source.get("completion_tokens"))
    if completion is None:
        completion = _int(source.get("output_tokens"))
    if completion is not None:
        out[A.OUTPUT_TOKENS] = completion
    details = source.get("completion_tokens_details") or source.get("output_tokens_details")
    if isinstance(details, dict) and _int(details.get("reasoning_tokens")) is not None:
        out[A.REASONING_TOKENS] = details["reasoning_tokens"]
    return out


def call_attributes(request: dict[str, Any], reply: dict[str, Any], first_meta: dict[str, Any], by: str) -> tuple[str, dict[str, Any], float | None]:
    """(span name, attributes, latency in ms) of one model call."""
    attrs: dict[str, Any] = {A.OPERATION: "chat"}
    model = request.get("model") if isinstance(request.get("model"), str) else None
    response_model = reply.get("model") if isinstance(reply.get("model"), str) else None
    provider = provider_of(request.get("api"), model or response_model, by, first_meta)
    attrs[A.PROVIDER] = provider
    attrs[A.OI_PROVIDER] = provider
    attrs[A.OI_SYSTEM] = provider
    if model:
        attrs[A.REQUEST_MODEL] = model
    if response_model:
        attrs[A.RESPONSE_MODEL] = response_model
    if model or response_model:
        attrs[A.OI_MODEL] = response_model or model
    temperature = request.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        attrs[A.REQUEST_TEMPERATURE] = float(temperature)
    if _int(request.get("max_tokens")) is not None:
        attrs[A.REQUEST_MAX_TOKENS] = request["max_tokens"]
    if request.get("stream") is True:
        attrs[A.REQUEST_STREAM] = True
    response_id = reply.get("reply_id") or first_meta.get("message_id")
    if isinstance(response_id, str) and response_id:
        attrs[A.RESPONSE_ID] = response_id
    reason = reply.get("finish_reason") or reply.get("stop_reason")
    if isinstance(reason, str) and reason:
        attrs[A.FINISH_REASONS] = (reason,)
    usage = usage_attributes(reply.get("usage"), None if reply.get("usage") else first_meta)
    attrs.update(usage)
    if A.INPUT_TOKENS in usage:
        attrs[A.OI_PROMPT_TOKENS] = usage[A.INPUT_TOKENS]
    if A.OUTPUT_TOKENS in usage:
        attrs[A.OI_COMPLETION_TOKENS] = usage[A.OUTPUT_TOKENS]
    if A.INPUT_TOKENS in usage and A.OUTPUT_TOKENS in usage:
        attrs[A.OI_TOTAL_TOKENS] = usage[A.INPUT_TOKENS] + usage[A.OUTPUT_TOKENS]
    latency = reply.get("latency_ms")
    latency = float(latency) if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency >= 0 else None
    name = f"chat {model or response_model}" if (model or response_model) else "chat"
    return name, attrs, latency
