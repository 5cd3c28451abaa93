"""Encryption at rest through eventsourcing's AES-GCM cipher: the database holds no plaintext, a
wrong or missing key is a clean typed error, and the key never appears in any message."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import drop_schema, postgres_url
from engine import CorruptLogError, EstimateCounter, InvalidInputError, Ledger, LedgerError, StorageError
from engine.cli import main

MARKERS = ["PLAINTEXT-MARKER-7f3a", "the migration completed at 14:02", "sk-live-SECRET-TOKEN-99"]


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def db_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            data += p.read_bytes()
    return data


def write_secrets(led: Ledger) -> None:
    s = led.create_session("secret-session-name")
    a = s.observe(MARKERS[0], meta={"note": MARKERS[2]})
    b = s.observe(MARKERS[1], role="assistant")
    s.rewrite([a.id, b.id], f"summary: {MARKERS[0]} and {MARKERS[1]}")
    big = " ".join([MARKERS[0]] * 2000)
    for _ in range(3):  # 3 x 44 kB observed and pruned: enough for a snapshot
        s.prune(s.observe(big).id)
    s.mark("checkpoint-" + MARKERS[0][:9])


def test_sqlite_file_holds_no_plaintext(tmp_path):
    path = tmp_path / "enc.db"
    key = new_key()
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter(), cipher_key=key)
    write_secrets(led)
    raw_before_close = db_bytes(path)  # the WAL is where fresh writes live
    led.close()
    raw = raw_before_close + db_bytes(path)
    assert b"stored_events" in raw  # it is the database we think it is
    for marker in MARKERS + ["secret-session-name"]:
        assert marker.encode() not in raw, marker
        assert marker.encode("utf-16-le") not in raw
    # and it reads back with the key
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter(), cipher_key=key)
    s = led.session("secret-session-name")
    assert s.verify().ok and s.original("o1").text == MARKERS[0]
    assert s.rebuild() == s.state
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM stored_snapshots").fetchone()[0] >= 1  # it was covered too
    con.close()
    assert [x.id for x in s.at(s.position - 1).spans()] == [x.id for x in s.spans()]  # from the snapshot
    led.close()


def test_the_same_store_without_encryption_does_hold_plaintext(tmp_path):
    """The control for the test above: the markers are findable when there is no cipher."""
    path = tmp_path / "plain.db"
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    write_secrets(led)
    raw = db_bytes(path)
    led.close()
    raw += db_bytes(path)
    assert MARKERS[1].encode() in raw


def test_wrong_key_is_a_clean_typed_error_and_changes_nothing(tmp_path):
    path = tmp_path / "enc.db"
    key = new_key()
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter(), cipher_key=key)
    write_secrets(led)
    led.close()
    before = db_bytes(path)
    wrong = new_key()
    with pytest.raises(CorruptLogError) as e:
        Ledger.open(f"sqlite:///{path}", cipher_key=wrong)
    assert "key" in e.value.message and "\n" not in e.value.message
    assert wrong not in str(e.value) and key not in str(e.value)
    with pytest.raises(CorruptLogError) as e:
        Ledger.open(f"sqlite:///{path}")  # no key at all
    assert "encrypted" in e.value.message
    assert db_bytes(path) == before


def test_a_key_on_an_unencrypted_store_is_refused(tmp_path):
    path = tmp_path / "plain.db"
    led = Ledger.open(f"sqlite:///{path}")
    led.create_session("a").observe("hello")
    led.close()
    with pytest.raises(CorruptLogError, match="key"):
        Ledger.open(f"sqlite:///{path}", cipher_key=new_key())


@pytest.mark.parametrize("bad", ["not-base64!!", base64.b64encode(b"short").decode(), base64.b64encode(os.urandom(20)).decode()])
def test_malformed_keys_are_refused_without_echoing_them(tmp_path, bad):
    with pytest.raises(InvalidInputError) as e:
        Ledger.open(f"sqlite:///{tmp_path / 'x.db'}", cipher_key=bad)
    assert bad not in str(e.value)
    assert "16, 24 or 32" in e.value.message
    assert not (tmp_path / "x.db").exists()


def test_key_from_environment_and_key_file(tmp_path, monkeypatch):
    path = tmp_path / "enc.db"
    key = new_key()
    monkeypatch.setenv("CTXLEDGER_CIPHER_KEY", key)
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    led.create_session("env").observe(MARKERS[0])
    led.close()
    assert MARKERS[0].encode() not in db_bytes(path)
    monkeypatch.delenv("CTXLEDGER_CIPHER_KEY")
    key_file = tmp_path / "cipher.key"
    key_file.write_text(key + "\n")
    monkeypatch.setenv("CTXLEDGER_CIPHER_KEY_FILE", str(key_file))
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    assert led.session("env").spans()[0].text == MARKERS[0]
    led.close()
    monkeypatch.setenv("CTXLEDGER_CIPHER_KEY_FILE", str(tmp_path / "missing.key"))
    with pytest.raises(StorageError, match="cipher key file"):
        Ledger.open(f"sqlite:///{path}")


def test_cli_with_a_wrong_key_exits_3_without_traceback_or_key(tmp_path):
    path = tmp_path / "enc.db"
    key = new_key()
    led = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter(), cipher_key=key)
    write_secrets(led)
    led.close()
    runner = CliRunner()
    ok = runner.invoke(main, ["--db", f"sqlite:///{path}", "log", "secret-session-name"], env={"CTXLEDGER_CIPHER_KEY": key})
    assert ok.exit_code == 0 and MARKERS[0] in ok.output
    wrong = new_key()
    res = runner.invoke(main, ["--db", f"sqlite:///{path}", "log", "secret-session-name"], env={"CTXLEDGER_CIPHER_KEY": wrong})
    assert res.exit_code == 3
    assert res.output.startswith("ctxledger: error:") and res.output.count("\n") == 1
    assert "Traceback" not in res.output and wrong not in res.output and key not in res.output


def test_the_key_never_appears_in_repr_or_errors(tmp_path):
    key = new_key()
    led = Ledger.open(f"sqlite:///{tmp_path / 'e.db'}", cipher_key=key)
    assert key not in repr(led)
    s = led.create_session("s")
    with pytest.raises(LedgerError) as e:
        s.prune("o99")
    assert key not in str(e.value)
    led.close()


def test_postgres_rows_hold_no_plaintext():
    url = postgres_url()
    try:
        key = new_key()
        led = Ledger.open(url, token_counter=EstimateCounter(), cipher_key=key)
        write_secrets(led)
        led.close()
        import psycopg

        from conftest import POSTGRES_DSN

        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(POSTGRES_DSN) as con:
            rows = con.execute(f'SELECT topic, state FROM "{schema}".ctxledger_events').fetchall()
            snaps = con.execute(f'SELECT state FROM "{schema}".ctxledger_snapshots').fetchall()
        assert len(rows) >= 8 and snaps
        raw = b"".join(bytes(r[-1]) for r in rows + snaps)
        for marker in MARKERS + ["secret-session-name"]:
            assert marker.encode() not in raw
        with pytest.raises(CorruptLogError):
            Ledger.open(url, cipher_key=new_key())
        led = Ledger.open(url, token_counter=EstimateCounter(), cipher_key=key)
        assert led.session("secret-session-name").verify().ok
        led.close()
    finally:
        drop_schema(url)
