"""Meta that the log's encoding cannot hold is refused with a typed error, and nothing is written."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, InvalidInputError, Ledger, validate


@pytest.mark.parametrize(
    "meta",
    [{"n": 2**64}, {"n": -(2**63) - 1}, {"args": {"id": 2**70}}, {"ids": [1, 2, 2**80]}],
    ids=["flat too big", "flat too small", "nested", "in a list"],
)
def test_integers_beyond_64_bits_are_refused_and_the_log_is_unchanged(meta):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("m")
    s.observe("before")
    before = [type(e).__name__ for e in s.events()]
    with pytest.raises(InvalidInputError, match="64-bit"):
        s.observe("tool output", role="tool", kind="tool_result", meta={"tool_call_id": "c1", **meta})
    with pytest.raises(InvalidInputError, match="64-bit"):
        with s.batch():
            s.observe("tool output", meta=meta)
    assert [type(e).__name__ for e in s.events()] == before
    assert led.session("m").position == len(before)


@pytest.mark.parametrize("value", [2**64 - 1, -(2**63), 0, 10**18])
def test_integers_the_log_can_hold_round_trip(value):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("m")
    span = s.observe("x", meta={"n": value, "nested": {"n": value}})
    assert led.session("m").original(span.id).meta == {"n": value, "nested": {"n": value}}


def _round_trip(value: dict):
    """What the full check stores: the JSON round trip, or the typed error."""
    try:
        return validate.meta(_NotExactlyADict(value))  # a dict subclass never takes the fast path
    except InvalidInputError as e:
        return ("refused", str(e))


class _NotExactlyADict(dict):
    pass


_ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=8)
_any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=8)  # lone surrogates too
_keys = st.one_of(_ascii_text, _ascii_text, _any_text)  # mostly ASCII: the fast path's own case
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    _ascii_text, _any_text, st.text(alphabet=st.characters(max_codepoint=127), min_size=4090, max_size=4100),
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_keys, _scalars, max_size=10))
@example({"id": float("nan")})  # each check of the fast path, one by one: JSON has no nan or inf,
@example({"id": float("-inf")})
@example({"id": "\ud800"})  # a lone surrogate is not UTF-8
@example({"\udfff": "c1"})
@example({"id": "caf\u00e9"})
@example({"id": 2**64})  # beyond the log's 64 bits
@example({"id": -(2**63) - 1})
@example({"id": "x" * 4_097})
@example({f"k{i}": "x" * 4_096 for i in range(70)})  # over the size limit: only 8 keys are fast
@example({1: "c1"})
@example({"args": {"n": 1}, "ids": [1, 2]})  # nested: copied deep, never shared with the caller
def test_the_fast_path_for_flat_meta_stores_exactly_what_the_json_round_trip_stores(value):
    # a flat dict of ASCII keys and finite scalars is copied instead of round-tripped through JSON;
    # for every flat dict, checked or copied, the stored meta (or the refusal) must be the same
    try:
        fast = validate.meta(value)
    except InvalidInputError as e:
        fast = ("refused", str(e))
    slow = _round_trip(value)
    assert fast == slow
    if not isinstance(fast, tuple):
        assert type(fast) is dict and fast is not value
        assert not any(fast[k] is value[k] for k in fast if isinstance(fast[k], (dict, list)))
        assert [type(v) for v in fast.values()] == [type(v) for v in slow.values()]
