"""The read side: pure folds over a session's events. A projection never writes events."""

from projections.buffer import BufferState, apply, project, span_from_event

__all__ = ["BufferState", "apply", "project", "span_from_event"]
