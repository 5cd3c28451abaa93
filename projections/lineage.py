"""Lineage: the tree a span came from and the history of what it became.

``came_from`` is a tree: a derived span's node has one child per input of the rewrite that made it
(observed leaves; derived inputs only in permissive logs, each with its own subtree). ``became`` is
the chronological list of what happened to the span and to everything made from it: pruned,
rewritten into d3, re-derived at 140, restored at 171, expanded back into its originals.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from engine.text_clip import clip
from engine.events import Expanded, Observed, Pruned, Rederived, Restored, Rewritten
from engine.spans import id_ranges, ordinal

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["Lineage", "LineageNode", "LineageStep", "lineage"]


class LineageNode(msgspec.Struct, frozen=True, kw_only=True):
    """A span in the came-from tree; ``position`` is the event that made its text."""

    span_id: str
    provenance: str
    position: int
    generation: int = 0
    by: str = ""
    text: str = ""
    children: tuple[LineageNode, ...] = ()


class LineageStep(msgspec.Struct, frozen=True, kw_only=True):
    """One event in the life of the span or of a span made from it."""

    position: int
    event_type: str
    span_id: str
    action: str
    by: str = ""
    at: datetime | None = None
    into: str = ""


class Lineage(msgspec.Struct, frozen=True, kw_only=True):
    span_id: str
    position: int  # the reader's position
    provenance: str
    status: str  # live | pruned | rewritten | expanded
    came_from: LineageNode
    became: tuple[LineageStep, ...]
    descendants: tuple[str, ...] = ()


class _Made(msgspec.Struct, frozen=True):
    position: int
    by: str
    inputs: tuple[str, ...]
    input_positions: tuple[int, ...]
    generation: int




def lineage(reader: LogReader, span_id: str) -> Lineage:
    """The lineage of ``span_id`` at the reader's position (UnknownSpanError if it never existed)."""
    reader.check_span_id(span_id)
    tracked = {span_id}
    descendants: list[str] = []
    became: list[LineageStep] = []
    made: dict[str, _Made] = {}
    observed_at: dict[str, int] = {}
    status = "live"
    for ev in reader.events(1, reader.position):
        t = type(ev)
        position = ev.originator_version
        if t is Observed:
            if ev.span_id in tracked:
                observed_at[ev.span_id] = position
                became.append(_step(ev, "observed"))
            continue
        if t is Rewritten:
            made[ev.span_id] = _Made(position, ev.by, ev.inputs, ev.input_positions, ev.generation)
            hit = [i for i in ev.inputs if i in tracked]
            if ev.span_id in tracked:
                became.append(_step(ev, f"made by rewrite of {id_ranges(ev.inputs, ', ')}" + (
                    f" (generation {ev.generation}, a rewrite of a rewrite)" if ev.violation else "")))
            elif hit:
                tracked.add(ev.span_id)
                descendants.append(ev.span_id)
                for i in hit:
                    became.append(_step(ev, f"{i} rewritten into {ev.span_id}", span_id=i, into=ev.span_id))
            continue
        if t is Pruned and ev.span_id in tracked:
            became.append(_step(ev, "pruned"))
        elif t is Rederived and ev.span_id in tracked:
            became.append(_step(ev, f"re-derived from its originals {id_ranges(ev.sources, ', ')}"))
        elif t is Restored and ev.span_id in tracked:
            became.append(_step(ev, "restored"))
        elif t is Expanded:
            if ev.span_id in tracked:
                became.append(_step(ev, f"expanded into its originals {id_ranges(ev.restored, ', ')}"))
            if span_id in ev.restored:
                became.append(_step(ev, f"restored by the expansion of {ev.span_id}", span_id=span_id))
    live = reader.state.live
    own = [s for s in became if s.span_id == span_id]
    if span_id in live:
        status = "live"
    elif own:
        last = own[-1]
        status = "rewritten" if last.into else last.action.split()[0]
    tree = _node(reader, span_id, made, observed_at, set())
    provenance = "observed" if span_id.startswith("o") else "derived"
    return Lineage(
        span_id=span_id,
        position=reader.position,
        provenance=provenance,
        status=status,
        came_from=tree,
        became=tuple(became),
        descendants=tuple(descendants),
    )


def _step(ev, action: str, *, span_id: str | None = None, into: str = "") -> LineageStep:
    return LineageStep(
        position=ev.originator_version,
        event_type=type(ev).__name__,
        span_id=span_id or ev.span_id,
        action=action,
        by=ev.by,
        at=ev.at,
        into=into,
    )


def _node(reader: LogReader, span_id: str, made: dict[str, _Made], observed_at: dict[str, int], seen: set[str], position: int = 0) -> LineageNode:
    if span_id.startswith("o"):
        pos = position or observed_at.get(span_id, 0)
        text = ""
        try:
            ev = reader.event(pos) if pos else reader.observation(ordinal(span_id))
            pos = ev.originator_version
            text = clip(ev.text, 70)
        except Exception:  # a source missing from the log: the audit reports it; show what we know
            pass
        return LineageNode(span_id=span_id, provenance="observed", position=pos, text=text)
    m = made.get(span_id)
    if m is None or span_id in seen:
        return LineageNode(span_id=span_id, provenance="derived", position=0)
    seen.add(span_id)
    children = tuple(
        _node(reader, i, made, observed_at, seen, p)
        for i, p in zip(m.inputs, m.input_positions or (0,) * len(m.inputs))
    )
    text = ""
    try:
        text = clip(reader.event(m.position).text, 70)
    except Exception:
        pass
    return LineageNode(
        span_id=span_id, provenance="derived", position=m.position, generation=m.generation, by=m.by,
        text=text, children=children,
    )
