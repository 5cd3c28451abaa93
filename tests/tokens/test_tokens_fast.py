"""The fast exact counter: the word cache (looked up in C or in Python) and the bpe-openai core give
tiktoken's counts exactly, on the benchmark corpus and on generated text, and the default write path
keeps every promise about counts (the span, the buffer total, the stored event, reads inside an open
batch)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.tokens as tokens
from engine import BPECounter, InvalidInputError, Ledger, tokenizer_packages

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=2)
def tiktoken_count(name: str):
    """The reference: tiktoken's own encode_ordinary, no cache in front."""
    encode = tokenizer_packages.tiktoken_encoding(name).encode_ordinary
    return lambda text: len(encode(text))


@functools.lru_cache(maxsize=1)
def bench_corpus() -> list[str]:
    """The texts of the batched-observe benchmark's first round (benchmarks/bench_core.py checks all
    seven rounds the same way before it times anything)."""
    spec = importlib.util.spec_from_file_location("bench_core_for_tests", ROOT / "benchmarks" / "bench_core.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.corpus(20_000, 0)


def rust_core(name: str):
    count = tokens._rust_bpe_count(name)
    if count is None:
        pytest.skip("bpe-openai (extra 'fast') is not installed")
    return count


# Words, whitespace and punctuation chosen to hit every edge of the split patterns: contractions,
# digits in runs of 1-3, punctuation followed by newlines or '/', combining marks, non-ASCII
# whitespace (NBSP, ideographic space, U+001C which Python calls whitespace and the pattern does not),
# the special-token text (ordinary text here), emoji and CJK.
PARTS = [
    "billing-api", "503", "14:02", "v2.3.1", "/etc/app", "INC-4411", "don't", "WE'LL", "it's", "a",
    "é", "e\u0301", "数据库", "🙂", "<|endoftext|>", "x.\n/y", "foo\nbar", "a\tb", "12345678", "'s",
    ".", "...", "(", ")", "\u00a0", "\u3000", "\x1c", "\n", "\r\n", "\t", "", " ",
]
SEPARATORS = [" ", " ", " ", "  ", "   ", "\n", " \n", "\n ", "\t", "\u00a0", ""]

texts_of_parts = st.lists(
    st.tuples(st.sampled_from(PARTS), st.sampled_from(SEPARATORS)), max_size=25
).map(lambda xs: "".join(p + s for p, s in xs))

# The C lookup reads ASCII text only: ASCII parts and every ASCII character Python calls whitespace
# (\x0b, \x0c and \x1c..\x1f included), next to spaces in every arrangement.
ASCII_PARTS = [p for p in PARTS if p.isascii()] + ["\x0b", "\x0c", "\x1d", "\x1f", "x\x1e", "\x1fy", "[7-123]", "0042"]
ASCII_SEPARATORS = [" ", " ", " ", "  ", "\n", " \n", "\n ", "\t", "\x0c", "\x1c", ""]
ascii_texts = st.lists(
    st.tuples(st.sampled_from(ASCII_PARTS), st.sampled_from(ASCII_SEPARATORS)), max_size=25
).map(lambda xs: "".join(p + s for p, s in xs))

NATIVE = [None, False] if tokens._WordTable is not None else [False]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("fast", [None, False])
@pytest.mark.parametrize("native", NATIVE)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts_of_parts | ascii_texts | st.text(max_size=80))
def test_the_word_cache_count_equals_tiktoken_on_any_text(name, fast, native, text):
    counter = BPECounter(name, fast=fast, native=native)
    assert counter.count(text) == tiktoken_count(name)(text)
    assert counter.count(text) == tiktoken_count(name)(text)  # again, now from the cache


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | texts_of_parts)
def test_the_bpe_openai_core_equals_tiktoken_on_random_unicode(text):
    for name in ("o200k_base", "cl100k_base"):
        assert rust_core(name)(text) == tiktoken_count(name)(text)


def test_both_fast_paths_equal_tiktoken_on_the_benchmark_corpus():
    corpus = bench_corpus()
    assert len(corpus) == 20_000
    expected = [tiktoken_count("o200k_base")(t) for t in corpus]
    fast = rust_core("o200k_base")
    assert [fast(t) for t in corpus] == expected
    counter = BPECounter("o200k_base")
    assert [counter.count(t) for t in corpus] == expected


def test_counts_stay_exact_when_the_cache_restarts(monkeypatch):
    monkeypatch.setattr(tokens, "_MAX_WORDS", 5)
    tokens._word_counts.cache_clear()  # the cache is shared per process: start this test from an empty one
    counter, reference = BPECounter("o200k_base"), tiktoken_count("o200k_base")
    texts = bench_corpus()[:300] + ["alpha beta gamma delta epsilon zeta eta theta"] * 3
    assert [counter.count(t) for t in texts] == [reference(t) for t in texts]
    words = counter._words
    assert len(words.first) <= 5 and len(words.spaced) <= 5


def test_lone_surrogates_and_long_texts_are_counted_like_tiktoken():
    reference = tiktoken_count("o200k_base")
    for text in ("\ud800 broken \udfff pair", "x" * 100_000, "word " * 50_000, "a\u00a0" * 10_000):
        assert BPECounter().count(text) == reference(text)
        assert BPECounter(fast=False).count(text) == reference(text)


def test_a_loaded_counter_pickles_and_copies():
    import copy
    import pickle

    counter = BPECounter("cl100k_base", fast=False)
    counter.count("warm up")
    for clone in (pickle.loads(pickle.dumps(counter)), copy.deepcopy(counter)):
        assert (clone.name, clone.fast) == ("cl100k_base", False)
        assert clone.count("billing-api 503") == counter.count("billing-api 503")


def test_a_count_of_something_that_is_not_text_is_a_typed_error():
    for bad in (None, b"bytes", 3):
        with pytest.raises(InvalidInputError):
            BPECounter().count(bad)


def test_without_the_fast_extra_tiktoken_counts_and_fast_true_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # import bpe_openai now raises ImportError
    monkeypatch.setitem(sys.modules, "bpe_openai._bindings", None)
    tokens._rust_bpe_count.cache_clear()
    try:
        counter = BPECounter("o200k_base")
        assert counter.count("billing-api returned 503 at 14:02") == tiktoken_count("o200k_base")(
            "billing-api returned 503 at 14:02"
        )
        assert counter.backend == "tiktoken"
        with pytest.raises(InvalidInputError, match=r"ctxledger\[fast\]"):
            BPECounter("o200k_base", fast=True).count("x")
    finally:
        tokens._rust_bpe_count.cache_clear()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # bpe_openai's own import of its data files
def test_the_fast_core_is_used_when_installed_and_loads_without_the_package_import():
    rust_core("o200k_base")
    counter = BPECounter()
    counter.count("x")
    assert counter.backend == "bpe-openai"
    assert BPECounter(fast=False).count("x") == 1
    # the extension was loaded on its own, and the package imported afterwards reuses it
    import bpe_openai

    assert len(bpe_openai.get_encoding("o200k_base").encode_ordinary("billing-api 503")) == BPECounter().count(
        "billing-api 503"
    )


def test_an_agent_batch_on_the_default_path_keeps_every_count_promise(sqlite_url):
    """A user observes tool output in a batch without passing tokens=: every span, the buffer total,
    reads inside the open batch and the stored events carry the exact o200k counts."""
    reference = tiktoken_count("o200k_base")
    texts = bench_corpus()[:150] + ["GET /health -> 503 from billing-api at 14:02\n\ttrace 9f3a", "数据库 ok"]
    with Ledger.open(sqlite_url) as led:
        s = led.create_session("agent")
        spans = []
        with s.batch():
            for i, text in enumerate(texts):
                span = s.observe(text, role="tool", kind="tool_result", meta={"tool_call_id": f"c{i}"})
                assert span.tokens == reference(text)
                spans.append(span)
                if i == 75:  # a read inside the open batch sees exact counts
                    assert s.tokens == sum(reference(t) for t in texts[: i + 1])
                    assert [x.tokens for x in s.spans()] == [reference(t) for t in texts[: i + 1]]
            with pytest.raises(InvalidInputError):  # bad input fails at the call, inside the batch
                s.observe("   ")
            assert s.position == 1 + len(texts)
        total = sum(reference(t) for t in texts)
        assert s.tokens == total
    with Ledger.open(sqlite_url) as led:
        again = led.session("agent")
        assert again.tokens == total
        stored = [ev.tokens for ev in again.events() if ev.type == "Observed"]
        assert stored == [reference(t) for t in texts]
        assert again.verify().ok
