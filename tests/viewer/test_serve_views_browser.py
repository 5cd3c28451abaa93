"""The conversation view, search, compare, the live tail and the integrity warning in headless
Chromium (Playwright, the system browser, as ``tests/viewer/test_serve_browser.py``): keyboard paths, no
console errors, hostile text inert. Screenshots go to pytest's tmp dir; ``CTXLEDGER_VIEWER_SHOTS=DIR``
keeps them there for a person to look at."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import msgspec
import pytest

from engine import EstimateCounter, Ledger
from engine._store.codec import decode_payload, encode_payload
from engine.viewer.pages import url
from test_serve_browser import browser, chromium, demo_url, page, server  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1"> **<script>window.__pwned=2</script>** \x1b[31m [a](javascript:window.__pwned=3)'


def _shot(pg, tmp_path, name: str) -> Path:
    out = Path(os.environ.get("CTXLEDGER_VIEWER_SHOTS") or tmp_path) / f"{name}.png"
    pg.screenshot(path=str(out), full_page=False)
    return out


def _clean(pg) -> None:
    assert pg.problems == [], pg.problems
    assert pg.evaluate("window.__pwned") is None
    assert pg.get_attribute("html", "data-rendered") == "ok"


def test_the_conversation_view_by_keyboard(server, page, tmp_path):
    base, ledger = server
    s = ledger.session("demo-naive")
    d1 = s.at(s.position).state.live
    page.goto(f"{base}/s/demo-naive?at={s.position}")
    page.wait_for_selector("html[data-at]", state="attached")
    page.keyboard.press("c")
    page.wait_for_selector("html[data-view=conversation]:not([data-loading])", state="attached")
    page.wait_for_selector("#conversation-data", state="attached")
    assert page.is_hidden("#state") and page.is_visible("#conversation")
    assert page.locator("#conversation li.msg.user").count() >= 1
    assert page.locator("#conversation details.result").count() >= 1
    assert "view=conversation" in page.url
    # the arrow keys step the conversation too, and a position link in it jumps there
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector(f"#conversation-data[data-at='{s.position - 1}']", state="attached")
    first = page.locator("#conversation a.pref").first
    target = int(first.get_attribute("data-at"))
    first.click()
    page.wait_for_selector(f"html[data-at='{target}']:not([data-loading])", state="attached")
    # a summary on this page is marked derived, with its sources
    page.goto(f"{base}/s/demo-naive?at={min(x.position for x in d1.values() if x.sources) + 1}&view=conversation")
    page.wait_for_selector("#conversation li.msg.derived")
    assert "sources" in page.inner_text("#conversation li.msg.derived .src") or page.inner_text("#conversation li.msg.derived .src")
    shot = _shot(page, tmp_path, "conversation")
    assert shot.stat().st_size > 20_000
    page.keyboard.press("b")
    page.wait_for_selector("html[data-view=buffer]", state="attached")
    assert page.is_visible("#state")
    _clean(page)


def test_search_with_a_filter_and_jump_to_a_hit(server, page, tmp_path):
    base, ledger = server
    page.goto(f"{base}/s/demo-naive")
    page.wait_for_selector("html[data-at]", state="attached")
    page.fill("#search-q", "deploy")
    page.keyboard.press("Enter")
    page.wait_for_selector("#search-results[data-query=deploy]:not([data-loading])", state="attached")
    every = page.locator("#search-results li.hit").count()
    assert every >= 1
    page.select_option("#search-kind", "tool_call")
    page.wait_for_selector("#search-results:not([data-loading])", state="attached")
    page.wait_for_selector("#search-results li.hit")
    kinds = page.eval_on_selector_all("#search-results li.hit", "els => els.map(e => e.textContent)")
    assert kinds and all("/tool_call" in k for k in kinds)
    hit = page.locator("#search-results a.pref").first
    target = int(hit.get_attribute("data-at"))
    hit.click()
    page.wait_for_selector(f"html[data-at='{target}']:not([data-loading])", state="attached")
    _shot(page, tmp_path, "search")
    _clean(page)


def test_compare_the_naive_and_guarded_runs_at_one_cycle(server, page, tmp_path):
    base, ledger = server
    page.goto(f"{base}/compare?a=demo-naive&at_a=cycle-12&b=demo-guarded&at_b=cycle-12")
    assert page.locator("table#compare tr.differ").count() >= 1
    assert "demo-naive" in page.inner_text("table#compare thead") and "demo-guarded" in page.inner_text("table#compare thead")
    page.fill("input[name=at_b]", "cycle-3")
    page.keyboard.press("Enter")
    page.wait_for_url("**at_b=cycle-3**")
    _shot(page, tmp_path, "compare")
    _clean(page)


def test_follow_a_session_while_it_is_written(server, page, tmp_path):
    base, ledger = server
    writer = Ledger.open(ledger.url, token_counter=EstimateCounter())
    s = writer.create_session(f"live-{time.monotonic_ns()}")
    s.observe("first line", role="user")
    page.goto(f"{base}{url('s', s.name)}?view=conversation")
    page.wait_for_selector("#conversation-data", state="attached")
    page.keyboard.press("f")
    page.wait_for_selector("html[data-follow='1']", state="attached")
    for i in range(3):
        s.observe(f"line {i} written while watched", role="user")
    page.wait_for_selector(f"html[data-at='{s.position}']:not([data-loading])", state="attached", timeout=20_000)
    assert "line 2 written while watched" in page.inner_text("#conversation")
    assert page.get_attribute("#slider", "max") == str(s.position)
    writer.close()
    _clean(page)


def test_a_forged_session_shows_the_integrity_warning_and_hostile_text_stays_inert(browser, tmp_path):
    path = tmp_path / "forged.db"
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    s = ledger.create_session("forged")
    s.observe("the deploy failed at 10:02", role="user")
    s.observe(HOSTILE, role="assistant")
    s.observe("ls", role="assistant", kind="tool_call", meta={"tool_call_id": "c", "name": HOSTILE, "arguments": {HOSTILE: HOSTILE}})
    s.observe(HOSTILE * 30, role="tool", kind="tool_result", meta={"tool_call_id": "c"})
    sid = s.id
    ledger.close()
    con = sqlite3.connect(path)
    (topic, state), = con.execute("SELECT topic, state FROM stored_events WHERE originator_id=? AND originator_version=2",
                                  (sid.hex,)).fetchall()
    ev = decode_payload(topic, bytes(state))
    forged = encode_payload(msgspec.structs.replace(ev, originator_id=None, text="the deploy succeeded at 10:02"))
    con.execute("UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=2", (forged, sid.hex))
    con.commit()
    con.close()

    import socket
    import threading

    import uvicorn

    from engine.viewer.app import create_app

    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(create_app(ledger, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        assert thread.is_alive()
        time.sleep(0.02)
    try:
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        pg = ctx.new_page()
        problems: list[str] = []
        pg.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        pg.on("pageerror", lambda e: problems.append(str(e)))
        pg.on("dialog", lambda d: problems.append(f"dialog {d.message}"))
        pg.goto(f"http://127.0.0.1:{sock.getsockname()[1]}/s/forged?view=conversation")
        pg.wait_for_selector("html[data-integrity=broken]", state="attached")
        assert pg.is_visible("#integrity") and "hash chain breaks at position 2" in pg.inner_text("#integrity")
        pg.wait_for_selector("#conversation-data", state="attached")
        pg.click("#conversation details.result summary") if pg.locator("#conversation details.result summary").count() else None
        assert pg.evaluate("window.__pwned") is None and problems == []
        assert "<script>" in pg.inner_text("#conversation")  # shown as text
        _shot(pg, tmp_path, "forged")
        ctx.close()
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()
        ledger.close()


def test_a_summary_panel_shows_what_its_compaction_dropped(server, page, tmp_path):
    base, ledger = server
    s = ledger.session("demo-naive")
    derived = max((x for x in s.spans() if x.sources), key=lambda x: x.position)
    page.goto(f"{base}/s/demo-naive?at={s.position}#{derived.id}")
    page.wait_for_selector(f"#panel[data-lost='{derived.id}']", state="attached", timeout=60_000)
    text = page.inner_text("#lost-box")
    assert "What this compaction dropped" in text and "kept" in text
    page.locator("#lost-box details.lost summary").first.click()
    _shot(page, tmp_path, "lost")
    _clean(page)


def test_search_every_session_by_keyboard_and_open_a_hit(server, page, tmp_path):
    base, ledger = server
    page.goto(f"{base}/")
    page.wait_for_selector("html[data-rendered=ok]", state="attached")
    page.focus("#search-all input[name=q]")
    page.keyboard.type("deploy")
    page.keyboard.press("Enter")
    page.wait_for_selector("#all-hits", state="attached")
    sessions = set(page.eval_on_selector_all("#all-hits li.hit", "els => els.map(e => e.dataset.session)"))
    assert len(sessions) >= 2  # the demo's runs share one workload: hits in more than one session
    page.select_option("#all-kind", "tool_call")
    page.focus("#all-q")
    page.keyboard.press("Enter")
    page.wait_for_selector("#all-hits, #search-none", state="attached")
    assert "kind=tool_call" in page.url
    kinds = page.eval_on_selector_all("#all-hits li.hit", "els => els.map(e => e.textContent)")
    assert kinds and all("/tool_call" in k for k in kinds)
    _shot(page, tmp_path, "search-every-session")
    first = page.locator("#all-hits li.hit a").first
    session = page.locator("#all-hits li.hit").first.get_attribute("data-session")
    href = first.get_attribute("href")
    span, position = href.split("#", 1)[1], int(href.split("at=", 1)[1].split("#")[0])
    first.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector(f"html[data-page=session][data-at='{position}']", state="attached")
    page.wait_for_function("id => (document.getElementById('panel-span') || {}).textContent === id", arg=span)
    assert page.inner_text("header h1") == session
    _clean(page)
