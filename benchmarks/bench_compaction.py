"""A compaction step's cost as the session grows: it must stay flat, not grow with the log.

    python benchmarks/bench_compaction.py            # 1k, 10k and 100k events
    python benchmarks/bench_compaction.py --quick    # 1k and 10k

An agent loop (user turn, assistant reply, tool call, tool output) runs under the guarded policy with
a 200k-token budget, so the live buffer stays bounded while the log grows. At each size the session
is measured with a probe compactor whose high-water mark is below the live tokens, so it always
plans (and executes) a full compaction of the whole live buffer:

- plan: ``compactor.plan(session)`` — median of 9;
- step: ``compactor.step(fork)`` on a fresh fork of the session at its head (so every sample starts
  from the same buffer; the compactor has planned it once), writes included — median of 5;
- reopen: ``ledger.session(name)`` from the store (snapshot + the events after it) — median of 5.

Writes its table into benchmarks/RESULTS.md between <!-- bench:compaction --> markers.
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
from engine import (  # noqa: E402
    BPECounter,
    Compactor,
    ElideToolOutputs,
    ExtractiveRewriter,
    Ledger,
    PruneDerived,
    RewriteOldest,
    ShrinkDerived,
)

RNG = random.Random(5)
WORDS = (
    "billing-api auth-service returned 503 timeout migration 0042 started at 14:02 retry p99 latency "
    "deploy v2.3.1 /etc/app/config.yaml the a of to and is was for user request fix error ticket "
    "INC-4411 cache miss rollback. The job finished. Nothing else changed."
).split()
BUDGET = 200_000


def text(n_words: int) -> str:
    return " ".join(RNG.choice(WORDS) for _ in range(n_words))


def policy(budget: int = BUDGET, high: float = 0.70, low: float = 0.50) -> Compactor:
    rewriter = ExtractiveRewriter()
    return Compactor(
        budget=budget,
        high_water=high,
        low_water=low,
        keep_last_turns=8,
        strategies=[
            ElideToolOutputs(older_than_turns=8),
            RewriteOldest(rewriter, summary_tokens=800, max_input_tokens=32_000),
            ShrinkDerived(2_000, rewriter=rewriter),
            PruneDerived(),
        ],
        name="guarded+prune-derived",
    )


def grow(s, compactor: Compactor, until_events: int, turn: list[int]) -> None:
    """Run the agent loop until the log has ``until_events`` events, compacting as it goes."""
    while s.position < until_events:
        with s.batch():
            for _ in range(20):
                turn[0] += 1
                i = turn[0]
                s.observe(f"Turn {i}: " + text(RNG.randint(10, 50)), role="user")
                s.observe(text(RNG.randint(10, 40)), role="assistant")
                s.observe(f"get_logs svc-{i}", role="assistant", kind="tool_call",
                          meta={"tool_call_id": f"c{i}", "name": "get_logs", "arguments": {"svc": i}})
                s.observe(text(RNG.randint(100, 400)), role="tool", kind="tool_result", meta={"tool_call_id": f"c{i}"})
                compactor.step(s)


def median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(ledger, s, size: int) -> str:
    probe = policy(high=0.30, low=0.20)  # always triggered: plans a full compaction of the live buffer
    plan = probe.plan(s)
    t_plan = median(lambda: probe.plan(s), 9)
    forks = iter(range(10**6))

    def step_once():
        fork = ledger.fork(s, name=f"probe-{size}-{next(forks)}")
        probe.plan(fork)  # a compactor that has seen the session before (it remembers span orders)
        t = time.perf_counter()
        result = probe.step(fork)
        dt = time.perf_counter() - t
        assert result.compacted
        return dt

    t_step = statistics.median(step_once() for _ in range(5))
    t_open = median(lambda: ledger.session(s.name), 5)
    kinds = {}
    for a in plan.actions:
        kinds[a.command] = kinds.get(a.command, 0) + 1
    what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (
        f"| {s.position:,} | {len(s.state.live):,} | {s.tokens:,} | {t_plan * 1000:,.1f} ms | "
        f"{t_step * 1000:,.1f} ms | {what} | {t_open * 1000:,.1f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        for store, url in (("SQLite file", f"sqlite:///{tmp}/compaction.db"), ("memory", "memory://")):
            ledger = Ledger.open(url, token_counter=BPECounter("o200k_base"))
            s = ledger.create_session("agent")
            s.observe("You are an SRE agent. " + text(100), role="system")
            compactor, turn, rows = policy(), [0], []
            t0 = time.perf_counter()
            for size in sizes:
                grow(s, compactor, size, turn)
                rows.append(measure(ledger, s, size))
                print(store, rows[-1], f"(built in {time.perf_counter() - t0:,.0f} s)", flush=True)
            ledger.close()
            sections += [
                f"**{store}**", "",
                "| log events | live spans | live tokens | plan | step (writes included) | the step's commands | reopen session |",
                "| ---: | ---: | ---: | ---: | ---: | --- | ---: |",
                *rows, "",
            ]
    body = "\n".join(
        [
            "### A compaction step as the session grows (issue 4)",
            "",
            f"Command: `.venv/bin/python benchmarks/bench_compaction.py{' --quick' if args.quick else ''}`",
            f"Machine: {machine()}",
            "",
            "An agent loop (user turn, reply, tool call, 100–400-word tool output) under the guarded policy "
            "(elide tool outputs older than 8 turns, rewrite the oldest observed run with the extractive "
            "rewriter, re-derive oversized summaries, prune old summaries), 200k-token budget, high-water "
            "70%, low-water 50%. At each size a probe compactor (high-water 30%, low-water 20%) plans and "
            "runs a full compaction of the live buffer: plan is the median of 9, step the median of 5 "
            "(each on a fresh fork at the head that the compactor has planned once), reopen the median of 5.",
            "",
            *sections,
            "The step's cost follows the live buffer (bounded by the budget) and the commands it issues, "
            "not the length of the log: the compactor reads `session.state`, never scans the log.",
        ]
    )
    print(body)
    write_section("compaction", body)


if __name__ == "__main__":
    main()
