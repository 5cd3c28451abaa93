"""The grounding checker's shortcuts decide exactly what the plain computations decide: the
near-quote bounds, the posting lists that narrow which units of evidence are indexed, the cache of
extracted specifics, and the patterns compiled on first use."""

from __future__ import annotations

import itertools
import re
from difflib import SequenceMatcher

import pytest

from projections.grounding.lazy import lazy
from projections.grounding.literals import NEAR_QUOTE_RATIO, _near_quote
from projections.grounding.specifics import SourceIndex, _extract, extract, tokens


def _near_quote_plainly(value: str, index: SourceIndex) -> str | None:
    """Every window of the sources' tokens one word shorter, as long or one longer than the quote
    whose first or last token is a word of it, compared with difflib's ratio: the first best wins."""
    words = value.split()
    if len(words) < 3:
        return None
    best, best_ratio = None, 0.0
    for toks in index.tok_lists:
        if len(set(words).intersection(toks)) < len(words) / 2:
            continue
        for size in (len(words) - 1, len(words), len(words) + 1):
            for i in range(len(toks) - size + 1):
                window = toks[i : i + size]
                if window[0] not in words and window[-1] not in words:
                    continue
                ratio = SequenceMatcher(None, " ".join(window), value, autojunk=False).ratio()
                if ratio >= NEAR_QUOTE_RATIO and ratio > best_ratio:
                    best, best_ratio = " ".join(window), ratio
    return best


SOURCES = [
    "the retry budget was exhausted after three attempts on billing-api",
    "retry budget exhausted after 3 attempts; billing api returned 503",
    "the retry budgets were exhausted after three attempt on the billing service",
    "nothing about it here at all",
]


@pytest.mark.parametrize(
    "quote",
    [
        "the retry budget was exhausted after three attempts",  # verbatim
        "the retry budget got exhausted after three attempts",  # a word changed
        "retry budget exhausted after three attempts",  # a word dropped
        "the retry budgets was exhaustd after three attempt",  # typos
        "an entirely different sentence about deployments",  # nothing close
        "budget exhausted attempts",
    ],
)
def test_near_quote_is_the_plain_search(quote):
    index = SourceIndex.build(SOURCES)
    value = " ".join(tokens(quote))
    assert _near_quote(value, index) == _near_quote_plainly(value, index)


def test_near_quote_finds_a_misquote_and_not_an_invention():
    index = SourceIndex.build(SOURCES)
    assert _near_quote("the retry budget got exhausted after three attempts", index) is not None
    assert _near_quote("an entirely different sentence about deployments", index) is None


UNIT_TEXTS = [
    "deploy finished at 14:02:37 on 2024-03-05, 1,536 MB written",
    "took 90 seconds; timeout=30 in the config",
    "retried 7 times, then 07:41 passed",
    "release v2.3.1 on March 5",
    "port 8080 in http://host:8080/x and 0042_add_index",
    "about 1200 rows, 45% done",
]
PROBES = [
    "14:02", "14:02:37", "07:41", "at 8:15", "1.5 GB", "1536 MB", "90 seconds", "30s", "1.5 minutes", "45%",
    "7 times", "retried 8 times", "1,536", "8080", "42", "March 5", "2024-03-05", "2024", "March 6", "1200 rows",
]


@pytest.mark.parametrize("probe", PROBES)
def test_only_groups_holding_a_text_that_may_state_it_support_it(probe):
    """``texts_that_may_state`` never leaves out a group of texts whose own index supports the
    specific (it is a superset): tried on every group of up to three texts."""
    index = SourceIndex.build(UNIT_TEXTS)
    for sp in extract(probe):
        may = index.texts_that_may_state(sp)
        if may is None:
            continue
        for r in (1, 2, 3):
            for group in itertools.combinations(range(len(UNIT_TEXTS)), r):
                sub = SourceIndex.build(
                    ["\n".join(UNIT_TEXTS[i] for i in group)],
                    [[s for i in group for s in index.per_text[i]]],
                    [[t for i in group for t in index.tok_lists[i]]],
                )
                if sub.supports(sp)[0]:
                    assert may & set(group), (sp, group)


def test_posting_lists_narrow_a_figure_to_the_texts_that_state_it():
    index = SourceIndex.build(UNIT_TEXTS)
    (sp,) = [s for s in extract("port 8080") if s.category == "number"]
    assert index.texts_that_may_state(sp) == {4}


def test_extracted_specifics_are_kept_per_text_and_a_copy_is_returned():
    text = "billing-api returned 503 at 14:02 after 2700 ms (req-4c4793)"
    first = extract(text)
    first.clear()  # a caller's list is its own
    again = extract(text)
    assert again == _extract(text, None) and len(again) >= 4  # what reading the text afresh finds
    assert again is not extract(text)


def test_a_lazy_pattern_compiles_on_first_use_and_acts_as_compiled():
    rx = lazy(r"\b(\d+)\s+passed\b", re.IGNORECASE)
    assert rx._compiled is None
    compiled = re.compile(r"\b(\d+)\s+passed\b", re.IGNORECASE)
    text = "12 PASSED, 3 failed; 4 passed"
    assert [m.group(1) for m in rx.finditer(text)] == [m.group(1) for m in compiled.finditer(text)]
    assert rx.search("none") is None and rx.pattern == compiled.pattern and rx.flags == compiled.flags
    assert rx._compiled is not None
    with pytest.raises(AttributeError):
        rx.no_such_method  # noqa: B018
