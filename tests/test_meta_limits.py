"""Meta that the log's encoding cannot hold is refused with a typed error, and nothing is written."""

from __future__ import annotations

import pytest

from engine import EstimateCounter, InvalidInputError, Ledger


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
