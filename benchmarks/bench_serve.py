"""``ctxledger serve`` on a long session: the session page at random positions, against the
time travel it is built on, and one step in a real browser.

    python benchmarks/bench_serve.py                    # 1M events (the session is built once, ~1 min)
    python benchmarks/bench_serve.py --events 100000    # smaller
    python benchmarks/bench_serve.py --no-browser       # skip the Chromium part

Server time is the app's own ``Server-Timing`` header (request in to response out, everything the
page needs: opening the session head, ``s.at(n)``, rendering the buffer and the event to HTML).
The baseline, side by side at the same positions: ``ledger.session(name).at(n).spans()``, the
time travel alone. Writes its table into benchmarks/RESULTS.md between <!-- bench:serve --> markers.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from engine import EstimateCounter, Ledger  # noqa: E402

BATCH = 100
WORDS = ("billing-api auth-service returned 503 timeout migration 0042 started at 14:02 retry p99 latency deploy "
         "v2.3.1 /etc/app/config.yaml user request fix error ticket INC-4411 cache miss rollback").split()


def build(path: Path, n_events: int, live_window: int = 200) -> float:
    """An agent session of ``n_events``: observations, prunes beyond a live window of ~200 spans,
    a rewrite every 97 observations and a re-derivation of an older summary now and then."""
    rng = random.Random(7)
    t0 = time.perf_counter()
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    s = ledger.create_session("long")
    i = 0
    while s.position < n_events:
        with s.batch():
            for _ in range(BATCH):
                text = f"[{i}] " + " ".join(rng.choice(WORDS) for _ in range(60))
                s.observe(text[:400], tokens=100, role="tool" if i % 2 else "user",
                          kind="tool_result" if i % 2 else "message", meta={"tool_call_id": f"c{i}"} if i % 2 else {})
                i += 1
                live = s.state.live
                if len(live) > live_window:
                    s.prune(min(live.values(), key=lambda x: x.order).id, reason="window")
                if i % 97 == 0:
                    observed = [x for x in s.spans() if x.observed][-6:-2]
                    if len(observed) == 4:
                        s.rewrite([x.id for x in observed], "summary " + text[:120], by="bench", tokens=30)
                if i % 1000 == 0:
                    derived = [x for x in s.spans() if x.derived]
                    if derived:
                        s.rederive(derived[0].id, text="re-derived " + text[:80], by="bench", tokens=25)
    ledger.close()
    return time.perf_counter() - t0


OTHERS = 20  # small sessions beside the long one: the sessions page and the all-session search see them


def add_others(path: Path, n: int = OTHERS, events: int = 500) -> None:
    """``other-1`` .. ``other-n`` (``events`` each), where missing: the store holds more than one session."""
    rng = random.Random(5)
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    for k in range(1, n + 1):
        if f"other-{k}" in ledger:
            continue
        s = ledger.create_session(f"other-{k}")
        with s.batch():
            for i in range(events - 1):
                s.observe(f"[{k}.{i}] " + " ".join(rng.choice(WORDS) for _ in range(30)), tokens=50,
                          role="tool" if i % 2 else "user", kind="tool_result" if i % 2 else "message",
                          meta={"tool_call_id": f"c{i}"} if i % 2 else {})
    ledger.close()


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def server_side(url: str, positions: list[int]) -> dict:
    import httpx
    import uvicorn

    from engine.viewer.app import create_app

    ledger = Ledger.open(url)
    s = ledger.session("long")
    head = s.position
    # baseline first, then the app, then the baseline again: the better of the two baseline runs
    def baseline() -> list[float]:
        out = []
        for n in positions:
            t0 = time.perf_counter()
            ledger.session("long").at(n).spans()
            out.append((time.perf_counter() - t0) * 1000)
        return out

    base1 = baseline()
    n_sessions = len(ledger.sessions())
    listing = []
    for _ in range(50):
        t0 = time.perf_counter()
        ledger.sessions()
        listing.append((time.perf_counter() - t0) * 1000)
    scan = []
    for _ in range(3):
        t0 = time.perf_counter()
        list(ledger.store.started_events())
        scan.append((time.perf_counter() - t0) * 1000)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(create_app(ledger, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    root = f"http://127.0.0.1:{sock.getsockname()[1]}"
    results: dict[str, list[float]] = {"page": [], "page_wall": [], "state": [], "api_at": []}
    sizes = []
    with httpx.Client(base_url=root, timeout=60) as c:
        t0 = time.perf_counter()
        curve = c.get("/api/s/long/curve")
        curve_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        c.get("/api/s/long/curve")
        curve_again = time.perf_counter() - t0
        for n in positions:
            t0 = time.perf_counter()
            r = c.get(f"/s/long?at={n}")
            results["page_wall"].append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200
            results["page"].append(float(r.headers["server-timing"].split("dur=")[1]))
            sizes.append(len(r.content))
            r = c.get(f"/s/long/state?at={n}")
            results["state"].append(float(r.headers["server-timing"].split("dur=")[1]))
            r = c.get(f"/api/s/long/at/{n}")
            results["api_at"].append(float(r.headers["server-timing"].split("dur=")[1]))
        seek = []
        for n in positions[:50]:
            r = c.get(f"/api/s/long/seek?from={n}&dir=1")
            seek.append(float(r.headers["server-timing"].split("dur=")[1]))
        more = _views(c, positions[:50])
    base2 = baseline()
    srv.should_exit = True
    thread.join(10)
    ledger.close()
    base = base1 if statistics.median(base1) <= statistics.median(base2) else base2
    return {
        "head": head,
        "sessions": n_sessions,
        "ledger_sessions": listing,
        "scan_sessions": scan,
        "baseline": base,
        **more,
        **results,
        "seek": seek,
        "bytes": statistics.median(sizes),
        "curve_first_s": curve_first,
        "curve_again_ms": curve_again * 1000,
        "curve_points": len(curve.json()["points"]),
        "curve_markers": len(curve.json()["markers"]),
    }


SEARCHES = ["rollback", "INC-4411 migration", "503 timeout", "p99 latency deploy", "re-derived summary"]
FILTERS = ["", "&role=tool", "&kind=message", "&provenance=derived", "&provenance=observed&role=user"]


def _dur(r) -> float:
    assert r.status_code == 200, r.text[:300]
    return float(r.headers["server-timing"].split("dur=")[1])


def _views(c, positions: list[int]) -> dict:
    """The conversation view, compare, head, search with filters and the integrity verdict."""
    out: dict = {"conversation": [], "conversation_bytes": [], "compare": [], "head": [], "search": [],
                 "search_wall": [], "search_server": [], "sessions_page": [], "api_sessions": [],
                 "search_all_wall": [], "search_all_server": []}
    for n in positions:
        r = c.get(f"/s/long/conversation?at={n}")
        out["conversation"].append(_dur(r))
        out["conversation_bytes"].append(len(r.content))
        out["compare"].append(_dur(c.get(f"/compare?a=long&at_a={n}&at_b={max(1, n - 500)}")))
        out["head"].append(_dur(c.get("/api/s/long/head")))
    t0 = time.perf_counter()
    _dur(c.get("/api/s/long/search?q=rollback", timeout=1200))  # the first search builds the sidecar index
    out["search_first_s"] = time.perf_counter() - t0
    for _ in range(4):
        for q in SEARCHES:
            for f in FILTERS:
                t0 = time.perf_counter()
                r = c.get(f"/s/long/search?q={q}{f}")
                out["search_wall"].append((time.perf_counter() - t0) * 1000)
                out["search_server"].append(_dur(r))
    for _ in range(50):  # the sessions page: the sessions projection, then each session's head opened
        out["sessions_page"].append(_dur(c.get("/")))
        out["api_sessions"].append(_dur(c.get("/api/sessions")))
    t0 = time.perf_counter()
    _dur(c.get("/search?q=rollback", timeout=1200))  # builds the other sessions' sidecar indexes
    out["search_all_first_s"] = time.perf_counter() - t0
    for _ in range(4):  # search over every session of the store, the same queries and filters
        for q in SEARCHES:
            for f in FILTERS:
                t0 = time.perf_counter()
                r = c.get(f"/search?q={q}{f}")
                out["search_all_wall"].append((time.perf_counter() - t0) * 1000)
                out["search_all_server"].append(_dur(r))
    t0 = time.perf_counter()
    verdict = c.get("/api/s/long/integrity").json()
    out["integrity_first_s"] = time.perf_counter() - t0
    out["integrity_ok"] = verdict["ok"]
    t0 = time.perf_counter()
    c.get("/api/s/long/integrity")
    out["integrity_again_ms"] = (time.perf_counter() - t0) * 1000
    return out


def browser_steps(url: str, steps: int = 60) -> dict | None:
    chromium = "/usr/bin/chromium"
    if not os.access(chromium, os.X_OK):
        return None
    import uvicorn
    from playwright.sync_api import sync_playwright

    from engine.viewer.app import create_app

    ledger = Ledger.open(url)
    head = ledger.session("long").position
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(create_app(ledger, fleet=False), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    root = f"http://127.0.0.1:{sock.getsockname()[1]}"
    rng = random.Random(3)
    wall, inpage = [], []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        start = rng.randint(2, head - steps - 2)
        pg.goto(f"{root}/s/long?at={start}")
        pg.wait_for_selector("#curve svg", timeout=120_000)  # the curve computed once (cached)
        for k in range(steps):
            if k % 10 == 0 and k:  # jump elsewhere now and then: random positions, not one warm stretch
                start = rng.randint(2, head - steps - 2)
                pg.goto(f"{root}/s/long?at={start}")
                pg.wait_for_selector("html[data-rendered=ok]", state="attached")
            n = int(pg.get_attribute("html", "data-at")) + 1
            t0 = time.perf_counter()
            pg.keyboard.press("ArrowRight")
            pg.wait_for_selector(f"html[data-at='{n}']:not([data-loading])", state="attached")
            wall.append((time.perf_counter() - t0) * 1000)
            inpage.append(float(pg.get_attribute("html", "data-step-ms")))
        b.close()
    srv.should_exit = True
    thread.join(10)
    ledger.close()
    return {"wall": wall, "inpage": inpage}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--db", default=None, help="Where to keep the built session (reused when it exists).")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="Print the table, do not touch RESULTS.md.")
    args = ap.parse_args()
    path = Path(args.db or Path(tempfile.gettempdir()) / f"ctxledger-bench-serve-{args.events}.db")
    build_s = None
    if not path.exists():
        build_s = build(path, args.events)
        print(f"built {args.events:,} events in {build_s:.0f} s", file=sys.stderr)
    url = f"sqlite:///{path}"
    projection_s = None
    with sqlite3.connect(path) as con:  # a store written before the sessions projection: built on this open
        missing = not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'ctxledger_sessions'").fetchone()
    if missing:
        t0 = time.perf_counter()
        Ledger.open(url).close()
        projection_s = time.perf_counter() - t0
    add_others(path)
    head = Ledger.open(url).session("long").position
    rng = random.Random(11)
    positions = [rng.randint(2, head) for _ in range(args.samples)]
    load = os.getloadavg()
    srv = server_side(url, positions)
    br = None if args.no_browser else browser_steps(url)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    med = statistics.median
    lines = [
        "### `ctxledger serve`: the session page at any position (issue 16)",
        "",
        f"Command: `python benchmarks/bench_serve.py{'' if args.events == 1_000_000 else f' --events {args.events}'}` · {machine()} · "
        f"load average before the run {load[0]:.2f}, after: `{uptime}`",
        "",
        f"Session: {head:,} events in one SQLite file (observations of 400 bytes, ~200 live spans: prunes beyond the window, "
        f"a rewrite every 97 observations, a re-derivation every 1,000){'' if build_s is None else f'; built in {build_s:.0f} s'}. "
        f"{args.samples} random positions; server time is the app's `Server-Timing` (request in, response out); "
        "the baseline is the time travel alone at the same positions, in the same process: "
        "`ledger.session(name).at(n).spans()`.",
        "",
        "| request | p50 ms | p95 ms | p50 vs baseline | target |",
        "|---|---:|---:|---:|---|",
        f"| baseline: `ledger.session(name).at(n).spans()` | {med(srv['baseline']):.2f} | {_pct(srv['baseline'], 0.95):.2f} | 1.0x | |",
        f"| `GET /s/long?at=n`, the session page (server time) | {med(srv['page']):.2f} | {_pct(srv['page'], 0.95):.2f} | "
        f"{med(srv['page']) / med(srv['baseline']):.1f}x | ≤ 100 ms p50 |",
        f"| the same, wall time at an HTTP client on loopback ({srv['bytes'] / 1000:.0f} KB) | {med(srv['page_wall']):.2f} | "
        f"{_pct(srv['page_wall'], 0.95):.2f} | {med(srv['page_wall']) / med(srv['baseline']):.1f}x | |",
        f"| `GET /s/long/state?at=n`, the fragment one step swaps in | {med(srv['state']):.2f} | {_pct(srv['state'], 0.95):.2f} | "
        f"{med(srv['state']) / med(srv['baseline']):.1f}x | |",
        f"| `GET /api/s/long/at/n`, the buffer as JSON | {med(srv['api_at']):.2f} | {_pct(srv['api_at'], 0.95):.2f} | "
        f"{med(srv['api_at']) / med(srv['baseline']):.1f}x | |",
        f"| `GET /api/s/long/seek?dir=1`, end of the next compaction (50 positions) | {med(srv['seek']):.2f} | "
        f"{_pct(srv['seek'], 0.95):.2f} | | |",
    ]
    lines += [
        f"| `GET /`, the sessions page ({srv['sessions']} sessions; 50 requests) | {med(srv['sessions_page']):.2f} | "
        f"{_pct(srv['sessions_page'], 0.95):.2f} | | ≤ 100 ms p50 |",
        f"| `GET /api/sessions`, the same rows as JSON (50 requests) | {med(srv['api_sessions']):.2f} | "
        f"{_pct(srv['api_sessions'], 0.95):.2f} | | |",
        f"| `Ledger.sessions()` alone: the sessions projection (50 calls) | {med(srv['ledger_sessions']):.3f} | "
        f"{_pct(srv['ledger_sessions'], 0.95):.3f} | | |",
        f"| the same list the old way, a scan of the log for each `SessionStarted` (3 calls) | {med(srv['scan_sessions']):.1f} | "
        f"{max(srv['scan_sessions']):.1f} | | |",
        f"| `GET /s/long/conversation?at=n`, the conversation view (200 events, {med(srv['conversation_bytes']) / 1000:.0f} KB; "
        f"50 positions) | {med(srv['conversation']):.2f} | {_pct(srv['conversation'], 0.95):.2f} | "
        f"{med(srv['conversation']) / med(srv['baseline']):.1f}x | ≤ 100 ms p50 |",
        f"| `GET /compare?a=long&at_a=n&at_b=n-500`, two buffers side by side (50 positions) | {med(srv['compare']):.2f} | "
        f"{_pct(srv['compare'], 0.95):.2f} | {med(srv['compare']) / med(srv['baseline']):.1f}x | ≤ 100 ms p50 |",
        f"| `GET /api/s/long/head`, what *follow live* polls | {med(srv['head']):.2f} | {_pct(srv['head'], 0.95):.2f} | | |",
        f"| `GET /s/long/search?q=..&filters`, {len(SEARCHES)} queries x {len(FILTERS)} filter sets x 4, server time "
        f"| {med(srv['search_server']):.2f} | {_pct(srv['search_server'], 0.95):.2f} | | |",
        f"| the same search, end to end at an HTTP client on loopback | {med(srv['search_wall']):.2f} | "
        f"{_pct(srv['search_wall'], 0.95):.2f} | | ≤ 200 ms |",
        f"| `GET /search?q=..&filters`, over every session of the store, the same queries and filters, server time "
        f"| {med(srv['search_all_server']):.2f} | {_pct(srv['search_all_server'], 0.95):.2f} | | |",
        f"| the same, end to end at an HTTP client on loopback | {med(srv['search_all_wall']):.2f} | "
        f"{_pct(srv['search_all_wall'], 0.95):.2f} | | ≤ 200 ms |",
    ]
    if br is not None:
        lines.append(
            f"| one step (→) in headless Chromium, key press to the new buffer drawn, {len(br['wall'])} steps: wall time at Playwright | "
            f"{med(br['wall']):.1f} | {_pct(br['wall'], 0.95):.1f} | | ≤ 150 ms |"
        )
        lines.append(
            f"| the same step measured inside the page: key event to the next frame after the new buffer is in the DOM | {med(br['inpage']):.1f} | "
            f"{_pct(br['inpage'], 0.95):.1f} | | |"
        )
    lines += [
        "",
        f"The live-token curve is the one whole-log read: {srv['curve_first_s']:.1f} s the first time for this session "
        f"(one streaming pass, {srv['curve_points']:,} points and {srv['curve_markers']:,} markers kept), then "
        f"{srv['curve_again_ms']:.1f} ms from the cache until the session's head moves; the page does not wait for it "
        "(the script fetches it after the page is shown). Blame, lineage, diff and audit are whole-log folds too and "
        "run only when asked for.",
        "",
        "The sessions page and `ctxledger sessions` read the store's sessions projection (one row per session, "
        "written in the append's transaction), not the log: "
        + (f"this store predated it, and its first open built it from the log in {projection_s:.1f} s (once); "
           if projection_s is not None else "")
        + f"the store holds {srv['sessions']} sessions: `long` and {OTHERS} of 500 events.",
        "",
        f"The search index (FTS5 in a sidecar file beside the store) is built by the first search: {srv['search_first_s']:.1f} s "
        "for this session, then caught up incrementally; the searches above ran on the built index. The integrity "
        f"verdict the page shows (a hash-chain walk of the whole log) took {srv['integrity_first_s']:.1f} s the first "
        f"time (chain {'intact' if srv['integrity_ok'] else 'BROKEN'}), {srv['integrity_again_ms']:.1f} ms from the cache; "
        "the page fetches it after it is shown, like the curve.",
    ]
    if br is not None:
        lines += [
            "",
            f"The page at a random position of this {head:,}-event session: {med(srv['page']):.1f} ms of server time (p50; "
            f"target 100 ms), {med(srv['page']) / med(srv['baseline']):.1f}x the time travel it is built on (the rest is "
            f"rendering the buffer to {srv['bytes'] / 1000:.0f} KB of escaped HTML). One step in the browser: "
            f"{med(br['inpage']):.0f} ms from the key event to the frame that shows the new buffer (p50; target 150 ms). "
            f"The Playwright row is what a test harness sees around the same step: each `keyboard.press` and "
            f"`wait_for_selector` is a round trip to the browser process, and those round trips, not the page, are most "
            f"of its {med(br['wall']):.0f} ms; it is listed so the in-page number can be checked against an outside clock.",
        ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("serve", text)


if __name__ == "__main__":
    main()
