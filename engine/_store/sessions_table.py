"""The sessions projection: one row per session, kept in the store's own database and written in
the same transaction as every append, so listing the sessions reads one small table (O(sessions))
instead of scanning the log for each session's ``SessionStarted``.

A row holds the session's id, name, mode (strict or permissive), the position of its
``SessionStarted`` (``first``; a fork's own stream starts after its parent's positions), its head
position, how many events it stored itself, the original time of its first and of its head event,
and the parent of a fork. ``seq`` orders the rows as the sessions were created.

Like every projection it is rebuildable from the log: ``build`` reads one ``GROUP BY`` of the events
table and decodes two rows per session (its first and its head). A store written before the table
existed gets it built once, when it is opened (``ensure``). In an encrypted store the name and the
times stay out of the table (they would sit there in plaintext); readers decode them from the log
(two primary-key reads per session)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from engine.events import Event, SessionStarted

__all__ = ["TABLE", "Row", "Stored", "rows_for", "sqlite_ensure", "sqlite_write", "sqlite_read",
           "postgres_ensure", "postgres_write", "postgres_read"]

TABLE = "ctxledger_sessions"
_COLUMNS = "id, name, strict, first, position, events, started_at, last_at, forked_from"
_UPSERT = (
    f"INSERT INTO {{table}} ({_COLUMNS}) VALUES ({{marks}}) ON CONFLICT (id) DO UPDATE SET "
    "position = excluded.position, events = {table}.events + excluded.events, last_at = excluded.last_at"
)


class Row(NamedTuple):
    """What one append (or the build) writes for one session; ``name`` is None when not known here
    (an append after the start, or an encrypted store)."""

    id: str  # the session id, hex
    name: str | None
    strict: bool | None
    first: int | None
    position: int
    events: int
    started_at: str | None
    last_at: str | None
    forked_from: str | None


class Stored(NamedTuple):
    """One row as read back, in creation order."""

    id: UUID
    name: str | None
    strict: bool | None
    first: int | None
    position: int
    events: int
    started_at: datetime | None
    last_at: datetime | None
    forked_from: UUID | None


def _time(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def rows_for(session_id: UUID, events: Sequence[Event], *, sealed: bool) -> list[Row]:
    """The row one session's appended ``events`` (in position order) add. ``sealed``: the store is
    encrypted, so neither the name nor the times are written."""
    if not events:
        return []
    head = events[-1]
    started = next((ev for ev in events if type(ev) is SessionStarted), None)
    return [Row(
        id=session_id.hex,
        name=None if started is None or sealed else started.name,
        strict=None if started is None else started.strict,
        first=None if started is None else started.originator_version,
        position=head.originator_version,
        events=len(events),
        started_at=None if started is None or sealed else _time(started.at),
        last_at=None if sealed else _time(head.at),
        forked_from=None if started is None or started.forked_from is None else started.forked_from.hex,
    )]


def rows_by_session(events: Iterable[Event], *, sealed: bool) -> list[Row]:
    """``rows_for`` of every session among ``events`` (an import may hold several)."""
    groups: dict[UUID, list[Event]] = {}
    for ev in events:
        if ev.originator_id is not None:
            groups.setdefault(ev.originator_id, []).append(ev)
    out = []
    for sid, evs in groups.items():
        out += rows_for(sid, sorted(evs, key=lambda e: e.originator_version), sealed=sealed)
    return out


def _stored(r: Sequence[Any]) -> Stored:
    return Stored(
        id=UUID(str(r[0])), name=r[1], strict=None if r[2] is None else bool(r[2]), first=r[3], position=r[4],
        events=r[5], started_at=datetime.fromisoformat(r[6]) if r[6] else None,
        last_at=datetime.fromisoformat(r[7]) if r[7] else None, forked_from=UUID(str(r[8])) if r[8] else None,
    )


# The build: one GROUP BY over the events table, then the first and the head row of each session
# decoded (``decode(session id, position)`` returns the event there, or None when unreadable).
Decode = Callable[[UUID, int], Any]


def _built_rows(groups: Iterable[Sequence[Any]], decode: Decode, sealed: bool) -> list[Row]:
    out = []
    for sid_raw, lo, hi, count in groups:
        sid = UUID(str(sid_raw))
        first = decode(sid, lo)
        head = decode(sid, hi) if hi != lo else first
        started = first if type(first) is SessionStarted else None
        out.append(Row(
            id=sid.hex,
            name=None if started is None or sealed else started.name,
            strict=None if started is None else started.strict,
            first=None if started is None else lo,
            position=hi, events=count,
            started_at=None if started is None or sealed else _time(started.at),
            last_at=None if sealed or head is None else _time(head.at),
            forked_from=None if started is None or started.forked_from is None else started.forked_from.hex,
        ))
    return out


# -- SQLite ----------------------------------------------------------------------------------------


def sqlite_write(c: Any, rows: Sequence[Row]) -> None:
    """Upsert ``rows`` with the sqlite3 cursor/connection ``c``, inside the append's transaction."""
    if rows:
        c.executemany(_UPSERT.format(table=TABLE, marks=", ".join("?" * 9)), rows)


def sqlite_ensure(conn: Any, events_table: str, mark_id: UUID, decode: Decode, *, sealed: bool) -> bool:
    """Create and build the table from the log when the store has none (under the write lock, so no
    append is missed). Returns whether it was built now."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (TABLE,)).fetchone():
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (TABLE,)).fetchone():
            conn.execute("ROLLBACK")
            return False  # another process built it meanwhile
        conn.execute(
            f"CREATE TABLE {TABLE} (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, name TEXT, strict INTEGER, "
            "first INTEGER, position INTEGER NOT NULL, events INTEGER NOT NULL, started_at TEXT, last_at TEXT, "
            "forked_from TEXT)"
        )
        groups = conn.execute(
            f"SELECT originator_id, MIN(originator_version), MAX(originator_version), COUNT(*) FROM {events_table} "
            "WHERE originator_id != ? GROUP BY originator_id ORDER BY MIN(rowid)", (mark_id.hex,)
        ).fetchall()
        sqlite_write(conn, _built_rows(groups, decode, sealed))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return True


def sqlite_read(select: Callable[[str], list[Sequence[Any]]]) -> list[Stored]:
    """The rows in creation order; ``select(sql)`` runs a read and returns its rows as tuples."""
    return [_stored(r) for r in select(f"SELECT {_COLUMNS} FROM {TABLE} ORDER BY seq")]


# -- PostgreSQL --------------------------------------------------------------------------------------


def _pg_table(schema: str) -> str:
    return f'"{schema}".{TABLE}' if schema else TABLE


def postgres_write(curs: Any, schema: str, rows: Sequence[Row]) -> None:
    if rows:
        table = _pg_table(schema)
        sql = _UPSERT.format(table=table, marks=", ".join(["%s"] * 9)).replace(f"{table}.events", f"{TABLE}.events")
        curs.executemany(sql, [r._replace(id=UUID(r.id), forked_from=r.forked_from and UUID(r.forked_from)) for r in rows])


def _tuples(conn: Any) -> Any:
    from psycopg.rows import tuple_row

    return conn.cursor(row_factory=tuple_row)  # eventsourcing's connections return dict rows


def postgres_ensure(conn: Any, schema: str, events_table: str, mark_id: UUID, decode: Decode, *, sealed: bool) -> bool:
    """``sqlite_ensure`` for PostgreSQL (``conn``: a psycopg connection; the caller holds the store's
    DDL lock, and the events table is locked while the rows are built)."""
    table = _pg_table(schema)
    events = f'"{schema}".{events_table}' if schema else events_table
    with conn.transaction(), _tuples(conn) as curs:
        if curs.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
            return False
        curs.execute(
            f"CREATE TABLE {table} (seq bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE, name text, strict boolean, "
            "first bigint, position bigint NOT NULL, events bigint NOT NULL, started_at text, last_at text, "
            "forked_from uuid)"
        )
        curs.execute(f"LOCK TABLE {events} IN EXCLUSIVE MODE")
        groups = curs.execute(
            f"SELECT originator_id, MIN(originator_version), MAX(originator_version), COUNT(*) FROM {events} "
            "WHERE originator_id != %s GROUP BY originator_id ORDER BY MIN(notification_id)", (mark_id,)
        ).fetchall()
        postgres_write(curs, schema, _built_rows(groups, decode, sealed))
    return True


def postgres_read(conn: Any, schema: str) -> list[Stored]:
    with _tuples(conn) as curs:
        return [_stored(r) for r in curs.execute(f"SELECT {_COLUMNS} FROM {_pg_table(schema)} ORDER BY seq").fetchall()]
