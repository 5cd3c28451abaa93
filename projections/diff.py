"""Diff: what changed in the live buffer between two positions, like ``git diff --stat``.

Each span that is live at one position and not the other, or live at both with different text, is
one entry, explained by the event between the two positions that last touched it: observed,
pruned, rewritten into d3 (its inputs) / made by that rewrite (the derived span), re-derived,
restored, expanded. ``a`` may be after ``b``: the diff then reads backwards in time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from engine.text_clip import clip
from engine.events import Expanded, Observed, Pruned, Rederived, Restored, Rewritten
from engine.spans import Span

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["Diff", "DiffEntry", "diff"]


class DiffEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One span that changed. ``change`` is added, removed, rewritten, rederived or changed;
    ``tokens`` the live tokens it adds (positive) or removes (negative)."""

    span_id: str
    change: str
    provenance: str
    tokens: int
    position: int = 0  # the event (between a and b) that explains the change
    event_type: str = ""
    by: str = ""
    into: str = ""  # for spans rewritten away: the derived span that replaced them
    sources: tuple[str, ...] = ()
    text: str = ""


class Diff(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    a: int
    b: int
    spans_a: int
    spans_b: int
    tokens_a: int
    tokens_b: int
    events: dict[str, int]
    entries: tuple[DiffEntry, ...]

    def of(self, change: str) -> list[DiffEntry]:
        return [e for e in self.entries if e.change == change]

    @property
    def added(self) -> list[DiffEntry]:
        return self.of("added")

    @property
    def removed(self) -> list[DiffEntry]:
        return self.of("removed") + self.of("rewritten")

    @property
    def rewritten(self) -> list[DiffEntry]:
        return self.of("rewritten")

    @property
    def rederived(self) -> list[DiffEntry]:
        return self.of("rederived")

    def stat(self) -> str:
        """One summary line: ``12 events; +3 -5 spans (2 rewritten, 1 re-derived); 1,234 -> 890 tokens (-344)``."""
        n = sum(self.events.values())
        add = len(self.added)
        rem = len(self.of("removed")) + len(self.rewritten)
        extra = []
        if self.rewritten:
            extra.append(f"{len(self.rewritten)} rewritten")
        if self.rederived:
            extra.append(f"{len(self.rederived)} re-derived")
        delta = self.tokens_b - self.tokens_a
        return (
            f"{n} event{'s' if n != 1 else ''}; +{add} -{rem} spans"
            + (f" ({', '.join(extra)})" if extra else "")
            + f"; {self.tokens_a:,} -> {self.tokens_b:,} tokens ({delta:+,})"
        )




def diff(session: LogReader, a: int, b: int) -> Diff:
    """The buffer change from position ``a`` to position ``b`` (both already resolved)."""
    va, vb = session.at(a), session.at(b)
    live_a, live_b = va.state.live, vb.state.live
    lo, hi = min(a, b), max(a, b)
    forward = a <= b
    # the last event between the two positions that touched each span
    why: dict[str, tuple[int, str, str, str]] = {}  # span -> (position, event type, by, into)
    events: dict[str, int] = {}
    if lo < hi:
        for ev in session.events(lo + 1, hi):
            t = type(ev)
            name = t.__name__
            events[name] = events.get(name, 0) + 1
            p = ev.originator_version
            if t in (Observed, Pruned, Rederived, Restored):
                why[ev.span_id] = (p, name, ev.by, "")
            elif t is Rewritten:
                why[ev.span_id] = (p, name, ev.by, "")
                for i in ev.inputs:
                    why[i] = (p, name, ev.by, ev.span_id)
            elif t is Expanded:
                why[ev.span_id] = (p, name, ev.by, "")
                for i in ev.restored:
                    why[i] = (p, name, ev.by, "")
    entries: list[DiffEntry] = []

    def entry(span: Span, change: str, tokens: int) -> DiffEntry:
        p, name, by, into = why.get(span.id, (0, "", "", ""))
        if not forward:
            into = ""
        if change == "removed" and into and forward:
            change = "rewritten"
        return DiffEntry(
            span_id=span.id, change=change, provenance=str(span.provenance), tokens=tokens, position=p,
            event_type=name, by=by, into=into, sources=span.sources, text=clip(span.text, 60),
        )

    for span_id in sorted(set(live_b) - set(live_a), key=lambda i: live_b[i].order):
        span = live_b[span_id]
        entries.append(entry(span, "added", span.tokens))
    for span_id in sorted(set(live_a) - set(live_b), key=lambda i: live_a[i].order):
        span = live_a[span_id]
        entries.append(entry(span, "removed", -span.tokens))
    for span_id in sorted(set(live_a) & set(live_b), key=lambda i: live_b[i].order):
        old, new = live_a[span_id], live_b[span_id]
        if old == new:
            continue
        change = "rederived" if old.text != new.text or old.position != new.position else "changed"
        entries.append(entry(new, change, new.tokens - old.tokens))
    return Diff(
        session=session.name,
        a=a,
        b=b,
        spans_a=len(live_a),
        spans_b=len(live_b),
        tokens_a=va.state.tokens,
        tokens_b=vb.state.tokens,
        events=events,
        entries=tuple(entries),
    )
