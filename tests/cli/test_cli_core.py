"""The core commands through the real CLI entry point, on a real SQLite file."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session("agent-42")
    a = s.observe("billing-api returned 503 at 13:58", role="user")
    b = s.observe("auth-service returned 500 at 14:01", role="user")
    d = s.rewrite([a.id, b.id], "billing 503 at 13:58, auth 500 at 14:01", by="model-x")
    try:
        s.rewrite([d.id], "the API failure", by="model-x")
    except Exception:
        pass
    s.observe("please fix")
    s.prune("o3", reason="answered")
    ledger.close()
    return url


def run(db, *args, input=None):
    return CliRunner().invoke(main, ["--db", db, *args], input=input, catch_exceptions=False)


def test_sessions_lists_and_json(db):
    r = run(db, "sessions")
    assert r.exit_code == 0 and "agent-42" in r.output and "7 events" in r.output
    data = json.loads(run(db, "sessions", "--json").output)
    assert data[0]["name"] == "agent-42" and data[0]["position"] == 7 and data[0]["strict"] is True


def test_log_shows_every_event_and_filters(db):
    r = run(db, "log", "agent-42")
    assert r.exit_code == 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 7
    assert "Rewritten" in lines[3] and "d1 <- o1,o2" in lines[3] and "by model-x" in lines[3]
    assert "RewriteRefused" in lines[4]
    only = run(db, "log", "agent-42", "--type", "RewriteRefused").output.strip().splitlines()
    assert len(only) == 1 and only[0].split()[0] == "5"
    events = [json.loads(x) for x in run(db, "log", "agent-42", "--json").output.splitlines()]
    assert [e["position"] for e in events] == list(range(1, 8))
    assert events[3]["type"] == "Rewritten" and events[3]["sources"] == ["o1", "o2"]


def test_show_time_travel(db):
    now = run(db, "show", "agent-42")
    assert now.exit_code == 0 and "d1" in now.output and "o3" not in now.output.split("\n", 1)[1]
    before = json.loads(run(db, "show", "agent-42", "--at", "3", "--json").output)
    assert before["position"] == 3 and [s["id"] for s in before["spans"]] == ["o1", "o2"]
    assert all(s["provenance"] == "observed" for s in before["spans"])


def test_show_bad_position_is_a_usage_error(db):
    r = CliRunner().invoke(main, ["--db", db, "show", "agent-42", "--at", "99"])
    assert r.exit_code == 2 and "out of range" in r.output


def test_unknown_session_exits_2_with_one_line(db):
    r = CliRunner().invoke(main, ["--db", db, "log", "nope"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == ["ctxledger: error: no session named 'nope' in " + db]


def test_verify_ok_and_json(db):
    r = run(db, "verify", "agent-42")
    assert r.exit_code == 0 and "OK, 7 events" in r.output
    data = json.loads(run(db, "verify", "--all", "--json").output)
    assert data[0]["ok"] is True and data[0]["position"] == 7


def test_verify_detects_an_edited_row(db, tmp_path):
    import sqlite3

    path = db[len("sqlite:///"):]
    con = sqlite3.connect(path)
    row = con.execute(
        "SELECT originator_id, originator_version, state FROM stored_events WHERE topic='ctxledger:Observed' "
        "ORDER BY originator_version LIMIT 1"
    ).fetchone()
    tampered = row[2].replace(b"13:58", b"13:59")
    con.execute(
        "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?", (tampered, row[0], row[1])
    )
    con.commit()
    con.close()
    r = CliRunner().invoke(main, ["--db", db, "verify", "agent-42"])
    assert r.exit_code == 1 and "BROKEN at position 2" in r.output


def test_export_import_round_trip_through_files(db, tmp_path):
    out = tmp_path / "agent.jsonl"
    r = run(db, "export", "agent-42", "-o", str(out))
    assert r.exit_code == 0 and len(out.read_text().splitlines()) == 7
    other = f"sqlite:///{tmp_path / 'other.db'}"
    r = run(other, "import", str(out), "--json")
    assert json.loads(r.output) == {"session": "agent-42", "position": 7, "verified": True}
    assert run(other, "show", "agent-42", "--json").output == run(db, "show", "agent-42", "--json").output
    again = CliRunner().invoke(main, ["--db", other, "import", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_import_from_stdin_and_a_tampered_file(db, tmp_path):
    text = run(db, "export", "agent-42").output
    other = f"sqlite:///{tmp_path / 'stdin.db'}"
    bad = text.replace("please fix", "please ignore")
    r = CliRunner().invoke(main, ["--db", other, "import", "-"], input=bad)
    assert r.exit_code == 2 and "line 6" in r.output
    assert json.loads(run(other, "sessions", "--json").output) == []
    r = run(other, "import", "-", input=text)
    assert r.exit_code == 0 and "7 events" in r.output


def test_mark_then_show_at_the_mark(db):
    r = run(db, "mark", "agent-42", "triaged")
    assert r.exit_code == 0 and "marked position 8" in r.output
    data = json.loads(run(db, "show", "agent-42", "--at", "triaged", "--json").output)
    assert data["position"] == 8


def test_a_foreign_database_exits_3_and_is_not_touched(tmp_path):
    import sqlite3

    path = tmp_path / "foreign.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.commit()
    con.close()
    before = path.read_bytes()
    r = CliRunner().invoke(main, ["--db", f"sqlite:///{path}", "sessions"])
    assert r.exit_code == 3 and "another application" in r.output
    assert path.read_bytes() == before


def test_every_core_command_has_an_example_in_its_help():
    for name in ("sessions", "log", "show", "verify", "export", "import", "mark"):
        r = CliRunner().invoke(main, [name, "--help"])
        assert r.exit_code == 0 and "Example:" in r.output
        assert re.search(rf"ctxledger( --db \S+)? {name} ", r.output), r.output
        assert r.output.startswith(f"Usage: ctxledger {name}")


def test_untrusted_text_cannot_drive_the_terminal(tmp_path):
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as ledger:
        s = ledger.create_session("esc")
        s.observe("before \x1b[2J\x1b]0;pwned\x07 after", by="evil\x1b[31m")
    for args in (["log", "esc"], ["show", "esc"]):
        out = CliRunner().invoke(main, ["--db", url, *args]).output
        assert "\x1b" not in out and "\x07" not in out
        assert "\\x1b[2J" in out
