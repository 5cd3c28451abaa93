"""Each compaction hook's wall time, Python start-up included, on a ~3 MB Claude Code transcript, and
``ctxledger lost`` on the session it recorded.

    .venv/bin/python benchmarks/bench_hooks.py            # 9 rounds, writes the hooks table into RESULTS.md
    .venv/bin/python benchmarks/bench_hooks.py --rounds 5 --no-write

The transcript is the real session in ../shared/data/transcripts/ (2.7 MB, a manual /compact): by
default padded to 3 MB before its boundary with renamed copies of its own model-visible lines (new
uuids, message and tool ids), then the boundary and the summary; with ``--unpadded``, as Claude Code
had written it at the compaction (1.7 MB up to the summary). Every round starts from a copy of a
store prepared outside the timing, and runs the installed command (``python -m engine.hooks
claude-code --db URL``) as a new process with the payload on stdin, timed from its start to its exit:

- PreCompact, incremental: the store holds the transcript up to 200 lines before the boundary;
- PreCompact, first: an empty store (the whole transcript imported at once);
- PostCompact: the store holds everything up to the boundary; the boundary and summary are new
  (import, audit of the session, the status line);
- SessionStart(compact) alone: the same, and the notice;
- SessionStart(compact) after PostCompact (as Claude Code fires them): nothing new to import, the
  audit PostCompact kept for this log position is reused, the notice;
- start-up floor: ``python -c pass``, and a hook for an event it ignores (SessionStart, startup).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "transcripts" / "claude_spotter_ae4a77f8_manual.jsonl"
COMPACT_CALL = REAL.parent / REAL.stem / "subagents" / "agent-acompact-946d2b.jsonl"
SID = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
TARGET_BYTES = 3_000_000


def padded_lines(target: int = TARGET_BYTES) -> list[bytes]:
    """The real transcript up to its summary, padded before the boundary to ``target`` bytes (0: as
    Claude Code had written it at the compaction)."""
    lines = REAL.read_bytes().splitlines(keepends=True)
    b = next(i for i, raw in enumerate(lines) if b'"compact_boundary"' in raw)
    visible = [raw for raw in lines[:b] if b'"type":"assistant"' in raw or b'"type":"user"' in raw]
    extra: list[bytes] = []
    size, k = sum(map(len, lines[: b + 2])), 0
    while size < target:
        k += 1
        for raw in visible:
            copy = (raw.replace(b'"uuid":"', b'"uuid":"p%d-' % k).replace(b"toolu_", b"toolu_p%d" % k)
                    .replace(b'"id":"msg_', b'"id":"msg_p%d' % k))
            extra.append(copy)
            size += len(copy)
            if size >= target:
                break
    return lines[:b] + extra + lines[b:b + 2]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


class Bench:
    def __init__(self, work: Path, target: int):
        self.work = work
        self.lines = padded_lines(target)
        self.b = len(self.lines) - 2
        self.env = {**os.environ, "CTXLEDGER_HOOKS_STATE": str(work / "state"), "CTXLEDGER_NO_PROGRESS": "1"}
        self.env.pop("CTXLEDGER_URL", None)
        self.project = work / "proj"
        self.project.mkdir()
        self.transcript = work / "projects" / f"{SID}.jsonl"
        (self.transcript.parent / SID / "subagents").mkdir(parents=True)
        shutil.copy(COMPACT_CALL, self.transcript.parent / SID / "subagents" / COMPACT_CALL.name)
        self.db_file = work / "hooks.db"
        self.command = [sys.executable, "-m", "engine.hooks", "claude-code", "--db", f"sqlite:///{self.db_file}"]
        self.stores: dict[int, Path] = {}

    def write(self, upto: int) -> None:
        self.transcript.write_bytes(b"".join(self.lines[:upto]))

    def payload(self, event: str, **extra) -> bytes:
        return json.dumps({"session_id": SID, "transcript_path": str(self.transcript), "cwd": str(self.project),
                           "hook_event_name": event, **extra}).encode()

    def store_upto(self, upto: int) -> Path:
        """A store holding the transcript up to line ``upto`` (made once, copied for each round)."""
        if upto not in self.stores:
            self.fresh(None)
            self.write(upto)
            self.hook(self.payload("PreCompact", trigger="auto"))
            saved = self.work / f"store-{upto}"
            saved.mkdir()
            for p in self.work.glob("hooks.db*"):
                shutil.copy(p, saved / p.name)
            self.stores[upto] = saved
        return self.stores[upto]

    def fresh(self, saved: Path | None) -> None:
        """The store as ``saved`` holds it (None: empty), and no audit kept by an earlier round."""
        shutil.rmtree(self.work / "state" / "cache", ignore_errors=True)
        for p in self.work.glob("hooks.db*"):
            p.unlink()
        if saved is not None:
            for p in saved.iterdir():
                shutil.copy(p, self.work / p.name)

    def hook(self, body: bytes) -> tuple[float, bytes]:
        t = time.perf_counter()
        done = subprocess.run(self.command, input=body, capture_output=True, env=self.env, cwd=self.project)
        wall = time.perf_counter() - t
        if done.returncode != 0 or done.stderr:
            raise SystemExit(f"the hook failed: {done.stderr.decode()}")
        return wall, done.stdout

    def timed(self, rounds: int, setup, body: bytes) -> tuple[list[float], bytes]:
        walls, out = [], b""
        for _ in range(rounds):
            setup()
            wall, out = self.hook(body)
            walls.append(wall)
        return walls, out


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    ap.add_argument("--unpadded", action="store_true",
                    help="the real transcript as it was at its compaction (1.9 MB), not padded to 3 MB")
    args = ap.parse_args()
    if not REAL.exists():
        raise SystemExit(f"the real transcript is not at {REAL}")
    rows: list[tuple[str, list[float]]] = []
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), 0 if args.unpadded else TARGET_BYTES)
        size = sum(map(len, bench.lines))
        pre = bench.store_upto(bench.b - 200)
        at_boundary = bench.store_upto(bench.b)

        def incremental():
            bench.fresh(pre)
            bench.write(bench.b)

        rows.append(("PreCompact, incremental (last 200 lines new)",
                     bench.timed(args.rounds, incremental, bench.payload("PreCompact", trigger="auto"))[0]))

        def first():
            bench.fresh(None)
            bench.write(bench.b)

        rows.append(("PreCompact, first (whole transcript new)",
                     bench.timed(args.rounds, first, bench.payload("PreCompact", trigger="auto"))[0]))

        def compacted():
            bench.fresh(at_boundary)
            bench.write(bench.b + 2)

        summary = json.loads(bench.lines[bench.b + 1])["message"]["content"]
        walls, _ = bench.timed(args.rounds, compacted, bench.payload("PostCompact", trigger="manual", compact_summary=summary))
        rows.append(("PostCompact (import boundary + summary, audit)", walls))
        walls, out = bench.timed(args.rounds, compacted, bench.payload("SessionStart", source="compact"))
        rows.append(("SessionStart(compact) alone (import, audit, notice)", walls))
        notice = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        post = bench.payload("PostCompact", trigger="manual", compact_summary=summary)

        def after_post():
            compacted()
            bench.hook(post)

        walls, _ = bench.timed(args.rounds, after_post, bench.payload("SessionStart", source="compact"))
        rows.append(("SessionStart(compact) after PostCompact (its audit kept: notice only)", walls))
        rows.append(("start-up floor: a hook for an event it ignores",
                     bench.timed(args.rounds, lambda: None, bench.payload("SessionStart", source="startup"))[0]))
        floor = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor.append(time.perf_counter() - t)
        rows.append(("start-up floor: python -c pass", floor))
        cli = Path(sys.executable).with_name("ctxledger")
        lost = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            subprocess.run([str(cli), "--db", f"sqlite:///{bench.db_file}", "lost", f"claude-code:{SID}", "--json"],
                           check=True, capture_output=True, env=bench.env)
            lost.append(time.perf_counter() - t)
        rows.append(("ctxledger lost SESSION --json (CLI start-up included)", lost))

        from engine.ledger import Ledger

        with Ledger.open(f"sqlite:///{bench.db_file}") as ledger:
            notice_tokens = ledger.counter.count(notice)
            sources = len(ledger.session(f"claude-code:{SID}").originals("d1"))

    cmd = f".venv/bin/python benchmarks/bench_hooks.py --rounds {args.rounds}" + (" --unpadded" if args.unpadded else "")
    out = ["### Hooks on the real session as it was at its compaction" if args.unpadded else "## Hooks",
           "",
           f"Hooks: wall time per run, Python start-up included ({machine()}; load average before the run "
           f"{load_before}, after {_load()}). `{cmd}`",
           "",
           ("Transcript: the real Claude Code session as it was at its compaction" if args.unpadded else
            "Transcript: the real Claude Code session padded (renamed copies of its own lines)")
           + f", {size / 1e6:.2f} MB ({len(bench.lines):,} lines, {sources} observations summarized); "
           f"{args.rounds} rounds each, every round from a copy of the same prepared store. "
           f"The notice: {notice_tokens:,} tokens (budget 1,500).",
           "",
           "| run | p50 s | p95 s | min s |",
           "| --- | ---: | ---: | ---: |"]
    for name, walls in rows:
        out.append(f"| {name} | {statistics.median(walls):.3f} | {pct(walls, 0.95):.3f} | {min(walls):.3f} |")
    table = "\n".join(out)
    print(table)
    if not args.no_write:
        write_section("hooks-real" if args.unpadded else "hooks", table)


if __name__ == "__main__":
    main()
