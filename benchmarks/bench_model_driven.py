"""What the model-driven policy adds to ``ctxledger demo``, and where its time goes.

    python benchmarks/bench_model_driven.py              # the default study, 3 alternating rounds
    python benchmarks/bench_model_driven.py --rounds 1 --no-write

Side by side in one run, on fresh SQLite files: the demo's work (the study and the story, as
``ctxledger demo`` does it) with the three earlier policies, and with the fourth one added; rounds
alternate and the medians are reported. Then the model-driven run alone, split into the grounding
gate (every summary the model writes is checked against its original observations), rendering the
buffer with span ids for each model turn, and the rest (the loop, the tools, the writes, the
simulated model). Writes its section into benchmarks/RESULTS.md between <!-- bench:model-driven -->
markers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from engine import Ledger  # noqa: E402
from engine.demo.story import tell  # noqa: E402
from engine.demo.study import POLICIES, StudyConfig, run_study  # noqa: E402
from engine.demo.workload import generate  # noqa: E402


def demo_seconds(cfg: StudyConfig, policies: tuple[str, ...]) -> float:
    with tempfile.TemporaryDirectory(prefix="ctxledger-md-") as tmp:
        t0 = time.perf_counter()
        ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'ctxledger.db'}")
        wl = generate(cfg.seed, cfg.cycles, scale=cfg.scale)
        result = run_study(ledger, cfg, workload=wl, policies=policies)
        tell(ledger, result, wl)
        ledger.close()
        return time.perf_counter() - t0


def split_model_driven(cfg: StudyConfig) -> tuple[float, float, float, object]:
    """(total, gate, render) seconds of the model-driven run, and the run."""
    import engine.tools
    import projections.grounding as grounding

    spent = {"gate": 0.0, "render": 0.0}
    real_gate, real_render = grounding.gate_findings, engine.tools.render

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter() - t0

        return wrapper

    grounding.gate_findings = timed("gate", real_gate)
    engine.tools.render = timed("render", real_render)
    try:
        with tempfile.TemporaryDirectory(prefix="ctxledger-md-") as tmp:
            ledger = Ledger.open(f"sqlite:///{Path(tmp) / 'ctxledger.db'}")
            result = run_study(ledger, cfg, policies=("model-driven",))
            ledger.close()
    finally:
        grounding.gate_findings, engine.tools.render = real_gate, real_render
    run = result.runs["model-driven"]
    return run.seconds, spent["gate"], spent["render"], run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    args = ap.parse_args()
    cfg = StudyConfig(cycles=args.cycles)
    three = tuple(p for p in POLICIES if p != "model-driven")
    load_before = os.getloadavg()[0]
    a: list[float] = []
    b: list[float] = []
    for _ in range(args.rounds):
        a.append(demo_seconds(cfg, three))
        b.append(demo_seconds(cfg, POLICIES))
    total, gate, render, run = split_model_driven(cfg)
    load_after = os.getloadavg()[0]
    ma, mb = statistics.median(a), statistics.median(b)
    f = run.final
    lines = [
        "### What the model-driven policy adds to `ctxledger demo` (issue 12)",
        "",
        f"Command: `.venv/bin/python benchmarks/bench_model_driven.py --rounds {args.rounds}"
        + (f" --cycles {args.cycles}" if args.cycles != 40 else "") + "`",
        f"Machine: {machine()}; load average {load_before:.2f} before, {load_after:.2f} after (a shared machine: "
        "other work ran beside it)",
        "",
        f"The study and its story on a fresh SQLite file (seed {cfg.seed}, {cfg.cycles} cycles), {args.rounds} alternating "
        "rounds, medians (spread in brackets):",
        "",
        "| run | seconds | ratio |",
        "| --- | ---: | ---: |",
        f"| three policies (prune-only, naive, guarded), as before | {ma:.2f} ({min(a):.2f}–{max(a):.2f}) | 1.00 |",
        f"| four policies (+ model-driven) | {mb:.2f} ({min(b):.2f}–{max(b):.2f}) | {mb / ma:.2f} |",
        "",
        f"The model-driven run alone: {total:.2f} s for {run.nudges} nudges, {run.model_calls} model turns and "
        f"{run.tool_calls} context-tool calls ({f.rewrites} summaries, {f.rederives} re-derivations, {f.refused} refused):",
        "",
        "| part | seconds | share |",
        "| --- | ---: | ---: |",
        f"| grounding gate (each summary against its original observations) | {gate:.2f} | {gate / total:.0%} |",
        f"| rendering the buffer with span ids, once per model turn | {render:.2f} | {render / total:.0%} |",
        f"| the rest: loop, tools, writes, simulated model, scoring | {total - gate - render:.2f} | "
        f"{(total - gate - render) / total:.0%} |",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("model-driven", body)


if __name__ == "__main__":
    main()
