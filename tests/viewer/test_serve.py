"""``ctxledger serve`` over HTTP (no browser): the endpoint contract, what each page shows against
``s.at(n)``, 404s with clear messages and the log unchanged, escaping of hostile session text,
and access (loopback by default, a token on every request otherwise). The browser side is in
``tests/viewer/test_serve_browser.py``."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine import EstimateCounter, Ledger, SpanStateError
from engine.cli import main
from engine.cli.serve import is_loopback
from engine.viewer import data, pages
from engine.viewer.app import create_app
from engine.viewer.escape import BIDI_CONTROLS, esc, script_json

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> \'\u202egnp.exe\u202c <!-- </pre>'
CLI = (sys.executable, "-c", "from engine.cli import main; main()")
HOSTILE_NAME = 'evil"><script>alert(3)</script>\u202e'


def _session(ledger: Ledger, name: str = "incident-7"):
    s = ledger.create_session(name)
    a = s.observe("GET /v1/invoices -> 503 from billing-api at 10:02 (upstream timeout)", role="tool",
                  kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("POST /v1/sessions -> 500 from auth-service at 10:07", role="tool", kind="tool_result",
                  meta={"tool_call_id": "c2"})
    c = s.observe("Running migration 0042_add_index on orders-db (started 13:41)", role="tool",
                  kind="tool_result", meta={"tool_call_id": "c3"})
    s.mark("cycle-9")
    d1 = s.rewrite([a.id, b.id], "Two failures: billing-api 503 at 10:02, auth-service 500 at 10:07.", by="model-x",
                   reason="compact above 70%")
    s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    s.observe("Please check the deploy.", role="user")
    s.prune("o4", reason="answered")
    s.rederive(d1.id, text="billing-api returned 503 at 10:02; auth-service returned 500 at 10:07.", by="model-y")
    return s


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    _session(ledger)
    yield ledger
    ledger.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(store, fleet=False), base_url="http://127.0.0.1") as c:
        yield c


# -- the contract --------------------------------------------------------------------------------


def test_api_at_is_the_buffer_of_s_at_n_at_every_position(client, store):
    s = store.session("incident-7")
    for n in range(1, s.position + 1):
        r = client.get(f"/api/s/incident-7/at/{n}")
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        body = r.json()
        view = s.at(n)
        assert body["position"] == n and body["head"] == s.position and body["tokens"] == view.tokens
        assert [x["id"] for x in body["spans"]] == [x.id for x in view.spans()]
        for got, want in zip(body["spans"], view.spans()):
            assert got["text"] == want.text and got["provenance"] == str(want.provenance)
            assert got["generation"] == want.generation and got["sources"] == list(want.sources)
            assert got["role"] == want.role and got["kind"] == want.kind and got["tokens"] == want.tokens
        assert body["event"]["position"] == n and body["event"]["type"] == s.event(n).type


def test_session_page_shows_the_buffer_and_event_at_the_position(client, store):
    s = store.session("incident-7")
    head = client.get("/s/incident-7")
    assert head.status_code == 200 and f'data-at="{s.position}"' in head.text
    for n in (2, 6, 7, s.position):
        page = client.get(f"/s/incident-7?at={n}").text
        ids = re.findall(r'<li class="span [^"]*" id="([od]\d+)"', page)
        assert ids == [x.id for x in s.at(n).spans()]
        assert f'data-at="{n}"' in page and f"Position {n:,} of {s.position:,}" in page
        frag = client.get(f"/s/incident-7/state?at={n}").text
        assert re.findall(r'<li class="span [^"]*" id="([od]\d+)"', frag) == ids
    assert "Rewritten" in client.get("/s/incident-7?at=6").text
    assert client.get("/s/incident-7?at=cycle-9").text.count('class="span ') == 3  # a mark is a position


def test_audit_json_is_the_session_audit(client, store):
    s = store.session("incident-7")
    body = client.get("/api/s/incident-7/audit").json()
    report = s.audit()
    assert body["ok"] is report.ok is False
    assert [f["kind"] for f in body["findings"]] == [f.kind for f in report.findings]
    assert any(f.get("value") == "14:02" for f in body["findings"])


def test_sessions_page_lists_every_session_with_its_numbers(client, store):
    store.create_session("second").observe("hello", role="user")
    page = client.get("/").text
    assert 'href="/s/incident-7"' in page and 'href="/s/second"' in page
    rows = {r["name"]: r for r in client.get("/api/sessions").json()["sessions"]}
    s = store.session("incident-7")
    assert rows["incident-7"]["events"] == s.position and rows["incident-7"]["tokens"] == s.tokens
    assert rows["second"]["live_spans"] == 1


def test_span_panel_has_origin_lineage_and_sentence_grounding(client, store):
    r = client.get("/api/s/incident-7/span/d2")
    d = r.json()
    assert d["span"]["provenance"] == "derived" and d["made_by"]["by"] == "model-x"
    assert [o["id"] for o in d["originals"]] == ["o3"]
    assert d["lineage"]["came_from"]["children"][0]["id"] == "o3"
    flagged = [f for sent in d["grounding"] for f in sent["findings"]]
    assert any(f["value"] == "14:02" and f["severity"] == "error" for f in flagged)
    html = client.get("/s/incident-7/span/d2").text
    assert '<mark class="error"' in html and ">14:02</mark>" in html
    assert 'id="lineage-box" data-span="d2"' in html  # the panel comes first, its lineage after
    lineage = client.get("/s/incident-7/lineage/d2").text
    assert 'data-span="o3"' in lineage and "What became of it" in lineage
    assert client.get("/s/incident-7/lineage/d7").status_code == 404
    pruned = client.get("/api/s/incident-7/span/o4").json()  # a pruned span: read back from the log
    assert pruned["live"] is False and pruned["span"]["text"] == "Please check the deploy."


def test_blame_and_diff(client, store):
    hits = client.get("/api/s/incident-7/blame", params={"q": "14:02"}).json()["hits"]
    assert hits[0]["span_id"] == "d2" and hits[0]["grounded"] is False
    frag = client.get("/s/incident-7/blame", params={"q": "14:02"}).text
    assert "NOT GROUNDED" in frag and 'data-span="d2"' in frag
    assert "No span holds" in client.get("/s/incident-7/blame", params={"q": "nowhere at all"}).text
    d = client.get("/s/incident-7/diff", params={"a": 4, "b": 6}).text
    assert "rewritten" in d and "d1" in d


def test_curve_matches_the_timeline_and_seek_finds_compactions(client, store):
    s = store.session("incident-7")
    c = client.get("/api/s/incident-7/curve").json()
    tl = {p.position: p for p in s.timeline().points}
    assert c["head"] == s.position and c["points"]
    for pos, obs, der in c["points"]:
        assert (obs, der) == (tl[pos].observed_tokens, tl[pos].derived_tokens)
    assert [m[1] for m in c["markers"]] == ["Rewritten", "Rewritten", "Pruned", "Rederived"]
    assert client.get("/api/s/incident-7/seek?from=1&dir=1").json()["position"] == 7  # the run 6-7
    assert client.get("/api/s/incident-7/seek?from=7&dir=1").json()["position"] == 10
    assert client.get("/api/s/incident-7/seek?from=10&dir=-1").json()["position"] == 7
    none = client.get("/api/s/incident-7/seek?from=5&dir=-1").json()
    assert none["position"] is None and "no previous compaction" in none["message"]


_KINDS = ("observe", "observe", "observe", "prune", "rewrite", "rederive", "restore", "mark")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=40), st.data())
def test_seek_and_curve_agree_with_a_scan_of_the_log(kinds, draw):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session("h")
    for i, k in enumerate(kinds):
        live = [x for x in s.spans()]
        obs = [x for x in live if x.observed]
        if k == "observe" or not live:
            s.observe(f"line {i} at 10:{i:02d}", role="user")
        elif k == "prune":
            s.prune(live[0].id)
        elif k == "rewrite" and len(obs) >= 2:
            s.rewrite([obs[0].id, obs[1].id], f"summary {i}", by="m")
        elif k == "rederive" and len(obs) < len(live):
            d = next(x for x in live if x.derived)
            s.rederive(d.id, text=f"again {i}")
        elif k == "restore":
            gone = [e.span_id for e in s.events() if e.type == "Pruned" and e.span_id not in s.state.live]
            if gone:
                with contextlib.suppress(SpanStateError):  # pruned, restored, then rewritten away
                    s.restore(gone[-1])
        else:
            s.mark(f"m{i}")
    types = {e.position: isinstance(e, data.COMPACTION_TYPES) for e in s.events()}
    ends = [p for p in types if types[p] and not types.get(p + 1, False)]
    n = draw.draw(st.integers(1, s.position))
    assert data.seek_compaction(s, n, 1) == next((p for p in ends if p > n), None)
    assert data.seek_compaction(s, n, -1) == next((p for p in reversed(ends) if p < n), None)
    tl = {p.position: p for p in s.timeline().points}
    c = data.curve(s)
    assert c["points"][-1][0] == s.position
    for pos, o, d in c["points"]:
        assert (o, d) == (tl[pos].observed_tokens, tl[pos].derived_tokens)


# -- bad input: 404 with a clear message, the log unchanged ---------------------------------------


@pytest.mark.parametrize(
    "path, needle",
    [
        ("/s/no-such-session", "no-such-session"),
        ("/s/incident-7?at=999", "position 999 is out of range"),
        ("/s/incident-7?at=0", "out of range"),
        ("/s/incident-7?at=nonsense", "no mark named"),
        ("/s/incident-7/span/d9", "d9 does not exist"),
        ("/s/incident-7/span/x1", "is not a span id"),
        ("/s/incident-7/state?at=50", "out of range"),
        ("/nowhere", "nothing at"),
    ],
)
def test_unknown_session_position_or_span_is_404_with_a_message(client, store, path, needle):
    before = store.session("incident-7").position
    r = client.get(path)
    assert r.status_code == 404 and 'id="error-message"' in r.text
    assert needle in r.text.replace("&#x27;", "'")
    assert store.session("incident-7").position == before


@pytest.mark.parametrize(
    "path, status, kind",
    [
        ("/api/s/nope/at/1", 404, "UnknownSessionError"),
        ("/api/s/incident-7/at/99", 404, "PositionOutOfRangeError"),
        ("/api/s/incident-7/at/x", 400, "InvalidInputError"),  # docs/serve.md: bad input is 400
        ("/api/s/nope/audit", 404, "UnknownSessionError"),
        ("/api/s/incident-7/span/o99", 404, "UnknownSpanError"),
        ("/api/s/incident-7/blame?q=", 400, "InvalidInputError"),
        ("/api/s/incident-7/seek?from=2&dir=sideways", 400, "InvalidInputError"),
    ],
)
def test_api_errors_are_json_with_the_typed_error(client, store, path, status, kind):
    before = [e.position for e in store.session("incident-7").events()]
    r = client.get(path)
    assert r.status_code == status and r.json()["type"] == kind and r.json()["error"]
    assert [e.position for e in store.session("incident-7").events()] == before


# -- escaping -----------------------------------------------------------------------------------


def test_escape_helpers():
    assert esc('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert esc("abc\u202edef") == "abc⟨U+202E⟩def" and esc("\u2066x\u2069") == "⟨U+2066⟩x⟨U+2069⟩"
    assert esc("a\x1b[31mb") == "a⟨U+001B⟩[31mb"
    assert "<" not in script_json({"t": "</script><!--"}) and json.loads(script_json({"t": "</script>"})) == {"t": "</script>"}


def _hostile_store(tmp_path) -> Ledger:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'hostile.db'}", token_counter=EstimateCounter())
    s = ledger.create_session(HOSTILE_NAME, strict=False)
    a = s.observe(HOSTILE, role="tool", kind="tool_result", meta={"tool_call_id": HOSTILE, HOSTILE: HOSTILE},
                  by=HOSTILE)
    b = s.observe("at 10:02 billing-api " + HOSTILE, role="user")
    s.mark(HOSTILE)
    d = s.rewrite([a.id, b.id], "completed at 14:02 " + HOSTILE, by=HOSTILE, reason=HOSTILE)
    s.observe("next", role="user")
    s.rewrite([d.id, "o3"], "again " + HOSTILE, by=HOSTILE, reason=HOSTILE)
    return ledger


def _no_live_markup(text: str) -> None:
    assert "<script>alert" not in text and "<img" not in text and "onerror=alert" not in text.replace("onerror=alert(2)&gt;", "")
    assert "\u202e" not in text and "\u202c" not in text
    assert "<!-- </pre>" not in text


def test_hostile_text_is_escaped_on_every_page_fragment_and_api(tmp_path):
    ledger = _hostile_store(tmp_path)
    with TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1") as c:
        from engine.viewer.pages import url

        base = url("s", HOSTILE_NAME)
        paths = ["/", base, base + "?at=2", base + "/state?at=5", base + "/span/o1?at=5", base + "/span/d1?at=5",
                 base + "/span/d2", base + "/blame?q=script", base + "/diff?a=1&b=6", base + "/span/o2"]
        for p in paths:
            r = c.get(p)
            assert r.status_code == 200, (p, r.text[:300])
            _no_live_markup(r.text)
            if "/diff" not in p:  # the diff shows 60 characters of each span: the override is further on
                assert "⟨U+202E⟩" in r.text, p
        page = c.get(base).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&quot;&gt;&lt;img src=x" in page
        api = c.get(url("api", "s", HOSTILE_NAME, "at", 2)).json()  # JSON keeps the text exactly
        assert api["spans"][0]["text"] == HOSTILE and api["session"] == HOSTILE_NAME
        err = c.get(url("s", HOSTILE_NAME + "x")).text  # the name echoed in an error message
        assert c.get(url("s", HOSTILE_NAME + "x")).status_code == 404
        _no_live_markup(err)


# -- access: loopback by default, a token otherwise ---------------------------------------------------


def test_without_a_token_only_loopback_hosts_are_answered(store):
    with TestClient(create_app(store, fleet=False), base_url="http://127.0.0.1") as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"host": "localhost:8765"}).status_code == 200
        r = c.get("/", headers={"host": "attacker.example:8765"})
        assert r.status_code == 403 and "loopback" in r.text
        assert c.get("/api/s/incident-7/at/1", headers={"host": "10.0.0.5"}).status_code == 403
        assert "default-src 'none'" in c.get("/").headers["content-security-policy"]


def test_a_token_is_checked_on_every_request(store):
    with TestClient(create_app(store, token="s3cret-token", fleet=False), base_url="http://192.0.2.1") as c:
        for path in ("/", "/s/incident-7", "/api/s/incident-7/at/2", "/api/s/incident-7/audit", "/_static/viewer.js"):
            r = c.get(path)
            assert r.status_code == 401 and "token" in r.text, path
            assert c.get(path, params={"token": "wrong"}).status_code == 401
        first = c.get("/", params={"token": "s3cret-token"})
        assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
        assert c.get("/api/s/incident-7/at/2").status_code == 200  # the cookie from the first visit
        c.cookies.clear()
        assert c.get("/api/s/incident-7/at/2").status_code == 401
        assert c.get("/api/s/incident-7/at/2", headers={"authorization": "Bearer s3cret-token"}).status_code == 200


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.com")


def test_cli_refuses_a_public_host_without_a_token(store, tmp_path):
    r = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'serve.db'}", "serve", "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "--token is required" in r.output
    help_ = CliRunner().invoke(main, ["serve", "--help"])
    assert help_.exit_code == 0 and "Example:" in help_.output and "--token" in help_.output


@pytest.mark.parametrize("token", ["a", "tok-123", "aaaaaaaaaaaaaaaaaaaaaaaa", "abababab12121212"])
def test_cli_refuses_a_weak_token(tmp_path, token):
    db = tmp_path / "weak.db"
    r = CliRunner().invoke(main, ["--db", f"sqlite:///{db}", "serve", "--host", "0.0.0.0", "--token", token])
    assert r.exit_code == 2 and "--token is too weak" in r.output and not db.exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(tmp_path, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [*CLI, "--db", f"sqlite:///{tmp_path / 'serve.db'}", "serve", "--no-fleet", "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(proc.stderr.read())
    return proc, json.loads(line)["url"]


def test_the_real_server_binds_loopback_and_checks_the_token(store, tmp_path):
    proc, url = _serve(tmp_path, "--port", str(_free_port()))
    try:
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "s/incident-7?at=3", timeout=10).status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)
    proc, url = _serve(tmp_path, "--port", str(_free_port()), "--token", "tok-123-a-strong-Token-9x")
    try:
        bare = url.split("?")[0]
        assert httpx.get(bare, timeout=10).status_code == 401
        assert httpx.get(url, timeout=10).status_code == 200
        assert httpx.get(bare + "api/s/incident-7/at/2", headers={"authorization": "Bearer tok-123-a-strong-Token-9x"}, timeout=10).status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        r = subprocess.run([*CLI, "--db", f"sqlite:///{tmp_path / 'serve.db'}", "serve",
                            "--no-fleet", "--port", str(busy.getsockname()[1])], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "could not listen" in r.stderr
    finally:
        busy.close()


# -- the user story ---------------------------------------------------------------------------------


def test_story_an_investigator_traces_an_invented_time_to_its_rewrite(client, store):
    """Someone was told the migration 'completed at 14:02'. They open the session, find the
    finding on the sessions page, scrub to the rewrite, open the summary, see the time marked as
    unsupported, blame it, and share the URL of that state."""
    assert "incident-7" in client.get("/").text
    s = store.session("incident-7")
    rewrite_at = client.get("/api/s/incident-7/seek?from=6&dir=1").json()["position"]
    assert s.event(rewrite_at).type == "Rewritten" and s.event(rewrite_at).span_id == "d2"
    page = client.get(f"/s/incident-7?at={rewrite_at}").text
    assert 'id="d2"' in page and "rewrote o3 into d2" in page and "model-x" in page
    panel = client.get(f"/s/incident-7/span/d2?at={rewrite_at}").text
    assert ">14:02</mark>" in panel and "13:41" in panel  # what the source really said
    blame = client.get("/api/s/incident-7/blame", params={"q": "14:02", "at": rewrite_at}).json()["hits"][0]
    assert blame["position"] == rewrite_at and blame["by"] == "model-x" and not blame["grounded"]
    shared = client.get(f"/s/incident-7?at={rewrite_at}")  # the URL of this state, opened again
    assert shared.status_code == 200 and re.findall(r' id="(d\d)"', shared.text) == ["d1", "d2"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_concurrent_requests_each_get_their_own_position(store):
    """uvicorn runs the endpoints in a thread pool over one shared ledger: many positions at once,
    each answer the buffer of its own position."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import uvicorn

    s = store.session("incident-7")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(create_app(store, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not srv.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        root = f"http://127.0.0.1:{sock.getsockname()[1]}"
        positions = [1 + (k * 7) % s.position for k in range(60)]
        with httpx.Client(base_url=root, timeout=30) as c, ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda n: (n, c.get(f"/api/s/incident-7/at/{n}").json()), positions))
            curves = list(pool.map(lambda _: c.get("/api/s/incident-7/curve").json(), range(8)))
        for n, body in answers:
            assert body["position"] == n and [x["id"] for x in body["spans"]] == [x.id for x in s.at(n).spans()]
        assert all(cv == curves[0] for cv in curves)
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()


def test_every_store_serves_the_same_pages(ledger):
    """memory://, SQLite and PostgreSQL (when CTXLEDGER_TEST_POSTGRES is set): the same contract."""
    s = _session(ledger)
    with TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1") as c:
        for n in (1, 5, s.position):
            body = c.get(f"/api/s/incident-7/at/{n}").json()
            assert [x["id"] for x in body["spans"]] == [x.id for x in s.at(n).spans()]
            assert c.get(f"/s/incident-7?at={n}").status_code == 200
        assert c.get("/api/s/incident-7/audit").json()["ok"] is False
        assert c.get("/s/incident-7?at=999").status_code == 404
        assert "incident-7" in c.get("/").text
        # search through each store's own index (FTS5 sidecar, PostgreSQL tsvector, in memory)
        hits = c.get("/api/s/incident-7/search?q=billing-api").json()["hits"]
        assert {"o1", "d1"} <= {h["span_id"] for h in hits}
        assert all("billing-api" in s.event(h["position"]).text for h in hits)
        assert c.get("/api/s/incident-7/search?q=billing-api&provenance=derived").json()["hits"][0]["span_id"] == "d1"
        conv = c.get("/api/s/incident-7/conversation").json()
        assert [i["span_id"] for i in conv["items"] if i["type"] == "summary"] == ["d1", "d2", "d1"]
        assert c.get("/api/compare?a=incident-7&at_a=4&at_b=-1").json()["differ"] >= 1


def test_sessions_page_takes_drift_findings_from_the_fleet_view(store):
    app = create_app(store, fleet=True)
    viewer = app.app.state.viewer
    viewer._fleet_thread.join(60)  # the background catch-up started with the app
    with TestClient(app, base_url="http://127.0.0.1") as c:
        rows = {r["name"]: r for r in c.get("/api/sessions").json()["sessions"]}
        assert rows["incident-7"]["drift"] >= 1 and "unsupported-specific" in rows["incident-7"]["findings"]
        page = c.get("/").text
        assert "from the fleet view" in page and "unsupported-specific" in page
    memory = Ledger.open("memory://")
    _session(memory)
    app = create_app(memory, fleet=True)
    app.app.state.viewer._fleet_thread.join(60)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        page = c.get("/").text
        assert "no fleet view" in page and 'href="/s/incident-7"' in page  # memory:// has none: said so


def test_sessions_beyond_the_open_limit_are_listed_without_being_opened():
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    for i in range(5):
        ledger.create_session(f"s{i}").observe("hello there", role="user")
    rows = data.session_rows(ledger, open_limit=2)
    assert [r["name"] for r in rows] == [f"s{i}" for i in range(5)]
    assert all(r["events"] == 2 for r in rows)
    assert [r["tokens"] is None for r in rows] == [False, False, True, True, True]


def test_an_imported_transcript_is_served_like_any_session(tmp_path):
    """A real Claude Code transcript, imported: every position of it served as s.at(n) shows it."""
    from pathlib import Path

    from engine.importers import import_path

    source = Path(__file__).parents[1] / "data" / "transcripts" / "claude_code" / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'imported.db'}", token_counter=EstimateCounter())
    s = import_path(ledger, source, name="imported").session
    with TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1") as c:
        for n in range(1, s.position + 1):
            page = c.get(f"/s/imported?at={n}")
            assert page.status_code == 200
            assert re.findall(r'<li class="span [^"]*" id="([od]\d+)"', page.text) == [x.id for x in s.at(n).spans()]
        assert c.get("/api/s/imported/curve").json()["head"] == s.position
        derived = [x for x in s.spans() if x.derived]
        if derived:  # the transcript's own compaction, recorded as a derived span: its panel works
            assert c.get(f"/s/imported/span/{derived[0].id}").status_code == 200
    ledger.close()


# -- escaping, as properties ----------------------------------------------------------------------

_ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60) | st.sampled_from(
    ["<script>x</script>", '"><img src=x>', "\u202e\u2066abc\u2069", "</pre><!--", "&amp;&lt;", "'\u200b'"]
)


@settings(max_examples=200, deadline=None)
@given(_ANY_TEXT.filter(lambda t: "⟨" not in t))  # a literal marker would read back as its character
def test_esc_leaves_no_markup_and_round_trips(text):
    import html as html_module

    out = esc(text)
    assert not set(out) & set("<>\"'") and not set(out) & set(BIDI_CONTROLS)
    back = re.sub(r"⟨U\+([0-9A-F]{4})⟩", lambda m: chr(int(m.group(1), 16)), html_module.unescape(out))
    assert back == text.replace("\r", "")


class _Tags:
    """Every start tag of a document, in order (Python's own HTML parser, as a browser would see them)."""

    def __init__(self, doc: str):
        from html.parser import HTMLParser

        self.tags: list[tuple[str, dict]] = []
        tags = self.tags

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                tags.append((tag, dict(attrs)))

        P(convert_charrefs=True).feed(doc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ANY_TEXT.filter(lambda t: t.strip()), min_size=1, max_size=5), _ANY_TEXT.filter(lambda t: t.strip()))
def test_any_session_text_yields_exactly_the_markup_of_the_page(texts, reason):
    """Whatever the texts, authors and reasons, the fragment's elements are exactly the ones the
    page draws for its spans: one li per span, with the span id as its id, and no other element."""
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session("p")
    for t in texts:
        s.observe(t, role="user", by=reason)
    ids = [x.id for x in s.spans()]
    d = s.rewrite(ids[:1], texts[-1], by=reason, reason=reason)
    view = s.at(s.position)
    doc = pages.state_fragment(data.buffer_json(view, s.position))
    tags = _Tags(doc).tags
    spans = [a for t, a in tags if t == "li" and "span" in a.get("class", "").split()]
    assert [a["id"] for a in spans] == [x.id for x in view.spans()] and d.id in [a["id"] for a in spans]
    allowed = {"div", "section", "h2", "span", "p", "b", "pre", "ol", "li", "small", "ul"}
    assert {t for t, _ in tags} <= allowed
    assert not any(k.startswith("on") for _, a in tags for k in a)
