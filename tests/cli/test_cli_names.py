"""What a new user types: ``--db prof.db`` (a plain path is a SQLite file) and a session by a
unique prefix or suffix of its name (``fa812bfe`` for ``claude-code:fa812bfe-...``)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, InvalidInputError, Ledger, UnknownSessionError
from engine.cli import main

CLAUDE = "claude-code:fa812bfe-4c1e-4d3a-9b2f-0c6d5e7a8b91"
CODEX = "codex:fa81ffff-0000-4000-8000-000000000000"


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store in ./prof.db, made through the URL form; the tests name it by its plain path."""
    monkeypatch.chdir(tmp_path)
    with Ledger.open("sqlite:///prof.db", token_counter=EstimateCounter()) as led:
        for name in (CLAUDE, CODEX, "agent-42", "agent-42-retry"):
            led.create_session(name).observe(f"{name} saw something")
    return tmp_path


def test_a_plain_path_is_a_sqlite_file(store):
    r = run("--db", "prof.db", "sessions", "--json")
    assert r.exit_code == 0, r.output
    assert [d["name"] for d in json.loads(r.output)] == [CLAUDE, CODEX, "agent-42", "agent-42-retry"]
    # the same file by its absolute path, and by the library
    r = run("--db", str(store / "prof.db"), "sessions")
    assert r.exit_code == 0 and "agent-42-retry" in r.output
    with Ledger.open("prof.db") as led:
        assert led.url == "sqlite:///prof.db" and len(led.sessions()) == 4


def test_a_plain_path_creates_no_other_file_and_urls_still_mean_urls(store):
    before = set(os.listdir(store))
    assert run("--db", "prof.db", "sessions").exit_code == 0
    assert {f for f in os.listdir(store) if not f.startswith("prof.db")} == {f for f in before if not f.startswith("prof.db")}
    r = run("--db", "mysql://db/agents", "sessions")
    assert r.exit_code == 2 and "unsupported store URL 'mysql://db/agents'" in r.output
    r = run("--db", ":memory:", "sessions")
    assert r.exit_code == 2 and "memory://" in r.output
    assert not (store / ":memory:").exists() and not (store / "mysql:").exists()


@pytest.mark.parametrize("typed", ["fa812bfe", "claude-code:fa81", "8b91", CLAUDE])
def test_a_unique_prefix_or_suffix_names_the_session(store, typed):
    r = run("--db", "prof.db", "log", typed, "--json")
    assert r.exit_code == 0, r.output
    first = json.loads(r.output.splitlines()[0])
    assert first["name"] == CLAUDE
    assert run("--db", "prof.db", "verify", typed).exit_code == 0


def test_an_ambiguous_short_name_lists_the_candidates_and_exits_2(store):
    log_before = run("--db", "prof.db", "sessions", "--json").output
    r = run("--db", "prof.db", "log", "fa81")
    assert r.exit_code == 2
    assert "'fa81' is ambiguous: 2 sessions match" in r.output
    assert CLAUDE in r.output and CODEX in r.output
    r = run("--db", "prof.db", "mark", "agent", "here")  # agent-42 and agent-42-retry
    assert r.exit_code == 2 and "ambiguous" in r.output and "agent-42-retry" in r.output
    assert run("--db", "prof.db", "sessions", "--json").output == log_before  # nothing was written


def test_an_exact_name_wins_over_longer_names_it_prefixes(store):
    r = run("--db", "prof.db", "mark", "agent-42", "here")
    assert r.exit_code == 0, r.output
    with Ledger.open("prof.db") as led:
        assert led.session("agent-42").marks() == {"here": 3}
        assert led.session("agent-42-retry").marks() == {}


def test_no_match_is_unknown_and_the_library_names_sessions_exactly(store):
    r = run("--db", "prof.db", "log", "nobody")
    assert r.exit_code == 2 and "no session named 'nobody'" in r.output
    with Ledger.open("prof.db") as led:
        with pytest.raises(UnknownSessionError):
            led.session("fa812bfe")  # programs name sessions exactly unless they ask
        assert led.resolve("fa812bfe") == CLAUDE
        with pytest.raises(InvalidInputError, match="ambiguous"):
            led.resolve("fa81")


def test_a_session_id_or_its_prefix_names_the_session_not_the_ones_nested_under_it(tmp_path, monkeypatch):
    """What a Claude Code user knows is the transcript's session id; its compaction call imports
    as a session nested under it (``…/agent-acompact-…``)."""
    monkeypatch.chdir(tmp_path)
    sid = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    with Ledger.open("sqlite:///prof.db", token_counter=EstimateCounter()) as led:
        for name in (f"claude-code:{sid}", f"claude-code:{sid}/agent-acompact-946d2b", "claude-code:ae4a0000-x"):
            led.create_session(name).observe(f"{name} saw something")
    for typed in (sid, "ae4a77f8", f"claude-code:{sid}"):
        r = run("--db", "prof.db", "log", typed, "--json")
        assert r.exit_code == 0, (typed, r.output)
        assert json.loads(r.output.splitlines()[0])["name"] == f"claude-code:{sid}"
    r = run("--db", "prof.db", "log", "ae4a")  # the session, its nested one, and another: still ambiguous
    assert r.exit_code == 2 and "ambiguous: 3 sessions match" in r.output
    r = run("--db", "prof.db", "log", "agent-acompact-946d2b")  # the nested one by its own suffix
    assert r.exit_code == 0 and f"{sid}/agent-acompact-946d2b" in r.output
