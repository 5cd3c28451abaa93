"""Blame: where a piece of text in the buffer came from -- and, if it is gone, what removed it.

For every live span whose text contains the needle (case-insensitive): the event that put that text
into the span, and its *origin*, the first event in the span's own lineage (its original
observations and the rewrites between them and the span) whose text contains it. An origin among the
original observations means the text is grounded; an origin in a rewrite means the model wrote it
("introduced by rewrite at position 123 by model-x; absent from all 14 source observations").

For text no live span holds any more, the events that removed it (like ``git log -S``): a prune, a
rewrite or re-derivation that left it out, an expansion back to originals that do not contain it.

One forward pass over events 1..n: the buffer fold, plus the few positions whose text matches.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from engine.text_clip import clip
from engine.errors import InvalidInputError, LedgerError
from projections.buffer import apply
from projections.grounding.checker import LEXICAL, Checker, run_checker
from projections.grounding.evidence import seen_sources, source_of
from engine.events import Event, Expanded, Observed, Pruned, Rederived, Rewritten
from engine.spans import Provenance, Span

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["BlameHit", "Facts", "assemble", "blame", "walk"]


class BlameHit(msgspec.Struct, frozen=True, kw_only=True):
    """One span that holds (or held) the text.

    ``position`` is the event that put the text into the span; ``origin_position`` the first event of
    the span's lineage whose text contains it, ``origin_kind`` whether that was an observation
    (``grounded``) or a rewrite. ``live`` is False for text that is gone; ``removed_position`` is then
    the event that removed it."""

    span_id: str
    live: bool
    position: int
    event_type: str
    by: str
    at: datetime | None
    origin_position: int
    origin_kind: str
    origin_span_id: str
    grounded: bool
    message: str
    text: str = ""
    sources: int = 0
    removed_position: int = 0
    removed_type: str = ""
    removed_by: str = ""
    checker: str = ""  # for text in a live derived span: the drift checker that judged it
    findings: tuple[str, ...] = ()  # what that checker says about the blamed text (empty: supported)


class Origin(msgspec.Struct, frozen=True):
    position: int
    event_type: str
    by: str
    at: datetime | None




def blame(
    reader: LogReader, text: str, checker: Checker | None = None, *, find: Callable[[LogReader, str], Facts | None] | None = None
) -> list[BlameHit]:
    """Blame ``text`` at the reader's position. Live hits first (buffer order), then removals. Text
    in a live derived span is also judged against the span's original observations by ``checker``
    (else the reader's configured checker, else the lexical default). ``find``: reads the needle's
    facts another way than ``walk`` (``engine.blame_index``: through the search index), or returns
    None to leave them to ``walk``; the hits are the same either way."""
    checker = checker or getattr(reader, "checker", None) or LEXICAL
    if not isinstance(text, str):
        raise InvalidInputError(f"blame text must be a str, not {type(text).__name__}")
    needle = text.casefold().strip()
    if not needle:
        raise InvalidInputError("blame text is empty")

    facts = find(reader, needle) if find is not None else None
    return assemble(reader, needle, checker, facts if facts is not None else walk(reader, needle))


class Facts(msgspec.Struct, kw_only=True):
    """What blame reads off the log for one needle (``walk`` reads it in one pass over the log;
    ``engine.blame_index`` from the search index and the log's structural events):

    ``state`` the buffer at the reader's position; ``observed_with`` the positions of observations
    containing the needle; ``first_with`` per derived span, its first content event containing it;
    ``derived_inputs`` per derived span, the derived spans it was rewritten from (permissive logs);
    ``removed`` per span that held the needle and lost it, (the span as it was, the event, how)."""

    state: Any
    observed_with: set[int]
    first_with: dict[str, Origin]
    derived_inputs: dict[str, tuple[str, ...]]
    removed: dict[str, tuple[Span, Event, str]]


def walk(reader: LogReader, needle: str) -> Facts:
    """The facts of ``needle`` (already case-folded) from one forward pass over events 1..n."""

    def has(s: str) -> bool:
        return needle in s.casefold()

    load = reader.event
    state = None
    observed_with: set[int] = set()  # positions of observations containing the needle
    first_with: dict[str, Origin] = {}  # derived span -> first content event containing it
    derived_inputs: dict[str, tuple[str, ...]] = {}  # for rewrites of rewrites (permissive logs)
    removed: dict[str, tuple[Span, Event, str]] = {}

    for ev in reader.events(1, reader.position):
        t = type(ev)
        position = ev.originator_version
        if t is Observed:
            if has(ev.text):
                observed_with.add(position)
        elif t is Pruned:
            span = state.live.get(ev.span_id)
            if span is not None and has(span.text):
                removed[span.id] = (span, ev, "pruned")
        elif t is Rewritten:
            keeps = has(ev.text)
            for span_id in ev.inputs:
                span = state.live.get(span_id)
                if span is not None and has(span.text) and not keeps:
                    removed[span.id] = (span, ev, f"rewritten into {ev.span_id} without it")
            inputs = tuple(i for i in ev.inputs if not i.startswith("o"))
            if inputs:
                derived_inputs[ev.span_id] = inputs
            if keeps and ev.span_id not in first_with:
                first_with[ev.span_id] = Origin(position, t.__name__, ev.by, ev.at)
        elif t is Rederived:
            span = state.live.get(ev.span_id)
            keeps = has(ev.text)
            if span is not None and has(span.text) and not keeps:
                removed[span.id] = (span, ev, "re-derived without it")
            if keeps and ev.span_id not in first_with:
                first_with[ev.span_id] = Origin(position, t.__name__, ev.by, ev.at)
        elif t is Expanded:
            span = state.live.get(ev.span_id)
            if span is not None and has(span.text) and not any(p in observed_with for p in ev.restored_positions):
                removed[span.id] = (span, ev, "expanded into originals that do not contain it")
        state = apply(state, ev, load)

    return Facts(state=state, observed_with=observed_with, first_with=first_with, derived_inputs=derived_inputs, removed=removed)


def assemble(reader: LogReader, needle: str, checker: Checker, facts: Facts) -> list[BlameHit]:
    """The hits of ``needle`` from its facts: live hits first (buffer order), then removals."""
    state, observed_with, first_with = facts.state, facts.observed_with, facts.first_with
    derived_inputs, removed = facts.derived_inputs, facts.removed

    def has(s: str) -> bool:
        return needle in s.casefold()

    events: dict[int, Origin] = {}  # the content events of live matching spans, filled lazily
    hits: list[BlameHit] = []
    live_ids = set()
    for span in state.spans() if state is not None else ():
        if not has(span.text):
            continue
        live_ids.add(span.id)
        put = _content(reader, span.position, events)
        hit = _hit(span, put, observed_with, first_with, derived_inputs, reader, events)
        if span.provenance is Provenance.DERIVED:
            hit = _judged(hit, span, needle, reader, checker)
        hits.append(hit)
    for span_id, (span, ev, how) in removed.items():
        if span_id in live_ids:
            continue
        put = _content(reader, span.position, events)
        hit = _hit(span, put, observed_with, first_with, derived_inputs, reader, events)
        by = f" by {ev.by}" if ev.by else ""
        hits.append(
            msgspec.structs.replace(
                hit,
                live=False,
                removed_position=ev.originator_version,
                removed_type=type(ev).__name__,
                removed_by=ev.by,
                message=f"gone: {how} at position {ev.originator_version}{by}. Before that: {hit.message}",
            )
        )
    return hits


def _content(reader: LogReader, position: int, cache: dict[int, Origin]) -> Origin:
    if position not in cache:
        ev = reader.event(position)
        cache[position] = Origin(position, type(ev).__name__, ev.by, ev.at)
    return cache[position]


def _hit(
    span: Span,
    put: Origin,
    observed_with: set[int],
    first_with: dict[str, Origin],
    derived_inputs: dict[str, tuple[str, ...]],
    reader: LogReader,
    cache: dict[int, Origin],
) -> BlameHit:
    by = f" by {put.by}" if put.by else ""
    if span.provenance is Provenance.OBSERVED:
        return BlameHit(
            span_id=span.id, live=True, position=put.position, event_type=put.event_type, by=put.by,
            at=put.at, origin_position=span.position, origin_kind="observed", origin_span_id=span.id,
            grounded=True, text=clip(span.text),
            message=f"observed in {span.id} at position {span.position}{by} ({span.role}/{span.kind})",
        )
    n = len(span.source_positions)
    grounded = [(s, p) for s, p in zip(span.sources, span.source_positions) if p in observed_with]
    verb = "re-derived" if put.event_type == "Rederived" else "rewritten"
    if grounded:
        source_id, origin = min(grounded, key=lambda sp: sp[1])
        also = f" (and {len(grounded) - 1} more of its {n} sources)" if len(grounded) > 1 else f" (1 of its {n} sources)"
        return BlameHit(
            span_id=span.id, live=True, position=put.position, event_type=put.event_type, by=put.by,
            at=put.at, origin_position=origin, origin_kind="observed", origin_span_id=source_id,
            grounded=True, sources=n, text=clip(span.text),
            message=(
                f"grounded: observed in {source_id} at position {origin}{also}; "
                f"{verb} into {span.id} at position {put.position}{by}"
            ),
        )
    # first appearance among the rewrites of this span's lineage
    candidates: list[tuple[Origin, str]] = []
    stack, seen = [span.id], set()
    while stack:
        sid = stack.pop()
        if sid in seen:
            continue
        seen.add(sid)
        if sid in first_with:
            candidates.append((first_with[sid], sid))
        stack.extend(derived_inputs.get(sid, ()))
    if candidates:
        origin, origin_span = min(candidates, key=lambda c: c[0].position)
    else:  # cannot happen for a span whose text contains the needle; stay truthful anyway
        origin, origin_span = put, span.id
    obys = f" by {origin.by}" if origin.by else ""
    kind = "re-derivation" if origin.event_type == "Rederived" else "rewrite"
    message = (
        f"introduced by {kind} at position {origin.position}{obys}; absent from "
        f"{'all ' if n != 1 else 'its '}{n} source observation{'s' if n != 1 else ''}"
    )
    if origin.position != put.position:
        message += f"; still in {span.id} after the {verb.replace('rewritten', 'rewrite').replace('re-derived', 're-derivation')} at position {put.position}{by}"
    return BlameHit(
        span_id=span.id, live=True, position=put.position, event_type=put.event_type, by=put.by,
        at=put.at, origin_position=origin.position, origin_kind="derived", origin_span_id=origin_span,
        grounded=False, sources=n, text=clip(span.text), message=message,
    )


def _judged(hit: BlameHit, span: Span, needle: str, reader: LogReader, checker: Checker) -> BlameHit:
    """The checker's findings on the derived span that concern the blamed text."""
    try:
        sources = [source_of(s) for s in reader.originals(span.id)] + seen_sources(reader, span)
    except LedgerError:
        return hit
    cache = getattr(reader, "grounding_cache", None)
    if cache is not None:  # the same result the audit keeps for this span (engine.grounding_cache)
        result = cache.check(reader.id, span.id, span.position, checker, span.text, sources)
    else:
        result = run_checker(checker, span.text, sources)
    at = span.text.casefold().find(needle)
    about = []
    for f in result.findings:
        if f.get("severity") not in ("error", "warning"):
            continue
        value = str(f.get("value", "")).casefold()
        offset = f.get("offset")
        near = isinstance(offset, int) and at >= 0 and offset <= at + len(needle) and at <= offset + max(len(value), 1)
        if needle in value or (value and value in needle) or near:
            about.append(f["message"])
    return msgspec.structs.replace(hit, checker=checker.name, findings=tuple(about))
