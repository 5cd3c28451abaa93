"""Keeping the fleet view up to date: ``Fleet`` folds what the notification log holds since the
tracked position (any SQLite or PostgreSQL store); ``follow`` runs eventsourcing's subscription on
PostgreSQL; ``poll`` is SQLite's stand-in for one. See the package docstring for the guarantees."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import InfrastructureFactory, IntegrityError, OperationalError, Tracking
from eventsourcing.projection import Projection, ProjectionRunner
from eventsourcing.utils import Environment

from engine._store.codec import TOPICS, EventMapper
from engine.errors import CorruptLogError, InvalidInputError, LedgerError, StorageError
from engine.events import EVENT_TYPES, Event
from engine.fleet.sqlite import SQLiteFleetView
from engine.fleet.view import APP_NAME, PROJECTION_NAME, FleetView, ViewMoved
from engine.ledger import Ledger
from engine._store.log_store import StoreApp, postgres_ddl_lock, storage_error
from projections.fleet import AUDIT_EVENTS, AuditHook, Finding, FleetRow, audit_findings, fold, needs_audit, unreadable

__all__ = ["Fleet", "follow", "poll", "FleetProjection"]

SESSION_TOPICS = tuple(TOPICS[cls] for cls in EVENT_TYPES.values())
AUDIT_TOPICS = tuple(TOPICS[cls] for cls in AUDIT_EVENTS)


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

    def __init__(self, view: FleetView, ledger: Ledger | None, audit: AuditHook | None):
        self.view = view
        self.ledger = ledger
        self.audit = audit
        self.skipped: dict[UUID, Event] = {}  # due audits left to a later batch of this catch-up

    def apply(
        self, items: Sequence[Event | Unreadable], last_id: int, start: int | None, later: dict[UUID, int] | None = None
    ) -> bool:
        """Fold ``items`` (the notifications after ``start`` up to ``last_id``). Returns False if
        the view had moved on (nothing written); raises ``ViewMoved`` if it moved while folding.
        ``later``: per session, the position of its last event that needs an audit among the
        notifications this catch-up will fold; a session is audited only in the batch that holds
        that event (its audit then covers the earlier ones, so a catch-up audits a session once)."""
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
        if later:
            # a session is reached in the batch holding its last such event (readable or not)
            reached = {it.originator_id for it in items if it.originator_version >= later.get(it.originator_id, 0)}
            for sid in [sid for sid in due if sid not in reached]:
                self.skipped[sid] = due.pop(sid)
            for sid in reached:
                if sid not in due and sid in self.skipped:
                    due[sid] = self.skipped.pop(sid)
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
    if ledger.backend == "postgres":
        return postgres_ddl_lock(env, ledger.url)
    return contextlib.nullcontext()


def _view_env(ledger_env: dict[str, str]) -> Environment:
    return Environment(PROJECTION_NAME, {k: v for k, v in ledger_env.items() if k not in ("CIPHER_KEY", "CIPHER_TOPIC")})


def _view_class(backend: str) -> type:
    if backend == "sqlite":
        return SQLiteFleetView
    if backend == "postgres":
        from engine.fleet.postgres import PostgresFleetView  # the PostgreSQL driver is an extra

        return PostgresFleetView
    raise InvalidInputError("the fleet view needs a SQLite or PostgreSQL store (not memory://)")


class Fleet:
    """The fleet view of one store: ``catch_up()`` folds new events in; ``rows()`` queries it."""

    def __init__(self, ledger: Ledger, *, audit: AuditHook | None = audit_findings):
        self.ledger = ledger
        env = ledger.store.environment
        cls = _view_class(ledger.backend)
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
        store = self.ledger.store
        later = self._last_audit_events(store) if self._folder.audit is not None else {}
        self._folder.skipped = {}
        while limit is None or done < limit:
            try:
                start = self.view.max_tracking_id(APP_NAME)
                notes = store.notifications(start or 0, page, SESSION_TOPICS)
            except Exception as e:
                raise storage_error(e, "cannot read the notification log") from None
            if not notes:
                break
            items = [self._decode(n) for n in notes]
            try:
                if self._folder.apply(items, notes[-1].id, start, later):
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

    def _last_audit_events(self, store: Any, page: int = 2_000) -> dict[UUID, int]:
        """Per session, the position of its last event that needs an audit after the tracked
        position (only those events' notifications are read, by topic). A first catch-up over a
        session with N compactions audits it once, at its last one, not N times (each audit of
        an earlier compaction would check a summary no longer live)."""
        last: dict[UUID, int] = {}
        try:
            start = self.view.max_tracking_id(APP_NAME) or 0
            while True:
                notes = store.notifications(start, page, AUDIT_TOPICS)
                for n in notes:
                    oid = n.originator_id if isinstance(n.originator_id, UUID) else UUID(str(n.originator_id))
                    last[oid] = max(last.get(oid, 0), n.originator_version)
                if len(notes) < page:
                    return last
                start = notes[-1].id
        except Exception:
            return {}  # only an optimisation: without it every batch audits its sessions

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
    env = ledger.store.environment
    if ledger.backend != "postgres":
        raise InvalidInputError("following the log live needs PostgreSQL; on SQLite call Fleet.catch_up() in a loop")
    from engine.fleet.postgres import PostgresFleetView

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
