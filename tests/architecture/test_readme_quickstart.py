"""The README's quickstart, pasted into a real interactive Python 3 (``python -i``: each line read
as typed at the prompt, so a statement right after an indented block, or an expression that would
echo a repr, breaks it) in an empty directory, twice: both pastes print exactly what the README
says, nothing else, no error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _block_after(text: str, heading: str, lang: str) -> str:
    start = text.index(heading)
    match = re.compile(r"```" + lang + r"\n(.*?)```", re.S).search(text, start)
    assert match, f"no ```{lang} block after {heading!r}"
    return match.group(1)


def _paste(code: str, cwd: Path) -> subprocess.CompletedProcess:
    # -i reads stdin as the interactive prompt does, even from a pipe (the prompts go to stderr)
    return subprocess.run(
        [sys.executable, "-i", "-q"], input=code, cwd=cwd, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )


def test_quickstart_pasted_into_the_interactive_interpreter_twice(tmp_path):
    text = README.read_text()
    code = _block_after(text, "## Five-minute quickstart", "python")
    expected = _block_after(text, "It prints:", "text").splitlines()
    for attempt in (1, 2):
        result = _paste(code, tmp_path)
        prompts_only = re.sub(r"(>>> |\.\.\. )", "", result.stderr).strip()
        assert prompts_only == "", f"paste {attempt}: the interpreter said\n{result.stderr[-2000:]}"
        assert result.stdout.splitlines() == expected, f"paste {attempt}"
    assert (tmp_path / "quickstart.db").exists()


def test_quickstart_runs_as_a_script_too(tmp_path):
    text = README.read_text()
    code = _block_after(text, "## Five-minute quickstart", "python")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == _block_after(text, "It prints:", "text").splitlines()


def test_the_interactive_check_catches_what_breaks_a_paste(tmp_path):
    """The two ways the quickstart broke in the REPL, each caught by the check above."""
    after_loop = "for i in range(2):\n    print(i)\nprint('after')\n"
    assert "SyntaxError" in _paste(after_loop, tmp_path).stderr
    echoed = "from engine import Ledger\nLedger.open('memory://').create_session('x').observe('hi')\n"
    assert "Span(" in _paste(echoed, tmp_path).stdout
