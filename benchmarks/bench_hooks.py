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

Before timing, the benchmark compiles the bytecode of ``engine`` and ``projections``
(``python -m compileall -q engine projections``): users' installs have it (pip compiles at install),
and where ``PYTHONDONTWRITEBYTECODE=1`` is set, as on our benchmark machine, nothing else would
write it and every hook run would spend ~0.1-0.5 s compiling the modules it imports.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def compile_bytecode() -> None:
    """The ``.pyc`` files an installed ctxledger has (see the module docstring)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "engine", "projections"], cwd=ROOT, check=True)


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
        # the installed command (python -m engine.hooks ...), through the wrapper that notes the checker's CPU share
        self.note = work / "checker-time.json"
        self.env["CTXLEDGER_CHECKER_TIME"] = str(self.note)
        self.command = [sys.executable, str(Path(__file__).resolve().parent / "_checker_time.py"), "-m", "engine.hooks",
                        "claude-code", "--db", f"sqlite:///{self.db_file}"]
        self.cpu: list[tuple[float, float]] = []  # (CPU s, checker CPU s) of each timed hook run
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
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(self.command, input=body, capture_output=True, env=self.env, cwd=self.project)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        checker = json.loads(self.note.read_text())["checker"] if self.note.exists() else 0.0
        self.note.unlink(missing_ok=True)
        self.cpu.append((cpu, checker))
        if done.returncode != 0 or done.stderr:
            raise SystemExit(f"the hook failed: {done.stderr.decode()}")
        return wall, done.stdout

    def timed(self, rounds: int, setup, body: bytes) -> tuple[list[float], bytes]:
        walls, out, cpus = [], b"", []
        for _ in range(rounds):
            setup()
            wall, out = self.hook(body)
            walls.append(wall)
            cpus.append(self.cpu[-1])
        self.last_cpu = cpus
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
    compile_bytecode()
    rows: list[tuple[str, list[float], list[tuple[float, float]]]] = []  # (run, walls, (CPU s, checker s) per round)
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), 0 if args.unpadded else TARGET_BYTES)
        size = sum(map(len, bench.lines))
        pre = bench.store_upto(bench.b - 200)
        at_boundary = bench.store_upto(bench.b)

        def incremental():
            bench.fresh(pre)
            bench.write(bench.b)

        def hook_row(name: str, setup, body: bytes) -> bytes:
            walls, out = bench.timed(args.rounds, setup, body)
            rows.append((name, walls, bench.last_cpu))
            return out

        hook_row("PreCompact, incremental (last 200 lines new)", incremental, bench.payload("PreCompact", trigger="auto"))

        def first():
            bench.fresh(None)
            bench.write(bench.b)

        hook_row("PreCompact, first (whole transcript new)", first, bench.payload("PreCompact", trigger="auto"))

        def compacted():
            bench.fresh(at_boundary)
            bench.write(bench.b + 2)

        summary = json.loads(bench.lines[bench.b + 1])["message"]["content"]
        post = bench.payload("PostCompact", trigger="manual", compact_summary=summary)
        hook_row("PostCompact (import boundary + summary, audit)", compacted, post)
        out = hook_row("SessionStart(compact) alone (import, audit, notice)", compacted, bench.payload("SessionStart", source="compact"))
        notice = json.loads(out)["hookSpecificOutput"]["additionalContext"]

        def after_post():
            compacted()
            bench.hook(post)

        hook_row("SessionStart(compact) after PostCompact (its audit kept: notice only)", after_post,
                 bench.payload("SessionStart", source="compact"))
        hook_row("start-up floor: a hook for an event it ignores", lambda: None, bench.payload("SessionStart", source="startup"))

        def process(argv: list[str], before=None) -> tuple[list[float], list[tuple[float, float]]]:
            walls, cpus = [], []
            for _ in range(args.rounds):
                if before is not None:
                    before()
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True, env=bench.env)
                walls.append(time.perf_counter() - t)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 0.0))
            return walls, cpus

        rows.append(("start-up floor: python -c pass", *process([sys.executable, "-c", "pass"])))
        cli = Path(sys.executable).with_name("ctxledger")
        lost_cmd = [str(cli), "--db", f"sqlite:///{bench.db_file}", "lost", f"claude-code:{SID}", "--json"]

        def forget_lost():  # the kept lost report dropped: each round computes it
            import sqlite3

            with sqlite3.connect(bench.db_file) as db:
                db.execute("DELETE FROM grounding_results WHERE checker LIKE 'projections.lost@%'")

        rows.append(("ctxledger lost SESSION --json, first (CLI start-up included)", *process(lost_cmd, forget_lost)))
        rows.append(("ctxledger lost SESSION --json, report kept (engine.lost_kept)", *process(lost_cmd)))

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
           "CPU s: the process's median CPU seconds; checker s: the median CPU seconds of it inside the checker's "
           "`run_checker` (noted by `benchmarks/_checker_time.py`); what a faster checker saves is at most that.",
           "",
           "| run | p50 s | p95 s | min s | CPU s | checker s |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, walls, cpus in rows:
        cpu = statistics.median(c for c, _ in cpus)
        checker = statistics.median(k for _, k in cpus)
        out.append(f"| {name} | {statistics.median(walls):.3f} | {pct(walls, 0.95):.3f} | {min(walls):.3f} | {cpu:.2f} | {checker:.2f} |")
    table = "\n".join(out)
    print(table)
    if not args.no_write:
        write_section("hooks-real" if args.unpadded else "hooks", table)


if __name__ == "__main__":
    main()
