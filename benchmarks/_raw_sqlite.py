"""Raw sqlite3, the baseline of the SQLite write benchmarks: the rows ctxledger stored, read back byte
for byte and inserted into the same table (eventsourcing's schema) the way a hand-written writer
would, in WAL mode with synchronous=FULL, as ctxledger runs."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def connect(path: str | Path) -> sqlite3.Connection:
    """A new database at ``path`` (which must not exist yet) with ctxledger's events table."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute(
        "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, "
        "state BLOB, PRIMARY KEY (originator_id, originator_version))"
    )
    return con


def insert(con: sqlite3.Connection, rows: list[tuple]) -> float:
    """One transaction of rows; returns the seconds it took."""
    t0 = time.perf_counter()
    con.execute("BEGIN")
    con.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows)
    con.execute("COMMIT")
    return time.perf_counter() - t0


def stored_rows(path: str | Path, session_id: str | None = None) -> list[tuple]:
    """The Observed rows ctxledger stored in the database at ``path`` (of one session, if given), in
    order, as (session id, position, topic, bytes)."""
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT originator_id, originator_version, topic, state FROM stored_events "
            "WHERE topic='ctxledger:Observed' AND (? IS NULL OR originator_id=?) ORDER BY originator_version",
            (session_id, session_id),
        ).fetchall()
    finally:
        con.close()
