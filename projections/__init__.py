"""The read side: pure folds over a session's events. A projection never writes events."""

import engine  # noqa: F401  (engine's package init loads projections.buffer; loading it first avoids an import cycle)
from projections.buffer import BufferState, apply, project, span_from_event

# Bound after the submodules of the same names are loaded, so ``projections.audit`` is the function.
from projections.audit import AuditReport, Finding, SpanCoverage, audit  # noqa: E402
from projections.blame import BlameHit, blame  # noqa: E402
from projections.diff import Diff, DiffEntry, diff  # noqa: E402
from projections.grounding import GroundingResult, check, gate_findings  # noqa: E402
from projections.lineage import Lineage, LineageNode, LineageStep, lineage  # noqa: E402
from projections.timeline import Timeline, TimelinePoint, timeline  # noqa: E402

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
