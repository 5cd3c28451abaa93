"""Keeping the fleet view up to date: every session of a store in one queryable table.

The view follows the store's notification log (the global order of every event of every
session) and folds each event into its session's row (``projections.fleet.fold``). It lives in the
same database as the ledger, in two tables: ``fleet_sessions`` (one row per session, with
queryable columns and the whole row as JSON) and ``fleet_tracking`` (the last notification id
folded in). Both are written in ONE transaction, so each event is folded exactly once, whatever
crashes or runs twice:

- ``Fleet(ledger).catch_up()`` reads the log page by page from the tracked position (SQLite and
  PostgreSQL). It is what ``ctxledger fleet`` runs before it shows the table.
- ``follow(url)`` runs eventsourcing's ``ProjectionRunner`` on PostgreSQL: a subscription
  (LISTEN/NOTIFY) delivers each new event as it is committed, by any writer on any host. SQLite
  has no subscriptions; ``ctxledger fleet --follow`` polls ``catch_up`` there instead.

Concurrent updaters are safe: a batch is written only if the tracking row still holds the
position its rows were read at (checked under a lock in the writing transaction), otherwise the
batch is discarded and re-read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import InfrastructureFactory, IntegrityError, OperationalError, Tracking
from eventsourcing.projection import Projection, ProjectionRunner
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import Environment

from engine.codec import TOPICS, EventMapper
from engine.errors import CorruptLogError, InvalidInputError, LedgerError, StorageError
from engine.events import EVENT_TYPES, Event
from engine.ledger import Ledger
from engine.store import StoreApp, postgres_ddl_lock, storage_error
from engine.stores import SQLITE_FACTORY
from projections.fleet import AuditHook, Finding, FleetRow, audit_findings, fold, needs_audit, unreadable

__all__ = [
    "Fleet",
    "follow",
    "SQLiteFleetView",
    "FleetProjection",
    "PROJECTION_NAME",
    "VIEW_TABLE",
    "TRACKING_TABLE",
]

PROJECTION_NAME = "fleet"
VIEW_TABLE = "fleet_sessions"
TRACKING_TABLE = "fleet_tracking"
APP_NAME = StoreApp.name
SESSION_TOPICS = tuple(TOPICS[cls] for cls in EVENT_TYPES.values())

ROW_ENCODER = msgspec.json.Encoder()
ROW_DECODER = msgspec.json.Decoder(FleetRow)


def utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _text_time(dt: datetime | None) -> str | None:
    dt = utc(dt)
    return None if dt is None else dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ViewMoved(Exception):
    """The tracking row moved while a batch was being folded: another updater got there first."""


# -- the view tables -------------------------------------------------------------------------------


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
                        r.unreadable, _text_time(r.last_event_at), _text_time(r.last_drift_at),
                        _text_time(r.last_refusal_at), ROW_ENCODER.encode(r).decode(),
                    )
                    for r in rows
                ],
            )
            self._insert_tracking(c, tracking)

    def select(self, *, since: datetime | None, drifted: bool, flagged: bool) -> list[FleetRow]:
        where, params = where_clause(since, drifted, flagged, _text_time)
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT row FROM {VIEW_TABLE}{where} ORDER BY name", params)
            return [ROW_DECODER.decode(r[0]) for r in c.fetchall()]


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


class Unreadable(msgspec.Struct, frozen=True):
    """A notification whose bytes did not decode (corrupt, tampered, or a wrong key)."""

    originator_id: UUID
    originator_version: int
    reason: str


class _LenientMapper(EventMapper):
    def to_domain_event(self, stored: Any) -> Any:
        try:
            return super().to_domain_event(stored)
        except CorruptLogError as e:
            oid = stored.originator_id if isinstance(stored.originator_id, UUID) else UUID(str(stored.originator_id))
            return Unreadable(oid, stored.originator_version, e.message)


class _FollowApp(StoreApp):
    """The ledger's application, decoding leniently: one corrupt row must not stop the view."""

    name = StoreApp.name

    def construct_mapper(self):
        return self.factory.mapper(transcoder=self.construct_transcoder(), mapper_class=_LenientMapper)


class _Folder:
    """Folds batches of events into view rows and commits them with their tracking."""

    def __init__(self, view: Any, ledger: Ledger | None, audit: AuditHook | None):
        self.view = view
        self.ledger = ledger
        self.audit = audit

    def apply(self, items: Sequence[Event | Unreadable], last_id: int, start: int | None) -> bool:
        """Fold ``items`` (the notifications after ``start`` up to ``last_id``). Returns False if
        the view had moved on (nothing written); raises ``ViewMoved`` if it moved while folding."""
        ids = {it.originator_id for it in items}
        tracked, rows = self.view.load(ids)
        if tracked != start:
            return False
        due: dict[UUID, Event] = {}
        for it in items:
            sid = it.originator_id
            if isinstance(it, Unreadable):
                rows[sid] = unreadable(rows.get(sid), sid, it.originator_version, it.reason)
                continue
            rows[sid] = fold(rows.get(sid), it)
            if needs_audit(it):
                due[sid] = it
        if self.audit is not None and self.ledger is not None:
            for sid, ev in due.items():
                self._audit(rows[sid], ev)
        self.view.commit(rows.values(), Tracking(APP_NAME, last_id), tracked)
        return True

    def _audit(self, row: FleetRow, ev: Event) -> None:
        try:
            reader = self.ledger.session(row.session_id).view(row.position)
            found = list(self.audit(reader))
        except LedgerError as e:
            row.findings = (row.findings + [Finding(kind="audit-failed", position=row.position, detail=e.message[:200])])[-50:]
            return
        except Exception as e:  # a third-party hook's bug must not wedge the view; it is recorded
            row.findings = (
                row.findings + [Finding(kind="audit-failed", position=row.position, detail=f"{type(e).__name__}: {e}"[:200])]
            )[-50:]
            return
        before = {(f.kind, f.position, f.span_id) for f in row.audit}
        row.audit = [msgspec.structs.replace(f, at=f.at or ev.at, source="audit") for f in found]
        row.audited_position = row.position
        if any((f.kind, f.position, f.span_id) not in before for f in row.audit):
            if row.first_drift_at is None or ev.at < row.first_drift_at:
                row.first_drift_at = ev.at
            if row.last_drift_at is None or ev.at > row.last_drift_at:
                row.last_drift_at = ev.at


# -- the public face -------------------------------------------------------------------------------


def _ddl_lock(env: dict[str, str], ledger: Ledger) -> Any:
    """Tables are created one process at a time on PostgreSQL (see ``Ledger.open``)."""
    if env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
        return postgres_ddl_lock(env, ledger.url)
    return contextlib.nullcontext()


def _view_env(ledger_env: dict[str, str]) -> Environment:
    return Environment(PROJECTION_NAME, {k: v for k, v in ledger_env.items() if k not in ("CIPHER_KEY", "CIPHER_TOPIC")})


def _view_class(env: dict[str, str]) -> type:
    module = env.get("PERSISTENCE_MODULE", "")
    if module in ("eventsourcing.sqlite", SQLITE_FACTORY):
        return SQLiteFleetView
    if module == "eventsourcing.postgres":
        from engine.pgfleet import PostgresFleetView  # the PostgreSQL driver is an extra

        return PostgresFleetView
    raise InvalidInputError("the fleet view needs a SQLite or PostgreSQL store (not memory://)")


class Fleet:
    """The fleet view of one store: ``catch_up()`` folds new events in; ``rows()`` queries it."""

    def __init__(self, ledger: Ledger, *, audit: AuditHook | None = audit_findings):
        self.ledger = ledger
        env = dict(ledger.store.app.env)
        cls = _view_class(env)
        for attempt in range(5):
            try:
                with _ddl_lock(env, ledger):
                    self.view = InfrastructureFactory.construct(env=_view_env(env)).tracking_recorder(cls)
                break
            except LedgerError:
                raise
            except OperationalError as e:  # SQLite: another process changed the file mid-create
                if attempt == 4:
                    raise storage_error(e, "cannot open the fleet view") from None
                time.sleep(0.05 * (attempt + 1))
            except Exception as e:
                raise storage_error(e, "cannot open the fleet view") from None
        self._folder = _Folder(self.view, ledger, audit)

    def close(self) -> None:
        self.view.datastore.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def tracked(self) -> int:
        """The last notification id folded into the view (0 before the first)."""
        try:
            return self.view.max_tracking_id(APP_NAME) or 0
        except Exception as e:
            raise storage_error(e, "cannot read the fleet view") from None

    def catch_up(self, *, page: int = 500, limit: int | None = None) -> int:
        """Fold every event committed since the last catch-up; returns how many were folded."""
        done = 0
        recorder = self.ledger.store.app.recorder
        while limit is None or done < limit:
            try:
                start = self.view.max_tracking_id(APP_NAME)
                notes = recorder.select_notifications(
                    start=start or 0, limit=page, topics=SESSION_TOPICS, inclusive_of_start=False
                )
            except Exception as e:
                raise storage_error(e, "cannot read the notification log") from None
            if not notes:
                break
            items = [self._decode(n) for n in notes]
            try:
                if self._folder.apply(items, notes[-1].id, start):
                    done += len(items)
            except (ViewMoved, IntegrityError):
                continue  # another updater folded these first: re-read from its position
            except LedgerError:
                raise
            except Exception as e:
                raise storage_error(e, "cannot update the fleet view") from None
            if len(notes) < page:
                break
        return done

    def _decode(self, note: Any) -> Event | Unreadable:
        try:
            return self.ledger.store.decode(note)
        except CorruptLogError as e:
            oid = note.originator_id if isinstance(note.originator_id, UUID) else UUID(str(note.originator_id))
            return Unreadable(oid, note.originator_version, e.message)

    def rows(self, *, since: datetime | None = None, drifted: bool = False, flagged: bool = False) -> list[FleetRow]:
        """Rows by session name. ``drifted``: sessions with drift (violations or audit findings),
        with ``since`` the drift happened at or after it; ``flagged``: drifted, refused rewrites or
        unreadable events; otherwise ``since`` selects sessions active since then."""
        try:
            return self.view.select(since=since, drifted=drifted, flagged=flagged)
        except Exception as e:
            raise storage_error(e, "cannot read the fleet view") from None

    def row(self, name: str) -> FleetRow | None:
        from engine.ledger import session_uuid

        _, rows = self.view.load([session_uuid(name)])
        return next(iter(rows.values()), None)


class FleetProjection(Projection[Any]):
    """eventsourcing ``Projection`` run by ``ProjectionRunner``: one event, one transaction (view
    rows and tracking together)."""

    name = PROJECTION_NAME
    topics = SESSION_TOPICS
    ledger: Ledger | None = None
    audit: AuditHook | None = None

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:  # type: ignore[override]
        folder = _Folder(self.view, self.ledger, self.audit)
        for _ in range(100):
            tracked, _rows = self.view.load(())
            if tracked is not None and tracked >= tracking.notification_id:
                return  # folded already (another runner, or a restart)
            if not isinstance(domain_event, (Event, Unreadable)):
                items: list[Any] = []
            else:
                items = [domain_event]
            try:
                if not items:
                    self.view.insert_tracking(tracking)
                    return
                if folder.apply(items, tracking.notification_id, tracked):
                    return
            except (ViewMoved, IntegrityError):
                continue
        raise StorageError(f"the fleet view kept moving while folding notification {tracking.notification_id}")


def follow(ledger: Ledger, *, audit: AuditHook | None = audit_findings) -> ProjectionRunner:
    """Start eventsourcing's ``ProjectionRunner`` on a PostgreSQL ledger's store: the fleet view
    is updated as each event is committed, until ``runner.stop()`` (use it as a context manager;
    ``runner.wait(notification_id)`` blocks until the view has caught up with that id)."""
    env = dict(ledger.store.app.env)
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        raise InvalidInputError("following the log live needs PostgreSQL; on SQLite call Fleet.catch_up() in a loop")
    from engine.pgfleet import PostgresFleetView

    projection = type("FleetProjection", (FleetProjection,), {"name": PROJECTION_NAME, "ledger": ledger, "audit": audit})
    try:
        with _ddl_lock(env, ledger):
            return ProjectionRunner(
                application_class=_FollowApp,
                projection_class=projection,
                view_class=PostgresFleetView,
                env=env,
            )
    except LedgerError:
        raise
    except Exception as e:
        raise storage_error(e, "cannot start following the log") from None


def poll(fleet: Fleet, *, interval: float = 1.0, stop: Any = None) -> Iterator[int]:
    """Catch up every ``interval`` seconds (SQLite's stand-in for a subscription); yields the
    number of events folded each round until ``stop`` (a threading.Event) is set."""
    while stop is None or not stop.is_set():
        yield fleet.catch_up()
        if stop is not None:
            stop.wait(interval)
        else:
            time.sleep(interval)
