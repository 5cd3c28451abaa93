"""The read side: pure folds over a session's events. A projection never writes events."""

import engine  # noqa: F401  (engine's package init loads projections.buffer; loading it first avoids an import cycle)
from projections.buffer import BufferState, apply, project, span_from_event

__all__ = ["BufferState", "apply", "project", "span_from_event"]
