"""PostgreSQL through eventsourcing's persistence module: the URL forms, the tables it makes, many
Ledgers (hosts) on one store, large events, and the same histories as SQLite byte for byte.
(The core suite itself runs on PostgreSQL through the ``ledger`` fixture.)"""

from __future__ import annotations

import multiprocessing

import psycopg
import pytest
from click.testing import CliRunner

from conftest import POSTGRES_DSN, drop_schema, postgres_url
from engine import EstimateCounter, Ledger, StoreUnavailableError
from engine.cli import main

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg():
    url = postgres_url()
    yield url
    drop_schema(url)


def schema_of(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def tables(url: str) -> set[str]:
    with psycopg.connect(POSTGRES_DSN) as con:
        rows = con.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema_of(url),)).fetchall()
    return {r[0] for r in rows}


def history(led: Ledger) -> None:
    s = led.create_session("agent-42")
    a = s.observe("GET /health -> 503 from billing-api", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("payments-api returned 502 at 09:40")
    c = s.observe("the deploy of 0042_add_index started at 13:41")
    s.prune(a.id)
    d = s.rewrite([b.id, c.id], "payments-api 502 at 09:40; 0042_add_index started 13:41")
    s.rederive(d.id, text="payments-api returned 502 (09:40); migration 0042 started at 13:41")
    s.restore(a.id)
    s.mark("before-expand")
    s.expand(d.id)
    led.fork(s, at="before-expand", name="agent-42-b").observe("a different future")


def test_the_store_is_eventsourcings_tables_in_the_schema(pg):
    led = Ledger.open(pg, token_counter=EstimateCounter())
    history(led)
    assert {"ctxledger_events", "ctxledger_snapshots"} <= tables(pg)
    with psycopg.connect(POSTGRES_DSN) as con:
        n = con.execute(f'SELECT count(*) FROM "{schema_of(pg)}".ctxledger_events').fetchone()[0]
    assert n == 1 + 10 + 2  # the ledger mark, agent-42's 10 events, the fork's 2
    led.close()


def test_postgres_and_sqlite_hold_the_same_history(pg, tmp_path):
    """Export from PostgreSQL, import into SQLite, export again: the same lines, hashes and all."""
    led = Ledger.open(pg, token_counter=EstimateCounter())
    history(led)
    lines = led.session("agent-42").export()
    fork_lines = led.session("agent-42-b").export()
    lite = Ledger.open(f"sqlite:///{tmp_path / 'copy.db'}", token_counter=EstimateCounter())
    copy = lite.import_(lines)
    assert copy.export() == lines
    assert lite.import_(fork_lines).export() == fork_lines
    s = led.session("agent-42")
    for n in range(1, s.position + 1):
        assert copy.at(n).state.live == s.at(n).state.live
    # and back into a second PostgreSQL schema
    pg2 = postgres_url()
    try:
        other = Ledger.open(pg2, token_counter=EstimateCounter())
        assert other.import_(copy.export()).export() == lines
        other.close()
    finally:
        drop_schema(pg2)
    lite.close()
    led.close()


def test_schemas_are_separate_stores(pg):
    pg2 = postgres_url()
    try:
        a = Ledger.open(pg, token_counter=EstimateCounter())
        b = Ledger.open(pg2, token_counter=EstimateCounter())
        a.create_session("only-in-a").observe("x")
        assert b.sessions() == [] and "only-in-a" not in b
        b.create_session("only-in-a").observe("a different session of the same name")
        assert a.session("only-in-a").spans()[0].text == "x"
        a.close()
        b.close()
    finally:
        drop_schema(pg2)


def test_many_ledgers_on_one_store_see_each_other(pg):
    """Each Ledger stands for an agent on its own host: what one commits, the others read."""
    hosts = [Ledger.open(pg, token_counter=EstimateCounter()) for _ in range(3)]
    for i, led in enumerate(hosts):
        led.create_session(f"agent-{i}").observe(f"hello from host {i}")
    for led in hosts:
        assert sorted(i.name for i in led.sessions()) == ["agent-0", "agent-1", "agent-2"]
    s0 = hosts[0].session("agent-1")
    hosts[1].session("agent-1").observe("more from host 1")
    assert s0.position == 2
    s0.refresh()
    assert s0.position == 3 and [sp.text for sp in s0.spans()][-1] == "more from host 1"
    for led in hosts:
        led.close()


def test_snapshots_and_time_travel(pg):
    led = Ledger.open(pg, token_counter=EstimateCounter())
    s = led.create_session("long")
    for i in range(120):
        span = s.observe(f"observation {i}: " + "detail " * 80)
        if i % 3:
            s.prune(span.id)
    with psycopg.connect(POSTGRES_DSN) as con:
        snaps = con.execute(f'SELECT count(*) FROM "{schema_of(pg)}".ctxledger_snapshots').fetchone()[0]
    assert snaps >= 1
    again = Ledger.open(pg, token_counter=EstimateCounter()).session("long")
    assert again.state == s.state and again.rebuild() == s.state
    for n in (1, 57, 150, s.position):
        assert again.at(n).state.live == Ledger.open("memory://").import_(again.export()).at(n).state.live
    led.close()


def big_writer(url: str) -> None:
    from engine import EstimateCounter, Ledger

    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session("big")
    for mb in (1, 2, 4, 7, 7, 7):
        s.observe("word " * (mb * 2**20 // 5), tokens=1)
    led.close()


def test_large_events_are_written_without_hanging(pg):
    """Regression: a multi-megabyte event sent through psycopg's pure-Python pipeline used to hang
    (engine._store.postgres.PostgresApplicationRecorder). The writer runs in a child so a hang fails the
    test instead of stalling the suite."""
    proc = multiprocessing.get_context("spawn").Process(target=big_writer, args=(pg,))
    proc.start()
    proc.join(timeout=240)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("writing large events to PostgreSQL hung")
    assert proc.exitcode == 0
    led = Ledger.open(pg, token_counter=EstimateCounter())
    s = led.session("big")
    assert s.position == 7 and s.verify().ok
    assert len(s.original("o4").text) == 7 * 2**20 // 5 * 5
    led.close()


def test_password_in_the_url_is_never_shown(pg):
    url = pg.replace("postgres@", "postgres:Sup3rSecret@")  # the test server trusts any password
    led = Ledger.open(url, token_counter=EstimateCounter())
    assert "Sup3rSecret" not in repr(led)
    led.create_session("s")
    led.close()
    bad = url.replace("/test?", "/no_such_db?")
    with pytest.raises(StoreUnavailableError) as err:
        Ledger.open(bad)
    assert "Sup3rSecret" not in str(err.value) and "***" in str(err.value)
    res = CliRunner().invoke(main, ["--db", bad, "sessions"])
    assert res.exit_code == 3 and "Sup3rSecret" not in res.output


def test_postgres_scheme_alias(pg):
    led = Ledger.open(pg.replace("postgresql://", "postgres://"), token_counter=EstimateCounter())
    led.create_session("alias").observe("x")
    led.close()
    assert "alias" in Ledger.open(pg)


def test_the_cli_on_postgres(pg, tmp_path):
    led = Ledger.open(pg, token_counter=EstimateCounter())
    history(led)
    led.close()
    runner = CliRunner()
    res = runner.invoke(main, ["--db", pg, "sessions"])
    assert res.exit_code == 0 and "agent-42" in res.output and "agent-42-b" in res.output
    res = runner.invoke(main, ["--db", pg, "verify", "--all"])
    assert res.exit_code == 0 and res.output.count(": OK") == 2
    res = runner.invoke(main, ["--db", pg, "log", "agent-42", "--type", "Rederived"])
    assert res.exit_code == 0 and "re-derived from o2,o3" in res.output
    out = tmp_path / "a.jsonl"
    res = runner.invoke(main, ["--db", pg, "export", "agent-42", "-o", str(out)])
    assert res.exit_code == 0
    res = runner.invoke(main, ["--db", f"sqlite:///{tmp_path / 'x.db'}", "import", str(out)])
    assert res.exit_code == 0 and "chain verified" in res.output
