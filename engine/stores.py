"""Small extensions of eventsourcing's recorders (configured by topic, never a store of our own)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder as _PgApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor
from eventsourcing.utils import retry

__all__ = ["FastSQLiteApplicationRecorder", "PostgresApplicationRecorder"]


class FastSQLiteApplicationRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite recorder with two hot paths trimmed, same table and transactions:

    - a batch is inserted with one ``executemany`` (eventsourcing executes row by row to collect
      notification ids, which ctxledger does not use: it reads notifications back from the table);
    - a select does not build a UUID per row: every row's session id is the one that was asked for.
    """

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **_: Any) -> None:
        c.executemany(
            self.insert_events_statement,
            [
                (
                    s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id,
                    s.originator_version,
                    s.topic,
                    s.state,
                )
                for s in stored_events
            ],
        )
        return None

    def select_rows(
        self, originator_id: UUID, *, gt: int, lte: int, limit: int
    ) -> list[tuple[int, str, bytes]]:
        """(position, topic, stored bytes) rows in order: the bulk-read path of rebuild and export."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_version, topic, state FROM {self.events_table_name} "
                "WHERE originator_id=? AND originator_version>? AND originator_version<=? "
                "ORDER BY originator_version ASC LIMIT ?",
                (originator_id.hex, gt, lte, limit),
            )
            return c.fetchall()

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        statement = (
            f"SELECT originator_version, topic, state FROM {self.events_table_name} WHERE originator_id=? "
        )
        params: list[Any] = [originator_id.hex if isinstance(originator_id, UUID) else originator_id]
        if gt is not None:
            statement += "AND originator_version>? "
            params.append(gt)
        if lte is not None:
            statement += "AND originator_version<=? "
            params.append(lte)
        statement += "ORDER BY originator_version DESC " if desc else "ORDER BY originator_version ASC "
        if limit is not None:
            statement += "LIMIT ? "
            params.append(limit)
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, params)
            rows = c.fetchall()
        return [StoredEvent(originator_id, r[0], r[1], r[2]) for r in rows]


class PostgresApplicationRecorder(_PgApplicationRecorder):
    """eventsourcing's PostgreSQL recorder, with large batches written outside pipeline mode.

    eventsourcing sends the LOCK TABLE, NOTIFY and INSERT of a batch through one psycopg pipeline.
    psycopg's pure-Python pipeline loop stops flushing once its command queue is empty, so when the
    last command's bytes do not fit the socket buffer in one write, the client waits for results
    while the server waits for the rest of the data: the insert hangs for ever (psycopg issue
    #685; here a 7 MB event hung about two times in three). Batches whose payloads total more than
    ``PIPELINE_MAX_BYTES`` are written with the same statements on a plain connection in one
    transaction (the lock, the notification and the primary key work exactly as before); small
    batches, the common case, keep the pipeline's single round trip."""

    PIPELINE_MAX_BYTES = 8 * 1024

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if self.datastore.enable_db_functions or sum(len(s.state) for s in stored_events) <= self.PIPELINE_MAX_BYTES:
            return _PgApplicationRecorder.insert_events.__wrapped__(self, stored_events, **kwargs)
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._insert_events(curs, stored_events, **kwargs)
            self._insert_stored_events(curs, stored_events, **kwargs)
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
