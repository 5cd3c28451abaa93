"""Audit findings as GenAI evaluation results.

``ctxledger audit`` judges every live derived span against its original sources. Each judged span
gets an evaluation span (``openinference.span.kind=EVALUATOR``) under the compaction span that made
its text, with one ``gen_ai.evaluation.result`` event for the grounding verdict (score: the share of
the sources' specifics the summary kept) and one per finding. Findings about something else (a
refused rewrite, a rule break, a broken chain) go under the compaction span or the turn of the
position they name. The evaluation spans' ids include the audited position: an audit of a longer log
is new spans, and the same audit exported twice is the same spans.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan

from engine.otel import attributes as A
from engine.otel.ids import span_id as make_span_id
from engine.otel.mapping import Mapper, finding_attributes

__all__ = ["evaluation_spans"]

_BAD = ("error", "warning")


def _target(mapper: Mapper, starts: list[int], position: int) -> tuple[int, int, int] | None:
    """(trace id, span id, key position) of the span a finding at ``position`` belongs under."""
    found = mapper.compactions.get(position)
    if found is not None:
        return found[0], found[1], position
    i = bisect_right(starts, position) - 1
    if i < 0:
        return None
    start, end, trace, root = mapper.turns[i]
    return (trace, root, start) if position <= end else None


def evaluation_spans(mapper: Mapper, report: Any, at_ns: int) -> list[ReadableSpan]:
    """Evaluation spans for an ``AuditReport`` of the session ``mapper`` folded (timestamped
    ``at_ns``, the time of the audited position)."""
    starts = [t[0] for t in mapper.turns]
    groups: dict[tuple[int, int, int], list[SpanEvent]] = {}
    derived_at = {c.span_id: c.position for c in report.coverage}
    per_span: dict[str, list[Any]] = {}
    for finding in report.findings:
        sid = finding.span_ids[0] if finding.span_ids else ""
        if sid in derived_at:
            per_span.setdefault(sid, []).append(finding)
            continue
        target = _target(mapper, starts, finding.positions[0]) if finding.positions else None
        if target is None and mapper.turns:
            start, _, trace, root = mapper.turns[-1]
            target = (trace, root, start)
        if target is not None:
            groups.setdefault(target, []).append(SpanEvent(A.EVALUATION_EVENT, finding_attributes(finding, "ctxledger"), at_ns, limit=None))
    for cov in report.coverage:
        target = _target(mapper, starts, cov.position)
        if target is None:
            continue
        findings = per_span.get(cov.span_id, [])
        bad = [f for f in findings if f.severity in _BAD]
        kept = cov.source_specifics - len(cov.dropped)
        verdict = {
            A.EVALUATION_NAME: "ctxledger.grounding",
            A.EVALUATION_LABEL: "ungrounded" if bad else "grounded",
            A.EVALUATION_VALUE: float(cov.coverage),
            A.EVALUATION_EXPLANATION: (
                f"{cov.span_id} keeps {kept} of the {cov.source_specifics} specifics of its sources "
                f"{', '.join(cov.sources[:6])}{'…' if len(cov.sources) > 6 else ''}; "
                f"{len(bad)} finding{'s' if len(bad) != 1 else ''} at warning or error"
            ),
            A.SPAN_ID: cov.span_id,
            A.CHECKER: report.checker,
        }
        events = groups.setdefault(target, [])
        events.append(SpanEvent(A.EVALUATION_EVENT, verdict, at_ns, limit=None))
        events.extend(SpanEvent(A.EVALUATION_EVENT, finding_attributes(f, "ctxledger"), at_ns, limit=None) for f in findings)
    spans = []
    for (trace, parent, key), events in groups.items():
        labels = [e.attributes.get(A.EVALUATION_LABEL) for e in events]
        attrs = {
            A.OI_KIND: "EVALUATOR",
            A.AUDIT_POSITION: report.position,
            A.CHECKER: report.checker,
            A.POSITION: key,
            A.EVALUATION_NAME: "ctxledger.audit",
            A.EVALUATION_LABEL: "fail" if any(label in ("ungrounded", "error") for label in labels) else "pass",
        }
        span = make_span_id(mapper.session, f"eval@{report.position}", key)
        spans.append(mapper.make_span("ctxledger.audit", trace, span, parent, at_ns, at_ns, attrs, events))
    return spans
