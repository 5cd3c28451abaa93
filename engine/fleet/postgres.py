"""The fleet view in PostgreSQL (imported only for postgresql:// stores: the driver is an extra)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder

from engine.fleet.view import APP_NAME, ROW_DECODER, ROW_ENCODER, TRACKING_TABLE, ViewMoved, utc, where_clause
from projections.fleet import FleetRow

__all__ = ["PostgresFleetView"]


class PostgresFleetView(PostgresTrackingRecorder):
    """The fleet view in PostgreSQL: eventsourcing's tracking recorder (table ``fleet_tracking``,
    named after the projection) with the ``fleet_sessions`` table beside it, in the ledger's schema."""

    def __init__(self, datastore: Any, *, tracking_table_name: str = TRACKING_TABLE, **kwargs: Any):
        super().__init__(datastore, tracking_table_name=tracking_table_name, **kwargs)
        from psycopg.sql import SQL, Identifier

        self.view_table_name = tracking_table_name.rsplit("_tracking", 1)[0] + "_sessions"
        self.check_identifier_length(self.view_table_name)
        schema, table = Identifier(self.datastore.schema), Identifier(self.view_table_name)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} ("
                "session_id uuid PRIMARY KEY, name text NOT NULL, position bigint NOT NULL, "
                "events bigint NOT NULL, refusals bigint NOT NULL, violations bigint NOT NULL, "
                "drift bigint NOT NULL, unreadable bigint NOT NULL, last_event_at timestamptz, "
                "last_drift_at timestamptz, last_refusal_at timestamptz, row text NOT NULL)"
            ).format(schema, table)
        )
        self.sql_create_statements.append(
            SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (last_drift_at)").format(
                Identifier(self.view_table_name + "_last_drift_at"), schema, table
            )
        )
        self._select_rows = SQL("SELECT row FROM {}.{} WHERE session_id = ANY(%s)").format(schema, table)
        self._lock_tracking = SQL("SELECT notification_id FROM {}.{} WHERE application_name = %s FOR UPDATE").format(
            schema, Identifier(self.tracking_table_name)
        )
        self._upsert = SQL(
            "INSERT INTO {}.{} (session_id, name, position, events, refusals, violations, drift, unreadable, "
            "last_event_at, last_drift_at, last_refusal_at, row) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
            "name = EXCLUDED.name, position = EXCLUDED.position, events = EXCLUDED.events, "
            "refusals = EXCLUDED.refusals, violations = EXCLUDED.violations, drift = EXCLUDED.drift, "
            "unreadable = EXCLUDED.unreadable, last_event_at = EXCLUDED.last_event_at, "
            "last_drift_at = EXCLUDED.last_drift_at, last_refusal_at = EXCLUDED.last_refusal_at, row = EXCLUDED.row"
        ).format(schema, table)
        self._select_all = SQL("SELECT row FROM {}.{}").format(schema, table)

    def load(self, session_ids: Iterable[UUID]) -> tuple[int | None, dict[UUID, FleetRow]]:
        rows: dict[UUID, FleetRow] = {}
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            tracked = self._max_tracking_id(APP_NAME, curs)
            curs.execute(self._select_rows, (list(session_ids),))
            for rec in curs.fetchall():
                row = ROW_DECODER.decode(rec["row"])
                rows[row.session_id] = row
        return tracked, rows

    def commit(self, rows: Iterable[FleetRow], tracking: Tracking, expected: int | None) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self._lock_tracking, (APP_NAME,))
            rec = curs.fetchone()
            if (rec["notification_id"] if rec else None) != expected:
                raise ViewMoved
            for r in rows:  # one statement per row: psycopg's executemany pipelines (see engine._store.sqlite)
                curs.execute(
                    self._upsert,
                    (
                        r.session_id, r.name, r.position, r.events, r.refusals, r.violations, r.drift,
                        r.unreadable, utc(r.last_event_at), utc(r.last_drift_at), utc(r.last_refusal_at),
                        ROW_ENCODER.encode(r).decode(),
                    ),
                    prepare=True,
                )
            self._insert_tracking(curs, tracking)

    def select(self, *, since: datetime | None, drifted: bool, flagged: bool) -> list[FleetRow]:
        from psycopg.sql import SQL

        where, params = where_clause(since, drifted, flagged, utc, "%s")
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self._select_all + SQL(where + " ORDER BY name"), params)
            return [ROW_DECODER.decode(rec["row"]) for rec in curs.fetchall()]
