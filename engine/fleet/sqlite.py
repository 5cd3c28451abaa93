"""The fleet view in a SQLite file."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from eventsourcing.sqlite import SQLiteTrackingRecorder

from engine.errors import InvalidInputError
from engine.fleet.view import APP_NAME, ROW_DECODER, ROW_ENCODER, TRACKING_TABLE, VIEW_TABLE, ViewMoved, text_time, where_clause
from projections.fleet import FleetRow

__all__ = ["SQLiteFleetView"]


class SQLiteFleetView(SQLiteTrackingRecorder):
    """The fleet view in a SQLite file: eventsourcing's tracking recorder, with its tracking in a
    table of its own (``fleet_tracking``) and the ``fleet_sessions`` table beside it."""

    def __init__(self, datastore: Any, **kwargs: Any):
        super().__init__(datastore, **kwargs)
        if not self.datastore.single_row_tracking:  # pragma: no cover - we never configure it
            raise InvalidInputError("the fleet view needs single-row tracking")
        t = TRACKING_TABLE
        self.insert_tracking_statement = (
            f"INSERT INTO {t} VALUES (:application_name, :notification_id) "
            "ON CONFLICT (application_name) DO UPDATE SET notification_id = :notification_id "
            f"WHERE {t}.notification_id < :notification_id RETURNING notification_id"
        )
        self.select_max_tracking_id_statement = f"SELECT MAX(notification_id) FROM {t} WHERE application_name=?"

    def construct_create_table_statements(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {TRACKING_TABLE} (application_name TEXT, notification_id INTEGER, "
            "PRIMARY KEY (application_name)) WITHOUT ROWID",
            f"CREATE TABLE IF NOT EXISTS {VIEW_TABLE} ("
            "session_id TEXT PRIMARY KEY, name TEXT NOT NULL, position INTEGER NOT NULL, "
            "events INTEGER NOT NULL, refusals INTEGER NOT NULL, violations INTEGER NOT NULL, "
            "drift INTEGER NOT NULL, unreadable INTEGER NOT NULL, last_event_at TEXT, "
            "last_drift_at TEXT, last_refusal_at TEXT, row TEXT NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {VIEW_TABLE}_last_drift_at ON {VIEW_TABLE} (last_drift_at)",
        ]

    def create_table(self) -> None:
        # In one write transaction, so processes opening a fresh file at once cannot both decide
        # the tables are missing and both insert the migration row (eventsourcing's own
        # create_table reads first, then writes).
        with self.datastore.transaction(commit=True) as c:
            for statement in self.create_table_statements:
                c.execute(statement)
            c.execute(f"INSERT OR IGNORE INTO {TRACKING_TABLE} VALUES (?, 1)", (self.table_migration_identifier,))
        self.tracking_table_exists = True
        self.tracking_migration_previous = self.tracking_migration_current = 1

    def load(self, session_ids: Iterable[UUID]) -> tuple[int | None, dict[UUID, FleetRow]]:
        """(tracked notification id, rows of these sessions), read in one transaction."""
        ids = [sid.hex for sid in session_ids]
        rows: dict[UUID, FleetRow] = {}
        with self.datastore.transaction(commit=False) as c:
            tracked = self._max_tracking_id(APP_NAME, c)
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                c.execute(
                    f"SELECT row FROM {VIEW_TABLE} WHERE session_id IN ({','.join('?' * len(chunk))})", chunk
                )
                for (data,) in c.fetchall():
                    row = ROW_DECODER.decode(data)
                    rows[row.session_id] = row
        return tracked, rows

    def commit(self, rows: Iterable[FleetRow], tracking: Tracking, expected: int | None) -> None:
        """Write rows and tracking in one transaction, if the tracking still holds ``expected``."""
        with self.datastore.transaction(commit=True) as c:
            # A write first, so the transaction holds SQLite's write lock before it reads.
            c.execute(f"UPDATE {TRACKING_TABLE} SET notification_id = notification_id WHERE application_name = ?", (APP_NAME,))
            if self._max_tracking_id(APP_NAME, c) != expected:
                raise ViewMoved
            c.executemany(
                f"INSERT INTO {VIEW_TABLE} (session_id, name, position, events, refusals, violations, drift, "
                "unreadable, last_event_at, last_drift_at, last_refusal_at, row) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "name = excluded.name, position = excluded.position, events = excluded.events, "
                "refusals = excluded.refusals, violations = excluded.violations, drift = excluded.drift, "
                "unreadable = excluded.unreadable, last_event_at = excluded.last_event_at, "
                "last_drift_at = excluded.last_drift_at, last_refusal_at = excluded.last_refusal_at, "
                "row = excluded.row",
                [
                    (
                        r.session_id.hex, r.name, r.position, r.events, r.refusals, r.violations, r.drift,
                        r.unreadable, text_time(r.last_event_at), text_time(r.last_drift_at),
                        text_time(r.last_refusal_at), ROW_ENCODER.encode(r).decode(),
                    )
                    for r in rows
                ],
            )
            self._insert_tracking(c, tracking)

    def select(self, *, since: datetime | None, drifted: bool, flagged: bool) -> list[FleetRow]:
        where, params = where_clause(since, drifted, flagged, text_time)
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT row FROM {VIEW_TABLE}{where} ORDER BY name", params)
            return [ROW_DECODER.decode(r[0]) for r in c.fetchall()]
