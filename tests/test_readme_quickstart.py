"""The README's quickstart is pasted into a fresh Python in an empty directory and prints exactly
what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _block_after(text: str, heading: str, lang: str) -> str:
    start = text.index(heading)
    match = re.compile(r"```" + lang + r"\n(.*?)```", re.S).search(text, start)
    assert match, f"no ```{lang} block after {heading!r}"
    return match.group(1)


def test_quickstart_runs_and_prints_what_the_readme_shows(tmp_path):
    text = README.read_text()
    code = _block_after(text, "## Five-minute quickstart", "python")
    expected = _block_after(text, "It prints:", "text")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected.splitlines()
    assert (tmp_path / "quickstart.db").exists()
