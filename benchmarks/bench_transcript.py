"""ctxledger vs a plain JSONL transcript: the same agent events appended both ways, side by side.

What a user would otherwise do is append each message to a JSON-lines file (the way Claude Code and
other agent CLIs keep their history). This benchmark writes the same events — the observations of the
demo's synthetic SRE session, realistic sizes from short user turns to bulky tool outputs — to:

- a JSONL file: one line per event, with an ``fsync`` per line (durable), with an ``fsync`` every 100
  lines (batched), and with no ``fsync`` at all (what a plain append gives you);
- a ctxledger session on SQLite: ``observe`` one event per transaction (durable: SQLite's default
  ``synchronous=FULL`` syncs the WAL at each commit), and 100 events per ``with s.batch():``.

It then reads everything back (parse every JSONL line / ``s.events()``) and rebuilds the buffer as
it was half-way (the ledger's time travel; a transcript has no buffer to rebuild, only lines to parse).

    python benchmarks/bench_transcript.py            # 5,000 events (durable: 1,000)
    python benchmarks/bench_transcript.py --quick    # 1,000 events (durable: 300)

Writes its table into benchmarks/RESULTS.md between <!-- bench:transcript --> markers.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _raw_sqlite as raw_sqlite  # noqa: E402
from _results import machine, write_section  # noqa: E402
from engine import EstimateCounter, Ledger  # noqa: E402
from engine.demo.workload import generate  # noqa: E402

BATCH = 100


def events(n: int) -> list[dict]:
    """``n`` agent events: the demo workload's observations, cycled (with a per-event suffix so no
    two texts are identical)."""
    wl = generate(7, 40, scale=1.0)
    turns = wl.turns()
    out = []
    for i in range(n):
        t = turns[i % len(turns)]
        out.append({"role": t.role, "kind": t.kind, "meta": t.meta, "text": f"{t.text}\n#{i}", "tokens": max(1, len(t.text) // 4)})
    return out


def _fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _disk(path: Path) -> int:
    return sum(os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s))


def jsonl_write(path: Path, evs: list[dict], fsync_every: int | None) -> float:
    _fresh(path)
    gc.collect()
    t0 = time.perf_counter()
    with open(path, "a", encoding="utf-8") as f:
        for i, e in enumerate(evs, 1):
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
            if fsync_every and i % fsync_every == 0:
                f.flush()
                os.fsync(f.fileno())
        f.flush()
        if fsync_every:
            os.fsync(f.fileno())
    return time.perf_counter() - t0


def jsonl_read(path: Path) -> float:
    t0 = time.perf_counter()
    with open(path, encoding="utf-8") as f:
        n = sum(1 for line in f if json.loads(line))
    assert n > 0
    return time.perf_counter() - t0


def ledger_write(path: Path, evs: list[dict], batch: int, counter=None) -> float:
    _fresh(path)
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=counter or EstimateCounter())
    s = ledger.create_session("bench")
    gc.collect()
    t0 = time.perf_counter()
    for start in range(0, len(evs), batch):
        with s.batch():
            for e in evs[start : start + batch]:
                s.observe(e["text"], role=e["role"], kind=e["kind"], meta=e["meta"],
                          tokens=None if counter is not None else e["tokens"])
    dt = time.perf_counter() - t0
    ledger.close()
    return dt


def sqlite_write(path: Path, rows: list[tuple]) -> float:
    """SQLite's own floor for the durable row: raw sqlite3 inserting the rows ctxledger stored, one per
    transaction, into the same table."""
    _fresh(path)
    con = raw_sqlite.connect(path)
    gc.collect()
    dt = sum(raw_sqlite.insert(con, [row]) for row in rows)
    con.close()
    return dt


def ledger_read(path: Path) -> tuple[float, float]:
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    s = ledger.session("bench")
    t0 = time.perf_counter()
    n = sum(1 for _ in s.events())
    read = time.perf_counter() - t0
    assert n == s.position
    t0 = time.perf_counter()
    view = s.at(s.position // 2)
    assert view.position == s.position // 2
    travel = time.perf_counter() - t0
    ledger.close()
    return read, travel


def _verdict(rows: list[tuple]) -> str:
    """What the numbers say, computed from them (not written in advance)."""
    durable, batched, plain, counted = (r[4] for r in rows)

    def x(ratio: float) -> str:
        return f"{1 / ratio:.1f}x the time" if ratio < 1 else f"{ratio:.1f}x less time"

    return (
        f"ctxledger takes {x(durable)} of a durable JSONL transcript per event, {x(batched)} when both batch "
        f"their syncs, and {x(plain)} of a JSONL append that never syncs. What that buys: every append is "
        "checked against the rules, hash-chained to its predecessor and folded into the live buffer (tokens by "
        "provenance, time travel, audit, blame); the transcript only stores lines. Counting exact tokens at "
        f"append time is the largest extra cost ({x(counted)} of a batched transcript): pass `tokens=` when "
        "the caller already has the count."
    )


def median(fn, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000 events (300 for the durable rows)")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    args = ap.parse_args()
    n = 1_000 if args.quick else 5_000
    n_durable = 300 if args.quick else 1_000
    runs = 5
    evs = events(n)
    durable = evs[:n_durable]
    text_bytes = sum(len(e["text"].encode()) for e in evs)
    with sqlite3.connect(":memory:") as con:
        sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[con.execute("PRAGMA synchronous").fetchone()[0]]

    with tempfile.TemporaryDirectory(prefix="ctxledger-bench-") as tmp:
        d = Path(tmp)
        jl, db = d / "transcript.jsonl", d / "ledger.db"
        rows = []

        def pair(what: str, count: int, j_fn, l_fn) -> None:
            # alternate the two sides, so a change in the machine's load hits both alike
            times = [(j_fn(), l_fn()) for _ in range(runs)]
            tj = statistics.median(t for t, _ in times)
            tl = statistics.median(t for _, t in times)
            rows.append((what, count, count / tj, count / tl, tj / tl))

        pair("durable: fsync per event / one event per transaction (target ≥ 0.8)", n_durable,
             lambda: jsonl_write(jl, durable, 1), lambda: ledger_write(db, durable, 1))
        # how much of the durable row is SQLite's own cost on this disk: the same rows, raw sqlite3
        rows_stored = raw_sqlite.stored_rows(db)
        floor = [(jsonl_write(jl, durable, 1), sqlite_write(d / "raw.db", rows_stored), ledger_write(db, durable, 1))
                 for _ in range(runs)]
        floor_of_jsonl = statistics.median(tj / tr for tj, tr, _ in floor)
        ours_of_floor = statistics.median(tr / tl for _, tr, tl in floor)
        pair(f"batched: fsync every {BATCH} / {BATCH} events per transaction", n,
             lambda: jsonl_write(jl, evs, BATCH), lambda: ledger_write(db, evs, BATCH))
        pair(f"no fsync (plain append) / {BATCH} events per transaction", n,
             lambda: jsonl_write(jl, evs, None), lambda: ledger_write(db, evs, BATCH))
        from engine.tokens import default_counter

        counter = default_counter()
        counter.count("warm up")  # load the rank file outside the timing
        pair(f"batched, ctxledger also counting exact tokens ({counter.name})", n,
             lambda: jsonl_write(jl, evs, BATCH), lambda: ledger_write(db, evs, BATCH, counter))

        jsonl_write(jl, evs, BATCH)
        ledger_write(db, evs, BATCH)
        disk_j, disk_l = _disk(jl), _disk(db)
        read_j = median(lambda: jsonl_read(jl), runs)
        read_l, travel = ledger_read(db)

    lines = [
        "### ctxledger vs a plain JSONL transcript (issue 5)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_transcript.py{' --quick' if args.quick else ''}`",
        f"Machine: {machine()}",
        "",
        f"Events: the observations of the demo's synthetic agent session (user turns, tool calls, tool outputs "
        f"of a few KB), {n:,} events, {text_bytes / n:,.0f} bytes of text on average. The same events, in the same "
        f"order, appended to a JSONL file and to a ctxledger session on SQLite (WAL, synchronous={sync}: the WAL "
        f"is synced at each commit). {runs} runs per row, the two sides alternating, a fresh file each run; medians.",
        "",
        "| what | events | JSONL events/s | ctxledger events/s | ratio (ctxledger ÷ JSONL) | ctxledger is |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for what, count, per_s_jsonl, per_s_ledger, ratio in rows:
        speed = f"{ratio:.2f}x as fast" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        lines.append(f"| {what} | {count:,} | {per_s_jsonl:,.0f} | {per_s_ledger:,.0f} | {ratio:.2f} | {speed} |")
    lines += [
        "",
        f"SQLite's own floor for the durable row on this machine: raw `sqlite3` inserting the rows ctxledger "
        f"stored, one per transaction, into the same table (WAL, synchronous=FULL) runs at **{floor_of_jsonl:.2f}** of "
        f"JSONL's durable rate, and ctxledger's durable `observe` at **{ours_of_floor:.2f}** of raw sqlite3 "
        f"({runs} alternating runs of the three, medians of the per-run ratios). A durable SQLite commit writes "
        "whole 4 KiB pages (the table's and its primary-key index's) to the WAL before its fsync; a JSONL "
        "line writes its own bytes.",
        "",
        "| after writing | JSONL | ctxledger |",
        "| --- | ---: | ---: |",
        f"| bytes on disk per byte of text | {disk_j / text_bytes:.2f} | {disk_l / text_bytes:.2f} |",
        f"| read every event back | {read_j * 1000:,.0f} ms | {read_l * 1000:,.0f} ms |",
        f"| the buffer as it was half-way | not possible (no buffer, only lines) | {travel * 1000:,.0f} ms |",
        "",
        _verdict(rows),
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("transcript", body)


if __name__ == "__main__":
    main()
