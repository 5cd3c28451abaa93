"""context_search and its index (engine/search_index.py): the whole log, a real index kept as a
projection, caught up incrementally, rebuilt when stale; FTS5 on SQLite and memory, tsvector + GIN on
PostgreSQL."""

from __future__ import annotations

import os
import sqlite3

import pytest

from engine import EstimateCounter, InvalidInputError, Ledger
from engine.search_index import PostgresSearchIndex, SqliteSearchIndex, open_index, sidecar_path
from engine.tools import ContextTools
from tests.conftest import drop_schema, postgres_url


def _fill(s):
    s.observe("You are the incident agent.", role="system")  # o1
    s.observe("Look at the nightly ETL failure.", role="user")  # o2
    s.observe("ETL job failed with error E_QUOTA_EXCEEDED on bucket raw-events", role="user")  # o3
    s.observe("Quota raised for bucket raw-events; the rerun succeeded.", role="assistant")  # o4
    s.observe("Also the dashboard shows stale numbers.", role="user")  # o5


def _hits(result):
    return [(h["span_id"], h["status"]) for h in result.data["hits"]]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = postgres_url()
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    yield ledger
    ledger.close()
    if request.param == "postgres":
        drop_schema(url)


def test_search_finds_pruned_and_summarized_originals(store):
    s = store.create_session("etl")
    _fill(s)
    tools = ContextTools(s, ledger=store)
    assert _hits(tools.call("context_search", {"query": "E_QUOTA_EXCEEDED"})) == []  # live: not by default
    assert _hits(tools.call("context_search", {"query": "E_QUOTA_EXCEEDED", "include_live": True})) == [("o3", "live")]
    s.prune("o3")
    s.rewrite(["o2", "o4"], "The ETL failure was fixed by raising the quota.")
    r = tools.call("context_search", {"query": "E_QUOTA_EXCEEDED"})
    assert _hits(r) == [("o3", "not in context")] and "«E" in r.text and "QUOTA" in r.text  # highlighted
    assert ("o4", "summarized in d1") in _hits(tools.call("context_search", {"query": "rerun succeeded"}))
    # the summary's earlier text stays findable after a re-derive
    s.rederive("d1", text="Raising the quota for bucket raw-events fixed the ETL job.")
    hits = _hits(tools.call("context_search", {"query": "ETL", "include_live": True, "limit": 10}))
    assert ("d1", "live") in hits and ("d1", "replaced") in hits
    # search never changes the log
    pos = s.position
    tools.call("context_search", {"query": "quota"})
    assert s.position == pos


def test_words_all_then_any(store):
    s = store.create_session("w")
    _fill(s)
    s.prune("o3")
    s.prune("o5")
    tools = ContextTools(s, ledger=store)
    assert _hits(tools.call("context_search", {"query": "bucket raw-events"})) == [("o3", "not in context")]
    # no span has both words: spans with either come back
    either = {h for h, _ in _hits(tools.call("context_search", {"query": "dashboard raw-events"}))}
    assert either == {"o3", "o5"}


def test_index_catches_up_incrementally(store):
    s = store.create_session("inc")
    _fill(s)
    index = open_index(None if store.url.startswith("memory") else store.url)
    assert index.catch_up(s) == 5
    assert index.catch_up(s) == 0
    s.observe("A brand new observation about kafka lag.", role="user")
    assert index.catch_up(s) == 1
    s.prune("o6")
    assert [h.span_id for h in index.search(s, "kafka")] == ["o6"]
    assert index.rebuild(s) == 6


def test_sqlite_sidecar_is_a_disposable_projection(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session("side")
    _fill(s)
    s.prune("o3")
    path = sidecar_path(str(tmp_path / "ledger.db"))
    index = SqliteSearchIndex(path)
    assert [h.span_id for h in index.search(s, "quota exceeded E_QUOTA_EXCEEDED")] == ["o3"]
    assert os.path.exists(path)
    # the ledger file holds no index tables: it stays exactly the log
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert not any(n.startswith("fts_") for n in names)
    index.close()
    os.remove(path)  # delete it: rebuilt from the log on the next search
    index = SqliteSearchIndex(path)
    assert [h.span_id for h in index.search(s, "E_QUOTA_EXCEEDED")] == ["o3"]
    index.close()
    ledger.close()


def test_a_recreated_session_is_reindexed_not_mixed_up(tmp_path):
    db = tmp_path / "ledger.db"
    ledger = Ledger.open(f"sqlite:///{db}", token_counter=EstimateCounter())
    s = ledger.create_session("same-name")
    _fill(s)
    index = SqliteSearchIndex(sidecar_path(str(db)))
    index.catch_up(s)
    ledger.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.remove(f"{db}{suffix}")
    ledger = Ledger.open(f"sqlite:///{db}", token_counter=EstimateCounter())
    s = ledger.create_session("same-name")  # same name, so the same session id: a different log
    s.observe("Only this text exists now.", role="user")
    s.prune("o1")
    assert index.search(s, "E_QUOTA_EXCEEDED") == []
    assert [h.span_id for h in index.search(s, "only this text")] == ["o1"]
    index.close()
    ledger.close()


def test_bad_queries(mem_ledger):
    s = mem_ledger.create_session("bad")
    _fill(s)
    index = open_index(None)
    for query in ("", "  ", "?!*", '"'):
        with pytest.raises(InvalidInputError):
            index.search(s, query)
    with pytest.raises(InvalidInputError):
        index.search(s, "x", limit=0)
    # FTS5 syntax in a query is taken as words, never as query syntax
    s.prune("o3")
    assert "o3" in [h.span_id for h in index.search(s, 'E_QUOTA_EXCEEDED NEAR("raw") *')]
    assert [h.span_id for h in index.search(s, 'raw-events AND) "quota')] == ["o3"]


def test_postgres_index_is_tsvector_with_gin():
    url = postgres_url()
    try:
        ledger = Ledger.open(url, token_counter=EstimateCounter())
        s = ledger.create_session("pg")
        _fill(s)
        s.prune("o3")
        index = PostgresSearchIndex(url)
        assert [h.span_id for h in index.search(s, "E_QUOTA_EXCEEDED")] == ["o3"]
        import psycopg

        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            indexdef = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'ctxledger_search'", (schema,)
            ).fetchall()
            kinds = conn.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_schema = %s AND "
                "table_name = 'ctxledger_search' AND column_name = 'tsv'", (schema,)
            ).fetchone()
        assert any("USING gin (tsv)" in d[0] for d in indexdef) and kinds == ("tsvector",)
        index.close()
        ledger.close()
    finally:
        drop_schema(url)


def test_an_encrypted_store_keeps_its_index_in_memory(tmp_path):
    import base64

    key = base64.b64encode(bytes(range(32))).decode()
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'secret.db'}", cipher_key=key, token_counter=EstimateCounter())
    s = ledger.create_session("secret")
    _fill(s)
    s.prune("o3")
    tools = ContextTools(s, ledger=ledger)
    assert [h["span_id"] for h in tools.call("context_search", {"query": "E_QUOTA_EXCEEDED"}).data["hits"]] == ["o3"]
    assert not os.path.exists(sidecar_path(str(tmp_path / "secret.db")))  # no plaintext beside the store
    ledger.close()
