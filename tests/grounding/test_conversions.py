"""The literal rule's conversion principle (projections/grounding/conversions.py): a figure converted
to another unit and rounded to the precision it is written with is grounded; one off by more than
that precision is not; a coarse rounding counts only where the source names the same subject."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from projections.grounding import Source, check
from projections.grounding.conversions import precision
from projections.grounding.names import acronym_stated, name_stated
from projections.grounding.specifics import SourceIndex, extract

LOUD = ("error", "warning")

# units with one reading each (GB/MB read both decimal and binary, which would blur "off by more")
DURATIONS = {"milliseconds": 1e-3, "seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
SIZES = {"KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3}


def _literal_loud(summary: str, source: str) -> list[str]:
    found = check(summary, [Source(source, "tool")], rules=("literal",), with_coverage=False).findings
    return [f["value"] for f in found if f["severity"] in LOUD]


def _written(x: float, digits: int) -> tuple[str, float]:
    """``x`` rounded to ``digits`` significant digits, as a summary writes it, and its value."""
    exponent = math.floor(math.log10(abs(x)))
    decimals = digits - 1 - exponent
    if decimals > 0:
        text = f"{x:.{decimals}f}"
    else:
        q = 10.0 ** -decimals
        text = f"{round(x / q) * q:.0f}"
    return text, float(text)


unit_pairs = st.one_of(
    st.tuples(st.just(DURATIONS), st.sampled_from(sorted(DURATIONS)), st.sampled_from(sorted(DURATIONS))),
    st.tuples(st.just(SIZES), st.sampled_from(sorted(SIZES)), st.sampled_from(sorted(SIZES))),
)


@settings(max_examples=120, deadline=None)
@given(unit_pairs, st.integers(min_value=1, max_value=10**6), st.integers(min_value=1, max_value=4))
def test_a_figure_converted_and_rounded_from_a_source_figure_is_grounded(units, n, digits):
    table, source_unit, summary_unit = units
    x = n * table[source_unit] / table[summary_unit]
    assume(0.5 <= x <= 50_000)
    text, _value = _written(x, digits)
    assume(len(text.replace(".", "").lstrip("0")) >= 1 and float(text) > 0)
    summary = f"The build took {text} {summary_unit}." if table is DURATIONS else f"The build cache holds {text} {summary_unit}."
    source = f"build finished: {n} {source_unit}" if table is DURATIONS else f"build cache: {n} {source_unit}"
    assert _literal_loud(summary, source) == []


@settings(max_examples=120, deadline=None)
@given(unit_pairs, st.integers(min_value=1, max_value=10**6), st.integers(min_value=1, max_value=4),
       st.integers(min_value=2, max_value=9), st.booleans())
def test_a_figure_off_by_more_than_its_written_precision_is_not(units, n, digits, k, up):
    table, source_unit, summary_unit = units
    x = n * table[source_unit] / table[summary_unit]
    assume(0.5 <= x <= 50_000)
    text, value = _written(x, digits)
    step = precision(text)
    off = value + (k if up else -k) * step
    assume(off > 0)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    off_text = f"{off:.{decimals}f}"
    # off by more than the precision the off figure itself is written with ("3100" reads as 31 hundreds)
    assume(abs(float(off_text) - x) > precision(off_text) / 2 * (1 + 1e-6))
    summary = f"The build took {off_text} {summary_unit}."
    source = f"build finished: {n} {source_unit}"
    assert _literal_loud(summary, source) != []


def test_precision_is_half_a_unit_of_the_last_significant_digit_written():
    assert precision("2 minutes") == 1
    assert precision("5.4 s") == 0.1
    assert precision("$18,400") == 100
    assert precision("912 GB") == 1


def test_a_coarse_rounding_needs_the_source_to_name_the_same_subject():
    assert _literal_loud("The build took 2 minutes.", "build finished in 101s") == []
    assert _literal_loud("The build took 2 minutes.", "deploy finished in 101s") == ["2 minutes"]
    # an exact conversion is as good as the figure verbatim, whatever the line names
    assert _literal_loud("The build took 2 minutes.", "deploy finished in 120s") == []


def test_a_bare_figure_takes_the_unit_its_label_writes():
    assert _literal_loud("The client timeout is 30 seconds.", "http_client_timeout_ms: 30000") == []
    assert _literal_loud("The loop waits two minutes.", "while true; do ./check.sh; sleep 120; done") == []
    assert _literal_loud("The volume holds 912 GB.", 'node_filesystem_size_bytes{mountpoint="/data"} 9.12384716800e+11') == []


def test_a_time_converts_between_zones_only_with_its_zone_written():
    assert _literal_loud("The job runs at 03:00 CET.", "cron: job at 02:00 UTC") == []
    assert _literal_loud("The deploy started at 9:05am EST.", "2024-03-04T14:05:11Z deploy started") == []
    assert _literal_loud("The job runs at 03:00 CET.", "cron: job at 02:00") == ["03:00"]  # no zone written
    assert _literal_loud("The job runs at 04:00 CET.", "cron: job at 02:00 UTC") == ["04:00"]


def test_a_percentage_is_a_ratio_one_source_line_states():
    assert _literal_loud("The error rate is 3.2%.", "errors=64 total=2000") == []
    assert _literal_loud("The error rate is 4.2%.", "errors=64 total=2000") == ["4.2%"]


def test_positions_and_random_characters_are_no_figures():
    index = SourceIndex.build(["lib/decoder.ex:983:47", "39:[Omitted long line]", "uuid 3bdd47ea-180d-4bab-8b54-3bdd47ea7adf",
                               "db.internal:5432"])
    assert {983.0, 39.0} <= index.line_numbers
    assert not {47.0, 39.0, 983.0} & index.numbers
    assert 5432.0 in index.numbers  # a host's port is a figure
    assert _literal_loud("The crash is at line 983 of decoder.ex.", "lib/decoder.ex:983:47") == []


def test_durations_in_several_units_are_one_quantity():
    (sp,) = extract("took 6m40s")
    assert sp.category == "quantity" and sp.value == ("s", (400.0,))
    assert _literal_loud("The check took about 12 seconds.", "check done in 0m12.09s") == []


def test_a_name_is_its_parts_in_any_case_and_separators():
    index = SourceIndex.build(["autoscaling:\n  maxReplicas: 12", "helm upgrade kubePrometheusStack ./chart"])
    assert name_stated("max_replicas", index) and name_stated("MaxReplicas", index) and name_stated("Prometheus", index)
    assert not name_stated("max_pods", index)


def test_an_acronym_is_the_initials_of_capitalized_words_a_source_writes():
    index = SourceIndex.build(["Amazon Relational Database Service and Amazon Elastic Compute Cloud; AWS Identity and Access Management"])
    assert acronym_stated("RDS", index) and acronym_stated("EC2", index) and acronym_stated("IAM", index)
    assert not acronym_stated("RDX", index)
    lower = SourceIndex.build(["removed dead sessions"])
    assert not acronym_stated("RDS", lower)  # initials of lower-case words are chance
