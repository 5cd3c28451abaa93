"""The live buffer: a fold over a session's events.

``apply(state, event, load)`` is the single definition of what each event does to the buffer. The
write side (the Session aggregate) uses it to evolve its state, snapshots store its result, and time
travel replays it. ``load(position)`` reads an earlier event of the same session back from the log:
restore and expand need the original text, which the state deliberately does not keep (pruned text
leaves memory, so the state stays as small as the live buffer).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from datetime import datetime
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
from engine.spans import Provenance, Span

__all__ = ["BufferState", "apply", "project", "span_from_event", "with_orders", "Loader"]

Loader = Callable[[int], Event]


class BufferState(msgspec.Struct, kw_only=True):
    """Everything the write side needs to check the rules, and nothing that grows with the log
    (apart from user marks, which are few)."""

    session_id: UUID | None = None
    name: str = ""
    strict: bool = True
    started_at: datetime | None = None
    forked_from: UUID | None = None
    fork_position: int = 0
    version: int = 0
    n_obs: int = 0
    n_der: int = 0
    live: dict[str, Span] = {}
    tokens: int = 0
    text_bytes: int = 0
    refusals: int = 0
    violations: int = 0
    marks: dict[str, int] = {}

    def spans(self) -> list[Span]:
        """The live buffer in order."""
        return sorted(self.live.values(), key=_order)


_order = operator.attrgetter("order")
_OBSERVED = Provenance.OBSERVED


def with_orders(state: BufferState) -> BufferState:
    """A decoded snapshot's state, with the order key filled in on spans snapshotted before spans
    carried it (they decode with order 0)."""
    for span_id, span in list(state.live.items()):
        if not span.order:
            key = int(span_id[1:]) if span.provenance is Provenance.OBSERVED else min(int(x[1:]) for x in span.sources)
            state.live[span_id] = msgspec.structs.replace(span, order=key)
    return state


def span_from_event(ev: Event) -> Span:
    """The span an Observed/Rewritten/Rederived event put into the buffer."""
    if isinstance(ev, Observed):
        return Span(
            id=ev.span_id,
            text=ev.text,
            role=ev.role,
            kind=ev.kind,
            provenance=Provenance.OBSERVED,
            generation=0,
            tokens=ev.tokens,
            meta=ev.meta,
            position=ev.originator_version,
            order=int(ev.span_id[1:]),
        )
    if isinstance(ev, (Rewritten, Rederived)):
        return Span(
            id=ev.span_id,
            text=ev.text,
            role=ev.role,
            kind=ev.kind,
            provenance=Provenance.DERIVED,
            generation=ev.generation,
            sources=ev.sources,
            source_positions=ev.source_positions,
            tokens=ev.tokens,
            meta=ev.meta,
            position=ev.originator_version,
            order=min(int(s[1:]) for s in ev.sources) if ev.sources else 0,
        )
    raise TypeError(f"{type(ev).__name__} at position {ev.originator_version} holds no span text")


def _add(state: BufferState, span: Span) -> None:
    state.live[span.id] = span
    state.tokens += span.tokens
    state.text_bytes += len(span.text)


def _remove(state: BufferState, span_id: str) -> Span:
    span = state.live.pop(span_id)
    state.tokens -= span.tokens
    state.text_bytes -= len(span.text)
    return span


def apply(state: BufferState | None, ev: Event, load: Loader) -> BufferState:
    """Evolve ``state`` by one event (in place, returning it)."""
    t = type(ev)
    if t is Observed:  # the hot path (most events): span construction and bookkeeping inlined
        state.n_obs += 1
        text = ev.text
        state.live[ev.span_id] = Span(
            id=ev.span_id, text=text, role=ev.role, kind=ev.kind, provenance=_OBSERVED,
            tokens=ev.tokens, meta=ev.meta, position=ev.originator_version, order=int(ev.span_id[1:]),
        )
        state.tokens += ev.tokens
        state.text_bytes += len(text)
    elif t is Pruned:
        span = state.live.pop(ev.span_id)
        state.tokens -= span.tokens
        state.text_bytes -= len(span.text)
    elif t is Rewritten:
        for span_id in ev.inputs:
            _remove(state, span_id)
        state.n_der += 1
        if ev.violation:
            state.violations += 1
        _add(state, span_from_event(ev))
    elif t is Rederived:
        _remove(state, ev.span_id)
        _add(state, span_from_event(ev))
    elif t is Restored:
        _add(state, span_from_event(load(ev.content_position)))
    elif t is Expanded:
        _remove(state, ev.span_id)
        for position in ev.restored_positions:
            _add(state, span_from_event(load(position)))
    elif t is RewriteRefused:
        state.refusals += 1
    elif t is Marked:
        state.marks[ev.label] = ev.originator_version
    elif t is SessionStarted and ev.forked_from is not None and state is not None:
        # A fork's log is its parent's events up to the fork, then its own SessionStarted:
        # that one renames the buffer instead of emptying it.
        state = msgspec.structs.replace(
            state, session_id=ev.originator_id, name=ev.name, strict=ev.strict, started_at=ev.at,
            forked_from=ev.forked_from, fork_position=ev.fork_position,
            live=dict(state.live), marks=dict(state.marks),
        )
    elif t is SessionStarted:
        state = BufferState(
            session_id=ev.originator_id,
            name=ev.name,
            strict=ev.strict,
            started_at=ev.at,
            forked_from=ev.forked_from,
            fork_position=ev.fork_position,
        )
    else:  # pragma: no cover - a new event type without a rule here is a programming error
        raise TypeError(f"no buffer rule for {t.__name__}")
    state.version = ev.originator_version
    return state


def project(events: Iterable[Event], load: Loader, state: BufferState | None = None) -> BufferState | None:
    """Fold events into a buffer state (starting from ``state``, e.g. a snapshot's)."""
    for ev in events:
        state = apply(state, ev, load)
    return state
