"""Small extensions of eventsourcing's recorders (configured by topic, never a store of our own)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

__all__ = ["FastSQLiteApplicationRecorder"]


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
