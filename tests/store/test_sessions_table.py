"""The store's sessions projection (engine._store.sessions_table): written in the append's transaction,
equal to what the log says, built once for a store that predates it, nothing in plaintext for an
encrypted store."""

from __future__ import annotations

import base64
import sqlite3

import pytest

from conftest import POSTGRES_DSN, drop_schema, postgres_url
from engine import EstimateCounter, Ledger
from engine.errors import ConcurrencyError
from engine._store.sessions_table import TABLE


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        u = postgres_url()
        yield u
        drop_schema(u)


def open_(url: str, **kw) -> Ledger:
    return Ledger.open(url, token_counter=EstimateCounter(), **kw)


def history(led: Ledger) -> None:
    a = led.create_session("agent-1")
    spans = [a.observe(f"line {i}") for i in range(5)]
    a.rewrite([spans[0].id, spans[1].id], "line 0 and line 1")
    led.create_session("loose", strict=False, happened_at="2025-01-02T03:04:05+00:00").observe("imported")
    f = led.fork(a, at=3, name="agent-1-fork")
    with f.batch():
        f.observe("forked")
        f.observe("forked again")


def from_log(led: Ledger) -> list[tuple]:
    """What the log itself says, read the slow way (a scan of the notifications)."""
    return [tuple(msgspec_fields(led._from_log(ev))) for ev in led.store.started_events()]


def msgspec_fields(info) -> tuple:
    return (info.name, info.id, info.position, info.strict, info.started_at, info.last_at, info.events, info.forked_from)


def listed(led: Ledger) -> list[tuple]:
    return [msgspec_fields(i) for i in led.sessions()]


def execute(url: str, sql: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///"):]) as con:
            con.execute(sql.format(table=TABLE))
        return
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
        con.execute(sql.format(table=f'"{url.rsplit("schema=", 1)[1]}".{TABLE}'))


def raw_rows(url: str) -> list[tuple]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///"):]) as con:
            return con.execute(f"SELECT name, events, position, started_at, last_at FROM {TABLE} ORDER BY seq").fetchall()
    import psycopg

    with psycopg.connect(POSTGRES_DSN) as con:
        schema = url.rsplit("schema=", 1)[1]
        return con.execute(f'SELECT name, events, position, started_at, last_at FROM "{schema}".{TABLE} ORDER BY seq').fetchall()


def test_the_projection_equals_the_log(url):
    led = open_(url)
    history(led)
    assert [r[0] for r in listed(led)] == ["agent-1", "loose", "agent-1-fork"]
    assert listed(led) == from_log(led)
    by_name = {i.name: i for i in led.sessions()}
    assert by_name["agent-1"].events == 7 and by_name["agent-1"].position == 7
    assert by_name["agent-1-fork"].events == 3 and by_name["agent-1-fork"].position == 6
    assert by_name["agent-1-fork"].forked_from == by_name["agent-1"].id
    assert by_name["loose"].strict is False and by_name["loose"].started_at.year == 2025  # the original time
    assert by_name["agent-1"].last_at == led.session("agent-1").event(7).at
    led.close()


def test_an_import_is_counted(url, tmp_path):
    led = open_(url)
    history(led)
    lines = led.session("agent-1").export()
    other = open_(f"sqlite:///{tmp_path / 'other.db'}")
    other.import_(lines)
    assert listed(other) == from_log(other)
    assert [(i.name, i.events, i.position) for i in other.sessions()] == [("agent-1", 7, 7)]
    other.close()
    led.close()


def test_a_refused_append_leaves_the_projection_as_it_was(url):
    led = open_(url)
    history(led)
    stale = led.session("agent-1")
    led.session("agent-1").observe("the other writer wins")
    before = raw_rows(url)
    with pytest.raises(ConcurrencyError):
        stale.observe("lost race")
    assert raw_rows(url) == before
    assert listed(led) == from_log(led)
    led.close()


def test_a_store_without_the_table_gets_it_built_once_on_open(url):
    led = open_(url)
    history(led)
    expected = listed(led)
    led.close()
    execute(url, "DROP TABLE {table}")
    led = open_(url)
    assert listed(led) == expected == from_log(led)
    led.session("loose").observe("after the build")  # appends keep it up to date from then on
    assert listed(led) == from_log(led)
    led.close()
    # a second open finds it built and does not build it again: a value written behind its back stays
    execute(url, f"UPDATE {{table}} SET events = 999 WHERE position = 7")
    led = open_(url)
    assert {i.name: i.events for i in led.sessions()}["agent-1"] == 999
    led.close()


def test_an_encrypted_store_keeps_no_names_or_times_in_the_table(tmp_path):
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    key = base64.b64encode(b"k" * 32).decode()
    led = open_(url, cipher_key=key)
    history(led)
    assert [r[0] for r in listed(led)] == ["agent-1", "loose", "agent-1-fork"]
    assert listed(led) == from_log(led)
    rows = raw_rows(url)
    assert [(r[1], r[2]) for r in rows] == [(7, 7), (2, 2), (3, 6)]
    assert all(r[0] is None and r[3] is None and r[4] is None for r in rows)
    led.close()


def test_memory_stores_list_from_the_log():
    led = open_("memory://")
    history(led)
    assert led.store.session_rows() is None
    assert listed(led) == from_log(led)
    led.close()
