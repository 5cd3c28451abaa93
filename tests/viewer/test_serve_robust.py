"""The viewer when a store is not what it should be, and session names that look like its own URLs:
one undecodable session never takes the others down, a chain-broken session says so, and a name like
``x/state`` opens that session (issue 24, items 10, 15 and 16)."""

from __future__ import annotations

import sqlite3

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine import EstimateCounter, Ledger
from engine._store.codec import decode_payload, encode_payload
from engine.viewer import pages
from engine.viewer.app import create_app

NAMES = ("x", "x/state", "x/diff", "x/span/o1", "x/span", "x/blame", "x/lineage/o1", "a b%2F?#&c")


def _get(path: str, sid, pos: int) -> tuple[str, bytes]:
    con = sqlite3.connect(path)
    try:
        (topic, state), = con.execute(
            "SELECT topic, state FROM stored_events WHERE originator_id=? AND originator_version=?", (sid.hex, pos)
        ).fetchall()
        return topic, bytes(state)
    finally:
        con.close()


def _put(path: str, sid, pos: int, state: bytes) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute("UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?", (state, sid.hex, pos))
        con.commit()
    finally:
        con.close()


def _dump(path: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT originator_id, originator_version, topic, state FROM stored_events ORDER BY 1, 2").fetchall()
    finally:
        con.close()


@pytest.fixture
def named(tmp_path):
    path = str(tmp_path / "names.db")
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    for name in NAMES:
        s = ledger.create_session(name)
        s.observe(f"the text of session {name}", role="user")
        s.observe(f"a second line of {name}", role="user")
    yield ledger, path
    ledger.close()


def test_names_that_look_like_sub_pages_open_their_own_session(named):
    ledger, _ = named
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    for name in NAMES:
        page = c.get(pages.url("s", name))
        assert page.status_code == 200, (name, page.text[:200])
        assert f'data-session="{pages.esc(name)}"' in page.text
        body = c.get(pages.url("api", "s", name, "at", 2)).json()
        assert body["session"] == name and body["spans"][0]["text"] == f"the text of session {name}"
        state = c.get(pages.url("s", name, "state") + "?at=2")
        assert state.status_code == 200 and pages.esc(f"the text of session {name}") in state.text
        span = c.get(pages.url("s", name, "span", "o2")).text
        assert pages.esc(f"a second line of {name}") in span
    # the viewer's own sub-pages of session x, written with bare slashes, stay x's
    assert "the text of session x<" in c.get("/s/x/state?at=2").text
    assert "a second line of x<" in c.get("/s/x/span/o2").text
    assert c.get("/api/s/x%2Fstate/at/2").json()["session"] == "x/state"
    assert c.get("/api/s/x/at/2").json()["session"] == "x"


def test_a_name_written_with_bare_slashes_redirects_to_its_one_segment_url(tmp_path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'bare.db'}", token_counter=EstimateCounter())
    ledger.create_session("team/incident-7").observe("hello", role="user")
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1", follow_redirects=False)
    r = c.get("/s/team/incident-7?at=1")
    assert r.status_code == 307 and r.headers["location"] == "/s/team%2Fincident-7?at=1"
    assert c.get(r.headers["location"]).status_code == 200
    missing = c.get("/s/team/nope")
    assert missing.status_code == 404 and "team" in missing.text
    ledger.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24).filter(str.strip))
def test_any_session_name_routes_to_itself(tmp_path_factory, name):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    try:
        ledger.create_session(name).observe("only text", role="user")
    except Exception:  # a name the ledger refuses is not a routing question
        return
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    assert c.get(pages.url("api", "s", name, "at", 2)).json()["session"] == name
    assert c.get(pages.url("s", name, "state")).status_code == 200


def test_a_bad_percent_encoding_is_400(named):
    ledger, _ = named
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    r = c.get("/api/s/%ff%fe/at/1")
    assert r.status_code == 400 and r.json()["type"] == "InvalidInputError"


def test_a_non_number_position_is_400_as_documented(named):
    ledger, path = named
    before = _dump(path)
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    for raw in ("abc", "1e3", "--1", "%20"):
        r = c.get(f"/api/s/x/at/{raw}")
        assert r.status_code == 400 and r.json()["type"] == "InvalidInputError", raw
    assert c.get("/api/s/x/at/99").status_code == 404
    assert _dump(path) == before


def test_one_undecodable_session_is_listed_as_unreadable_and_the_rest_work(named):
    ledger, path = named
    bad = ledger.session("x/diff")
    _put(path, bad.id, 2, b"\xff\xfe not msgpack")
    ledger.close()
    before = _dump(path)
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    home = c.get("/")
    assert home.status_code == 200
    rows = {r["name"]: r for r in c.get("/api/sessions").json()["sessions"]}
    assert set(rows) == set(NAMES)
    assert rows["x/diff"]["unreadable"] and "position 2" in rows["x/diff"]["unreadable"]
    assert all(not r["unreadable"] and r["live_spans"] == 2 for n, r in rows.items() if n != "x/diff")
    assert "unreadable: " in home.text and home.text.count('class=unreadable') == 1
    page = c.get(pages.url("s", "x/diff"))
    assert page.status_code == 503 and "position 2" in page.text
    assert c.get(pages.url("s", "x/state")).status_code == 200
    assert _dump(path) == before
    ledger.close()


def test_a_chain_broken_session_says_so_and_an_intact_one_does_not(named):
    ledger, path = named
    forged = ledger.session("x")
    topic, state = _get(path, forged.id, 2)
    ev = decode_payload(topic, state)
    text = "the text of session x: the migration completed at 14:02"
    _put(path, forged.id, 2, encode_payload(msgspec.structs.replace(ev, originator_id=None, text=text)))
    ledger.close()
    before = _dump(path)
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    verdict = c.get("/api/s/x/integrity").json()
    assert verdict["ok"] is False and verdict["first_bad_position"] in (2, 3) and verdict["reason"]
    assert verdict["first_bad_position"] == ledger.session("x").verify().first_bad_position
    assert c.get(pages.url("api", "s", "x/state", "integrity")).json()["ok"] is True
    page = c.get("/s/x").text
    assert 'id="integrity"' in page  # the script fills it from the verdict (tests/viewer/test_serve_browser.py)
    assert _dump(path) == before
    ledger.close()
