"""The fleet view: one row per session of the whole store, folded from the global event stream.

``fold(row, event)`` is the single definition of what each event does to its session's row. It
keeps counts and *structural* drift findings, read off the events themselves:

- ``refused``: the ledger refused a rewrite that would have drifted (``RewriteRefused``), i.e.
  attempted drift, stopped;
- ``violation``: a permissive session rewrote a derived span (``Rewritten`` with
  ``violation=True``): drift that happened.

Deeper, text-level findings (a summary stating specifics none of its sources contain) come from
an *audit hook*: ``audit_findings(reader)`` adapts ``projections.audit.audit`` when that module is
installed; the runner (``engine.fleet``) calls a hook whenever a session's derived text changes and
stores its findings in ``row.audit`` (replacing the previous audit's). Any callable
``reader -> list[Finding]`` can be plugged in instead.

Rows hold names, counts, positions, span ids and finding kinds — never span text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from engine.events import (
    Event,
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    SessionStarted,
)

__all__ = [
    "Finding",
    "FleetRow",
    "fold",
    "AuditHook",
    "AUDIT_EVENTS",
    "audit_findings",
    "needs_audit",
    "MAX_FINDINGS",
]

MAX_FINDINGS = 50  # the newest structural findings kept per row; the counts are never capped
IGNORED_AUDIT_KINDS = frozenset({"rewrite-refused"})  # attempts, counted by the fold as refusals


class Finding(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    kind: str  # "refused", "violation", "unreadable", or an audit finding's kind
    position: int
    at: datetime | None = None
    span_id: str = ""
    detail: str = ""
    source: str = "log"  # "log": read off an event; "audit": from the audit hook


class FleetRow(msgspec.Struct, kw_only=True, omit_defaults=True):
    session_id: UUID
    name: str = ""
    strict: bool = True
    forked_from: UUID | None = None
    started_at: datetime | None = None
    position: int = 0
    last_event_at: datetime | None = None
    events: int = 0
    observed: int = 0
    rewritten: int = 0
    rederived: int = 0
    pruned: int = 0
    restored: int = 0
    expanded: int = 0
    marks: int = 0
    refusals: int = 0
    violations: int = 0
    max_generation: int = 0
    unreadable: int = 0
    findings: list[Finding] = []
    audit: list[Finding] = []
    audited_position: int = 0
    first_drift_at: datetime | None = None
    last_drift_at: datetime | None = None
    last_refusal_at: datetime | None = None

    @property
    def drift(self) -> int:
        """Drift that happened: the audit's findings once an audit ran (they include the
        structural violations), else the violations recorded in permissive sessions."""
        return len(self.audit) if self.audited_position else self.violations

    @property
    def drifted(self) -> bool:
        return self.drift > 0

    @property
    def flagged(self) -> bool:
        """Drifted, or the agent attempted drift (refused rewrites), or events were unreadable."""
        return self.drifted or self.refusals > 0 or self.unreadable > 0


def _finding(row: FleetRow, f: Finding) -> None:
    row.findings = (row.findings + [f])[-MAX_FINDINGS:]


def _drift_at(row: FleetRow, at: datetime | None) -> None:
    if at is None:
        return
    if row.first_drift_at is None or at < row.first_drift_at:
        row.first_drift_at = at
    if row.last_drift_at is None or at > row.last_drift_at:
        row.last_drift_at = at


def fold(row: FleetRow | None, ev: Event) -> FleetRow:
    """Evolve a session's fleet row by one of its events (in place, returning it)."""
    if row is None:
        row = FleetRow(session_id=ev.originator_id)
    t = type(ev)
    row.events += 1
    row.position = max(row.position, ev.originator_version)
    if row.last_event_at is None or ev.at > row.last_event_at:
        row.last_event_at = ev.at
    if t is SessionStarted:
        row.name = ev.name
        row.strict = ev.strict
        row.forked_from = ev.forked_from
        row.started_at = ev.at
    elif t is Observed:
        row.observed += 1
    elif t is Rewritten:
        row.rewritten += 1
        row.max_generation = max(row.max_generation, ev.generation)
        if ev.violation:
            row.violations += 1
            derived_inputs = [i for i in ev.inputs if i.startswith("d")]
            _finding(
                row,
                Finding(
                    kind="violation", position=ev.originator_version, at=ev.at, span_id=ev.span_id,
                    detail=f"{ev.span_id} rewrote derived {','.join(derived_inputs) or ','.join(ev.inputs)}"
                    f" (generation {ev.generation})",
                ),
            )
            _drift_at(row, ev.at)
    elif t is Rederived:
        row.rederived += 1
    elif t is Pruned:
        row.pruned += 1
    elif t is Restored:
        row.restored += 1
    elif t is Expanded:
        row.expanded += 1
    elif t is Marked:
        row.marks += 1
    elif t is RewriteRefused:
        row.refusals += 1
        row.last_refusal_at = ev.at if row.last_refusal_at is None else max(row.last_refusal_at, ev.at)
        if ev.findings:
            detail = f"{ev.command} refused by the grounding gate: {len(ev.findings)} unsupported specific(s)"
        else:
            detail = f"{ev.command} of derived {','.join(ev.offending) or ','.join(ev.inputs)} refused"
        _finding(
            row,
            Finding(
                kind="refused", position=ev.originator_version, at=ev.at,
                span_id=(ev.offending or ev.inputs or ("",))[0], detail=detail,
            ),
        )
    return row


def unreadable(row: FleetRow | None, session_id: UUID, position: int, why: str) -> FleetRow:
    """Record that the event at ``position`` could not be decoded (corrupt or tampered bytes)."""
    if row is None:
        row = FleetRow(session_id=session_id)
    row.unreadable += 1
    row.position = max(row.position, position)
    _finding(row, Finding(kind="unreadable", position=position, detail=why[:200]))
    return row


AUDIT_EVENTS = (Rewritten, Rederived, Expanded, RewriteRefused)


def needs_audit(ev: Event) -> bool:
    """Events after which a session's audit findings may change (its derived text changed)."""
    return type(ev) in AUDIT_EVENTS


AuditHook = Callable[[Any], list[Finding]]


def _first(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if v not in (None, ""):
            return v
    return None


def audit_findings(reader: Any) -> list[Finding]:
    """The drift findings of ``projections.audit.audit(reader)`` as fleet findings ([] if that
    module is not installed): errors and warnings, except recorded refusals (the fold counts those
    as attempts). Only kinds, positions and span ids are kept: never the offending text."""
    try:
        from projections.audit import audit
    except ImportError:
        return []
    report = audit(reader)
    out = []
    for item in getattr(report, "findings", ()) or ():
        d = msgspec.to_builtins(item, enc_hook=str) if not isinstance(item, dict) else item
        if not isinstance(d, dict):
            continue
        severity = d.get("severity", "error")
        kind = str(d.get("kind") or type(item).__name__)
        if severity not in ("error", "warning") or kind in IGNORED_AUDIT_KINDS:
            continue
        position = _first(d, "positions", "position")
        span_id = _first(d, "span_ids", "span_id")
        category = d.get("category") or ""
        out.append(
            Finding(
                kind=kind,
                position=position if isinstance(position, int) else 0,
                span_id=span_id if isinstance(span_id, str) else "",
                detail=f"{severity} from the audit" + (f" ({category})" if category else ""),
                source="audit",
            )
        )
    return out
