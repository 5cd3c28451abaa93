"""The grounding cache (``engine.grounding_cache``): a derived span is checked once, and what the
cache answers is exactly what a recomputation finds. Runs on every store (memory, SQLite,
PostgreSQL) through the ``ledger`` fixture, plus the SQLite table's own properties."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Ledger
from engine.grounding_cache import (
    TABLE,
    MemoryGroundingCache,
    SqliteGroundingCache,
    checker_id,
    input_digest,
    open_cache,
)
from projections import audit, blame
from projections.grounding import Source
from projections.grounding.checker import LEXICAL, LexicalChecker, run_checker

WORDS = ["billing-api", "503", "10:02", "auth-service", "500", "10:07", "orders-db", "0042_add_index",
         "migration", "completed", "failed", "timeout", "retry", "deployed", "v2.3.1", "INC-4411", "14:02"]


def uncached(reader, checker=None):
    """The audit recomputed from scratch: the reader without the ledger's cache."""
    reader.grounding_cache = None
    try:
        return audit(reader, checker)
    finally:
        reader.grounding_cache = None


def comparable(report):
    return [(f.kind, f.severity, f.message, f.span_ids, f.positions, f.value, f.category, f.checker) for f in report.findings], [
        (c.span_id, c.position, c.sources, c.source_specifics, c.dropped, c.coverage) for c in report.coverage
    ]


class Versioned(LexicalChecker):
    """The lexical rules under an explicit version, optionally reporting one extra finding (a
    stand-in for a changed rule)."""

    def __init__(self, version: str, extra: bool = False):
        self._version = version
        self.extra = extra

    @property
    def version(self) -> str:
        return self._version

    def result(self, summary, sources, *, with_coverage=True):
        r = super().result(summary, sources, with_coverage=with_coverage)
        if self.extra:
            r.findings.append({"kind": "changed-rule", "severity": "warning", "value": "x", "message": "a changed rule",
                               "category": "", "offset": 0, "rule": "test", "checker": self.name})
        return r


class Unversioned:
    name = "unversioned"

    def __init__(self):
        self.calls = 0

    def check(self, summary, sources):
        self.calls += 1
        return []


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


@st.composite
def session_plans(draw):
    """Observations, then rewrites of disjoint groups of them with texts mixing their words and others."""
    observations = draw(st.lists(texts, min_size=1, max_size=10))
    order = draw(st.permutations(range(len(observations))))
    groups, i = [], 0
    while i < len(order):
        n = draw(st.integers(1, 3))
        groups.append(sorted(order[i : i + n]))
        i += n
    rewrites = [(g, draw(texts)) for g in groups if draw(st.booleans())]
    return observations, rewrites


def build(ledger, name, plan):
    observations, rewrites = plan
    s = ledger.create_session(name, strict=False)
    spans = [
        s.observe(t, role="tool", kind="tool_result", meta={"tool_call_id": f"c{i}"}) if i % 3 == 1
        else s.observe(t, role="user" if i % 3 == 0 else "assistant")
        for i, t in enumerate(observations)
    ]
    for group, text in rewrites:
        s.rewrite([spans[i].id for i in group], text, by="model-x")
    return s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=session_plans(), data=st.data())
def test_cached_findings_equal_recomputed_ones_on_random_sessions(ledger, plan, data):
    name = f"p{data.draw(st.integers(0, 10**9))}"
    if name in ledger:
        return
    s = build(ledger, name, plan)
    cache = ledger.grounding_cache
    first = s.audit()  # computes and keeps
    before = cache.hits
    second = ledger.session(name).audit()  # reads back
    assert cache.hits - before == first.derived_checked
    fresh = uncached(ledger.session(name).view())
    assert comparable(first) == comparable(fresh) == comparable(second)
    assert first.ok == fresh.ok and first.errors == fresh.errors and first.warnings == fresh.warnings
    # blame of any derived span's word judges through the same results
    for span in ledger.session(name).spans():
        if span.derived:
            word = span.text.split()[0]
            cached_hits = ledger.session(name).blame(word)
            v = ledger.session(name).view()
            v.grounding_cache = None
            assert cached_hits == blame(v, word)
            break


def test_a_checker_version_change_does_not_use_the_cache(ledger):
    s = build(ledger, "v", (["billing-api returned 503 at 10:02", "auth-service 500"], [([0, 1], "billing-api 503 at 14:02")]))
    cache = ledger.grounding_cache
    old = audit(s, Versioned("1"))
    assert cache.misses == 1 and cache.hits == 0
    assert audit(s, Versioned("1")).findings == old.findings and cache.hits == 1
    changed = audit(s, Versioned("2", extra=True))
    assert cache.misses == 2  # the new version missed ...
    assert [f for f in changed.findings if f.kind == "changed-rule"]  # ... and the new rule's finding is there
    assert not [f for f in old.findings if f.kind == "changed-rule"]
    assert comparable(changed) == comparable(uncached(ledger.session("v").view(), Versioned("2", extra=True)))
    # the same version with a different rule is the one thing the version must prevent: both kept apart
    assert audit(s, Versioned("1")).findings == old.findings


def test_the_lexical_version_is_a_hash_of_the_rules_code():
    assert LEXICAL.version and LEXICAL.version == LexicalChecker().version
    assert checker_id(LEXICAL) != checker_id(Versioned("other"))
    assert checker_id(Unversioned()) is None


def test_a_checker_without_a_version_is_never_cached(ledger):
    s = build(ledger, "u", (["billing-api returned 503"], [([0], "billing-api 503")]))
    judge = Unversioned()
    audit(s, judge)
    audit(s, judge)
    assert judge.calls == 2
    assert ledger.grounding_cache.hits == 0


def test_a_row_for_other_inputs_is_a_miss():
    cache = MemoryGroundingCache()
    sources = [Source("billing-api returned 503 at 10:02", "tool")]
    a = cache.check("sid", "d1", 5, LEXICAL, "billing-api 503 at 14:02", sources)
    # the same key, other sources (a log that is not the one the row came from): recomputed
    b = cache.check("sid", "d1", 5, LEXICAL, "billing-api 503 at 14:02", [Source("billing-api 503 at 14:02", "tool")])
    assert cache.misses == 2 and cache.hits == 0
    assert [f["value"] for f in a.findings if f["severity"] == "error"] == ["14:02"]
    assert not [f for f in b.findings if f["severity"] == "error"]
    assert input_digest("x", [Source("y", "tool")]) != input_digest("x", [Source("y", "user")])
    assert input_digest("x", [Source("y", harness=True)]) != input_digest("x", [Source("y", harness="true")])
    assert input_digest("ab", [Source("c")]) != input_digest("a", [Source("bc")])


def test_what_a_hit_returns_equals_what_the_checker_returns():
    cache = MemoryGroundingCache()
    sources = [Source("POST /v1/sessions -> 500 from auth-service at 10:07", "tool", call="c1"), Source("retry it", "user")]
    text = "auth-service returned 500 at 10:07 and again at 10:09; the user asked to roll back"
    miss = cache.check("s", "d1", 3, LEXICAL, text, sources)
    hit = cache.check("s", "d1", 3, LEXICAL, text, sources)
    direct = run_checker(LEXICAL, text, sources)
    assert cache.hits == 1
    for r in (miss, hit):
        assert r.findings == direct.findings and r.dropped == direct.dropped
        assert (r.specifics, r.source_specifics) == (direct.specifics, direct.source_specifics)


def test_sqlite_results_live_in_the_ledger_file_and_survive_a_reopen(tmp_path):
    path = tmp_path / "l.db"
    url = f"sqlite:///{path}"
    with Ledger.open(url) as ledger:
        s = build(ledger, "s", (["billing-api returned 503 at 10:02"], [([0], "billing-api 503 at 14:02")]))
        first = s.audit()
        assert isinstance(ledger.grounding_cache, SqliteGroundingCache)
    rows = sqlite3.connect(path).execute(f"SELECT session, span_id, position, checker FROM {TABLE}").fetchall()
    assert len(rows) == 1 and rows[0][1].startswith("d") and rows[0][3].endswith("@" + LEXICAL.version)
    with Ledger.open(url) as ledger:
        again = ledger.session("s").audit()
        assert ledger.grounding_cache.hits == 1 and ledger.grounding_cache.misses == 0
        assert comparable(again) == comparable(first)
        assert ledger.verify("s").ok  # the table beside the log changes nothing of the log


def test_a_damaged_or_dropped_sqlite_row_is_recomputed(tmp_path):
    path = tmp_path / "l.db"
    url = f"sqlite:///{path}"
    with Ledger.open(url) as ledger:
        s = build(ledger, "s", (["billing-api returned 503 at 10:02"], [([0], "billing-api 503 at 14:02")]))
        first = s.audit()
    db = sqlite3.connect(path)
    db.execute(f"UPDATE {TABLE} SET result = ?", (b"not json",))
    db.commit()
    with Ledger.open(url) as ledger:
        assert comparable(ledger.session("s").audit()) == comparable(first)
        assert ledger.grounding_cache.misses == 1
    db.execute(f"DROP TABLE {TABLE}")  # the projection is disposable: rebuilt on demand
    db.commit()
    with Ledger.open(url) as ledger:
        assert comparable(ledger.session("s").audit()) == comparable(first)
        assert ledger.grounding_cache.misses == 1
        assert comparable(ledger.session("s").audit()) == comparable(first)
        assert ledger.grounding_cache.hits == 1


def test_an_unwritable_cache_only_costs_the_recomputation(tmp_path):
    cache = SqliteGroundingCache(str(tmp_path / "missing-dir" / "x.db"))  # cannot be opened
    sources = [Source("billing-api returned 503 at 10:02")]
    r = cache.check("s", "d1", 2, LEXICAL, "billing-api 503 at 14:02", sources)
    assert r.findings == run_checker(LEXICAL, "billing-api 503 at 14:02", sources).findings
    assert cache.misses == 1


def test_memory_and_encrypted_stores_keep_results_in_the_process(tmp_path):
    assert isinstance(open_cache("memory://"), MemoryGroundingCache)
    assert isinstance(open_cache(f"sqlite:///{tmp_path}/x.db", encrypted=True), MemoryGroundingCache)


def test_a_new_compaction_checks_only_its_own_summary(ledger):
    s = build(ledger, "grow", (["billing-api returned 503 at 10:02", "auth-service 500 at 10:07", "orders-db migration"],
                               [([0], "billing-api 503 at 10:02"), ([1], "auth-service 500 at 10:07")]))
    cache = ledger.grounding_cache
    s.audit()
    assert cache.misses == 2
    d = s.rewrite([s.spans()[-1].id], "orders-db migration completed at 14:02", by="model-x")
    report = s.audit()
    assert cache.misses == 3 and cache.hits == 2  # the two earlier summaries came from the cache
    assert any(f.value == "14:02" and d.id in f.span_ids for f in report.findings)
    # and an audit at an earlier position reads the same kept results
    assert s.audit(at=s.position - 1).derived_checked == 2 and cache.misses == 3


def test_the_report_and_the_fleet_view_read_the_kept_results(tmp_path):
    from engine.fleet import Fleet
    from engine.report import build_report

    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger.open(url) as ledger:
        s = build(ledger, "r", (["billing-api returned 503 at 10:02", "auth-service 500 at 10:07"],
                                [([0], "billing-api 503 at 14:02"), ([1], "auth-service 500 at 10:07")]))
        expected = comparable(uncached(ledger.session("r").view()))
        s.audit()
        cache = ledger.grounding_cache
        assert cache.misses == 2
        html = build_report([ledger.session("r")])  # its audit and the blame of each finding's value
        assert "14:02" in html
        with Fleet(ledger) as fleet:
            fleet.catch_up()
            row = fleet.row("r")
        assert cache.misses == 2 and cache.hits >= 3  # nothing checked twice
        assert any(f.kind == "unsupported-specific" for f in row.audit)
        assert comparable(ledger.session("r").audit()) == expected


def test_a_ledger_file_another_writer_holds_still_audits(tmp_path):
    path = tmp_path / "l.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        s = build(ledger, "w", (["billing-api returned 503 at 10:02"], [([0], "billing-api 503 at 14:02")]))
        expected = comparable(uncached(ledger.session("w").view()))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # holds the write lock past the cache's wait
        try:
            assert comparable(s.audit()) == expected
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert ledger.grounding_cache.misses == 1
        assert comparable(s.audit()) == expected  # kept now that the file is free
        assert comparable(s.audit()) == expected and ledger.grounding_cache.hits == 1
