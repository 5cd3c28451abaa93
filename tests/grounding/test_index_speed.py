"""The shortcuts SourceIndex takes for speed give exactly what the plain definitions give."""

from __future__ import annotations

import random

from projections.grounding import SourceIndex, Specific

WORDS = ["a", "b", "ab", "ba", "billing", "api", "x1", "go", "gog", "o", "s"]


def _plain_name(index: SourceIndex, v: str) -> bool:
    def has(key: str) -> bool:
        return key in index.toks or key in index.grams

    return not v or has(v) or (v.endswith("s") and has(v[:-1])) or has(v + "s") or has(v + "es")


def test_names_are_looked_up_as_grams_would_answer():
    rng = random.Random(7)
    for _ in range(300):
        texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14))) for _ in range(rng.randint(1, 4))]
        keys = {"".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(30)}
        for key in sorted(keys):
            fresh = SourceIndex.build(texts)  # grams not made yet: the lookup does without them
            got = fresh.supports(Specific("name", key, 0, len(key), key))[0]
            assert got == _plain_name(SourceIndex.build(texts), key), (texts, key)


def test_a_subset_is_the_index_of_those_texts():
    texts = ["deployed billing-api v2.1.0 at 14:02", "    1→x = 30\n    2→y = 45\n    3→z", "retried 7 times at 07:41", "ok"]
    index = SourceIndex.build(texts)
    for keep in ([0, 2], [1], [0, 1, 2, 3], [3, 1]):
        sub = index.subset(keep)
        alone = SourceIndex.build([texts[i] for i in keep])
        for field in ("texts", "specifics", "per_text", "by_cat", "numbers", "bare_numbers", "noun_numbers",
                      "quantities", "toks", "tok_lists", "lower", "norm", "grams", "line_numbers", "listing_lengths"):
            assert getattr(sub, field) == getattr(alone, field), field
        assert list(sub.numbers) == list(alone.numbers)  # the same order, too


def test_a_repeated_text_is_indexed_as_often_as_given():
    texts = ["3 tests, 0 failures", "pushed abc1234..def5678 main -> main", "3 tests, 0 failures"]
    index = SourceIndex.build(texts)
    assert len(index.per_text) == 3 and len(index.specifics) == 2 * len(index.per_text[0]) + len(index.per_text[1])
    assert index.by_cat["number"] == [sp for sp in index.specifics if sp.category == "number"]
