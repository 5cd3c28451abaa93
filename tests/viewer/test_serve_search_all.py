"""The viewer's search over every session of the store (``/search``, ``/api/search``): text, role,
kind, provenance and findings only, across sessions, each hit linking to its session at its
position — checked against each session's own search."""

from __future__ import annotations

import re
import sqlite3

import pytest
from starlette.testclient import TestClient

from engine import EstimateCounter, Ledger
from engine.viewer.app import create_app
from engine.viewer.pages import url

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> \u202e'


def _dump(path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT originator_id, originator_version, state FROM stored_events ORDER BY 1, 2").fetchall()
    finally:
        con.close()


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "all.db"
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    naive = ledger.create_session("incident/naive")
    a = naive.observe("billing-api returned 503 at 10:00", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = naive.observe("billing-api returned 503 at 10:01", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
    naive.rewrite([a.id, b.id], "billing-api returned 503 twice; it recovered at 14:02.", by="model-x")
    guarded = ledger.create_session("incident-guarded")
    guarded.observe("why does billing-api fail?", role="user")
    guarded.observe("billing-api returned 503 at 10:00", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    other = ledger.create_session(HOSTILE)
    other.observe(f"billing-api says {HOSTILE}", role="user")
    ledger.create_session("quiet").observe("nothing to see here", role="user")
    yield ledger, path
    ledger.close()


@pytest.fixture
def client(store):
    return TestClient(create_app(store[0], fleet=False), base_url="http://127.0.0.1")


def test_hits_come_from_every_session_and_match_each_sessions_own_search(client, store):
    res = client.get("/api/search", params={"q": "billing-api 503"}).json()
    got = {(h["session"], h["span_id"], h["position"]) for h in res["hits"]}
    want = set()
    for name in ("incident/naive", "incident-guarded", HOSTILE, "quiet"):
        own = client.get(url("api", "s", name, "search", q="billing-api 503")).json()
        # texts with every word: a session's own search falls back to any word, the store-wide one
        # only when no session has them all
        want |= {(name, h["span_id"], h["position"]) for h in own["hits"] if "503" in h["snippet"]}
    assert got == want
    assert {s for s, _, _ in got} == {"incident/naive", "incident-guarded"}
    assert res["sessions"] == 4 and res["searched"] == 4
    # the most recently active session first, each session's hits newest first
    order = list(dict.fromkeys(h["session"] for h in res["hits"]))
    assert order == ["incident-guarded", "incident/naive"]
    naive = [h["position"] for h in res["hits"] if h["session"] == "incident/naive"]
    assert naive == sorted(naive, reverse=True)


def test_when_no_session_has_every_word_the_best_any_word_matches_are_shown(client):
    res = client.get("/api/search", params={"q": "billing-api kubernetes"}).json()
    assert res["hits"] and all("«billing-api»" in h["snippet"] for h in res["hits"])
    assert {h["session"] for h in res["hits"]} == {"incident/naive", "incident-guarded", HOSTILE}


@pytest.mark.parametrize("query, keep", [
    ("role=tool", lambda h: h["role"] == "tool"),
    ("role=user", lambda h: h["role"] == "user"),
    ("kind=tool_result", lambda h: h["kind"] == "tool_result"),
    ("provenance=derived", lambda h: h["provenance"] == "derived"),
    ("provenance=observed", lambda h: h["provenance"] == "observed"),
])
def test_filters_apply_across_sessions(client, query, keep):
    every = client.get("/api/search?q=billing-api").json()["hits"]
    kept = client.get(f"/api/search?q=billing-api&{query}").json()["hits"]
    assert kept and [h for h in every if keep(h)] == kept
    assert len(kept) < len(every)


def test_findings_only_keeps_the_summary_that_invents_a_time(client):
    hits = client.get("/api/search?q=billing-api&findings=1").json()["hits"]
    assert [(h["session"], h["span_id"]) for h in hits] == [("incident/naive", "d1")]
    assert any("14:02" in f["message"] for f in hits[0]["findings"])


def test_the_page_links_each_hit_to_its_session_at_its_position(client):
    r = client.get("/search?q=billing-api&role=tool")
    assert r.status_code == 200
    links = re.findall(r'<li class="hit[^"]*" data-session="[^"]*"><a href="([^"]+)"', r.text)
    assert len(links) == 3
    for link in links:
        page = client.get(link.replace("&amp;", "&").split("#")[0])
        assert page.status_code == 200
    assert url("s", "incident/naive", at=4) + "#d1" not in links  # role=tool: the summary is filtered out
    assert any(link.startswith("/s/incident%2Fnaive?at=") for link in links)
    assert 'value="tool" selected' not in r.text and "<option selected>tool</option>" in r.text  # the filter is kept


def test_hostile_text_is_inert_on_the_page(client):
    r = client.get("/search", params={"q": "billing-api says"})
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text and "<img src=x" not in r.text and "\u202e" not in r.text
    assert "&lt;script&gt;" in r.text


def test_the_sessions_page_has_the_form_and_the_form_alone_is_a_page(client):
    assert 'id="search-all" action="/search"' in client.get("/").text
    r = client.get("/search")
    assert r.status_code == 200 and 'id="all-q"' in r.text and "all-hits" not in r.text


@pytest.mark.parametrize("params", [{"q": "x" * 501}, {"q": "billing", "provenance": "forged"}, {"q": "...."},
                                    {"q": "billing", "role": "r" * 65}])
def test_bad_input_is_400_and_the_log_is_unchanged(client, store, params):
    _, path = store
    before = _dump(path)
    assert client.get("/api/search", params=params).status_code == 400
    assert client.get("/search", params=params).status_code == 400
    assert _dump(path) == before


def test_nothing_found_says_so(client):
    r = client.get("/search?q=kubernetes")
    assert r.status_code == 200 and 'id="search-none"' in r.text and "4 sessions" in r.text


def test_a_session_written_after_a_search_is_searched_at_its_new_head(client, store):
    ledger, _ = store
    assert client.get("/api/search?q=kubernetes").json()["hits"] == []
    ledger.session("quiet").observe("kubernetes pod evicted", role="tool", kind="tool_result",
                                    meta={"tool_call_id": "k1"})
    hits = client.get("/api/search?q=kubernetes").json()["hits"]
    assert [(h["session"], h["span_id"], h["position"]) for h in hits] == [("quiet", "o2", 3)]
