"""Run every benchmark of the project, then stamp benchmarks/RESULTS.md with the machine, the date
and the command.

    .venv/bin/python benchmarks/run_all.py            # every benchmarks/bench_*.py at full size
    .venv/bin/python benchmarks/run_all.py --quick    # the smaller sizes, for a quick look
    .venv/bin/python benchmarks/run_all.py -k transcript -k demo   # only those

Each ``bench_*.py`` runs as its own subprocess (a fresh interpreter, so no benchmark warms another's
caches) with the same Python, and writes its own section of RESULTS.md between
``<!-- bench:NAME -->`` markers. This script owns only the header block at the top.
Exit status: non-zero when any benchmark failed (the others still run).
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _results import RESULTS, machine  # noqa: E402

HEADER_START, HEADER_END = "<!-- bench:header -->", "<!-- /bench:header -->"


def discover(only: list[str]) -> list[Path]:
    found = sorted(HERE.glob("bench_*.py")) + [HERE / "quality.py"]  # grounding quality (XSumFaith, drift set)
    if only:
        found = [p for p in found if any(k in p.stem for k in only)]
    return found


def supports_quick(path: Path) -> bool:
    return "--quick" in path.read_text(encoding="utf-8")


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    return ""


def write_header(command: str, results: list[tuple[str, float, int]], started: datetime) -> None:
    lines = [
        HEADER_START,
        f"Last run: {started:%Y-%m-%d %H:%M} UTC, `{command}`",
        "",
        f"Machine: {machine()}" + (f", {_memory()}" if _memory() else "") + f", {platform.system()} {platform.release()}",
        "",
        "| benchmark | seconds | status |",
        "| --- | ---: | --- |",
    ]
    for name, seconds, code in results:
        lines.append(f"| {name} | {seconds:.1f} | {'ok' if code == 0 else f'FAILED (exit {code})'} |")
    lines.append(HEADER_END)
    block = "\n".join(lines)
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(re.escape(HEADER_START) + r".*?" + re.escape(HEADER_END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        head, _, rest = text.partition("\n")
        if head.startswith("# "):
            text = f"{head}\n\n{block}\n\n{rest.lstrip(chr(10))}"
        else:
            text = f"# Benchmark results\n\n{block}\n\n{text}"
    RESULTS.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="pass --quick to every benchmark that has it")
    ap.add_argument("-k", dest="only", action="append", default=[], help="only benchmarks whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args()
    benches = discover(args.only)
    if args.list:
        for p in benches:
            print(p.name)
        return 0
    if not benches:
        print("run_all: no benchmark matched", file=sys.stderr)
        return 2
    started = datetime.now(timezone.utc)
    results: list[tuple[str, float, int]] = []
    for p in benches:
        cmd = [sys.executable, str(p)] + (["--quick"] if args.quick and supports_quick(p) else [])
        print(f"== {p.name} {' '.join(cmd[2:])}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.run(cmd, cwd=HERE.parent).returncode
        seconds = time.perf_counter() - t0
        results.append((p.stem, seconds, code))
        print(f"== {p.name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {seconds:.1f}s", flush=True)
    command = ".venv/bin/python benchmarks/run_all.py" + (" --quick" if args.quick else "") + "".join(f" -k {k}" for k in args.only)
    write_header(command, results, started)
    print(f"wrote {RESULTS}")
    return 0 if all(code == 0 for _, _, code in results) else 1


if __name__ == "__main__":
    sys.exit(main())
