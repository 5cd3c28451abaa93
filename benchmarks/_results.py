"""Shared by every benchmark: machine description and writing a section of RESULTS.md."""

from __future__ import annotations

import os
import platform
import re
from datetime import date
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{date.today().isoformat()}, {os.cpu_count()} vCPU {cpu}, Python {platform.python_version()}"


def write_section(name: str, body: str) -> None:
    """Replace (or append) the block between <!-- bench:NAME --> and <!-- /bench:NAME -->."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    block = f"{start}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)
