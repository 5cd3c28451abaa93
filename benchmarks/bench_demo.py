"""The drift study behind ``ctxledger demo``, timed phase by phase on a fresh SQLite file.

    python benchmarks/bench_demo.py            # the default study: seed 7, 40 cycles, 200k budget
    python benchmarks/bench_demo.py --quick    # 16 cycles

Writes its table into benchmarks/RESULTS.md between <!-- bench:demo --> markers: where the time of
the demo goes (the workload and its exact token counts, each policy's run, the forensic story, the
HTML report) and the study's final numbers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from engine import Ledger  # noqa: E402
from engine.demo.story import tell  # noqa: E402
from engine.demo.study import StudyConfig, run_study  # noqa: E402
from engine.demo.workload import generate  # noqa: E402
from engine.report import build_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="16 cycles instead of 40")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    args = ap.parse_args()
    cfg = StudyConfig(cycles=16 if args.quick else 40)
    phases: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="ctxledger-demo-") as tmp:
        t_all = time.perf_counter()
        t0 = time.perf_counter()
        ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'ctxledger.db'}")
        ledger.counter.count("warm up")
        phases.append(("open the store, load the o200k_base tokenizer", time.perf_counter() - t0))
        t0 = time.perf_counter()
        wl = generate(cfg.seed, cfg.cycles, scale=cfg.scale)
        phases.append(("generate the workload", time.perf_counter() - t0))
        t0 = time.perf_counter()
        result = run_study(ledger, cfg, workload=wl)
        study = time.perf_counter() - t0
        tokenize = study - sum(r.seconds for r in result.runs.values())
        phases.append((f"count {result.observed_tokens:,} tokens of {result.observations} observations exactly", tokenize))
        for p, run in result.runs.items():
            phases.append((f"run {p} ({run.final.position:,} events, {run.model_calls} model calls)", run.seconds))
        t0 = time.perf_counter()
        tell(ledger, result, wl)
        phases.append(("the story: blame and three audits", time.perf_counter() - t0))
        t0 = time.perf_counter()
        page = build_report([ledger.session(result.runs["naive"].session), ledger.session(result.runs["guarded"].session)])
        phases.append((f"report of naive vs guarded ({len(page) // 1024} KB of HTML)", time.perf_counter() - t0))
        total = time.perf_counter() - t_all
        ledger.close()

    lines = [
        "### The drift study behind `ctxledger demo` (issue 5)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_demo.py{' --quick' if args.quick else ''}`",
        f"Machine: {machine()}",
        "",
        f"Seed {cfg.seed}, {cfg.cycles} cycles, budget {cfg.budget:,}, compaction above {cfg.high_water:.0%} down to "
        f"{cfg.low_water:.0%}; simulated model drop {cfg.drop:.0%}, merge {cfg.merge:.0%}, invent {cfg.invent:.0%}; "
        "a fresh SQLite file, one transaction per cycle per session.",
        "",
        "| phase | seconds |",
        "| --- | ---: |",
    ]
    lines += [f"| {what} | {sec:.2f} |" for what, sec in phases]
    lines += [f"| **total** | **{total:.2f}** |", "", "| at the end | " + " | ".join(result.runs) + " |",
              "| --- |" + " ---: |" * len(result.runs)]

    def row(label, fn):
        lines.append(f"| {label} | " + " | ".join(fn(r) for r in result.runs.values()) + " |")

    row("fact retention", lambda r: f"{r.final.retention:.0%} ({r.final.facts_retained}/{r.final.facts_seen})")
    row("invented facts in the buffer", lambda r: str(r.final.invented))
    row("merged events in the buffer", lambda r: str(r.final.merged))
    row("live tokens, mean of cycles", lambda r: f"{r.mean_tokens:,}")
    row("compactions", lambda r: str(r.final.compactions))
    row("rewrites / re-derivations / refused", lambda r: f"{r.final.rewrites} / {r.final.rederives} / {r.final.refused}")
    row("max generation", lambda r: str(r.final.max_generation))
    lines += ["", "Where the time goes: the grounding gate and the audits extract and match the specifics of every "
              "source observation (regular expressions over megabytes of tool output); the writes themselves are "
              "a small share."]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("demo", body)


if __name__ == "__main__":
    main()
