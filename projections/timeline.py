"""Timeline: per event, the live span count and live tokens by provenance (for plots and reports).

One fold over events 1..n; each point costs only the spans its event touched, not the whole buffer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from projections.buffer import apply
from engine.events import Expanded, Observed, Pruned, Rederived, Restored, Rewritten
from engine.spans import Provenance

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["Timeline", "TimelinePoint", "timeline"]


class TimelinePoint(msgspec.Struct, frozen=True, array_like=False):
    """The buffer right after the event at ``position``."""

    position: int
    event_type: str
    span_id: str
    live: int
    observed: int
    derived: int
    tokens: int
    observed_tokens: int
    derived_tokens: int


class Timeline(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    position: int
    points: tuple[TimelinePoint, ...]

    def columns(self) -> dict[str, list]:
        """Column-wise, ready for a plotting library or a CSV writer."""
        names = TimelinePoint.__struct_fields__
        return {n: [getattr(p, n) for p in self.points] for n in names}


def _touched(ev) -> tuple[str, ...]:
    t = type(ev)
    if t is Rewritten:
        return (*ev.inputs, ev.span_id)
    if t is Expanded:
        return (ev.span_id, *ev.restored)
    if t in (Observed, Pruned, Rederived, Restored):
        return (ev.span_id,)
    return ()


def timeline(reader: LogReader) -> Timeline:
    load = reader.event
    state = None
    counts = [0, 0]  # observed, derived
    tokens = [0, 0]
    points: list[TimelinePoint] = []
    for ev in reader.events(1, reader.position):
        ids = _touched(ev)
        if state is not None:
            for i in ids:
                span = state.live.get(i)
                if span is not None:
                    k = span.provenance is Provenance.DERIVED
                    counts[k] -= 1
                    tokens[k] -= span.tokens
        state = apply(state, ev, load)
        for i in ids:
            span = state.live.get(i)
            if span is not None:
                k = span.provenance is Provenance.DERIVED
                counts[k] += 1
                tokens[k] += span.tokens
        points.append(
            TimelinePoint(
                position=ev.originator_version,
                event_type=type(ev).__name__,
                span_id=getattr(ev, "span_id", ""),
                live=counts[0] + counts[1],
                observed=counts[0],
                derived=counts[1],
                tokens=tokens[0] + tokens[1],
                observed_tokens=tokens[0],
                derived_tokens=tokens[1],
            )
        )
    return Timeline(session=reader.name, position=reader.position, points=tuple(points))
