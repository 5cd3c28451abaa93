"""Forensics on long sessions: audit, blame, report, fleet and lost beside export, side by side.

    python benchmarks/bench_forensics.py                  # the real session 1x, 4x and 8x
    python benchmarks/bench_forensics.py --copies 1 4     # a quicker look
    python benchmarks/bench_forensics.py --profile audit  # also cProfile the first audit at the largest size
    python benchmarks/bench_forensics.py --real --baseline DIR  # first audit of each real session vs export,
                                                               # this tree beside the checkout in DIR

The session: the real shared Claude Code session (``/work/shared/data/transcripts/...jsonl`` with its
``subagents/`` dir) repeated N times into one transcript: each copy's lines get fresh uuids, message,
request and tool ids and timestamps a day later than the previous copy's, so the copies import as one
session with N successive compactions. It is imported with the default SQLite store, then each
command is run as a user runs it (``ctxledger ...`` in a fresh process) and timed with the wall
clock, in this order: ``export`` (the baseline), ``audit`` (first run: nothing kept yet; second run:
the kept grounding results), ``blame SESSION "tail_wrapper.sh"`` (the issue's needle, which this
session does not hold) and ``blame SESSION set_attributes_safely`` (held by the live summary, so the
checker's findings on it are read), ``report``, ``fleet`` (its first
run: the view is folded from the empty table) and ``lost``. Ratios are to ``export`` of the same
session in the same run.

Writes its table into benchmarks/RESULTS.md between <!-- bench:forensics --> markers.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "transcripts" / "claude_spotter_ae4a77f8_manual.jsonl"
SUBAGENTS = REAL.parent / REAL.stem / "subagents"
CHECKER_TIME = str(ROOT / "benchmarks" / "_checker_time.py")  # ctxledger, noting the checker's share
NEEDLE = "tail_wrapper.sh"  # the blame (not in this session: every span is looked at, none holds it)
IN_SUMMARY = "set_attributes_safely"  # in every copy's summary: that blame judges the live summary
SESSION = "long"

_IDS = re.compile(rb'"(uuid|parentUuid|logicalParentUuid|messageId|requestId|tool_use_id|id)":"')
_TIME = re.compile(rb'"timestamp":"([0-9T:.\-]+)Z"')


def repeated(copies: int) -> bytes:
    """The real transcript ``copies`` times over: copy k's ids renamed and its times k days later."""
    lines = REAL.read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    for k in range(copies):
        if k == 0:
            out.extend(lines)
            continue
        tag = b"r%d-" % k
        day = timedelta(days=k)

        def later(m: re.Match) -> bytes:
            t = datetime.fromisoformat(m.group(1).decode()) + day
            return b'"timestamp":"' + t.isoformat(timespec="milliseconds").encode() + b'Z"'

        for raw in lines:
            raw = _IDS.sub(lambda m: m.group(0) + tag, raw).replace(b"toolu_", b"toolu_" + tag.rstrip(b"-"))
            out.append(_TIME.sub(later, raw))
    return b"".join(out)


CPU: dict[str, float] = {}  # label -> CPU seconds (user + system) of the last run under that label
CHECK: dict[str, float] = {}  # label -> CPU seconds of that run spent in the checker's run_checker


def run(args: list[str], db: str, cwd: Path, label: str = "", tree: Path = ROOT) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of one ``ctxledger`` process running the code of ``tree``; its CPU seconds go to
    ``CPU[label]`` (the machine is shared, so the CPU time is the steadier measure)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    note = cwd / "checker-time.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "CTXLEDGER_CHECKER_TIME": str(note), "CTXLEDGER_NO_PROGRESS": "1"}
    t = time.perf_counter()
    done = subprocess.run([sys.executable, CHECKER_TIME, "--db", db, *args], cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CHECK[label] = json.loads(note.read_text())["checker"] if note.exists() else 0.0
    note.unlink(missing_ok=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"ctxledger {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return elapsed, done


COMMANDS = [
    ("export", ["export", SESSION, "-o", "export.jsonl"]),
    ("audit (first)", ["audit", SESSION, "--json"]),
    ("audit (second)", ["audit", SESSION, "--json"]),
    ("blame", ["blame", SESSION, NEEDLE, "--json"]),
    ("blame (summary)", ["blame", SESSION, IN_SUMMARY, "--json"]),
    ("report", ["report", SESSION, "-o", "report.html"]),
    ("fleet (first)", ["fleet", "--json"]),
    ("lost", ["lost", SESSION, "--json"]),
    ("lost (second)", ["lost", SESSION, "--json"]),
]


def measure(copies: int, work: Path) -> dict:
    d = work / f"x{copies}"
    sid = REAL.stem
    (d / sid / "subagents").mkdir(parents=True)
    (d / f"{sid}.jsonl").write_bytes(repeated(copies))
    for f in SUBAGENTS.glob("*.jsonl"):
        (d / sid / "subagents" / f.name).write_bytes(f.read_bytes())
    db = f"sqlite:///{d / 'ledger.db'}"
    t_import, _ = run(["import", str(d / f"{sid}.jsonl"), "--session", SESSION], db, d)
    import shutil

    shutil.copy(d / "ledger.db", d / "never-audited.db")  # for the fleet's first run on an import nothing read yet
    row = {"copies": copies, "bytes": (d / f"{sid}.jsonl").stat().st_size, "import": t_import, "cpu": {}, "checker": {}}
    for label, args in COMMANDS:
        row[label], done = run(args, db, d, label)
        row["cpu"][label] = CPU[label]
        row["checker"][label] = CHECK[label]
        if label == "audit (first)":
            report = json.loads(done.stdout)
            row["derived"] = report.get("derived_checked", 0)
            row["findings"] = len(report.get("findings", []))
        if label == "audit (second)":
            again = json.loads(done.stdout)
            assert again.get("findings") == report.get("findings"), "the second audit differs from the first"
    label = "fleet (first, never audited)"
    row[label], _ = run(["fleet", "--json"], f"sqlite:///{d / 'never-audited.db'}", d, label)
    row["cpu"][label], row["checker"][label] = CPU[label], CHECK[label]
    # one more compaction: the transcript grows by one copy, the import takes only the new lines
    (d / f"{sid}.jsonl").write_bytes(repeated(copies + 1))
    run(["import", str(d / f"{sid}.jsonl"), "--session", SESSION], db, d)
    label = "audit (+1 compaction)"
    row[label], _ = run(["audit", SESSION, "--json"], db, d, label)
    row["cpu"][label] = CPU[label]
    row["checker"][label] = CHECK[label]
    return row


def profile(copies: int, work: Path, command: str) -> str:
    """cProfile of one command in this process, on a fresh copy of the store (nothing kept)."""
    from click.testing import CliRunner

    from engine.cli import main

    d = work / f"x{copies}"
    fresh = d / "profile.db"
    import shutil
    import sqlite3

    shutil.copy(d / "ledger.db", fresh)
    db = sqlite3.connect(fresh)
    db.execute("DROP TABLE IF EXISTS grounding_results")
    db.commit()
    db.close()
    args = dict(COMMANDS)[command] if command in dict(COMMANDS) else [command, SESSION]
    prof = cProfile.Profile()
    prof.enable()
    CliRunner().invoke(main, ["--db", f"sqlite:///{fresh}", *args])
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def real_sessions(work: Path, trees: dict[str, Path], rounds: int) -> str:
    """The first ``audit`` of each real session present (``benchmarks/data/real/manifest.json``) beside
    ``export`` of it, for each tree's code: each imported into a fresh SQLite store of its own."""
    import real_data

    rows = []
    for t in real_data.real_transcripts():
        if not t["present"]:
            continue
        for tag, tree in trees.items():
            best: dict[str, tuple[float, float]] = {}
            for k in range(rounds):
                d = work / f"{t['name']}-{tag}-{k}"
                d.mkdir(parents=True)
                db = f"sqlite:///{d / 'ledger.db'}"
                run(["import", str(t["file"]), "--session", SESSION], db, d, tree=tree)
                for label, args in (("export", ["export", SESSION, "-o", "export.jsonl"]), ("audit (first)", ["audit", SESSION, "--json"])):
                    wall, done = run(args, db, d, label, tree=tree)
                    if label == "audit (first)":
                        findings = len(json.loads(done.stdout).get("findings", []))
                    prev = best.get(label)
                    if prev is None or CPU[label] < prev[1]:
                        best[label] = (wall, CPU[label])
            rows.append((t["name"], Path(t["file"]).stat().st_size, tag, best, findings))
            print(rows[-1], file=sys.stderr)
    lines = ["| session | MB | code | export wall / CPU s | first audit wall / CPU s | audit ÷ export (CPU) | findings |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for name, size, tag, best, findings in rows:
        (ew, ec), (aw, ac) = best["export"], best["audit (first)"]
        lines.append(f"| {name} | {size / 1e6:.1f} | {tag} | {ew:.2f} / {ec:.2f} | {aw:.2f} / {ac:.2f} | {ac / ec:.1f}× | {findings} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--profile", metavar="COMMAND", help="cProfile this command (first run) at the largest size")
    ap.add_argument("--no-write", action="store_true", help="print the table, do not write RESULTS.md")
    ap.add_argument("--real", action="store_true", help="first audit vs export of each real session (benchmarks/data/real)")
    ap.add_argument("--baseline", type=Path, help="with --real: also run the code of this checkout, side by side")
    ap.add_argument("--rounds", type=int, default=1, help="with --real: runs of each, the lowest CPU kept")
    args = ap.parse_args()
    if args.real:
        trees = {"baseline": args.baseline.resolve(), "this tree": ROOT} if args.baseline else {"this tree": ROOT}
        with tempfile.TemporaryDirectory() as tmp:
            table = real_sessions(Path(tmp), trees, args.rounds)
        cmd = "python benchmarks/bench_forensics.py --real" + (" --baseline DIR" if args.baseline else "") + (
            f" --rounds {args.rounds}" if args.rounds != 1 else "")
        body = "\n".join([
            "## First audit of each real session (`benchmarks/bench_forensics.py --real`)", "",
            f"`{cmd}` — {machine()}, load average {os.getloadavg()[0]:.2f} at the end.",
            "Each real Claude Code session (benchmarks/data/real/manifest.json) imported into a fresh SQLite store, "
            "then `ctxledger export` and the first `ctxledger audit --json` (nothing kept yet), each a fresh "
            "process (Python start-up included); `baseline` is the code of the checkout given with `--baseline`, "
            "run in the same session of the benchmark. The lowest CPU time of the rounds is shown, with its wall time.",
            "", table, ""])
        print(body)
        if not args.no_write:
            write_section("forensics-real", body)
        return
    if not REAL.exists():
        raise SystemExit(f"the real session is not here: {REAL}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in args.copies:
            rows.append(measure(n, work))
            print(json.dumps(rows[-1]), file=sys.stderr)
        prof = profile(max(args.copies), work, args.profile) if args.profile else ""
    labels = [label for label, _ in COMMANDS] + ["fleet (first, never audited)", "audit (+1 compaction)"]
    lines = []
    for title, get in (("CPU seconds", lambda r, k: r["cpu"][k]), ("Wall seconds", lambda r, k: r[k])):
        lines += [f"{title} (× `export` of the same session):", "",
                  "| copies | MB | " + " | ".join(labels) + " |", "|" + "---:|" * (2 + len(labels))]
        for r in rows:
            base = get(r, "export")
            cells = [f"{get(r, k):.2f}" + ("" if k == "export" else f" ({get(r, k) / base:.1f}×)") for k in labels]
            lines.append(f"| {r['copies']}× | {r['bytes'] / 1e6:.1f} | " + " | ".join(cells) + " |")
        if len(rows) > 1:
            lo, hi = rows[0], rows[-1]
            growth = " · ".join(f"{k} {get(hi, k) / get(lo, k):.1f}×" for k in labels)
            lines += ["", f"Growth {lo['copies']}× → {hi['copies']}×: {growth}"]
        lines.append("")
    lines += ["The checker's own share: CPU seconds inside `run_checker` (the lexical rules checking a summary; "
              "what the checker's own speed-up divides) / the process's CPU seconds:", "",
              "| copies | MB | " + " | ".join(labels) + " |", "|" + "---:|" * (2 + len(labels))]
    for r in rows:
        cells = [f"{r['checker'][k]:.2f} / {r['cpu'][k]:.2f}" for k in labels]
        lines.append(f"| {r['copies']}× | {r['bytes'] / 1e6:.1f} | " + " | ".join(cells) + " |")
    lines.append("")
    cmd = "python benchmarks/bench_forensics.py" + (f" --copies {' '.join(map(str, args.copies))}" if args.copies != [1, 4, 8] else "")
    body = "\n".join(
        [
            "## Forensics on a long session (`benchmarks/bench_forensics.py`)",
            "",
            f"`{cmd}` — {machine()}, load average {os.getloadavg()[0]:.2f} at the end.",
            "The real shared Claude Code session repeated N× into one transcript (N successive compactions), "
            "imported into the default SQLite store; each command a fresh `ctxledger` process, wall clock, "
            "(ratio to `export` of the same session in the same run). `audit (second)` reads the kept "
            "grounding results (`engine.grounding_cache`); `audit (+1 compaction)`: after the transcript "
            "grew by one more copy (one more compaction) and was re-imported. `blame` reads the search "
            "index (`engine.blame_index`; its first run builds the index); `lost (second)` reads the kept "
            "report (`engine.lost_kept`); `fleet (first, never audited)`: the fleet's first run on a copy of "
            "the store taken right after the import (no grounding result kept: one audit of the live summary). "
            "Each process runs through `benchmarks/_checker_time.py`, which notes the CPU seconds spent in the "
            "checker's `run_checker`. The machine is shared: the CPU seconds of each process are the steadier "
            "measure.",
            "",
            *lines,
        ]
    )
    print(body)
    if prof:
        print(prof)
    if not args.no_write:
        write_section("forensics", body)


if __name__ == "__main__":
    main()
