"""eventsourcing's PostgreSQL recorder with one fix (imported only for postgresql:// URLs, so the
core install needs no PostgreSQL driver)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder as _PgApplicationRecorder
from eventsourcing.utils import retry

from engine._store import sessions_table

__all__ = ["PostgresApplicationRecorder"]


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

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """eventsourcing's insert, then the sessions projection's rows, in the same transaction."""
        super()._insert_stored_events(curs, stored_events, **kwargs)
        rows = kwargs.get("sessions", ())
        if rows:  # on a cursor of its own: eventsourcing reads the notification ids from ``curs`` next
            with curs.connection.cursor() as own:
                sessions_table.postgres_write(own, self.datastore.schema, rows)
