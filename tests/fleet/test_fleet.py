"""The fleet view: every session of a store in one table, folded from the global log exactly once
(catch-up on SQLite and PostgreSQL, eventsourcing's ProjectionRunner live on PostgreSQL)."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from conftest import drop_schema, postgres_url
from engine import EstimateCounter, InvalidInputError, Ledger, RewritePolicyError
from engine.cli import main
from engine.fleet import Fleet, follow
from projections.fleet import Finding, FleetRow, fold


def populate(led: Ledger) -> None:
    """clean: no findings; stubborn: two refused rewrites (attempted drift); loose: a permissive
    session that rewrote a rewrite (drift); confab: a summary inventing a time (audit finding)."""
    clean = led.create_session("clean")
    a, b = clean.observe("build passed"), clean.observe("tests passed")
    clean.rewrite([a.id, b.id], "build and tests passed")
    stubborn = led.create_session("stubborn")
    x, y = stubborn.observe("disk at 91%"), stubborn.observe("disk at 93%")
    d = stubborn.rewrite([x.id, y.id], "disk at 91-93%")
    for _ in range(2):
        with pytest.raises(RewritePolicyError):
            stubborn.rewrite([d.id], "disk is fine")
    loose = led.create_session("loose", strict=False)
    p, q = loose.observe("queue depth 40"), loose.observe("queue depth 45")
    d1 = loose.rewrite([p.id, q.id], "queue depth 40-45")
    loose.rewrite([d1.id], "queue is deep")
    confab = led.create_session("confab")
    m, n = confab.observe("billing-api returned 503 at 09:12"), confab.observe("payments-api returned 502 at 09:40")
    confab.rewrite([m.id, n.id], "The API failure happened; the migration completed at 14:02.")


def truth(led: Ledger) -> dict[str, FleetRow]:
    """The rows folded directly from each session's own events."""
    out = {}
    for info in led.sessions():
        row = None
        s = led.session(info.id)
        start = (s.state.fork_position + 1) if s.state.forked_from else 1
        for ev in s.events(start):
            row = fold(row, ev)
        out[info.name] = row
    return out


def same_counts(row: FleetRow, expected: FleetRow) -> bool:
    fields = ("name", "position", "events", "observed", "rewritten", "rederived", "pruned", "refusals", "violations", "max_generation")
    return all(getattr(row, f) == getattr(expected, f) for f in fields)


def test_the_view_answers_which_sessions_drifted(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    with Fleet(led) as fleet:
        assert fleet.catch_up() == 19
        rows = {r.name: r for r in fleet.rows()}
        assert sorted(rows) == ["clean", "confab", "loose", "stubborn"]
        expected = truth(led)
        assert all(same_counts(rows[n], expected[n]) for n in rows)
        assert rows["stubborn"].refusals == 2 and not rows["stubborn"].drifted and rows["stubborn"].flagged
        assert rows["loose"].violations == 1 and rows["loose"].drifted
        assert rows["confab"].drifted and {f.kind for f in rows["confab"].audit} >= {"unsupported-specific"}
        assert not rows["clean"].flagged
        assert [r.name for r in fleet.rows(drifted=True)] == ["confab", "loose"]
        assert [r.name for r in fleet.rows(flagged=True)] == ["confab", "loose", "stubborn"]
        today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        assert [r.name for r in fleet.rows(drifted=True, since=today)] == ["confab", "loose"]
        assert fleet.rows(drifted=True, since=datetime.now(timezone.utc) + timedelta(hours=1)) == []
        assert len(fleet.rows(since=today)) == 4
    led.close()


def test_each_event_is_folded_exactly_once(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    with Fleet(led) as fleet:
        assert fleet.catch_up(page=5) == 19  # many small pages
        assert fleet.catch_up() == 0  # nothing new: nothing folded twice
        led.session("clean").observe("one more")
        assert fleet.catch_up() == 1
        rows = {r.name: r for r in fleet.rows()}
        expected = truth(led)
        assert all(same_counts(rows[n], expected[n]) for n in rows)
        assert fleet.tracked == led.store.app.recorder.max_notification_id()
    with Fleet(led) as again:  # a second updater starts from the tracked position
        assert again.catch_up() == 0
    led.close()


def test_a_crash_between_rows_and_tracking_writes_neither(url, monkeypatch):
    """The view rows and the tracking row are one transaction: a failure after the rows were
    written rolls both back, and the next catch-up folds the same events once."""
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    with Fleet(led) as fleet:
        view = type(fleet.view)
        real = view._insert_tracking
        calls = {"n": 0}

        def crash_once(self, curs, tracking):
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("power cut")
            return real(self, curs, tracking)

        monkeypatch.setattr(view, "_insert_tracking", crash_once)
        with pytest.raises(Exception, match="power cut"):
            fleet.catch_up(page=6)
        assert fleet.tracked > 0  # the first page was committed
        monkeypatch.setattr(view, "_insert_tracking", real)
        assert fleet.catch_up(page=6) == 19 - 6
        rows = {r.name: r for r in fleet.rows()}
        expected = truth(led)
        assert all(same_counts(rows[n], expected[n]) for n in rows)
    led.close()


def updater(url: str, rounds: int) -> None:
    from engine import EstimateCounter, Ledger
    from engine.fleet import Fleet

    led = Ledger.open(url, token_counter=EstimateCounter())
    with Fleet(led) as fleet:
        for _ in range(rounds):
            fleet.catch_up(page=3)
    led.close()


def test_concurrent_updaters_in_processes_never_double_count(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    s = led.session("clean")
    for i in range(40):
        s.observe(f"more {i}")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=updater, args=(url, 30)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    with Fleet(led) as fleet:
        fleet.catch_up()
        rows = {r.name: r for r in fleet.rows()}
        expected = truth(led)
        assert all(same_counts(rows[n], expected[n]) for n in rows)
        assert rows["clean"].observed == 42
    led.close()


def test_forks_have_rows_of_their_own(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session("parent")
    s.observe("a")
    s.observe("b")
    f = led.fork(s, at=2, name="child")
    f.observe("c")
    with Fleet(led) as fleet:
        fleet.catch_up()
        child = fleet.row("child")
        assert child.position == 4 and child.events == 2 and child.observed == 1
        assert child.forked_from == s.id
    led.close()


def test_an_unreadable_event_is_flagged_not_fatal(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    victim = led.session("clean")
    con = sqlite3.connect(tmp_path / "ledger.db")
    con.execute("UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2", (os.urandom(30), victim.id.hex))
    con.commit()
    con.close()
    with Fleet(led) as fleet:
        assert fleet.catch_up() == 19
        row = fleet.row("clean")
        assert row.unreadable == 1 and row.flagged
        assert row.findings[0].kind == "unreadable" and row.findings[0].position == 2
        # the audit of a session whose log cannot be read fails, and says so
        assert {f.kind for f in row.findings[1:]} <= {"audit-failed"}
    led.close()


def test_an_audit_hook_plugs_in_and_its_failures_are_recorded(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    seen = []

    def hook(reader):
        seen.append((reader.name, reader.position))
        if reader.name == "clean":
            raise ValueError("hook bug")
        return [Finding(kind="my-check", position=reader.position, span_id="d1")] if reader.name == "stubborn" else []

    with Fleet(led, audit=hook) as fleet:
        fleet.catch_up()
        rows = {r.name: r for r in fleet.rows()}
    assert ("stubborn", 6) in seen  # called at the session's position after its last derivation
    assert [f.kind for f in rows["stubborn"].audit] == ["my-check"] and rows["stubborn"].drifted
    assert "audit-failed" in [f.kind for f in rows["clean"].findings] and not rows["clean"].drifted
    with Fleet(led, audit=None) as plain:  # no hook: structural findings only
        assert plain.row("confab") is not None
    led.close()


def test_the_view_holds_no_span_text(tmp_path):
    key = base64.b64encode(os.urandom(32)).decode()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter(), cipher_key=key)
    populate(led)
    with Fleet(led) as fleet:
        fleet.catch_up()
        assert fleet.row("confab").drifted
    led.close()
    con = sqlite3.connect(tmp_path / "ledger.db")
    rows = con.execute("SELECT row FROM fleet_sessions").fetchall()
    con.close()
    text = " ".join(r[0] for r in rows)
    for secret in ("14:02", "billing-api", "disk at 91%", "queue depth"):
        assert secret not in text


def test_memory_stores_have_no_fleet_view():
    led = Ledger.open("memory://")
    with pytest.raises(InvalidInputError, match="SQLite or PostgreSQL"):
        Fleet(led)
    with pytest.raises(InvalidInputError):
        follow(led)


def host(url: str, name: str, n: int) -> None:
    from engine import EstimateCounter, Ledger, RewritePolicyError

    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session(name)
    spans = [s.observe(f"{name} event {i}") for i in range(n)]
    d = s.rewrite([spans[0].id, spans[1].id], f"{name} summary")
    try:
        s.rewrite([d.id], "summary of a summary")
    except RewritePolicyError:
        pass
    led.close()


def test_the_projection_runner_follows_writers_on_other_hosts():
    """eventsourcing's ProjectionRunner, subscribed with LISTEN/NOTIFY, keeps the view current as
    processes elsewhere write; stopped and restarted, it resumes from its tracking row."""
    url = postgres_url()
    try:
        led = Ledger.open(url, token_counter=EstimateCounter())
        ctx = multiprocessing.get_context("spawn")
        with follow(led) as runner:
            procs = [ctx.Process(target=host, args=(url, f"host-{i}", 10)) for i in range(3)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(timeout=120)
                assert p.exitcode == 0
            runner.wait(led.store.app.recorder.max_notification_id(), timeout=60)
        with Fleet(led) as fleet:
            rows = {r.name: r for r in fleet.rows()}
            assert sorted(rows) == ["host-0", "host-1", "host-2"]
            assert all(r.observed == 10 and r.refusals == 1 and r.position == 13 for r in rows.values())
            host(url, "host-3", 4)
            with follow(led) as runner:
                runner.wait(led.store.app.recorder.max_notification_id(), timeout=60)
            expected = truth(led)
            rows = {r.name: r for r in fleet.rows()}
            assert sorted(rows) == ["host-0", "host-1", "host-2", "host-3"]
            assert all(same_counts(rows[n], expected[n]) for n in rows)
            assert fleet.catch_up() == 0  # the runner and the catch-up share one tracking row
        led.close()
    finally:
        drop_schema(url)


def test_fleet_cli(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    populate(led)
    led.close()
    runner = CliRunner()
    res = runner.invoke(main, ["--db", url, "fleet"])
    assert res.exit_code == 1, res.output  # it lists drifted sessions
    lines = res.output.splitlines()
    assert lines[0].split()[:6] == ["SESSION", "EVENTS", "REFUSED", "DRIFT", "E/W", "LAST"]
    assert [ln.split()[0] for ln in lines[1:5]] == ["clean", "confab", "loose", "stubborn"]
    res = runner.invoke(main, ["--db", url, "fleet", "--drifted", "--since", "today"])
    assert res.exit_code == 1 and [ln.split()[0] for ln in res.output.splitlines()[1:3]] == ["confab", "loose"]
    assert "stubborn" not in res.output
    res = runner.invoke(main, ["--db", url, "fleet", "--flagged", "--detail"])
    assert "refused" in res.output and "violation" in res.output and "unsupported-specific" in res.output
    res = runner.invoke(main, ["--db", url, "fleet", "--json", "--no-update"])
    data = json.loads(res.output)
    assert {d["name"]: d["drifted"] for d in data} == {"clean": False, "confab": True, "loose": True, "stubborn": False}
    res = runner.invoke(main, ["--db", url, "fleet", "--since", "last tuesday"])
    assert res.exit_code == 2 and res.output.startswith("ctxledger: error:")
    res = runner.invoke(main, ["--db", url, "fleet", "--drifted", "--since", "2999-01-01"])
    assert res.exit_code == 0 and "no sessions drifted since 2999-01-01" in res.output


def test_fold_counts_match_event_types(tmp_path):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    populate(led)
    for info in led.sessions():
        s = led.session(info.id)
        counts = Counter(type(e).__name__ for e in s.events())
        row = truth(led)[info.name]
        assert row.observed == counts["Observed"] and row.rewritten == counts["Rewritten"]
        assert row.refusals == counts["RewriteRefused"] and row.events == sum(counts.values())
    led.close()


def test_a_catch_up_audits_each_session_once_at_its_last_derivation(tmp_path):
    """Small pages put a session's compactions in different batches: the catch-up audits the
    session once, at its position after the last one (an audit of an earlier compaction would
    check a summary that is no longer live), and the row equals one audited at the end."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session("long", strict=False)
    for k in range(3):
        a, b = s.observe(f"step {k} took 4{k} s"), s.observe(f"step {k} exit code {k}")
        s.rewrite([a.id, b.id], f"step {k} took 4{k} s; it finished at 1{k}:02")
    other = led.create_session("other")
    x, y = other.observe("disk at 91%"), other.observe("disk at 93%")
    other.rewrite([x.id, y.id], "disk at 91-93%")
    seen = []

    def hook(reader):
        seen.append((reader.name, reader.position))
        return [Finding(kind="mine", position=reader.position, span_id="d")]

    with Fleet(led, audit=hook) as fleet:
        assert fleet.catch_up(page=2) == s.position + other.position
        rows = {r.name: r for r in fleet.rows()}
    assert sorted(seen) == [("long", s.position), ("other", other.position)]
    assert rows["long"].audited_position == s.position and rows["long"].audit[0].position == s.position
    # a compaction after the catch-up is audited by the next one
    c, d = s.observe("step 9 took 49 s"), s.observe("step 9 exit code 0")
    s.rewrite([c.id, d.id], "step 9 took 49 s")
    with Fleet(led, audit=hook) as fleet:
        assert fleet.catch_up(page=2) == 3
        assert fleet.row("long").audited_position == s.position
    assert seen[-1] == ("long", s.position) and len(seen) == 3
    # the default audit: the same rows whatever the page size (the view dropped and refolded)
    audits = []
    for page in (3, 500):
        con = sqlite3.connect(tmp_path / "ledger.db")
        con.execute("DELETE FROM fleet_sessions")
        con.execute("DELETE FROM fleet_tracking")
        con.commit()
        con.close()
        with Fleet(led) as fleet:
            fleet.catch_up(page=page)
            audits.append({r.name: (r.audited_position, r.audit) for r in fleet.rows()})
    assert audits[0] == audits[1]
    assert {f.kind for f in audits[0]["long"][1]} >= {"unsupported-specific"}  # the invented finishing times
    led.close()
