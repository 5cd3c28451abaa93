"""The model's context tools: call latency, the MCP round trip, search over a long log, tag overhead.

    python benchmarks/bench_tools.py                 # 100k-event session, search over 1M events
    python benchmarks/bench_tools.py --search-events 300000 --quick

Each number sits beside a named baseline measured in the same run:

- ``ContextTools.call`` (argument validation, the rules the tools add, the result text) vs the bare
  Session command it ends in (``spans()``, ``prune``, ``rewrite``), on a SQLite session of 100k
  events whose live buffer is kept at a realistic size (a few hundred spans, as compaction keeps it);
- the MCP round trip over a real stdio subprocess (``ctxledger mcp``) vs the same call in process
  through the SDK's in-memory transport and vs ``ContextTools.call``;
- ``context_search`` on the FTS5 index vs a scan of the log (``Session.events`` + substring);
- the span tags of ``render(ids=True)`` vs the same render without them, in tokens, on the demo
  workload (and on a chatty workload of short turns, the unfavourable case).

Writes its tables into benchmarks/RESULTS.md between <!-- bench:tools --> markers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from engine import BPECounter, EstimateCounter, Ledger  # noqa: E402
from engine.render import render  # noqa: E402
from engine.search_index import SqliteSearchIndex, sidecar_path  # noqa: E402
from engine.tools import ContextTools  # noqa: E402

RNG = random.Random(5)
WORDS = (
    "billing-api auth-service returned 503 timeout migration started retry p99 latency deploy config "
    "the a of to and is was for user request fix error ticket cache miss rollback queue worker pod "
    "node restart shard replica lag index vacuum checkpoint upstream envoy gateway token session"
).split()
LIVE_SPANS = 400


def text(n: int, extra: str = "") -> str:
    words = [RNG.choice(WORDS) for _ in range(n)]
    if extra:
        words.insert(RNG.randrange(len(words) + 1), extra)
    return " ".join(words)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# -- the 100k-event session ------------------------------------------------------------------------


def build_session(ledger: Ledger, name: str, events: int, *, live: int = LIVE_SPANS, words: int = 40):
    """Observations (a tool pair every fifth turn), the oldest pruned to keep ``live`` spans live."""
    s = ledger.create_session(name)
    s.observe("You are the platform agent. Keep the checkout path healthy.", role="system")
    oldest = 2
    k = 0
    while s.position < events:
        with s.batch():
            for _ in range(min(1000, events - s.position)):
                k += 1
                if k % 5 == 0:
                    cid = f"c{k}"
                    s.observe(f"calling get_logs {k}", role="assistant", kind="tool_call",
                              meta={"tool_call_id": cid, "name": "get_logs", "arguments": {"n": k}})
                    s.observe(text(words, f"INC-{k}"), role="tool", kind="tool_result", meta={"tool_call_id": cid})
                else:
                    s.observe(text(words, f"INC-{k}"), role="user" if k % 2 else "assistant")
                while len(s.state.live) > live and s.position < events:
                    span_id = f"o{oldest}"
                    oldest += 1
                    if span_id in s.state.live:
                        s.prune(span_id, by="compactor")
                if s.position >= events:
                    break
    return s


def bench_calls(s, repeat: int) -> list[tuple[str, float, str, float]]:
    tools = ContextTools(s, budget=200_000, by="model:bench")
    rows = []

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    # context_list vs spans()
    for _ in range(20):
        tools.call("context_list", {})
    ours = [timed(lambda: tools.call("context_list", {})) for _ in range(repeat)]
    base = [timed(lambda: s.spans()) for _ in range(repeat)]
    rows.append(("context_list {} (50 of 400 spans)", statistics.median(ours), "session.spans()", statistics.median(base)))

    # context_prune vs prune (each pruned span restored afterwards, untimed)
    messages = [sp.id for sp in s.spans() if sp.kind == "message" and sp.role != "system"]
    ours, base = [], []
    for i in range(repeat):
        a = messages[(2 * i) % len(messages)]
        b = messages[(2 * i + 1) % len(messages)]
        ours.append(timed(lambda: tools.call("context_prune", {"span_ids": [a], "reason": "stale"})))
        s.restore(a)
        base.append(timed(lambda: s.prune(b, reason="stale", by="model:bench")))
        s.restore(b)
    rows.append(("context_prune {span_ids: [1], reason}", statistics.median(ours), "session.prune", statistics.median(base)))

    # context_summarize (grounding gate on) vs rewrite without / with the gate (expanded afterwards)
    ours, base, gated = [], [], []
    for i in range(repeat):
        pair = messages[(3 * i) % (len(messages) - 1) : (3 * i) % (len(messages) - 1) + 2]
        summary = " ".join(s.span(pair[0]).text.split()[:12])
        r = None

        def call():
            nonlocal r
            r = tools.call("context_summarize", {"span_ids": pair, "summary": summary, "reason": "fold"})

        ours.append(timed(call))
        assert not r.is_error, r.text
        s.expand(r.data["derived"])
        d = None

        def rewrite(gate):
            nonlocal d
            d = s.rewrite(pair, summary, by="model:bench", reason="fold", gate=gate)

        base.append(timed(lambda: rewrite(False)))
        s.expand(d.id)
        gated.append(timed(lambda: rewrite(True)))
        s.expand(d.id)
    rows.append(("context_summarize {2 spans, summary, reason} (gate on)", statistics.median(ours),
                 "session.rewrite (gate off)", statistics.median(base)))
    rows.append(("", 0.0, "session.rewrite (gate on)", statistics.median(gated)))
    return rows


# -- the MCP round trip --------------------------------------------------------------------------------


async def mcp_round_trips(url: str, name: str, repeat: int, s, ledger) -> list[tuple[str, float, float, float]]:
    import mcp
    from mcp import StdioServerParameters

    from engine.integrations.mcp import create_server

    ctxledger = Path(sys.executable).parent / "ctxledger"
    calls = [
        ("context_list {limit: 5}", "context_list", {"limit": 5}),
        ("context_search {query}", "context_search", {"query": "INC-77"}),
        ("ledger_at {position} (read-only, not recorded)", "ledger_at", {"position": 2}),
    ]
    out = []
    params = StdioServerParameters(command=str(ctxledger), args=["--db", url, "mcp", "--session", name])
    async with mcp.Client(params) as client:
        stdio = {}
        for label, tool, args in calls:
            for _ in range(10):
                await client.call_tool(tool, args)
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                result = await client.call_tool(tool, args)
                times.append(time.perf_counter() - t)
                assert not result.is_error, result.content[0].text
            stdio[label] = times
    s.refresh()
    async with mcp.Client(create_server(s, by="model:bench", ledger=ledger)) as client:
        for label, tool, args in calls:
            for _ in range(10):
                await client.call_tool(tool, args)
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                await client.call_tool(tool, args)
                times.append(time.perf_counter() - t)
            out.append((label, statistics.median(stdio[label]), pct(stdio[label], 0.9), statistics.median(times)))
    return out


# -- search over a long log ----------------------------------------------------------------------------


def build_search_session(ledger: Ledger, events: int):
    s = ledger.create_session(f"search-{events}")
    n = 0
    t0 = time.perf_counter()
    while n < events:
        with s.batch():
            for _ in range(min(2000, events - n)):
                n += 1
                s.observe(text(30, f"INC-{n}"), role="tool" if n % 3 == 0 else "user",
                          kind="tool_result" if n % 3 == 0 else "message",
                          meta={"tool_call_id": f"c{n}"} if n % 3 == 0 else None, tokens=40)
        # a compaction keeps the live buffer at LIVE_SPANS: pruned text is what search must find
        with s.batch():
            for sp in s.spans()[: max(0, len(s.state.live) - LIVE_SPANS)]:
                if n >= events:
                    break
                s.prune(sp.id)
                n += 1
    return s, time.perf_counter() - t0


def bench_search(s, index: SqliteSearchIndex, repeat: int, scan: bool) -> dict:
    t = time.perf_counter()
    index.rebuild(s)
    build = time.perf_counter() - t
    head = s.position
    queries = [f"INC-{RNG.randrange(1, head // 2)}" for _ in range(repeat)]  # one span each (rare)
    mids = [f"{RNG.choice(WORDS)} INC-{RNG.randrange(1, 100)}" for _ in range(repeat)]  # an OR of rare + common
    commons = [f"{RNG.choice(WORDS)} {RNG.choice(WORDS)}" for _ in range(repeat)]  # tens of thousands of hits
    res = {"events": head, "build": build}
    for label, qs in (("rare id", queries), ("common + rare", mids), ("two common words", commons)):
        times = []
        for q in qs:
            t = time.perf_counter()
            index.search(s, q, limit=10)
            times.append(time.perf_counter() - t)
        res[label] = (statistics.median(times), pct(times, 0.9))
    # incremental catch-up after 1000 new events
    with s.batch():
        for i in range(1000):
            s.observe(text(30, f"NEW-{i}"), role="user", tokens=40)
    t = time.perf_counter()
    index.search(s, "NEW-999", limit=10)
    res["catch_up_1000"] = time.perf_counter() - t
    if scan:
        times = []
        for q in queries[: 3 if head <= 300_000 else 1]:
            t = time.perf_counter()
            [ev for ev in s.events() if getattr(ev, "text", None) and q in ev.text]
            times.append(time.perf_counter() - t)
        res["scan"] = statistics.median(times)
    return res


# -- tag overhead --------------------------------------------------------------------------------------


def bench_tags() -> list[tuple[str, int, float, float]]:
    from engine.demo.workload import generate

    counter = BPECounter("o200k_base")
    rows = []
    for label, workload_turns in (("demo workload (40 cycles, 200k budget)", None), ("chatty turns (~25 tokens each)", 400)):
        ledger = Ledger.open("memory://", token_counter=EstimateCounter())
        s = ledger.create_session("tags")
        overheads = []
        if workload_turns is None:
            w = generate(seed=7, cycles=40)
            s.observe(w.system.text, role="system")
            turns = [t for c in w.cycles for t in c.turns]
        else:
            turns = [None] * workload_turns
        for i, turn in enumerate(turns):
            if turn is None:
                s.observe(text(18), role="user" if i % 2 else "assistant")
            else:
                s.observe(turn.text, role=turn.role, kind=turn.kind, meta=turn.meta)
            while s.tokens > 200_000:
                oldest = next(sp for sp in s.spans() if sp.role != "system")
                s.prune(oldest.id)
            if i % 25 == 24 or i == len(turns) - 1:
                for fmt in ("openai", "anthropic"):
                    plain = _tokens(counter, render(s.spans(), format=fmt, reader=s))
                    tagged = _tokens(counter, render(s.spans(), format=fmt, reader=s, ids=True))
                    overheads.append((tagged - plain) / plain)
        rows.append((label, len(s.spans()), statistics.mean(overheads), max(overheads)))
        ledger.close()
    return rows


def _tokens(counter, rendered) -> int:
    import json

    return counter.count(json.dumps(rendered, ensure_ascii=False))


# -- main ----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000, help="events in the session the calls run on")
    ap.add_argument("--search-events", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--no-write", action="store_true", help="print, do not update RESULTS.md")
    args = ap.parse_args()
    repeat = 40 if args.quick else args.repeat
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-tools-"))
    url = f"sqlite:///{tmp / 'tools.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    t = time.perf_counter()
    s = build_session(ledger, "agent", args.events)
    print(f"built {s.position:,} events ({len(s.spans())} live spans) in {time.perf_counter() - t:.1f} s", flush=True)
    mem = Ledger.open("memory://", token_counter=EstimateCounter())
    ms_session = build_session(mem, "agent", args.events)
    calls = {"memory://": bench_calls(ms_session, repeat), "SQLite file": bench_calls(s, repeat)}
    for store, rows in calls.items():
        for row in rows:
            print(store, row, flush=True)
    rounds = asyncio.run(mcp_round_trips(url, "agent", repeat, s, ledger))
    for row in rounds:
        print(row, flush=True)
    searches = []
    for n in args.search_events:
        sl = Ledger.open(f"sqlite:///{tmp / f'search-{n}.db'}", token_counter=EstimateCounter())
        ss, built = build_search_session(sl, n)
        print(f"built {ss.position:,} events for search in {built:.1f} s", flush=True)
        index = SqliteSearchIndex(sidecar_path(str(tmp / f"search-{n}.db")))
        res = bench_search(ss, index, repeat, scan=True)
        res["sidecar_mb"] = os.path.getsize(sidecar_path(str(tmp / f"search-{n}.db"))) / 1e6
        print(res, flush=True)
        searches.append(res)
        index.close()
        sl.close()
    tags = bench_tags()
    for row in tags:
        print(row, flush=True)
    load_after = os.getloadavg()[0]
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    lines = [
        "## Context tools and MCP (`benchmarks/bench_tools.py`)",
        "",
        f"`{' '.join(['python benchmarks/bench_tools.py', *sys.argv[1:]])}` — {machine()}; "
        f"load average {load_before:.2f} before, {load_after:.2f} after (`uptime`: {uptime}). "
        "Medians (p50) unless marked.",
        "",
        f"**In-process `ContextTools.call`** on a session of {s.position:,} events "
        f"({LIVE_SPANS} live spans, as compaction keeps the buffer; {repeat} calls each), in memory and in "
        "a SQLite file. Target ≤ 2 ms. On SQLite every edit is one durable commit (an fsync), which the "
        "bare Session command pays too: the tools' own cost is the difference between the two columns.",
        "",
        "| store | call | ours p50 | baseline | baseline p50 | ratio |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for store, rows in calls.items():
        for label, ours, base_label, base in rows:
            ratio = f"{ours / base:.1f}x" if label else ""
            lines.append(f"| {store} | {label or '↳'} | {ms(ours) if label else ''} | {base_label} | {ms(base)} | {ratio} |")
    lines += [
        "",
        f"**MCP round trip** over a real stdio subprocess (`ctxledger mcp`, the same session; {repeat} calls). "
        "Target ≤ 20 ms. Recorded calls write two observations (the call and its result) each.",
        "",
        "| call | stdio p50 | stdio p90 | in-process SDK client p50 (baseline) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, p50, p90, inproc in rounds:
        lines.append(f"| {label} | {ms(p50)} | {ms(p90)} | {ms(inproc)} |")
    lines += [
        "",
        "**`context_search`** on the SQLite FTS5 sidecar index (10 hits, pruned spans included) vs a scan "
        "of the log. Target ≤ 50 ms at 1M events.",
        "",
        "| events | index build (cold) | sidecar | rare id p50 / p90 | common + rare (OR fallback) p50 / p90 | two common words p50 / p90 | catch-up of 1,000 new events + search | log scan (baseline) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in searches:
        scan = ms(r["scan"])
        lines.append(
            f"| {r['events']:,} | {r['build']:.1f} s | {r['sidecar_mb']:.0f} MB | "
            + " | ".join(f"{ms(r[k][0])} / {ms(r[k][1])}" for k in ("rare id", "common + rare", "two common words"))
            + f" | {ms(r['catch_up_1000'])} | {scan} |"
        )
    lines += [
        "",
        "**Span tags** (`render(ids=True)` vs `render()`, tokens of the rendered OpenAI and Anthropic "
        "payloads, o200k_base, measured every 25 turns). Target < 2% of the buffer.",
        "",
        "| workload | live spans at the end | mean overhead | worst overhead |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, spans, mean, worst in tags:
        lines.append(f"| {label} | {spans} | {mean:.2%} | {worst:.2%} |")
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("tools", body)
    ledger.close()


if __name__ == "__main__":
    main()
