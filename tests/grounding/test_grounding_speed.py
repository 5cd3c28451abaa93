"""The grounding checker's shortcuts decide exactly what the plain computations decide: the
near-quote bounds, the cache of extracted specifics, and the patterns compiled on first use."""

from __future__ import annotations

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
