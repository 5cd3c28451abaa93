"""The user story through the CLI: import a Claude Code project directory, then every forensic
command works on the imported sessions; re-import adds nothing; bad input exits 2 with the log
unchanged; `ctxledger watch` follows a growing transcript and reports drift as a compaction lands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from engine.cli import main

DATA = Path(__file__).parents[1] / "data" / "transcripts"
CC_DIR = DATA / "claude_code"
CC = CC_DIR / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"
NAME = "claude-code:7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33"


def run(db, *args):
    return CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False)


def test_story_import_then_investigate(tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    r = run(db, "import", "--format", "claude-code", str(CC_DIR))
    assert r.exit_code == 0, r.output
    assert "3 compaction(s), 2 summary-of-a-summary violation(s)" in r.output
    assert "progress 1" in r.output and "future-line-type 1" in r.output
    log = run(db, "log", NAME, "--type", "Rewritten")
    assert log.exit_code == 0 and "claude-code:compact:auto" in log.output and "VIOLATION generation 2" in log.output
    rewrites = [json.loads(line) for line in run(db, "log", NAME, "--type", "Rewritten", "--json").output.splitlines()]
    at = rewrites[1]["position"]
    show = run(db, "show", NAME, "--at", str(at))
    assert show.exit_code == 0 and "derived g2" in show.output
    audit = run(db, "audit", NAME, "--at", str(at))
    assert audit.exit_code == 1 and "14:20" in audit.output
    blame = run(db, "blame", NAME, "deployed at 14:20", "--at", str(at))
    assert blame.exit_code == 1 and "claude-code:compact:manual" in blame.output  # NOT GROUNDED: exit 1
    for args in (("lineage", NAME, "d3"), ("timeline", NAME), ("fleet",), ("verify", NAME),
                 ("report", NAME, "-o", str(tmp_path / "r.html"))):
        res = run(db, *args)
        assert res.exit_code in (0, 1), (args, res.output)
        assert res.output.strip()
    assert (tmp_path / "r.html").stat().st_size > 1000
    again = run(db, "import", str(CC))
    assert again.exit_code == 0 and "already imported" in again.output


def test_import_json_and_session_name(tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    r = run(db, "import", "--json", "--session", "oh", str(DATA / "openhands" / "v1" / "conv-9b8e7f60"))
    data = json.loads(r.output)
    assert r.exit_code == 0 and data["session"] == "oh" and data["format"] == "openhands"
    assert data["compactions"] == 1 and data["unknown"] == {"FutureEvent": 1} and data["spans"] == 10


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    run(db, "import", str(DATA / "messages" / "openai.jsonl"))
    before = run(db, "sessions", "--json").output
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(CC.read_bytes().replace(b'"future-line-type"', b'"future-line-type" oops', 1))
    r = run(db, "import", "--format", "claude-code", str(bad))
    assert r.exit_code == 2 and "line" in r.output and "nothing was imported" in r.output
    assert run(db, "sessions", "--json").output == before
    r = run(db, "import", "--format", "claude-code", "--skip-bad", str(bad))
    assert r.exit_code == 0 and "malformed lines skipped (--skip-bad): 1" in r.output
    clash = run(db, "import", "--format", "claude-code", "--session", "messages:openai", str(CC))
    assert clash.exit_code == 2 and "already exists" in clash.output


def test_watch_follows_a_growing_transcript_and_stops_on_ctrl_c(tmp_path):
    lines = CC.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "project"
    folder.mkdir()
    f = folder / CC.name
    f.write_bytes(b"".join(lines[:10]))
    env = {**os.environ, "CTXLEDGER_NO_PROGRESS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from engine.cli import main; main()", "--db", f"sqlite:///{tmp_path / 'w.db'}", "watch", "--json", str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=Path(__file__).parents[2],
    )
    try:
        time.sleep(3)
        with open(f, "ab") as out:
            out.write(b"".join(lines[10:30]))
            out.write(lines[30][:20])  # half a line: waited for
            out.flush()
            time.sleep(2)
            out.write(lines[30][20:] + b"".join(lines[31:]))
        time.sleep(3)
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()
    events = [json.loads(line) for line in stdout.decode().splitlines()]
    imports = [e for e in events if e["event"] == "import"]
    assert imports[0]["first_line"] == 1 and imports[-1]["last_line"] == 39
    taken = sorted((e["first_line"], e["last_line"]) for e in imports)
    assert all(a[1] + 1 == b[0] for a, b in zip(taken, taken[1:]))  # nothing doubled, nothing skipped
    assert any(e["event"] == "drift" and e.get("value") == "14:20" for e in events)
    assert b"stopped" in stderr
