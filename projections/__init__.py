"""The read side: pure folds over a session's events. A projection never writes events."""

from types import ModuleType as _ModuleType

from projections.buffer import BufferState, apply, project, span_from_event

# Bound after the submodules of the same names are loaded, so ``projections.audit`` is the function.
from projections.audit import AuditReport, Finding, SpanCoverage, audit
from projections.blame import BlameHit, blame
from projections.diff import Diff, DiffEntry, diff
from projections.grounding import GroundingResult, check, gate_findings
from projections.lineage import Lineage, LineageNode, LineageStep, lineage
from projections.lost import LostCategory, LostItem, LostReport, lost
from projections.timeline import Timeline, TimelinePoint, timeline

# The one export list is the imports above: ``__all__`` is derived from them (every public name bound
# here that is not a submodule); tests/architecture/test_exports.py checks each resolves to a projections object.
__all__ = sorted(
    _name for _name, _value in globals().items() if not _name.startswith("_") and not isinstance(_value, _ModuleType)
)
