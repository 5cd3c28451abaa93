"""Transcript import (issue 11): Claude Code JSONL into a SQLite ledger, exact token counts included.

    .venv/bin/python benchmarks/bench_import.py            # 3 / 30 / 300 MB
    .venv/bin/python benchmarks/bench_import.py --quick    # 3 / 30 MB
    .venv/bin/python benchmarks/bench_import.py --sizes 3  # chosen sizes (MB)

The transcripts are generated with the proportions of the real Claude Code 2.1.39 session in
tests/data (by bytes: ~40% progress lines, ~37% tool results with their structured copy, ~14% tool
calls, ~6% assistant text, snapshots, user turns), with an automatic compaction every ~1.5 MB.
Each size runs in its own subprocess so its peak RSS is its own (memory flat = the same peak for
3 and 300 MB). Side by side, in the same run:

- ours: ``import_path`` (validating pass + writing pass, o200k_base counts, SQLite file);
- baseline "parse only": ``json.loads`` of every line (what reading the file costs at all);
- baseline "naive import": every line parsed and inserted as a row into sqlite3 (no spans, no
  tokens, no checks): the cheapest way to "store" a transcript.

Then the audit of the imported 3 MB session (target <= 2 s). Writes the ``import`` section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _results import machine, write_section  # noqa: E402

# The full real session lives outside the repository on the development machine; measured when present.
REAL = Path(os.environ.get("CTXLEDGER_REAL_TRANSCRIPT", "/work/shared/data/transcripts/claude_spotter_ae4a77f8_manual.jsonl"))
SID = "5f0c4b7e-1d2a-4e3b-9c8d-7a6b5c4d3e2f"
WORDS = (
    "the billing-api returned 503 upstream timeout after 2500 ms retry deploy auth-service config "
    "yaml migration 0047 started completed rows rewritten request id cache miss latency p99 file "
    "def return import class self value error test passed failed function module path src lib "
    "update status pending running kubectl logs grep tail journalctl order invoice customer"
).split()


def _words(rng: random.Random, n: int) -> str:
    """Prose-like filler with a number every ~40 words (about the density of the real session)."""
    out = []
    for i in range(n):
        out.append(rng.choice(WORDS) if i % 40 != 17 else f"{rng.randint(10, 99999)}")
    return " ".join(out)


def generate(path: Path, megabytes: float, seed: int = 11) -> int:
    """A Claude Code transcript of about ``megabytes`` MB; returns the number of lines."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/USER/proj", "sessionId": SID,
            "version": "2.1.39", "gitBranch": "main"}
    size = lines = turn = 0
    since_compact = 0
    parent = None
    with open(path, "w") as f:
        def put(d: dict) -> None:
            nonlocal size, lines, parent, since_compact
            s = json.dumps(d) + "\n"
            f.write(s)
            size += len(s)
            since_compact += len(s)
            lines += 1
            parent = d.get("uuid", parent)

        def line(kind: str, **kw) -> dict:
            return {"parentUuid": parent, **base, "type": kind, "uuid": f"u-{lines:09d}",
                    "timestamp": f"2026-11-03T{(lines // 3600) % 24:02d}:{(lines // 60) % 60:02d}:{lines % 60:02d}.000Z", **kw}

        recent: list[str] = []  # tool outputs since the last compaction: what its summary restates
        while size < target:
            turn += 1
            if turn % 20 == 1:
                put(line("user", message={"role": "user", "content": _words(rng, 40)}))
            mid = f"msg_{turn:08d}"
            put(line("assistant", requestId=f"req_{turn}", message={"id": mid, "role": "assistant", "model": "claude-opus-4-5",
                     "content": [{"type": "text", "text": _words(rng, 120)}], "usage": {"input_tokens": 9, "output_tokens": 9}}))
            tid = f"toolu_{turn:08d}"
            put(line("assistant", requestId=f"req_{turn}", message={"id": mid, "role": "assistant", "model": "claude-opus-4-5",
                     "content": [{"type": "tool_use", "id": tid, "name": "Bash",
                                  "input": {"command": _words(rng, 25), "description": _words(rng, 8)}}]}))
            for _ in range(7):
                put(line("progress", data={"type": "hook_progress", "hookEvent": "PostToolUse",
                                           "hookName": "PostToolUse:Bash", "command": "/home/USER/.claude/hooks/x.sh"},
                         parentToolUseID=tid, toolUseID=tid))
            out = _words(rng, 260)
            recent.append(out)
            put(line("user", message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": out}]},
                     toolUseResult={"stdout": out, "stderr": "", "interrupted": False}, sourceToolAssistantUUID=parent))
            if turn % 10 == 0:
                f.write(json.dumps({"type": "file-history-snapshot", "messageId": mid,
                                    "snapshot": {"messageId": mid, "trackedFileBackups": {
                                        f"src/f{i}.py": {"backupFileName": f"{i:016x}@v2", "version": 2} for i in range(20)}}}) + "\n")
                lines += 1
            if since_compact > 1_500_000:
                since_compact = 0
                put({**line("system", subtype="compact_boundary", content="Conversation compacted",
                            compactMetadata={"trigger": "auto", "preTokens": 160000}), "parentUuid": None})
                summary_line = line("user", isCompactSummary=True, message={"role": "user", "content":
                    "This session is being continued from a previous conversation that ran out of context. "
                    "The summary below covers the earlier portion of the conversation.\n\nSummary:\n"
                    + "\n".join(" ".join(rng.choice(recent).split()[k:k + 30]) for k in range(0, 900, 30))
                    + "\n\nPlease continue the conversation from where we left off without "
                    "asking the user any further questions."})
                put(summary_line)
                recent = []
    return lines


def run_one(megabytes: float, workdir: Path) -> dict:
    """In this (fresh) process: generate, then baselines and ours, then the audit."""
    from engine import Ledger
    from engine.importers import import_path

    src = workdir / f"{SID}.jsonl"
    n_lines = generate(src, megabytes)
    size = src.stat().st_size
    with open(src, "rb") as f:  # warm the page cache for every contender alike (1 MB at a time)
        while f.read(1 << 20):
            pass

    # ours first: the process's peak RSS after it is ours alone (the baselines come after)
    ledger = Ledger.open(f"sqlite:///{workdir / 'ours.db'}")
    ledger.counter.count("warm up the tokenizer")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t, c = time.perf_counter(), time.process_time()
    result = import_path(ledger, src, format="claude-code")
    ours_s, ours_cpu = time.perf_counter() - t, time.process_time() - c
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = result.report

    t = time.perf_counter()
    with open(src, "rb") as f:
        for row in f:
            json.loads(row)
    parse_s = time.perf_counter() - t

    db = sqlite3.connect(workdir / "naive.db")
    db.execute("create table lines (n integer primary key, type text, body text)")
    t = time.perf_counter()
    with open(src, "rb") as f, db:
        batch = []
        for i, row in enumerate(f):
            d = json.loads(row)
            batch.append((i, d.get("type"), row.decode()))
            if len(batch) == 1000:
                db.executemany("insert into lines values (?, ?, ?)", batch)
                batch.clear()
        db.executemany("insert into lines values (?, ?, ?)", batch)
    naive_s = time.perf_counter() - t
    db.close()

    out = {
        "mb": size / 1e6, "lines": n_lines, "parse_s": parse_s, "naive_s": naive_s, "ours_s": ours_s, "ours_cpu": ours_cpu,
        "spans": report.spans, "tokens": report.tokens, "compactions": report.compactions,
        "events": result.session.position, "rss_before_mb": rss_before / 1024, "rss_peak_mb": rss_after / 1024,
        "exact": bool(getattr(ledger.counter, "exact", False)), "counter": getattr(ledger.counter, "name", "?"),
    }
    if megabytes <= 3.5:
        s = ledger.session(result.session.name)
        t, c = time.perf_counter(), time.process_time()
        audit = s.audit()
        out["audit_s"], out["audit_cpu"] = time.perf_counter() - t, time.process_time() - c
        out["audit_findings"] = len(audit.findings)
        out["audit_derived"] = audit.derived_checked
    ledger.close()
    return out


NOTE = (
    "Where the time goes (cProfile of a 15 MB import): about a third reading and parsing (two passes: the "
    "first validates every line before anything is written), the rest exact token counting (o200k_base) and "
    "the ledger's writes. Under this load (4-6 on 2 cores, other work running) wall time is up to 2x CPU time. "
    "The 305 MB run is slower per MB because its 199 compactions form one chain of summaries of summaries: each "
    "recorded rewrite carries the sources of the whole chain (up to ~97k span ids), so those events grow with "
    "the chain (quadratic in the number of compactions). Memory stays bounded: the peak RSS grows 50 MB for "
    "100x the input (the tokenizer's word cache and SQLite's cache fill up to their caps)."
)


def run_real() -> dict:
    from engine import Ledger
    from engine.importers import import_path

    ledger = Ledger.open("memory://")
    ledger.counter.count("warm up the tokenizer")
    t, c = time.perf_counter(), time.process_time()
    s = import_path(ledger, REAL, format="claude-code").session
    import_s, import_cpu = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    s.audit()
    audit_s, audit_cpu = time.perf_counter() - t, time.process_time() - c
    (d,) = [sp for sp in s.spans() if not sp.observed]
    return {"mb": REAL.stat().st_size / 1e6, "import_s": import_s, "import_cpu": import_cpu,
            "audit_s": audit_s, "audit_cpu": audit_cpu, "sources": len(d.sources)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", type=float, nargs="*")
    ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--real", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args()
    if args.child is not None:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(run_one(args.child, Path(tmp))))
        return
    if args.real:
        print(json.dumps(run_real()))
        return
    sizes = args.sizes or ([3, 30] if args.quick else [3, 30, 300])
    rows = []
    for mb in sizes:
        proc = subprocess.run([sys.executable, __file__, "--child", str(mb)], capture_output=True, text=True,
                              env={**os.environ, "CTXLEDGER_NO_PROGRESS": "1"})
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"size {mb} MB failed")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{r['mb']:.1f} MB: ours {r['mb'] / r['ours_s']:.1f} MB/s, parse-only {r['mb'] / r['parse_s']:.1f} MB/s, "
              f"naive {r['mb'] / r['naive_s']:.1f} MB/s, peak RSS {r['rss_peak_mb']:.0f} MB", flush=True)
    load = os.getloadavg()
    lines = [
        "### Transcript import (issue 11)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_import.py{' --quick' if args.quick else ''}`",
        f"Machine: {machine()}; load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (`uptime`)",
        "",
        "Generated Claude Code transcripts (the real session's mix of line types, an automatic compaction every "
        "~1.5 MB) imported into a SQLite file with exact token counts "
        f"({rows[0]['counter']}, exact={rows[0]['exact']}). Each size in a fresh process.",
        "",
        "| transcript | lines | spans | tokens | compactions | ours (wall / CPU) | MB/s (wall / CPU) | parse only (json.loads) | naive (parse + sqlite3 rows) | ours / naive (wall) | peak RSS (before the import) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['mb']:.0f} MB | {r['lines']:,} | {r['spans']:,} | {r['tokens']:,} | {r['compactions']} | "
            f"{r['ours_s']:.2f} s / {r['ours_cpu']:.2f} s | **{r['mb'] / r['ours_s']:.1f}** / {r['mb'] / r['ours_cpu']:.1f} | "
            f"{r['mb'] / r['parse_s']:.1f} MB/s | "
            f"{r['mb'] / r['naive_s']:.1f} MB/s | {r['naive_s'] / r['ours_s']:.2f}x | {r['rss_peak_mb']:.0f} MB ({r['rss_before_mb']:.0f} MB) |"
        )
    lines += ["", NOTE]
    small = next((r for r in rows if "audit_s" in r), None)
    if small:
        lines += ["", f"Audit of the imported {small['mb']:.0f} MB session ({small['events']:,} events, "
                      f"{small['audit_derived']} live derived span(s) checked, its sources ~1.5 MB of tool output): "
                      f"**{small['audit_s']:.2f} s wall, {small['audit_cpu']:.2f} s CPU** (target <= 2 s)."]
    if REAL.exists():
        real = json.loads(subprocess.run([sys.executable, __file__, "--real"], capture_output=True, text=True,
                                         check=True).stdout.strip().splitlines()[-1])
        lines += ["", f"The real Claude Code session ({REAL.name}, {real['mb']:.1f} MB, 2,385 lines, one manual "
                      f"compaction over {real['sources']} spans): import {real['import_s']:.2f} s wall / "
                      f"{real['import_cpu']:.2f} s CPU ({real['mb'] / real['import_cpu']:.1f} MB/s CPU), audit "
                      f"{real['audit_s']:.2f} s wall / {real['audit_cpu']:.2f} s CPU."]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("import", body)


if __name__ == "__main__":
    main()
