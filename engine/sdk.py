"""Clients of the official model SDKs (``openai``, ``anthropic``), built one way for every part of
ctxledger that calls a model: the rewriter adapters, the agent loop, the LLM judge. The SDKs are
optional extras, imported on first use; a missing one is the caller's typed error naming the
``pip install`` to run."""

from __future__ import annotations

import os
from typing import Any

from engine.errors import InvalidInputError, LedgerError

__all__ = ["check_connection", "openai_client", "anthropic_client", "api_key"]

# what a local OpenAI-compatible server accepts; the Anthropic SDK refuses to start without a key
_NO_KEY = {"openai": "not-needed-for-local-servers", "anthropic": "not-set"}
_KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def check_connection(model: Any, timeout: Any, max_retries: Any, what: str = "a model") -> None:
    """The arguments every model client takes, checked before anything is called."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidInputError(f"{what} needs a model name")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds; got {timeout!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise InvalidInputError(f"max_retries must be a non-negative int; got {max_retries!r}")


def api_key(provider: str, given: str | None) -> str:
    return given or os.environ.get(_KEY_VARS[provider]) or _NO_KEY[provider]


def _sdk(provider: str, error: type[LedgerError], who: str) -> Any:
    try:
        return __import__(provider)
    except ImportError:
        raise error(f"{who} needs the official {provider} SDK: pip install 'ctxledger[{provider}]'") from None


def openai_client(
    *, base_url: str | None, key: str | None, timeout: float, max_retries: int, error: type[LedgerError], who: str
) -> Any:
    openai = _sdk("openai", error, who)
    return openai.OpenAI(base_url=base_url, api_key=api_key("openai", key), timeout=timeout, max_retries=max_retries)


def anthropic_client(
    *, base_url: str | None, key: str | None, timeout: float, max_retries: int, error: type[LedgerError], who: str
) -> Any:
    anthropic = _sdk("anthropic", error, who)
    return anthropic.Anthropic(base_url=base_url, api_key=api_key("anthropic", key), timeout=timeout, max_retries=max_retries)
