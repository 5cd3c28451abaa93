"""Each rule of the lexical checker, on its own file of cases (projections/grounding/cases/), and
the contract every rule holds to."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.grounding import RULES, Source, check, finding
from projections.grounding.registry import SEVERITIES

LOUD = ("error", "warning")
CASES = [(code, i, case) for code, rule in RULES.items() for i, case in enumerate(rule.cases())]


def test_every_rule_has_a_code_a_principle_and_cases_on_both_sides():
    assert set(RULES) == {"literal", "merged", "instruction", "completion", "plan", "status", "pairing"}
    for code, rule in RULES.items():
        assert rule.principle.endswith(".") and rule.kinds
        expects = [bool(c["expect"]) for c in rule.cases()]
        assert True in expects and False in expects, f"{code}: needs grounded and ungrounded cases"


@pytest.mark.parametrize("code, i, case", CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
def test_a_rule_on_its_cases(code, i, case):
    sources = [Source(s["text"], s.get("role", ""), call=s.get("call", "")) for s in case["sources"]]
    found = check(case["summary"], sources, rules=(code,), with_coverage=False).findings
    loud = sorted({f["kind"] for f in found if f["severity"] in LOUD})
    assert loud == sorted(case["expect"]), (case["origin"], found)
    assert all(f["rule"] == code for f in found)
    assert all(f["kind"] in RULES[code].kinds for f in found)


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=200), max_size=4))
def test_every_finding_has_the_one_shape(summary, texts):
    for f in check(summary, texts).findings:
        assert f["severity"] in SEVERITIES and f["kind"] and isinstance(f["value"], str) and f["message"]
        assert f["rule"] in RULES


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([
    "billing-api returned 503 at 13:58", "$ pytest -q\n12 passed in 2.1s", "deployed cart-api v2.1.0 to prod",
    "[main 1a2b3c4] Fix the parser", "Compiling 3 files (.ex)", "GET /v1/users -> 200 in 85ms",
]), min_size=1, max_size=5, unique=True))
def test_a_summary_that_copies_its_sources_gets_no_error_and_no_warning(picked):
    summary = ". ".join(picked) + "."
    assert [f for f in check(summary, [Source(t, "tool") for t in picked]).findings if f["severity"] in LOUD] == []


def test_a_finding_with_an_unknown_severity_is_refused():
    with pytest.raises(ValueError):
        finding("literal", "unsupported-specific", "fatal", "x", "y")
