"""Tampering with the store directly (sqlite3 / psycopg on the rows themselves): every change,
deletion, reordering and insertion is detected by ``verify`` and ``ctxledger verify``, which name
the first bad position."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from uuid import UUID

import msgspec
import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main
from engine._store.codec import chain_hash, decode_payload, encode_payload
from engine.events import Observed, now

N_OBS = 8


class Rows:
    """Direct access to one session's rows, bypassing ctxledger entirely (what an attacker does)."""

    def __init__(self, url: str, session_id: UUID):
        self.url = url
        self.sid = session_id
        if url.startswith("sqlite"):
            self.path = url[len("sqlite:///") :]
            self.kind = "sqlite"
        else:
            self.kind = "postgres"
            self.schema = url.rsplit("schema=", 1)[1]

    def _sql(self, statement: str, params: tuple = ()) -> list:
        if self.kind == "sqlite":
            con = sqlite3.connect(self.path)
            try:
                cur = con.execute(statement.replace("%s", "?").replace("{t}", "stored_events"), params)
                out = cur.fetchall()
                con.commit()
                return out
            finally:
                con.close()
        import psycopg

        from conftest import POSTGRES_DSN

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
            cur = con.execute(statement.replace("{t}", f'"{self.schema}".ctxledger_events'), params)
            return cur.fetchall() if cur.description else []

    @property
    def _id(self):
        return self.sid.hex if self.kind == "sqlite" else self.sid

    def get(self, pos: int) -> tuple[str, bytes]:
        (topic, state), = self._sql("SELECT topic, state FROM {t} WHERE originator_id=%s AND originator_version=%s", (self._id, pos))
        return topic, bytes(state)

    def put(self, pos: int, topic: str, state: bytes) -> None:
        self._sql("UPDATE {t} SET topic=%s, state=%s WHERE originator_id=%s AND originator_version=%s", (topic, state, self._id, pos))

    def delete(self, pos: int) -> None:
        self._sql("DELETE FROM {t} WHERE originator_id=%s AND originator_version=%s", (self._id, pos))

    def insert(self, pos: int, topic: str, state: bytes) -> None:
        """Make room at ``pos`` by moving every later row up by one, then insert there."""
        self._sql("UPDATE {t} SET originator_version = originator_version + 1000000 WHERE originator_id=%s AND originator_version>=%s", (self._id, pos))
        self._sql("UPDATE {t} SET originator_version = originator_version - 999999 WHERE originator_id=%s AND originator_version>=1000000", (self._id,))
        self._sql("INSERT INTO {t} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)", (self._id, pos, topic, state))

    def count(self) -> int:
        return self._sql("SELECT count(*) FROM {t} WHERE originator_id=%s", (self._id,))[0][0]


def make_session(url: str, name: str = "victim"):
    """SessionStarted, 8 observations, a prune, a rewrite and a mark: 12 events."""
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session(name)
    spans = [s.observe(f"turn {i}: the deploy of service-{i} finished") for i in range(1, N_OBS + 1)]
    s.prune(spans[1].id)
    s.rewrite([spans[6].id, spans[7].id], "turns 7 and 8: two deploys finished")
    s.mark("end")
    assert s.position == 12 and s.verify().ok
    return led, s


def decode(topic: str, state: bytes):
    return decode_payload(topic, state)


def reencode(ev, **changes) -> bytes:
    return encode_payload(msgspec.structs.replace(ev, originator_id=None, **changes))


def cli_verify(url: str, name: str, *extra: str):
    return CliRunner().invoke(main, ["--db", url, "verify", name, *extra])


def assert_detected(led: Ledger, s, url: str, bad: int) -> None:
    r = s.verify()
    assert not r.ok
    assert r.first_bad_position == bad, r.reason
    # a fresh process sees the same thing, through the CLI (exit 1, the position named)
    res = cli_verify(url, s.name)
    assert res.exit_code == 1, res.output
    assert f"BROKEN at position {bad}:" in res.output
    res = cli_verify(url, s.name, "--json")
    assert res.exit_code == 1
    assert json.loads(res.output)["first_bad_position"] == bad


K = 5  # the tampered position: the 4th observation


def test_untouched_store_verifies_everywhere(url):
    led, s = make_session(url)
    res = cli_verify(url, s.name)
    assert res.exit_code == 0 and "OK, 12 events" in res.output
    led.close()


def test_changed_text_is_named(url):
    led, s = make_session(url)
    rows = Rows(url, s.id)
    topic, state = rows.get(K)
    ev = decode(topic, state)
    rows.put(K, topic, reencode(ev, text="turn 4: the deploy of service-4 FAILED"))
    assert_detected(led, s, url, K)
    led.close()


def test_changed_prev_field_is_named(url):
    """The changed row's own back-pointer is wrong and nothing after it vouches for it."""
    led, s = make_session(url)
    rows = Rows(url, s.id)
    topic, state = rows.get(K)
    rows.put(K, topic, reencode(decode(topic, state), prev=b"\x00" * 16))
    assert_detected(led, s, url, K)
    led.close()


def test_garbage_bytes_are_named(url):
    led, s = make_session(url)
    rows = Rows(url, s.id)
    topic, _ = rows.get(K)
    rows.put(K, topic, os.urandom(40))
    assert_detected(led, s, url, K)
    led.close()


def test_changed_topic_is_named(url):
    led, s = make_session(url)
    rows = Rows(url, s.id)
    _, state = rows.get(K)
    rows.put(K, "ctxledger:Pruned", state)
    assert_detected(led, s, url, K)
    led.close()


def test_deleted_event_is_named(url):
    led, s = make_session(url)
    Rows(url, s.id).delete(K)
    assert_detected(led, s, url, K)
    led.close()


def test_deleted_first_event_is_named(url):
    led, s = make_session(url)
    Rows(url, s.id).delete(1)
    assert_detected(led, s, url, 1)
    led.close()


def test_reordered_events_are_named(url):
    led, s = make_session(url)
    rows = Rows(url, s.id)
    a, b = rows.get(K), rows.get(K + 1)
    rows.put(K, *b)
    rows.put(K + 1, *a)
    assert_detected(led, s, url, K)
    led.close()


def test_inserted_copy_is_named(url):
    """A replayed old event slipped in at K (later events moved up by one)."""
    led, s = make_session(url)
    rows = Rows(url, s.id)
    rows.insert(K, *rows.get(2))
    assert rows.count() == 13
    assert_detected(led, s, url, K)
    led.close()


def test_inserted_forgery_with_a_correct_back_pointer_is_named(url):
    """A careful forger gives the inserted event the right position and the right ``prev``: the
    event after it still points past it, which names the insertion."""
    led, s = make_session(url)
    rows = Rows(url, s.id)
    before = chain_hash(rows.get(K - 1)[1])
    forged = Observed(originator_version=K, at=now(), prev=before, span_id="o4", text="the migration completed at 14:02")
    rows.insert(K, "ctxledger:Observed", encode_payload(forged))
    assert_detected(led, s, url, K)
    led.close()


def test_inserted_forgery_with_a_wrong_back_pointer_is_named(url):
    led, s = make_session(url)
    rows = Rows(url, s.id)
    forged = Observed(originator_version=K, at=now(), prev=b"\x01" * 16, span_id="o4", text="forged")
    rows.insert(K, "ctxledger:Observed", encode_payload(forged))
    assert_detected(led, s, url, K)
    led.close()


def test_inserted_first_event_is_named(url):
    """A forged SessionStarted put in front of the real one."""
    led, s = make_session(url)
    rows = Rows(url, s.id)
    topic, state = rows.get(1)
    rows.insert(1, topic, reencode(decode(topic, state), reason="forged"))
    assert_detected(led, s, url, 1)
    led.close()


def test_appended_replay_is_named(url):
    """A copy of an old event appended after the head does not fit there."""
    led, s = make_session(url)
    rows = Rows(url, s.id)
    rows.insert(13, *rows.get(3))
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    r = fresh.verify(s.id)
    assert not r.ok and r.first_bad_position == 13
    res = cli_verify(url, s.name)
    assert res.exit_code == 1 and "BROKEN at position 13:" in res.output
    fresh.close()
    led.close()


def test_tampering_is_found_by_verify_all(url):
    led, s = make_session(url)
    other = led.create_session("bystander")
    other.observe("unrelated")
    Rows(url, s.id).delete(K)
    res = CliRunner().invoke(main, ["--db", url, "verify", "--all"])
    assert res.exit_code == 1, res.output
    assert f"victim: BROKEN at position {K}:" in res.output
    assert "bystander: OK, 2 events" in res.output
    led.close()


def test_an_untampered_neighbour_session_still_loads_and_writes(url):
    led, s = make_session(url)
    other = led.create_session("bystander")
    other.observe("unrelated")
    Rows(url, s.id).delete(K)
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    b = fresh.session("bystander")
    b.observe("still fine")
    assert b.verify().ok and b.position == 3
    fresh.close()
    led.close()


def test_encrypted_store_ciphertext_flip_is_named(tmp_path):
    import base64

    key = base64.b64encode(b"k" * 32).decode()
    url = f"sqlite:///{tmp_path / 'enc.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter(), cipher_key=key)
    s = led.create_session("victim")
    for i in range(6):
        s.observe(f"secret {i}")
    rows = Rows(url, s.id)
    topic, state = rows.get(K)
    flipped = bytearray(state)
    flipped[len(flipped) // 2] ^= 0x01
    rows.put(K, topic, bytes(flipped))
    r = s.verify()
    assert not r.ok and r.first_bad_position == K
    env = {"CTXLEDGER_CIPHER_KEY": key}
    res = CliRunner().invoke(main, ["--db", url, "verify", "victim"], env=env)
    assert res.exit_code == 1 and f"BROKEN at position {K}:" in res.output
    led.close()


def test_tampered_database_file_is_reported_not_crashed(tmp_path):
    """Zeroing a page of the file: a clean error or a named position, never a traceback."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led, s = make_session(url)
    led.close()
    path = Path(tmp_path / "ledger.db")
    for suffix in ("-wal", "-shm"):
        assert not Path(str(path) + suffix).exists() or True
    data = bytearray(path.read_bytes())
    data[4096 : 4096 + 512] = b"\x00" * 512
    path.write_bytes(bytes(data))
    res = cli_verify(url, "victim")
    assert res.exit_code in (1, 2, 3), res.output
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
