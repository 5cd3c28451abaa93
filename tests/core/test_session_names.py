"""``Ledger.session_names()``: every session that has rows in the store, the one ``ctxledger verify
--all`` walks, so that a session whose first event was deleted or garbled is verified (and found
broken) rather than skipped; ``Ledger.sessions()`` lists readable starts only."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from engine import CorruptLogError, EstimateCounter, Ledger
from engine.cli import main


def _store(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    ids = {}
    for name in ("alpha", "beta", "gamma", "delta"):
        s = ledger.create_session(name)
        s.observe(f"{name} observed something", tokens=3)
        ids[name] = s.id
    return url, ledger, ids


def _rows(url: str, statement: str, params: tuple) -> None:
    con = sqlite3.connect(url[len("sqlite:///") :])
    try:
        con.execute(statement, params)
        con.commit()
    finally:
        con.close()


def test_every_stored_session_is_named_in_creation_order(tmp_path):
    url, ledger, ids = _store(tmp_path)
    assert ledger.session_names() == ["alpha", "beta", "gamma", "delta"]
    assert [i.name for i in ledger.sessions()] == ledger.session_names()
    ledger.close()
    assert Ledger.open("memory://").session_names() == []


def test_a_session_whose_start_is_gone_or_garbled_is_named_by_id(tmp_path):
    url, ledger, ids = _store(tmp_path)
    ledger.close()
    _rows(url, "DELETE FROM stored_events WHERE originator_id=? AND originator_version=1", (ids["beta"].hex,))
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    assert [i.name for i in fresh.sessions()] == ["alpha", "gamma", "delta"]
    assert fresh.session_names() == ["alpha", str(ids["beta"]), "gamma", "delta"]
    fresh.close()
    res = CliRunner().invoke(main, ["--db", url, "verify", "--all", "--json"])
    assert res.exit_code == 1, res.output  # the session without its start is verified, and broken
    verdicts = {d["session"]: d["ok"] for d in json.loads(res.output)}
    assert verdicts == {"alpha": True, str(ids["beta"]): False, "gamma": True, "delta": True}
    _rows(url, "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=1",
          (b"\xc1 not msgpack", ids["gamma"].hex))
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    assert fresh.session_names() == ["alpha", str(ids["beta"]), str(ids["gamma"]), "delta"]
    with pytest.raises(CorruptLogError, match="position 1"):
        fresh.sessions()
    fresh.close()
