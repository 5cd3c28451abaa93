"""The viewer's conversation view, model-call details, original times, search with filters, compare
and the head the page polls to follow a live session — over HTTP, checked against the session API.
The browser side is in ``tests/viewer/test_serve_views_browser.py``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine import EstimateCounter, Ledger
from engine.viewer import conversation as conv_mod
from engine.viewer import views
from engine.viewer.app import create_app
from engine.viewer.compare import compare
from engine.viewer.pages import url

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> \u202e <!-- </pre> **[x](javascript:alert(3))**'


def _dump(path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT originator_id, originator_version, state FROM stored_events ORDER BY 1, 2").fetchall()
    finally:
        con.close()


def _run(s, *, summarize: bool) -> None:
    """One workload: a user turn, a tool call and its result, the model's answer, three times;
    ``summarize`` folds the first two turns' tool output into a summary that invents a time."""
    for turn in range(3):
        s.observe(f"Turn {turn}: why does billing-api fail?", role="user")
        s.observe(f"get_logs(service='billing-api', turn={turn})", role="assistant", kind="tool_call",
                  meta={"tool_call_id": f"c{turn}", "name": "get_logs", "arguments": {"service": "billing-api", "turn": turn},
                        "reply": {"model": "gpt-test", "latency_ms": 412.5, "usage": {"prompt_tokens": 1200 + turn,
                                                                                     "completion_tokens": 17}}})
        s.observe(f"ERROR billing-api 503 at 10:0{turn}\n" + "trace line\n" * 200, role="tool", kind="tool_result",
                  meta={"tool_call_id": f"c{turn}", "timestamp": f"2026-02-11T21:2{turn}:19.366Z"})
        s.observe(f"**Finding {turn}:**\n1. billing-api returned 503\n2. retry later", role="assistant",
                  meta={"message_id": f"m{turn}", "input_tokens": 50, "output_tokens": 9, "cache_read_input_tokens": 40})
        s.mark(f"cycle-{turn + 1}")
    if summarize:
        s.rewrite(["o3", "o7"], "billing-api returned 503 at 10:00 and 10:01; it recovered at 14:02.", by="model-x",
                  reason="compact")


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "views.db"
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    _run(ledger.create_session("naive"), summarize=True)
    _run(ledger.create_session("guarded"), summarize=False)
    yield ledger, path
    ledger.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(store[0], fleet=False), base_url="http://127.0.0.1") as c:
        yield c


# -- the conversation view ---------------------------------------------------------------------


def test_every_observation_of_the_window_appears_once_with_results_under_their_calls(client, store):
    s = store[0].session("naive")
    for at in range(1, s.position + 1):
        body = client.get(f"/api/s/naive/conversation?at={at}").json()
        assert body["at"] == at and body["start"] == max(1, at - conv_mod.WINDOW + 1)
        shown = []
        for item in body["items"]:
            if item["type"] == "message":
                shown.append(item["span_id"])
                for r in item.get("results", []):
                    assert r["kind"] == "tool_result" and r["meta"]["tool_call_id"] == item["meta"]["tool_call_id"]
                    shown.append(r["span_id"])
        want = [ev.span_id for ev in s.events(body["start"], at) if type(ev).__name__ == "Observed"]
        assert sorted(shown) == sorted(want)
        view = s.at(at)
        for item in body["items"]:
            if item["type"] == "message":
                live = view.state.live.get(item["span_id"])
                assert (item["status"] == "live") == (live is not None and live.position == item["position"])


def test_a_summary_is_marked_with_its_sources_and_its_findings(client, store):
    s = store[0].session("naive")
    body = client.get("/api/s/naive/conversation").json()
    (summary,) = [i for i in body["items"] if i["type"] == "summary"]
    assert summary["sources"] == ["o3", "o7"] and summary["by"] == "model-x" and summary["generation"] == 1
    kinds = {f["kind"] for f in summary["findings"]["items"]}
    assert summary["findings"]["source"] == "check" and "unsupported-specific" in kinds
    assert any("14:02" in f["message"] for f in summary["findings"]["items"])
    messages = [i for i in body["items"] if i["type"] == "message"]
    statuses = {m["span_id"]: m["status"] for i in messages for m in [i, *i.get("results", [])]}
    assert statuses["o3"] == "summarized in d1" and statuses["o1"] == "live"
    html = client.get("/s/naive/conversation").text
    assert 'class="msg derived"' in html and "14:02" in html and "from o3, o7" in html
    assert s.at(s.position).state.live["d1"].sources == ("o3", "o7")


def test_model_calls_show_model_latency_tokens_once_per_call(client):
    body = client.get("/api/s/naive/conversation").json()
    calls = [i["call"] for i in body["items"] if i.get("call")]
    proxy = [c for c in calls if c["model"] == "gpt-test"]
    assert len(proxy) == 3 and proxy[0]["latency_ms"] == 412.5 and proxy[0]["input_tokens"] == 1200
    assert proxy[0]["output_tokens"] == 17
    flat = [c for c in calls if c["call"].startswith("m")]
    assert len(flat) == 3 and flat[0]["input_tokens"] == 50 and flat[0]["cache_read_tokens"] == 40
    html = client.get("/s/naive/conversation").text
    assert "gpt-test</span> · 412 ms · 1,200 in / 17 out tokens" in html
    assert "50 in / 9 out tokens · 40 cached" in html
    assert conv_mod.call_info({}) is None and conv_mod.call_info({"reply": {"status": 200}}) is None
    assert conv_mod.call_info({"reply": {"cost": 0.0123}})["cost"] == 0.0123


def test_original_times_are_preferred_and_the_recorded_time_kept(client, store):
    body = client.get("/api/s/naive/conversation").json()
    results = [r for i in body["items"] if i["type"] == "message" for r in i.get("results", [])]
    assert results[0]["time"] == "2026-02-11 21:20:19" and results[0]["time_source"] == "original"
    assert results[0]["recorded"] != results[0]["time"]
    users = [i for i in body["items"] if i.get("role") == "user"]
    assert users[0]["time_source"] == "recorded" and users[0]["time"] == users[0]["recorded"]
    at = client.get("/api/s/naive/at/4").json()["event"]
    assert at["time"] == "2026-02-11 21:20:19" and at["time_source"] == "original"
    assert "(transcript time)" in client.get("/s/naive/state?at=4").text


def test_long_outputs_are_folded_and_markdown_rendered(client):
    html = client.get("/s/naive/conversation").text
    assert '<details class="result"><summary>result' in html  # 2,000+ characters: folded, not open
    assert "characters, 202 lines: show more" in html
    assert "<b>Finding 0:</b>" in html and '<ol start="1"><li>billing-api returned 503</li>' in html


def test_a_window_says_where_earlier_events_are(store):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session("long")
    with s.batch():
        for i in range(conv_mod.WINDOW + 50):
            s.observe(f"line {i}", role="user")
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    body = c.get("/api/s/long/conversation").json()
    assert body["earlier"] == s.position - conv_mod.WINDOW and len(body["items"]) == conv_mod.WINDOW
    assert f'data-at="{body["earlier"]}"' in c.get("/s/long/conversation").text


# -- search ---------------------------------------------------------------------------------------


def test_search_finds_text_the_buffer_no_longer_holds_and_links_to_positions(client, store):
    s = store[0].session("naive")
    body = client.get("/api/s/naive/search?q=503").json()
    ids = {h["span_id"]: h for h in body["hits"]}
    assert {"o3", "o7", "o11", "d1"} <= set(ids)
    for h in body["hits"]:
        assert "503" in s.event(h["position"]).text
    assert ids["o3"]["status"] == "summarized in d1"
    html = client.get("/s/naive/search?q=503").text
    assert f'data-at="{ids["o3"]["position"]}"' in html and "<mark>503</mark>" in html


@pytest.mark.parametrize("query, check", [
    ("role=tool", lambda h: h["role"] == "tool"),
    ("kind=message", lambda h: h["kind"] == "message"),
    ("provenance=derived", lambda h: h["provenance"] == "derived"),
    ("provenance=observed", lambda h: h["provenance"] == "observed"),
    ("findings=1", lambda h: h["provenance"] == "derived" and h["findings"]),
])
def test_each_filter_keeps_only_what_it_names(client, query, check):
    every = client.get("/api/s/naive/search?q=billing-api").json()["hits"]
    kept = client.get(f"/api/s/naive/search?q=billing-api&{query}").json()["hits"]
    assert kept and all(check(h) for h in kept)
    assert [h["span_id"] for h in kept] == [h["span_id"] for h in every if check({**h, "findings": h["findings"] or [1]})] \
        or query == "findings=1"


@pytest.mark.parametrize("query", ["q=", "q=%20", "q=x&provenance=inferred", "q=" + "a" * 501, "q=x&role=" + "r" * 65])
def test_bad_search_input_is_400_and_the_log_unchanged(client, store, query):
    before = _dump(store[1])
    r = client.get(f"/api/s/naive/search?{query}")
    assert r.status_code == 400 and r.json()["type"] == "InvalidInputError"
    assert client.get(f"/s/naive/search?{query}").status_code == 400
    assert _dump(store[1]) == before


# -- compare ----------------------------------------------------------------------------------------


def test_compare_aligns_two_runs_by_observation_and_turn(client, store):
    ledger = store[0]
    a, b = ledger.session("naive"), ledger.session("guarded")
    body = client.get("/api/compare?a=naive&b=guarded").json()
    assert body["a"]["tokens"] == a.tokens and body["b"]["tokens"] == b.tokens
    differ = [r for r in body["rows"] if not r["same"]]
    # the summary of o3 and o7 sits on o3's row, against the guarded run's o3; o7 is alone on its side
    assert [(r["key"], [x["id"] for x in r["a"]], [x["id"] for x in r["b"]]) for r in differ] == [
        (3, ["d1"], ["o3"]), (7, [], ["o7"])]
    assert [r["turn"] for r in body["rows"]] == sorted(r["turn"] for r in body["rows"]) and body["rows"][-1]["turn"] == 3
    same = [r for r in body["rows"] if r["same"]]
    assert all(r["a"][0]["id"] == r["b"][0]["id"] == f"o{r['key']}" for r in same)
    html = client.get("/compare?a=naive&b=guarded").text
    assert "2 rows differ" in html and "identical row" in html


def test_compare_by_mark_and_two_positions_of_one_session(client, store):
    s = store[0].session("naive")
    body = client.get("/api/compare?a=naive&at_a=cycle-1&b=guarded&at_b=cycle-1").json()
    assert body["a"]["position"] == s.marks()["cycle-1"] and body["differ"] == 0
    one = client.get(f"/api/compare?a=naive&at_a=cycle-2&at_b={s.position}").json()
    assert one["b"]["session"] == "naive" and one["b"]["position"] == s.position and one["differ"] == 2 + 4  # the summary; the third turn
    assert compare(s.at(5), s.at(5))["differ"] == 0


@pytest.mark.parametrize("query, status", [("", 400), ("a=nope&b=naive", 404), ("a=naive&at_a=999", 404),
                                           ("a=naive&at_a=--1", 400)])
def test_bad_compare_input(client, store, query, status):
    before = _dump(store[1])
    assert client.get(f"/api/compare?{query}").status_code == status
    assert client.get(f"/compare?{query}").status_code == status
    assert _dump(store[1]) == before


# -- following a live session ------------------------------------------------------------------------


def test_the_head_moves_as_the_session_is_written(client, store):
    s = store[0].session("guarded")
    assert client.get("/api/s/guarded/head").json()["head"] == s.position
    s.observe("one more line", role="user")
    assert client.get("/api/s/guarded/head").json()["head"] == s.position
    assert client.get("/api/s/guarded/conversation").json()["items"][-1]["text"] == "one more line"


# -- hostile text ------------------------------------------------------------------------------------

ALLOWED = {"div", "p", "br", "b", "i", "code", "ul", "ol", "li", "blockquote", "pre", "h4", "h5", "h6", "hr", "span",
           "a", "details", "summary", "time", "mark", "table", "thead", "tbody", "tr", "th", "td", "small", "form",
           "label", "input", "button", "datalist", "option", "header", "h1", "html", "head", "meta", "link", "title",
           "script", "body"}


def _safe(doc: str) -> None:
    from html.parser import HTMLParser

    bad: list = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in ALLOWED or any(k.startswith("on") for k, _ in attrs):
                bad.append((tag, attrs))
            if tag == "script" and dict(attrs).get("src") != "/_static/viewer.js":
                bad.append((tag, attrs))
            if tag == "a" and not (dict(attrs).get("href") or "").startswith(("?", "#", "/")):
                bad.append((tag, attrs))

    P().feed(doc)
    assert not bad, bad
    assert "\u202e" not in doc


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([HOSTILE, "# h", "1. x", "`c`", "\x1b[31m", "**b**", "[a](b)", "<b>", "text"]),
                min_size=1, max_size=6))
def test_hostile_text_is_inert_in_every_new_view(parts):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session(HOSTILE, strict=False)
    text = " ".join(parts)
    s.observe(text, role="user", by=HOSTILE, meta={"timestamp": HOSTILE, "reply": {"model": HOSTILE, "latency_ms": 3}})
    s.observe(text, role="assistant", kind="tool_call", meta={"tool_call_id": "c", "name": HOSTILE, "arguments": {HOSTILE: text}})
    s.observe(text * 40, role="tool", kind="tool_result", meta={"tool_call_id": "c"})
    d = s.rewrite(["o1", "o3"], "text " + text, by=HOSTILE, reason=HOSTILE)
    s.rewrite([d.id, "o2"], text, by=HOSTILE, reason=HOSTILE)
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    for path in [url("s", HOSTILE, "conversation"), url("s", HOSTILE, "search", q="text"),
                 url("compare", a=HOSTILE, at_a=3, b=HOSTILE), url("s", HOSTILE, "search", q="text", findings=1)]:
        r = c.get(path)
        assert r.status_code == 200, (path, r.text[:200])
        _safe(r.text)
    assert views.conversation_fragment(conv_mod.conversation(s, s.position)).count("<script") == 0


# -- what a compaction dropped (projections.lost) -----------------------------------------------------


def test_the_lost_view_of_a_compaction_is_projections_lost(client, store):
    from projections.lost import lost

    s = store[0].session("naive")
    body = client.get("/api/s/naive/lost/d1").json()
    want = lost(s.span("d1"), s.originals("d1"))
    assert body["span_id"] == "d1" and body["sources"] == want.sources == 2
    assert [(c["name"], c["kept"], c["total"]) for c in body["categories"]] == [(c.name, c.kept, c.total) for c in want.categories]
    html = client.get("/s/naive/lost/d1").text
    assert "What this compaction dropped" in html and "kept" in html
    assert 'id="lost-box" data-span="d1"' in client.get("/s/naive/span/d1").text
    assert 'id="lost-box"' not in client.get("/s/naive/span/o1").text


@pytest.mark.parametrize("path, status", [("/api/s/naive/lost/o1", 404), ("/api/s/naive/lost/d9", 404),
                                          ("/api/s/guarded/lost/d1", 404), ("/api/s/naive/lost/x", 404)])
def test_lost_of_what_is_no_summary_is_refused_and_the_log_unchanged(client, store, path, status):
    before = _dump(store[1])
    r = client.get(path)
    assert r.status_code == status and r.json()["type"] in ("SpanStateError", "UnknownSpanError"), r.json()
    assert _dump(store[1]) == before


def test_search_keeps_its_index_beside_a_sqlite_store_and_builds_it_once(client, store):
    ledger, path = store
    assert client.get("/api/s/naive/search?q=503").status_code == 200
    side = Path(f"{path}-search")
    assert side.exists()
    con = sqlite3.connect(side)
    try:
        (indexed,) = con.execute("SELECT count(*) FROM indexed").fetchone()
    finally:
        con.close()
    assert indexed >= 1
    app_viewer = client.app.app.state.viewer
    first = app_viewer.search_index()
    client.get("/api/s/guarded/search?q=503")
    assert app_viewer.search_index() is first
