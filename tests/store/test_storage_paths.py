"""The SQLite write path: rows the session encoded go straight to eventsourcing's table, a due
snapshot rides in the same transaction, snapshots are zstd (and old zlib ones still read), and a
failed transaction writes nothing at all."""

from __future__ import annotations

import sqlite3
import zlib

import msgspec
import pytest

from engine import ConcurrencyError, CorruptLogError, EstimateCounter, Ledger, StorageError
from engine._store.codec import SessionSnapshot, decompress_snapshot, encode_payload


def open_sqlite(path, **kw):
    return Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter(), **kw)


def rows(path, table):
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT originator_version, topic, state FROM {table} ORDER BY originator_id, originator_version").fetchall()
    finally:
        con.close()


def spans_of(view):
    return [(s.id, s.text, s.provenance, s.generation, s.position) for s in view.spans()]


def test_a_due_snapshot_is_written_with_the_events_that_made_it_due(tmp_path):
    path = tmp_path / "l.db"
    ledger = open_sqlite(path)
    ledger.snapshot_min_bytes = 1_000
    s = ledger.create_session("a")
    with s.batch():  # ~6 KB appended, a live buffer of ~600 bytes: a snapshot is due at the end
        for i in range(30):
            s.observe(f"observation {i} " + "x" * 100)
        for i in range(25):
            s.prune(f"o{i + 1}")
    snaps = rows(path, "stored_snapshots")
    assert [v for v, _, _ in snaps] == [s.position]  # one snapshot, at the batch's last event
    stored = snaps[0][2]
    assert stored[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
    snap = msgspec.msgpack.decode(decompress_snapshot(stored), type=SessionSnapshot)
    assert snap.state.version == s.position
    assert sorted(snap.state.live) == sorted(x.id for x in s.spans())
    ledger.close()


def test_snapshots_written_as_zlib_by_earlier_versions_still_load(tmp_path):
    path = tmp_path / "l.db"
    ledger = open_sqlite(path)
    ledger.snapshot_min_bytes = 10**9  # no snapshots of our own
    s = ledger.create_session("a")
    for i in range(12):
        s.observe(f"turn {i}")
        if i % 3 == 2:
            s.prune(f"o{i}")
    at8 = spans_of(s.at(8))
    head = spans_of(s)
    # An earlier ctxledger stored its snapshots zlib-compressed: put one at position 6.
    legacy = SessionSnapshot(originator_version=6, timestamp=s.at(6).state.started_at, state=s.at(6).state)
    payload = zlib.compress(encode_payload(legacy), 1)
    ledger.close()
    con = sqlite3.connect(path)
    with con:
        con.execute(
            "INSERT INTO stored_snapshots VALUES (?,?,?,?)", (s.id.hex, 6, "ctxledger:Snapshot", payload)
        )
    con.close()
    ledger = open_sqlite(path)
    s = ledger.session("a")
    assert spans_of(s.at(8)) == at8  # time travel starts from the zlib snapshot and replays 7..8
    assert spans_of(s) == head
    assert s.rebuild() == s.state
    ledger.close()


def test_a_refused_transaction_writes_neither_events_nor_snapshot(tmp_path):
    path = tmp_path / "l.db"
    ledger = open_sqlite(path)
    ledger.snapshot_min_bytes = 1_000
    s = ledger.create_session("a")
    s.observe("first")
    other = open_sqlite(path).session("a")
    other.observe("the other writer wins position 3")
    before_events, before_snaps = rows(path, "stored_events"), rows(path, "stored_snapshots")
    with pytest.raises(ConcurrencyError):
        with s.batch():
            for i in range(20):
                s.observe(f"late {i} " + "y" * 100)  # would make a snapshot due
    assert rows(path, "stored_events") == before_events
    assert rows(path, "stored_snapshots") == before_snaps
    assert [x.text for x in s.spans()] == ["first", "the other writer wins position 3"]  # reloaded
    ledger.close()


def test_a_locked_database_is_a_storage_error_and_nothing_is_written(tmp_path):
    path = tmp_path / "l.db"
    ledger = Ledger.open(f"sqlite:///{path}?", token_counter=EstimateCounter())
    s = ledger.create_session("a")
    s.observe("before")
    pool = ledger.store.app.recorder.datastore.pool
    pool.lock_timeout = 0  # new connections give up at once
    for conn in list(pool._pool):
        conn._sqlite_conn.execute("PRAGMA busy_timeout=0")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    before = rows(path, "stored_events")
    try:
        with pytest.raises(StorageError, match="nothing was written"):
            s.observe("blocked")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert rows(path, "stored_events") == before
    assert s.observe("after").id == "o2"  # the session carries on from what is stored
    ledger.close()


def test_a_row_that_does_not_decode_is_named_by_the_bulk_read(tmp_path):
    path = tmp_path / "l.db"
    ledger = open_sqlite(path)
    s = ledger.create_session("a")
    for i in range(9):
        s.observe(f"turn {i}")
    con = sqlite3.connect(path)  # another process damages position 5 under the open session
    with con:
        con.execute(
            "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=5",
            (b"\xc1 not msgpack", s.id.hex),
        )
    con.close()
    for read in (lambda: list(s.events()), s.rebuild, lambda: ledger.session("a")):
        with pytest.raises(CorruptLogError, match="position 5") as e:
            read()
        assert e.value.position == 5
    read = []
    with pytest.raises(CorruptLogError, match="position 5"):
        for ev in s.events():
            read.append(ev.position)
    assert read == [1, 2, 3, 4]  # every event before the damaged one, then the error
    ledger.close()


def test_the_fast_chain_walk_and_the_explaining_walk_agree(tmp_path):
    from engine._store.chain import explain_chain
    from engine._store.codec import chain_hash

    ledger = open_sqlite(tmp_path / "l.db")
    s = ledger.create_session("a")
    for i in range(1_200):  # more than two pages of the walk
        s.observe(f"turn {i}")
        if i % 7 == 0:
            s.prune(f"o{i + 1}")
    fast = s.verify()
    slow = explain_chain(ledger.store, s.id, s.position)
    assert fast.ok and slow.ok
    assert fast.position == slow.position == s.position
    last = ledger.store.app.mapper.plaintext(ledger.store.stored_row(s.id, s.position))
    assert fast.head == slow.head == chain_hash(last).hex()
    fork = ledger.fork(s, at=700, name="b")
    fork.observe("after the fork")
    assert fork.verify().head == explain_chain(ledger.store, fork.id, fork.position).head
    ledger.close()


def test_a_batch_leaves_the_wal_to_grow_and_a_single_event_commit_checkpoints_it(tmp_path):
    """A commit of many events checkpoints the WAL at SQLite's 1000 pages, a one-event commit at 256
    (engine/_store/sqlite.py says why): seen from outside as the database file growing when the WAL's pages
    are copied into it."""
    path = tmp_path / "l.db"
    ledger = open_sqlite(path)
    s = ledger.create_session("a")
    before = path.stat().st_size
    with s.batch():  # ~400 pages of WAL: over the one-event threshold, under the batch one
        for i in range(400):
            s.observe(f"observation {i} " + "x" * 3_000, tokens=750)
    assert path.stat().st_size == before, "a 400-page batch was checkpointed at once"
    s.observe("one more", tokens=2)
    assert path.stat().st_size > 400 * 3_000, "the one-event commit after it did not checkpoint"
    ledger.close()
    reopened = open_sqlite(path)
    assert len(reopened.session("a").spans()) == 401
    reopened.close()
