"""Store URLs: SQLAlchemy's convention for SQLite, the environment default, clear errors."""

from __future__ import annotations

import os

import pytest

from engine import EstimateCounter, InvalidInputError, Ledger, StorageError
from engine._store.log_store import parse_url as _parse_url, redact as _redact


def test_relative_and_absolute_sqlite_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Ledger.open("sqlite:///rel.db", token_counter=EstimateCounter()) as led:
        led.create_session("a")
    assert (tmp_path / "rel.db").exists()
    absolute = tmp_path / "sub" / "abs.db"
    absolute.parent.mkdir()
    with Ledger.open(f"sqlite:///{absolute}", token_counter=EstimateCounter()) as led:
        led.create_session("b")
    assert absolute.exists()


def test_default_is_env_then_ctxledger_db(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXLEDGER_URL", raising=False)
    with Ledger.open(token_counter=EstimateCounter()) as led:
        led.create_session("default")
    assert (tmp_path / "ctxledger.db").exists()
    monkeypatch.setenv("CTXLEDGER_URL", "sqlite:///from-env.db")
    with Ledger.open(token_counter=EstimateCounter()) as led:
        assert led.sessions() == []
    assert (tmp_path / "from-env.db").exists()


@pytest.mark.parametrize("url", ["", "mysql://x/y", "sqlite://relative.db", "sqlite:///", "sqlite:///:memory:", 42])
def test_bad_urls_are_invalid_input(url):
    with pytest.raises(InvalidInputError):
        Ledger.open(url) if url != "" else _parse_url(url, None)


def test_missing_directory_is_a_storage_error(tmp_path):
    with pytest.raises(StorageError, match="does not exist"):
        Ledger.open(f"sqlite:///{tmp_path}/no/such/dir/x.db")
    assert not (tmp_path / "no").exists()


def test_postgres_url_maps_onto_eventsourcing_settings():
    env, path = _parse_url("postgresql://alice:s3cr%40t@db.example:6543/ledgers?schema=agents", None)
    assert path == ""
    assert env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]) == ("db.example", "6543", "ledgers")
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_SCHEMA"]) == ("alice", "s3cr@t", "agents")


def test_passwords_never_appear_in_messages():
    assert "s3cret" not in _redact("postgresql://alice:s3cret@host:5432/db")
    assert _redact("sqlite:///x.db") == "sqlite:///x.db"


def test_environment_variables_of_eventsourcing_are_ignored(tmp_path, monkeypatch):
    # A stray PERSISTENCE_MODULE or CIPHER_KEY in the environment must not change where or how we write.
    monkeypatch.setenv("PERSISTENCE_MODULE", "eventsourcing.popo")
    monkeypatch.setenv("CIPHER_KEY", "not-a-key")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        led.create_session("s").observe("visible plaintext")
    assert b"visible plaintext" in b"".join(
        p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("x.db")
    )
    assert os.environ["PERSISTENCE_MODULE"] == "eventsourcing.popo"
