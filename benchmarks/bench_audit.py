"""Audit throughput: auditing a session vs rebuilding its buffer from the log, side by side.

    python benchmarks/bench_audit.py                 # 100,000 events on SQLite (a few minutes to build)
    python benchmarks/bench_audit.py --events 20000  # smaller, for a quick look
    python benchmarks/bench_audit.py --postgres URL  # also on PostgreSQL

The session is an agent's log under a token budget: tool outputs and turns are observed; whenever the
live buffer exceeds the budget, the oldest observed spans are rewritten into a summary (some summaries
carry an invented time or merge two failures, so the audit has real findings to report), old summaries
are pruned or re-derived, a few rewrites of summaries are attempted and refused. The audit reads the
whole log (hash chain, buffer fold, comparison with the stored state) and checks every live derived
span against its original observations. Target: audit <= 2x rebuild.

Writes its table into benchmarks/RESULTS.md between <!-- bench:audit --> markers.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from engine import EstimateCounter, Ledger, RewritePolicyError  # noqa: E402

SERVICES = ("billing-api", "auth-service", "search-api", "notify-worker", "payments-gateway", "cart-service")
BUDGET = 24_000  # live tokens (estimate counter: 4 chars a token)
BATCH = 200


def _tool_output(rnd: random.Random, k: int) -> str:
    svc = rnd.choice(SERVICES)
    lines = [
        f"{svc} returned {rnd.choice((500, 502, 503, 504))} at {rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d} "
        f"after {rnd.randint(5, 3000)} ms; request id req-{k:06x}",
        f"see /var/log/{svc}/error.log line {rnd.randint(1, 99999)}",
    ]
    lines += [f"  at {svc}.handler.step{j} ({rnd.randint(1, 999)} ms)" for j in range(rnd.randint(2, 20))]
    return "\n".join(lines)


def _summary(rnd: random.Random, texts: list[str]) -> str:
    """An extractive summary: first line of each input; one in eight invents a time."""
    parts = [t.split("\n", 1)[0].split(";")[0] for t in texts]
    text = "Summary: " + "; ".join(parts) + "."
    if rnd.random() < 0.125:
        text += f" The migration completed at {rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}."
    return text


def build(url: str, n_events: int, name: str = "audit-bench", seed: int = 11) -> Ledger:
    rnd = random.Random(seed)
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session(name)
    k = 0
    while s.position < n_events:
        with s.batch():
            for _ in range(BATCH):
                if s.position >= n_events:
                    break
                k += 1
                live = s.state.live
                if s.tokens > BUDGET:
                    observed = sorted((sp for sp in live.values() if sp.observed), key=lambda sp: sp.order)
                    derived = sorted((sp for sp in live.values() if sp.derived), key=lambda sp: sp.order)
                    if len(derived) > 30:
                        old = derived[0]
                        if rnd.random() < 0.3:
                            s.rederive(old.id, text=_summary(rnd, [x.text for x in s.originals(old.id)][:3]), by="model-y")
                        else:
                            s.prune(old.id, by="policy")
                    elif len(observed) >= 8:
                        group = observed[:8]
                        s.rewrite([sp.id for sp in group], _summary(rnd, [sp.text for sp in group]), by="model-x")
                    else:
                        s.prune(next(iter(live)), by="policy")
                    continue
                r = rnd.random()
                if r < 0.002 and any(sp.derived for sp in live.values()):
                    target = next(sp for sp in live.values() if sp.derived)
                    try:
                        s.rewrite([target.id], "a summary of a summary", by="model-x")
                    except RewritePolicyError:
                        pass
                elif r < 0.004:
                    s.mark(f"cycle-{k}")
                elif r < 0.3:
                    s.observe(f"user: please check {rnd.choice(SERVICES)} again (turn {k})")
                else:
                    s.observe(
                        _tool_output(rnd, k), role="tool", kind="tool_result", meta={"tool_call_id": f"call-{k}"}
                    )
    return ledger


def measure(url: str, n_events: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    ledger = build(url, n_events)
    built = time.perf_counter() - t0
    ledger.close()
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.session("audit-bench")
    rebuild, audit, verify = [], [], []
    report = None
    for _ in range(repeats):  # side by side, alternating, so drift in machine load hits both
        t = time.perf_counter()
        s.rebuild()
        rebuild.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = s.audit()
        audit.append(time.perf_counter() - t)
        t = time.perf_counter()
        s.verify()
        verify.append(time.perf_counter() - t)
    live = s.state.live
    out = {
        "events": s.position,
        "live": len(live),
        "live_derived": sum(1 for sp in live.values() if sp.derived),
        "build": built,
        "rebuild": statistics.median(rebuild),
        "audit": statistics.median(audit),
        "verify": statistics.median(verify),
        "errors": report.errors,
        "warnings": report.warnings,
        "infos": report.infos,
        "checked": report.derived_checked,
    }
    ledger.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--postgres", default="", help="also measure on this PostgreSQL URL (a fresh schema is best)")
    ap.add_argument("--no-write", action="store_true", help="print, do not update RESULTS.md")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("SQLite file", f"sqlite:///{tmp}/audit.db")]
        if args.postgres:
            stores.append(("PostgreSQL", args.postgres))
        for label, url in stores:
            r = measure(url, args.events, args.repeats)
            r["store"] = label
            rows.append(r)
            print(
                f"{label}: {r['events']:,} events, rebuild {r['rebuild']:.2f}s, audit {r['audit']:.2f}s "
                f"({r['audit'] / r['rebuild']:.2f}x), verify {r['verify']:.2f}s; "
                f"{r['checked']} derived spans checked; {r['errors']} errors, {r['warnings']} warnings"
            )
    command = "python benchmarks/bench_audit.py" + (f" --events {args.events}" if args.events != 100_000 else "")
    lines = [
        "### Audit throughput (issue 3)",
        "",
        f"Command: `{command}`" + (" (plus `--postgres URL`)" if args.postgres else ""),
        f"Machine: {machine()}",
        "",
        "A budgeted agent session (24k live tokens; the oldest observations are rewritten into summaries when",
        "over budget, one summary in eight invents a time; old summaries pruned or re-derived; a few refused",
        f"rewrites of summaries). Median of {args.repeats} runs, rebuild and audit alternating in one process.",
        "`rebuild` folds the buffer from the first event ignoring snapshots (`s.rebuild()`); `audit` is",
        "`s.audit()`: the same single read of the log with the hash chain checked on the way, the fold",
        "compared with the stored state, and the grounding check of every live derived span.",
        "",
        "| store | events | live spans (derived) | rebuild | audit | audit / rebuild | verify (for reference) | findings |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['events']:,} | {r['live']} ({r['live_derived']}) | {r['rebuild']:.2f} s | "
            f"{r['audit']:.2f} s | **{r['audit'] / r['rebuild']:.2f}x** | {r['verify']:.2f} s | "
            f"{r['errors']} errors, {r['warnings']} warnings, {r['infos']} info |"
        )
    lines += ["", "Target: audit <= 2x rebuild."]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("audit", body)


if __name__ == "__main__":
    main()
