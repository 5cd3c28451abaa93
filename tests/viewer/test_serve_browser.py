"""``ctxledger serve`` in a real browser: Debian's headless Chromium, driven by Playwright for
Python through the system browser's ``executable_path`` (no browser download).

A demo session is served on a free loopback port from a thread; the test scrubs with the keyboard
(←/→, Shift for the next/previous compaction, Home/End), checks every buffer shown against
``s.at(n)``, clicks a span, runs a blame, filters and sorts the sessions page, watches the console
for errors, and checks the screenshot's pixels for the drawn curve.

Skipped, with the reason, when Chromium is missing — except in CI (``$CI`` set), where that fails.
``CTXLEDGER_DOCS_IMG=1`` also writes the two screenshots used by docs/serve.md into docs/img/."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import Ledger
from engine.cli import main
from engine.viewer import data

pytestmark = pytest.mark.browser

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and os.access(p, os.X_OK)), "")
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
OBSERVED_RGB = (0x4C, 0x78, 0xA8)  # --obs in engine/viewer/assets.py, drawn at 85% opacity on white
DERIVED_RGB = (0xF5, 0x85, 0x18)  # --der, opaque


@pytest.fixture(scope="module")
def chromium() -> str:
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI is set but /usr/bin/chromium is missing: .ci/run must install Debian's chromium")
        pytest.skip("headless Chromium is not installed (apt-get install chromium); the viewer's browser test needs it")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the Playwright Python package is not installed (pip install 'ctxledger[test]')")
    return CHROMIUM


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("serve")
    url = f"sqlite:///{d / 'demo.db'}"
    r = CliRunner().invoke(main, ["--db", url, "demo", "--cycles", "12", "--invent", "0.6", "--no-audit"])
    assert r.exit_code == 0, r.output
    return url


@pytest.fixture(scope="module")
def server(demo_url):
    """The viewer on 127.0.0.1, a free port, in a thread; stopped when the module is done."""
    import uvicorn

    from engine.viewer.app import create_app

    ledger = Ledger.open(demo_url)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(ledger, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", ledger
    srv.should_exit = True
    thread.join(10)
    sock.close()
    ledger.close()


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    pg.problems = problems
    yield pg
    ctx.close()


def _shown_ids(pg) -> list[str]:
    return pg.eval_on_selector_all("#buffer li.span", "els => els.map(e => e.id)")


def _at(pg) -> int:
    return int(pg.get_attribute("html", "data-at"))


def _wait_at(pg, n: int) -> None:
    # selectors, not wait_for_function: the page's CSP forbids the eval a JS predicate needs
    pg.wait_for_selector(f"html[data-at='{n}']:not([data-loading])", state="attached")


def _matches(pg, s, n: int) -> None:
    view = s.at(n)
    assert _shown_ids(pg) == [x.id for x in view.spans()], f"buffer shown at {n} is not s.at({n})"
    assert pg.get_attribute("#state-data", "data-tokens") == str(view.tokens)
    assert f"Position {n:,} of" in pg.inner_text("#event")
    assert pg.url.endswith(f"?at={n}") or f"?at={n}#" in pg.url


def _pixels_near(pg, png: bytes, rgb: tuple[int, int, int], alpha: float, tol: int = 16) -> int:
    """Decode the screenshot in the browser (a canvas) and count pixels near ``rgb`` at ``alpha``."""
    target = [round(alpha * v + (1 - alpha) * 255) for v in rgb]
    return pg.evaluate(
        """async ([src, t, tol]) => {
            const img = new Image(); img.src = src; await img.decode();
            const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data; let n = 0;
            for (let i = 0; i < d.length; i += 4)
              if (Math.abs(d[i] - t[0]) <= tol && Math.abs(d[i + 1] - t[1]) <= tol && Math.abs(d[i + 2] - t[2]) <= tol) n++;
            return n; }""",
        ["data:image/png;base64," + base64.b64encode(png).decode(), target, tol],
    )


def test_scrub_with_the_keyboard_click_a_span_and_blame(server, page):
    base, ledger = server
    s = ledger.session("demo-naive")
    first_rewrite = next(e.position for e in s.events() if e.type == "Rewritten")
    start = first_rewrite - 3
    page.goto(f"{base}/s/demo-naive?at={start}")
    page.wait_for_selector("html[data-rendered=ok]", state="attached")
    page.wait_for_selector("#curve svg")
    _matches(page, s, start)

    page.keyboard.press("ArrowRight")
    _wait_at(page, start + 1)
    _matches(page, s, start + 1)
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    _wait_at(page, start - 1)
    _matches(page, s, start - 1)

    # Shift: the end of the next compaction (the first rewrite and what came with it)
    expected = data.seek_compaction(s, start - 1, 1)
    assert expected is not None and expected >= first_rewrite
    page.keyboard.press("Shift+ArrowRight")
    _wait_at(page, expected)
    _matches(page, s, expected)
    assert "d1" in _shown_ids(page)
    back = data.seek_compaction(s, expected, -1)
    page.keyboard.press("Shift+ArrowLeft")
    if back is None:
        page.wait_for_selector("#event p.meta:has-text('no previous compaction')")
        assert _at(page) == expected
    else:
        _wait_at(page, back)
        _matches(page, s, back)
    page.keyboard.press("End")
    _wait_at(page, s.position)
    _matches(page, s, s.position)
    page.keyboard.press("Home")
    _wait_at(page, 1)
    _matches(page, s, 1)

    # the slider and the position box land on the same states
    page.fill("#pos", str(first_rewrite))
    page.press("#pos", "Enter")
    page.dispatch_event("#pos", "change")
    _wait_at(page, first_rewrite)
    _matches(page, s, first_rewrite)

    # a span: its panel (who wrote it, lineage, grounding) and its URL
    page.click("#d1 .sh")
    page.wait_for_selector("#panel[data-lineage=d1]")
    panel = page.inner_text("#panel")
    d1 = s.at(first_rewrite).span("d1")
    assert "derived" in panel and "naive-summarizer" in panel and "Lineage" in panel and "Grounding" in panel
    page.wait_for_selector("#panel[data-grounding=d1] ol.grounding", state="attached")  # inline, or fetched after
    assert page.eval_on_selector("#panel pre.full", "e => e.textContent") == d1.text
    assert page.url.endswith(f"?at={first_rewrite}#d1")
    assert page.get_attribute("#d1", "class").split().count("selected") == 1

    # blame: the same hits as s.blame at this position
    needle = "Summary of earlier turns"
    page.fill("#blame-q", needle)
    page.press("#blame-q", "Enter")
    page.wait_for_selector("#blame-results[data-query]")
    shown = page.eval_on_selector_all("#blame-results a.sref", "els => els.map(e => e.textContent)")
    assert shown == [h.span_id for h in s.blame(needle, at=first_rewrite)][:30] and shown
    # a blame hit's link opens that span
    page.click("#blame-results a.sref >> nth=0")
    page.wait_for_selector(f"#panel[data-span={shown[0]}]")

    # the curve: click a rewrite marker to jump there
    page.click(f"#curve rect.marker-Rewritten[data-at='{first_rewrite}']", force=True)
    _wait_at(page, first_rewrite)

    # diff between two positions
    page.fill("#diff-a", str(first_rewrite - 1))
    page.fill("#diff-b", str(first_rewrite))
    page.click("#diff-form button")
    page.wait_for_selector("#diff-results table.diff")
    assert "rewritten" in page.inner_text("#diff-results")
    assert page.problems == [], page.problems


def test_a_shared_url_opens_the_same_state_and_span(server, page):
    base, ledger = server
    s = ledger.session("demo-guarded")
    d = next(e for e in s.events() if e.type == "Rewritten")
    page.goto(f"{base}/s/demo-guarded?at={d.position}#{d.span_id}")
    page.wait_for_selector(f"#panel[data-span={d.span_id}]")
    _matches(page, s, d.position)
    assert page.problems == [], page.problems


def test_sessions_page_filters_and_sorts(server, page):
    base, ledger = server
    page.goto(base + "/")
    page.wait_for_selector("html[data-rendered=ok]", state="attached")
    names = page.eval_on_selector_all("#sessions tbody tr td:first-child a", "els => els.map(e => e.textContent)")
    assert sorted(names) == sorted(i.name for i in ledger.sessions())
    page.fill("#filter", "naive")
    visible = page.eval_on_selector_all("#sessions tbody tr:not([hidden]) a", "els => els.map(e => e.textContent)")
    assert visible == ["demo-naive"]
    page.fill("#filter", "")
    page.click("#sessions th[data-key=events]")
    page.click("#sessions th[data-key=events]")  # descending
    order = page.eval_on_selector_all("#sessions tbody tr td:first-child a", "els => els.map(e => e.textContent)")
    events = {i.name: i.position for i in ledger.sessions()}
    assert order == sorted(events, key=lambda n: -events[n])
    page.click("text=demo-naive")
    page.wait_for_selector("#curve svg")
    assert _at(page) == events["demo-naive"]
    assert page.problems == [], page.problems


def test_screenshot_shows_the_curve_and_the_buffer(server, page):
    base, ledger = server
    s = ledger.session("demo-naive")
    last_rewrite = [e.position for e in s.events() if e.type == "Rewritten"][-1]
    page.goto(f"{base}/s/demo-naive?at={last_rewrite}")
    page.wait_for_selector("#curve svg")
    page.click(f"#{s.event(last_rewrite).span_id} .sh")
    page.wait_for_selector("#panel[data-lineage]")
    page.evaluate("window.scrollTo(0, 0)")
    n_points = int(page.get_attribute("#curve svg", "data-points"))
    assert n_points >= s.position * 0.9  # a short session: every position is a point
    shot = page.screenshot()
    assert len(shot) > 20_000
    observed = _pixels_near(page, shot, OBSERVED_RGB, 0.85)
    derived = _pixels_near(page, shot, DERIVED_RGB, 1.0)
    assert observed > 20_000, f"only {observed} pixels of the observed-tokens area"
    assert derived > 500, f"only {derived} pixels of derived colour (the area and the derived spans' borders)"
    if os.environ.get("CTXLEDGER_DOCS_IMG"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        (DOCS_IMG / "serve-session.png").write_bytes(shot)
        page.goto(base + "/")
        page.wait_for_selector("html[data-rendered=ok]", state="attached")
        page.set_viewport_size({"width": 1400, "height": 330})
        (DOCS_IMG / "serve-sessions.png").write_bytes(page.screenshot())
    assert page.problems == [], page.problems


def test_hostile_text_never_runs_in_the_browser(browser, tmp_path):
    """A session whose name, texts, meta and authors carry script tags, attribute breakers and an
    RTL override: nothing runs (no dialog, no console error) and the override is shown, not obeyed."""
    import uvicorn

    from engine.viewer.app import create_app
    from engine.viewer.pages import url
    from test_serve import HOSTILE_NAME, _hostile_store  # pytest puts tests/ on sys.path

    ledger = _hostile_store(tmp_path)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(create_app(ledger, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    ctx = browser.new_context()
    pg = ctx.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        root = f"http://127.0.0.1:{sock.getsockname()[1]}"
        pg.goto(root + "/")
        pg.wait_for_selector("html[data-rendered=ok]", state="attached")
        pg.goto(root + url("s", HOSTILE_NAME) + "?at=3")
        pg.wait_for_selector("#curve svg")
        pg.click("#o1 .sh")
        pg.wait_for_selector("#panel[data-span=o1]")
        pg.fill("#blame-q", "script")
        pg.press("#blame-q", "Enter")
        pg.wait_for_selector("#blame-results[data-query]")
        assert dialogs == [] and errors == []
        assert pg.evaluate("document.querySelectorAll('img').length") == 0
        assert pg.evaluate("document.querySelectorAll('script:not([src])').length") == 0
        assert "⟨U+202E⟩" in pg.inner_text("#o1") and "<script>alert(1)</script>" in pg.inner_text("#o1")
    finally:
        ctx.close()
        srv.should_exit = True
        thread.join(10)
        sock.close()
        ledger.close()
