"""Small extensions of eventsourcing's recorders (configured by topic, never a store of our own)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

__all__ = ["FastSQLiteApplicationRecorder"]


class FastSQLiteApplicationRecorder(SQLiteApplicationRecorder):
    """Inserts a batch with one ``executemany`` instead of one ``execute`` per row.

    eventsourcing's recorder executes row by row to collect each row's notification id; ctxledger
    reads notifications back from the table and does not need them returned, so a batch of 100
    events costs one statement. Same table, same transaction, same conflict detection (the
    primary key on session id + position)."""

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
