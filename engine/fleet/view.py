"""What every fleet view table offers, and what the SQLite and PostgreSQL views share.

A view is eventsourcing's tracking recorder for the fleet projection, with a ``fleet_sessions`` table
beside its tracking table (``fleet_tracking``): one row per session, with queryable columns and the
whole row as JSON. Rows and tracking are written in one transaction (``commit``), only if the tracking
still holds the position the rows were read at.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, Protocol
from uuid import UUID

import msgspec
from eventsourcing.persistence import Tracking

from engine._store.log_store import StoreApp
from projections.fleet import FleetRow

__all__ = [
    "FleetView",
    "ViewMoved",
    "PROJECTION_NAME",
    "VIEW_TABLE",
    "TRACKING_TABLE",
    "APP_NAME",
    "ROW_ENCODER",
    "ROW_DECODER",
    "utc",
    "text_time",
    "where_clause",
]

PROJECTION_NAME = "fleet"
VIEW_TABLE = "fleet_sessions"
TRACKING_TABLE = "fleet_tracking"
APP_NAME = StoreApp.name

ROW_ENCODER = msgspec.json.Encoder()
ROW_DECODER = msgspec.json.Decoder(FleetRow)


class ViewMoved(Exception):
    """The tracking row moved while a batch was being folded: another updater got there first."""


class FleetView(Protocol):
    """The fleet view's tables in one database (``SQLiteFleetView``, ``PostgresFleetView``); the
    tracking methods and ``datastore`` are eventsourcing's ``TrackingRecorder``'s."""

    datastore: Any

    def load(self, session_ids: Iterable[UUID]) -> tuple[int | None, dict[UUID, FleetRow]]:
        """(tracked notification id, rows of these sessions), read in one transaction."""

    def commit(self, rows: Iterable[FleetRow], tracking: Tracking, expected: int | None) -> None:
        """Write rows and tracking in one transaction if the tracking still holds ``expected``;
        raise ``ViewMoved`` otherwise."""

    def select(self, *, since: datetime | None, drifted: bool, flagged: bool) -> list[FleetRow]:
        """Rows by session name (see ``Fleet.rows``)."""

    def max_tracking_id(self, application_name: str) -> int | None: ...

    def insert_tracking(self, tracking: Tracking) -> None: ...


def utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def text_time(dt: datetime | None) -> str | None:
    dt = utc(dt)
    return None if dt is None else dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def where_clause(since: datetime | None, drifted: bool, flagged: bool, conv: Any, ph: str = "?") -> tuple[str, list]:
    clauses, params = [], []
    if drifted:
        clauses.append("drift > 0")
        if since is not None:
            clauses.append(f"last_drift_at >= {ph}")
            params.append(conv(since))
    elif flagged:
        clauses.append("(drift > 0 OR refusals > 0 OR unreadable > 0)")
        if since is not None:
            clauses.append(f"(last_drift_at >= {ph} OR last_refusal_at >= {ph} OR (unreadable > 0 AND last_event_at >= {ph}))")
            params += [conv(since)] * 3
    elif since is not None:
        clauses.append(f"last_event_at >= {ph}")
        params.append(conv(since))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params
