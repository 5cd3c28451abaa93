"""The C lookup of the word cache (engine/_wordcount.c): what it answers, that it answers exactly
what the Python word cache does, and that an install on a machine with a C compiler builds it."""

from __future__ import annotations

import random
import shutil
import sysconfig

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.tokens as tokens
from engine import BPECounter, InvalidInputError

WordTable = tokens._WordTable


def test_an_install_with_a_c_compiler_builds_the_extension():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: ctxledger counts in pure Python, the same counts")
    assert WordTable is not None, "engine._wordcount was not built: reinstall with `pip install -e .`"
    assert BPECounter().native is True


needs_c = pytest.mark.skipif(WordTable is None, reason="engine._wordcount is not built (no C compiler)")


@needs_c
def test_the_table_answers_a_count_the_first_part_or_nothing():
    table = WordTable(space=1)
    table.add_first("GET", 1)
    for word, n in (("/health", 2), ("503", 1), ("ok", 1)):
        table.add_spaced(word, n)
    assert table.lookup("GET /health 503") == 4
    assert table.lookup("GET /health 503 ") == 5  # one trailing space is a piece of its own
    assert table.lookup("POST /health 503") == (3, "POST")  # only the first part is new
    assert table.lookup("[1-7]") == (0, "[1-7]")  # a text of one new part
    assert table.lookup("GET /health 504") is None  # a later part is new
    assert table.lookup("GET  /health") is None  # two spaces: not a sum of parts
    assert table.lookup("GET /health  ") is None
    assert table.lookup("GET /hé") is None  # not ASCII: the Python path's
    assert table.lookup(b"GET") is None and table.lookup(3) is None
    assert table.sizes() == (1, 3)


@needs_c
def test_the_table_keeps_no_long_or_non_ascii_part_and_restarts_when_full():
    table = WordTable(space=1)
    table.add_spaced("x" * 65, 9)
    table.add_spaced("héllo", 2)
    assert table.sizes() == (0, 0)
    with pytest.raises(TypeError):
        table.add_spaced(b"bytes", 1)
    for i in range(65_536):
        table.add_spaced(f"w{i}", 2)
    assert table.sizes() == (0, 65_536)
    assert table.lookup("a w65535") == (2, "a")
    table.add_spaced("one-more", 3)  # full: the table restarts with this part alone
    assert table.sizes() == (0, 1)
    assert table.lookup("a w65535") is None and table.lookup("a one-more") == (3, "a")
    table.clear()
    assert table.sizes() == (0, 0)


@needs_c
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 400))
def test_the_c_and_python_lookups_count_every_text_alike_and_like_tiktoken(seed, size):
    """The same stream of log-like texts (words repeat, first parts are new, whitespace of every kind
    now and then) through two fresh caches: the C lookup's and the Python one's."""
    rng = random.Random(seed)
    words = ["billing-api", "503", "14:02", "retry", "[a]", "x\x1f", "\x0bq", "don't", "v2.3.1", ""]
    texts = []
    for i in range(size):
        parts = [f"[{seed % 97}-{i}]"] + [rng.choice(words) for _ in range(rng.randint(0, 30))]
        texts.append(rng.choice([" ", " ", " ", "  ", "\n", "\t "]).join(parts) + rng.choice(["", "", " ", "\n"]))
    tokens._word_counts.cache_clear()
    native, python = BPECounter(native=True), BPECounter(native=False)
    reference = tokens._encoding("o200k_base").encode_ordinary
    for text in texts:
        expected = len(reference(text))
        assert native.count(text) == expected, text
        assert python.count(text) == expected, text
    assert native._words is not python._words


def test_native_true_without_the_extension_names_how_to_get_it(monkeypatch):
    monkeypatch.setattr(tokens, "_WordTable", None)
    with pytest.raises(InvalidInputError, match=r"C compiler"):
        BPECounter(native=True)
    counter = BPECounter()
    assert counter.native is False
    assert counter.count("billing-api returned 503") == len(
        tokens._encoding("o200k_base").encode_ordinary("billing-api returned 503")
    )
