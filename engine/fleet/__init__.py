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

The package: ``view`` (the ``FleetView`` protocol and what both views share), ``sqlite`` and
``postgres`` (the two views; the second needs the ``postgres`` extra and is imported only for
postgresql:// stores), ``updater`` (``Fleet``, ``follow``, ``poll``).

Concurrent updaters are safe: a batch is written only if the tracking row still holds the
position its rows were read at (checked under a lock in the writing transaction), otherwise the
batch is discarded and re-read.
"""

from engine.fleet.sqlite import SQLiteFleetView
from engine.fleet.updater import Fleet, FleetProjection, follow, poll
from engine.fleet.view import PROJECTION_NAME, TRACKING_TABLE, VIEW_TABLE, FleetView

__all__ = [
    "Fleet",
    "follow",
    "poll",
    "FleetView",
    "SQLiteFleetView",
    "FleetProjection",
    "PROJECTION_NAME",
    "VIEW_TABLE",
    "TRACKING_TABLE",
]
