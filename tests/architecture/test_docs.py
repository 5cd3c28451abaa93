"""The documentation is tested like code: README.md and every docs/*.md page.

- Every ```python block runs, and runs again: the blocks of one page run in order in one namespace,
  in a fresh interpreter whose working directory is an empty temporary directory, then once more in
  a second fresh interpreter in the same directory (a reader runs an example twice), offline (no network
  variables, no API keys, no ``CTXLEDGER_URL``), under a timeout. A block fenced ```python no-run is
  only compiled (code that needs a real server or key; use it rarely).
- A ```text block that follows a python block directly (at most one line of prose between, such as
  "It prints:") is that block's expected output: the block must print exactly those lines.
- Every command of the CLI appears as ``ctxledger <name>`` in README.md or a docs page
  (sqlite-utils' habit: a command nobody can find in the docs does not exist).
- Relative links between the pages point at files (and headings) that exist.

Pages added to docs/ later are picked up by the glob. A failure names the page, the block's number
on that page and its first line, with the traceback or the differing output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE_TIMEOUT_S = 180


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name


@dataclass(frozen=True)
class Block:
    number: int  # 1-based among the page's python blocks
    line: int  # 1-based line of the block's first code line
    code: str
    run: bool
    expected: str | None  # the text block that shows its output, if any


_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`]*)$")


def fenced_blocks(text: str) -> list[tuple[str, int, str, int, int]]:
    """(info string, first code line, code, line of the opening fence, line of the closing fence)."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(fence[0] * len(fence)) and not lines[j].strip(fence[0]).strip()):
            j += 1
        out.append((info, i + 2, "\n".join(lines[i + 1 : j]) + "\n", i + 1, j + 1))
        i = j + 1
    return out


def python_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    fenced = fenced_blocks(text)
    blocks: list[Block] = []
    for k, (info, first, code, _, close) in enumerate(fenced):
        words = info.split()
        if not words or words[0] != "python":
            continue
        expected = None
        if k + 1 < len(fenced):
            nxt_info, _, nxt_code, nxt_open, _ = fenced[k + 1]
            between = [ln for ln in lines[close : nxt_open - 1] if ln.strip()]
            if nxt_info == "text" and len(between) <= 1:
                expected = nxt_code
        blocks.append(Block(len(blocks) + 1, first, code, "no-run" not in words[1:], expected))
    return blocks


# Runs in the child interpreter: execute the blocks in order in one namespace, capture each block's
# stdout, stop at the first exception, and write one JSON result per block that ran.
_DRIVER = r"""
import contextlib, io, json, sys, traceback
spec = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
results = []
for block in spec["blocks"]:
    out = io.StringIO()
    error = None
    try:
        code = compile(block["code"], f"{spec['page']}, python block {block['number']} (line {block['line']})", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    except BaseException:
        error = traceback.format_exc()
    results.append({"number": block["number"], "stdout": out.getvalue(), "error": error})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)
    if error:
        break
"""


def _offline_env(home: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "NO_PROXY": "*", "no_proxy": "*"}
    if "PYTHONPATH" in os.environ:  # e.g. a checkout that is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env  # deliberately no CTXLEDGER_*, no *_API_KEY, no proxies


def _describe(page: Path, block: Block) -> str:
    first = next((ln for ln in block.code.splitlines() if ln.strip()), "")
    return f"{_name(page)}, python block {block.number} (line {block.line}: {first.strip()[:70]!r})"


def check_page(page: Path, workdir: Path, *, runs: int = 2) -> list[str]:
    """Run the page's python blocks ``runs`` times in the same directory (each run a fresh
    interpreter); return what went wrong (empty when every block ran and printed what the page shows,
    every time). Stops at the first block that raises: later blocks may depend on it."""
    blocks = [b for b in python_blocks(page) if b.run]
    run_dir = workdir / "cwd"
    run_dir.mkdir()
    for k in range(runs):
        problems = _run_page(page, blocks, workdir, run_dir)
        if problems:
            return problems if k == 0 else [f"run {k + 1} (the same directory again): {p}" for p in problems]
    return []


def _run_page(page: Path, blocks: list[Block], workdir: Path, run_dir: Path) -> list[str]:
    spec = workdir / ".docs-spec.json"
    result = workdir / ".docs-result.json"
    spec.write_text(json.dumps({"page": _name(page), "blocks": [
        {"number": b.number, "line": b.line, "code": b.code} for b in blocks]}), encoding="utf-8")
    driver = workdir / ".docs-driver.py"
    driver.write_text(_DRIVER, encoding="utf-8")
    result.unlink(missing_ok=True)
    try:
        proc = subprocess.run([sys.executable, str(driver), str(spec), str(result)], cwd=run_dir,
                              env=_offline_env(workdir), capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        done = json.loads(result.read_text()) if result.exists() else []
        stuck = blocks[min(len(done), len(blocks) - 1)]
        return [f"{_describe(page, stuck)} did not finish within {PAGE_TIMEOUT_S} s (the page's blocks share one timeout)"]
    if not result.exists():
        return [f"{_name(page)}: the interpreter running its blocks died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"]
    problems = []
    by_number = {b.number: b for b in blocks}
    results = json.loads(result.read_text(encoding="utf-8"))
    for res in results:
        block = by_number[res["number"]]
        if res["error"]:
            problems.append(f"{_describe(page, block)} raised:\n{res['error']}")
        elif block.expected is not None:
            got = [ln.rstrip() for ln in res["stdout"].splitlines()]
            want = [ln.rstrip() for ln in block.expected.splitlines()]
            if got != want:
                problems.append(f"{_describe(page, block)} printed something else than the text block after it.\n"
                                f"--- the page shows\n{chr(10).join(want)}\n--- it printed\n{chr(10).join(got)}")
    if not problems and len(results) != len(blocks):
        problems.append(f"{_name(page)}: only {len(results)} of {len(blocks)} python blocks ran")
    return problems


def _pages_with_code() -> list[Path]:
    return [p for p in pages() if any(b.run for b in python_blocks(p))]


@pytest.fixture(scope="module")
def page_checks(request, tmp_path_factory):
    """The selected pages run two at a time (each in its own interpreter and directory); each test
    then waits for its own page. Pages deselected with -k are not run."""
    wanted = [item.callspec.params["page"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_every_python_block_of_the_page_runs_and_prints_what_the_page_shows"]
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {page: pool.submit(check_page, page, tmp_path_factory.mktemp(page.stem)) for page in wanted}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("page", _pages_with_code(), ids=_name)
def test_every_python_block_of_the_page_runs_and_prints_what_the_page_shows(page, page_checks):
    problems = page_checks[page].result()
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_python_block_compiles_including_no_run_ones(page):
    for block in python_blocks(page):
        try:
            compile(block.code, f"{_name(page)}, python block {block.number}", "exec")
        except SyntaxError as e:
            pytest.fail(f"{_describe(page, block)} is not valid Python: {e}")


def test_skipped_blocks_are_few_and_counted():
    run = skipped = 0
    where = []
    for page in pages():
        for block in python_blocks(page):
            if block.run:
                run += 1
            else:
                skipped += 1
                where.append(_describe(page, block))
    # counted in the assertions' messages, not printed: a print here would cut into pytest's dots
    assert run >= 5, "the README and docs pages should show runnable examples"
    assert skipped <= max(3, run // 4), "`python no-run` is for code that needs a real server or key: " + "; ".join(where)


def _all_docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in pages())


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_is_documented_in_the_readme_or_docs(name):
    assert re.search(rf"\bctxledger (?:--db \S+ )?{re.escape(name)}\b", _all_docs_text()), (
        f"`ctxledger {name}` appears neither in README.md nor in docs/*.md: document it, with an example and its real output"
    )


def _section(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert f"<!-- section:{name}" in text, f"{_name(path)} has no <!-- section:{name} --> marker"
    return text.split(f"<!-- section:{name}", 1)[1].split(f"<!-- /section:{name} -->", 1)[0]


def test_the_forensics_page_shows_each_read_side_command_with_its_output():
    section = _section(ROOT / "docs" / "forensics.md", "forensics")
    for name in ("audit", "blame", "lineage", "diff", "timeline", "fleet", "report"):
        # a shell example (a line starting with "$ ctxledger NAME") followed by its output
        assert re.search(rf"^\$ ctxledger (?:--db \S+ )?{name}\b.*\n(?!```)\S", section, re.M), name


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = page.read_text(encoding="utf-8")
    code = {ln for _, first, body, _, _ in fenced_blocks(text) for ln in range(first, first + body.count("\n"))}
    anchors: set[str] = set()
    for number, line in enumerate(text.split("\n"), 1):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and number not in code:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            anchor, k = slug, 0
            while anchor in anchors:
                k += 1
                anchor = f"{slug}-{k}"
            anchors.add(anchor)
    return anchors


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_relative_links_point_at_files_and_headings_that_exist(page):
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{_name(page)} has broken links: {broken}"


def test_the_harness_finds_blocks_outputs_and_no_run_fences(tmp_path):
    """The parser itself: python blocks in order, the output block after one, no-run, other fences ignored."""
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 2\nprint(x * 21)\n```\n\nIt prints:\n\n```text\n42\n```\n\n"
        "```console\n$ ctxledger sessions\n```\n\n```python no-run\nimport nowhere\n```\n\n"
        "Far away.\n\nTwo lines of prose.\n\n```python\nprint(x)\n```\n\nOne.\n\nTwo.\n\n```text\nnot output\n```\n",
        encoding="utf-8")
    blocks = python_blocks(page)
    assert [(b.number, b.run, b.expected) for b in blocks] == [(1, True, "42\n"), (2, False, None), (3, True, None)]
    assert blocks[0].line == 4 and blocks[2].code == "print(x)\n"


def test_heading_anchors_follow_github(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## The fleet view: which sessions drifted today?\n\n## Policies: `Compactor`\n\n"
                    "```python\n# not a heading\n```\n\n## Top\n", encoding="utf-8")
    assert heading_anchors(page) == {"top", "the-fleet-view-which-sessions-drifted-today", "policies-compactor", "top-1"}


def test_a_failing_block_is_named_by_page_number_and_line(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("# b\n\n```python\nimport os\nprint(os.listdir('.'))\n```\n\n```text\n[]\n```\n\n"
                    "```python\nprint('two')\n```\n\n```text\nthree\n```\n\n"
                    "```python\nraise KeyError('boom')\n```\n\n```python\nprint('never reached')\n```\n",
                    encoding="utf-8")
    (tmp_path / "work").mkdir()
    problems = check_page(page, tmp_path / "work")
    assert len(problems) == 2, problems   # block 1 ran in an empty directory and printed what it shows
    assert problems[0].startswith("broken.md, python block 2 (line 13: \"print('two')\") printed something else")
    assert "--- the page shows\nthree\n--- it printed\ntwo" in problems[0]
    assert problems[1].startswith("broken.md, python block 3 (line 21: \"raise KeyError('boom')\") raised:")
    assert "KeyError: 'boom'" in problems[1] and "broken.md, python block 3 (line 21)" in problems[1]


DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/ctxledger demo"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[all]' && .venv/bin/python -m pytest -q"


def test_the_readme_fits_on_a_screen_or_two_and_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300, "README.md is for a newcomer's five minutes: move reference material to docs/"
    lines = readme.splitlines()
    assert DEMO_COMMAND in lines and TEST_COMMAND in lines
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines(), "CI must run the README's test command"


def test_an_example_that_cannot_run_twice_is_named_with_its_second_run(tmp_path):
    page = tmp_path / "once.md"
    page.write_text("# o\n\n```python\nfrom pathlib import Path\nPath('made').mkdir()\nprint('ok')\n```\n\n"
                    "```text\nok\n```\n", encoding="utf-8")
    (tmp_path / "work").mkdir()
    problems = check_page(page, tmp_path / "work")
    assert len(problems) == 1 and problems[0].startswith("run 2 (the same directory again): once.md, python block 1")
    assert "FileExistsError" in problems[0]
    (tmp_path / "again").mkdir()
    assert check_page(page, tmp_path / "again", runs=1) == []
