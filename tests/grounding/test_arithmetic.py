"""The literal rule's arithmetic principle (projections/grounding/arithmetic.py): a quantity that is
the sum, difference, column total, share or change of same-dimension quantities ONE observation
states, or the time between two of its timestamps, is computed (info) to the precision written; the
same figure off by more stays an error. One step over figures of different observations counts only
where the sources state few figures and the step singles the figure out (restated.py, chance.py)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from projections.grounding import Source, check
from projections.grounding.arithmetic import MAX_FIGURES
from projections.grounding.restated import PAIR_BUDGET

LOUD = ("error", "warning")


def _loud(summary: str, *sources: str) -> list[str]:
    found = check(summary, [Source(s, "tool") for s in sources], rules=("literal",), with_coverage=False).findings
    return [f["value"] for f in found if f["severity"] in LOUD]


@settings(max_examples=60, deadline=None)
@given(st.integers(1200, 9000), st.integers(100, 1100))
def test_a_difference_of_two_sizes_one_listing_prints_is_computed(before: int, after: int) -> None:
    listing = f"slim {after}MiB\nlatest {before}MiB"  # one reading each (MB is also read as MiB)
    diff = before - after
    assume((diff + 7) % 10)  # trailing zeros may be rounding ("600 MiB" is 550-650 MiB)
    assert _loud(f"The image shrank by {diff} MiB.", listing) == []
    assert _loud(f"The image shrank by {diff + 7} MiB.", listing) == [f"{diff + 7} MiB"]


def test_operands_of_two_observations_count_only_where_few_figures_are_stated() -> None:
    # the same two sizes in two observations: one step of arithmetic over the sources' figures,
    # searched only while they state few (projections/grounding/restated.py, PAIR_BUDGET)
    assert _loud("The image shrank by 898 MB.", "latest 1210MB", "slim 312MB") == []
    assert _loud("The image shrank by 899 MB.", "latest 1210MB", "slim 312MB") == ["899 MB"]
    crowded = [f"layer {i}: {1000 + 97 * i} bytes" for i in range(PAIR_BUDGET)]
    assert _loud("The image shrank by 898 MB.", "latest 1210MB", "slim 312MB", *crowded) == ["898 MB"]


def test_a_derivation_most_neighbouring_figures_also_find_is_chance() -> None:
    # figures 1..12 of one small table: nearly every small ratio is one step from some pair
    table = " ".join(str(i) for i in range(1, 13))
    assert _loud("Errors fell by 2.7 times.", table) == ["2.7"]
    assert _loud("Errors fell by 2.7 times.", "before 1841", "after 682") == []


def test_a_change_as_a_percentage_to_the_precision_written() -> None:
    src = "median of 10 runs: 1900 ms -> 1200 ms"
    assert _loud("Cold start is about 37% faster.", src) == []
    assert _loud("Cold start is 36.8% faster.", src) == []
    assert _loud("Cold start is 36.5% faster.", src) == ["36.5%"]


def test_the_time_between_two_timestamps_of_one_log() -> None:
    log = "2024-06-18T09:41:02Z connecting\n2024-06-18T09:41:07Z i/o timeout"
    assert _loud("It timed out five seconds later.", log) == []
    assert _loud("It timed out 6 seconds later.", log) == ["6 seconds"]


def test_a_column_total_but_not_one_that_already_holds_its_total() -> None:
    bundle = "a.js  412.77 kB │ gzip: 131.02 kB\nb.js  598.10 kB │ gzip: 187.44 kB\nc.js  142.35 kB │ gzip:  45.60 kB"
    assert _loud("The three come to a little over 1.1 MB.", bundle) == []
    assert _loud("The run took 4.1 seconds.", "Finished in 2.1 seconds (0.4s async, 1.6s sync)") == ["4.1 seconds"]


def test_too_many_figures_of_one_dimension_ground_nothing() -> None:
    many = "\n".join(f"step {i} took {100 + 37 * i} ms" for i in range(MAX_FIGURES + 1))
    assert _loud("The gap was 74 ms.", many) == ["74 ms"]
    few = "\n".join(f"step {i} took {100 + 37 * i} ms" for i in range(3))
    assert _loud("The gap was 74 ms.", few) == []


def test_a_ctime_weekday_and_a_date_glued_after_an_underscore() -> None:
    helm = "58        Tue Jun 18 09:05:47 2024  deployed    web-1.9.4   4.2.0"
    assert _loud("Revision 58 was deployed Tuesday 18 June at 09:05.", helm) == []
    assert _loud("Revision 58 was deployed Friday 18 June at 09:05.", helm) == ["Friday"]
    runs = "| daily_sales | backfill__2024-06-15T00:00:00+00:00 | success |"
    assert _loud("The run for 15 June succeeded.", runs) == []
    assert _loud("The run for 16 June succeeded.", runs) == ["16 June"]


def test_a_host_and_port_one_observation_gives_together() -> None:
    assert _loud("Sentinel reported 10.8.1.10:6379.", "Sentinel: 14:02:05 10.8.1.10 6379") == []
    assert _loud("Sentinel reported 10.8.1.10:6380.", "Sentinel: 14:02:05 10.8.1.10 6379") == ["10.8.1.10:6380"]
