"""The read side: pure folds over a session's events. A projection never writes events."""

from projections.buffer import BufferState, apply, project, span_from_event

# Bound after the submodules of the same names are loaded, so ``projections.audit`` is the function.
from projections.audit import AuditReport, Finding, SpanCoverage, audit
from projections.blame import BlameHit, blame
from projections.diff import Diff, DiffEntry, diff
from projections.grounding import GroundingResult, check, gate_findings
from projections.lineage import Lineage, LineageNode, LineageStep, lineage
from projections.lost import LostCategory, LostItem, LostReport, lost
from projections.timeline import Timeline, TimelinePoint, timeline

__all__ = [
    "BufferState",
    "apply",
    "project",
    "span_from_event",
    # drift audit and forensics
    "AuditReport",
    "Finding",
    "SpanCoverage",
    "audit",
    "BlameHit",
    "blame",
    "Lineage",
    "LineageNode",
    "LineageStep",
    "lineage",
    "LostReport", "LostCategory", "LostItem", "lost",
    "Diff",
    "DiffEntry",
    "diff",
    "Timeline",
    "TimelinePoint",
    "timeline",
    "GroundingResult",
    "check",
    "gate_findings",
]
