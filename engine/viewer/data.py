"""What the viewer shows, as plain data, read through the public session API only.

Every function here answers one request without reading the whole log, except ``curve`` (one
streaming pass, cached per session head by ``engine.viewer.cache``) and the forensics that are
whole-log folds by nature (``blame``, ``lineage``), which run only when the user asks for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.event_lines import describe
from engine.events import (
    Event,
    Expanded,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
)
from engine.errors import LedgerError, StoreUnavailableError
from engine.viewer.conversation import event_time
from engine.spans import Provenance, Span

if TYPE_CHECKING:
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = [
    "COMPACTION_TYPES",
    "MARKER_TYPES",
    "buffer_json",
    "curve",
    "event_json",
    "grounding_sentences",
    "integrity",
    "lineage_json",
    "lost_json",
    "seek_compaction",
    "sentence_bounds",
    "session_rows",
    "span_detail",
    "span_json",
]

COMPACTION_TYPES = (Pruned, Rewritten, Rederived, RewriteRefused, Expanded)
MARKER_TYPES = ("Pruned", "Rewritten", "Rederived", "RewriteRefused", "Restored", "Expanded")
CURVE_BUCKETS = 1500  # chart samples: each bucket keeps its peak and its last point
MAX_MARKERS = 2000  # per kind of marker: more are thinned evenly over the log
SEEK_LIMIT = 50_000  # how far Shift+arrow looks for the next compaction before giving up
PAGE = 512


def _time(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at is not None else ""


def span_json(span: Span, *, text: bool = True) -> dict[str, Any]:
    """A span as the JSON API shows it."""
    out: dict[str, Any] = {
        "id": span.id,
        "role": span.role,
        "kind": span.kind,
        "provenance": str(span.provenance),
        "generation": span.generation,
        "tokens": span.tokens,
        "sources": list(span.sources),
        "position": span.position,
        "meta": span.meta,
    }
    if text:
        out["text"] = span.text
    return out


def buffer_json(view: Any, head: int) -> dict[str, Any]:
    """The buffer at a position: ``GET /api/s/<session>/at/<n>``."""
    spans = view.spans()
    return {
        "session": view.name,
        "position": view.position,
        "head": head,
        "tokens": view.tokens,
        "event": event_json(view.event(view.position)),
        "spans": [span_json(s) for s in spans],
    }


def event_json(ev: Event) -> dict[str, Any]:
    """The event that produced a position: type, what it did, who and why (text truncated)."""
    out: dict[str, Any] = {
        "position": ev.originator_version,
        "type": type(ev).__name__,
        "what": describe(ev, "prose"),
        "by": ev.by,
        "reason": ev.reason,
        "at": _time(ev.at),
        "span_id": getattr(ev, "span_id", ""),
        **event_time(ev),
    }
    text = getattr(ev, "text", "")
    if text:
        out["text"] = text if len(text) <= 2000 else text[:2000] + "…"
    if type(ev) is RewriteRefused and ev.findings:
        out["findings"] = [f.get("message", "") for f in ev.findings][:10]
    return out


# -- the live-token curve ----------------------------------------------------------------------


def _touched(ev: Event) -> tuple[str, ...]:
    t = type(ev)
    if t is Rewritten:
        return (*ev.inputs, ev.span_id)
    if t is Expanded:
        return (ev.span_id, *ev.restored)
    if t in (Observed, Pruned, Rederived, Restored):
        return (ev.span_id,)
    return ()


def curve(session: Session, stop: int | None = None) -> dict[str, Any]:
    """Live tokens (observed, derived) over the log, in at most ``CURVE_BUCKETS`` buckets (each
    keeps its peak and its last point, so the saw-tooth survives), and markers for prunes,
    rewrites, re-derivations, refusals, restores and expansions (at most ``MAX_MARKERS`` of each
    kind, thinned evenly when there are more).

    One pass over the log a page at a time, keeping only token counts per live span id: the
    buffer's tokens are tracked from each event's own fields (and, for a restore or an expansion,
    the original events read back by position), never by rebuilding spans."""
    head = session.position if stop is None else stop
    size = max(1, -(-head // CURVE_BUCKETS))
    live: dict[str, tuple[int, bool]] = {}  # span id -> (tokens, derived)
    obs = der = 0
    points: list[list[int]] = []
    markers: dict[str, list[list[Any]]] = {}
    peak: list[int] | None = None
    for ev in _paged(session, 1, head):
        t = type(ev)
        p = ev.originator_version
        if t is Observed:
            live[ev.span_id] = (ev.tokens, False)
            obs += ev.tokens
        elif t is Pruned:
            gone = live.pop(ev.span_id, None)
            if gone is not None:
                if gone[1]:
                    der -= gone[0]
                else:
                    obs -= gone[0]
        elif t is Rewritten:
            for i in ev.inputs:
                gone = live.pop(i, None)
                if gone is not None:
                    if gone[1]:
                        der -= gone[0]
                    else:
                        obs -= gone[0]
            live[ev.span_id] = (ev.tokens, True)
            der += ev.tokens
        elif t is Rederived:
            old = live.get(ev.span_id)
            if old is not None:
                der -= old[0]
            live[ev.span_id] = (ev.tokens, True)
            der += ev.tokens
        elif t is Restored:
            content = session.event(ev.content_position)
            d = type(content) is not Observed
            live[ev.span_id] = (content.tokens, d)
            if d:
                der += content.tokens
            else:
                obs += content.tokens
        elif t is Expanded:
            gone = live.pop(ev.span_id, None)
            if gone is not None:
                der -= gone[0]
            for sid, pos in zip(ev.restored, ev.restored_positions):
                tok = session.event(pos).tokens
                live[sid] = (tok, False)
                obs += tok
        name = t.__name__
        if name in MARKER_TYPES:
            markers.setdefault(name, []).append([p, name, getattr(ev, "span_id", "")])
        point = [p, obs, der]
        if peak is None or obs + der > peak[1] + peak[2]:
            peak = point
        if p % size == 0 or p == head:
            if peak is not point:
                points.append(peak)
            points.append(point)
            peak = None
    kept: list[list[Any]] = []
    for kind in markers.values():  # each kind thinned evenly over the log, never cut off at the end
        kept += kind[:: -(-len(kind) // MAX_MARKERS)]
    kept.sort()
    return {"session": session.name, "head": head, "bucket": size, "points": points, "markers": kept}


def _paged(session: Session, start: int, stop: int) -> Iterator[Event]:
    for lo in range(start, stop + 1, 4096):
        yield from session.events(lo, min(stop, lo + 4095))


# -- seeking ------------------------------------------------------------------------------------


def seek_compaction(session: Session, position: int, direction: int) -> int | None:
    """The position at the end of the next (``direction`` 1) or previous (-1) compaction: a run of
    consecutive prunes, rewrites, re-derivations, refusals or expansions. From inside a run, the
    next one is the end of this run; None when there is none within ``SEEK_LIMIT`` events."""
    head = session.position
    if direction > 0:
        end: int | None = None
        lo = position + 1
        while lo <= min(head, position + SEEK_LIMIT):
            hi = min(head, lo + PAGE - 1)
            for ev in session.events(lo, hi):
                if isinstance(ev, COMPACTION_TYPES):
                    end = ev.originator_version
                elif end is not None:
                    return end
            lo = hi + 1
        return end
    # backwards: the newest run end before ``position`` (a compaction event not followed by one)
    following = position <= head and isinstance(session.event(position), COMPACTION_TYPES)
    hi = position - 1
    floor = max(1, position - SEEK_LIMIT)
    while hi >= floor:
        lo = max(floor, hi - PAGE + 1)
        for ev in reversed(list(session.events(lo, hi))):
            c = isinstance(ev, COMPACTION_TYPES)
            if c and not following:
                return ev.originator_version
            following = c
        hi = lo - 1
    return None


# -- a span, in depth -----------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_LIST_MARKER = re.compile(r"\s*(?:[-*+]|\(?(?:\d{1,3}|[A-Za-z]|[ivxIVX]{1,4})[.)])\s*")  # "1." "a)" "iv." "-": not sentences


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends: split after ``.!?;`` and at line breaks,
    a Markdown list number (``1.``, ``a)``) kept with the sentence it numbers."""
    bounds: list[tuple[int, int]] = []
    pos = 0
    pending: int | None = None  # the start of a list marker waiting for its sentence
    for m in [*_SENTENCE.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        part = text[pos:end]
        if part.strip():
            if _LIST_MARKER.fullmatch(part) and m is not None and "\n" not in m.group():
                pending = pos if pending is None else pending
            else:
                bounds.append((pos if pending is None else pending, end))
                pending = None
        if m is None:
            break
        pos = m.end()
    if pending is not None:
        bounds.append((pending, len(text)))
    return bounds or [(0, len(text))]


def grounding_sentences(text: str, sources: list[str]) -> list[dict[str, Any]]:
    """A derived text checked against its original sources (one ``projections.check`` of the whole
    text), its findings laid out sentence by sentence: each sentence with the findings that point
    into it (value, severity, message, offset within the sentence; -1 when a finding names no
    place, and then it goes with the sentence that contains its value, or the first)."""
    from projections import check

    result = check(text, sources, with_coverage=False)
    bounds = sentence_bounds(text)
    out = [{"text": text[a:b], "findings": []} for a, b in bounds]
    for f in result.findings:
        offset = f.get("offset", -1)
        value = f.get("value", "") or ""
        k = next((i for i, (a, b) in enumerate(bounds) if a <= offset < b), None) if offset >= 0 else None
        if k is None:
            k = next((i for i, (a, b) in enumerate(bounds) if value and value in text[a:b]), 0)
        a = bounds[k][0]
        out[k]["findings"].append(
            {
                "kind": f["kind"],
                "value": value,
                "severity": f["severity"],
                "message": f["message"],
                "offset": offset - a if offset >= a else -1,
            }
        )
    return out


GROUNDING_INLINE_CHARS = 40_000  # source characters checked within the panel's own request


def span_detail(session: Session, at: int, span_id: str, *, with_lineage: bool = True,
                grounding: bool | None = None) -> dict[str, Any]:
    """Everything the span panel shows: the span (live at ``at``, or read back from the log), who
    wrote it and why, its original observations, its lineage, and for a derived span the grounding
    of its text sentence by sentence. ``grounding``: True checks it here, False leaves it to a
    request of its own (``grounding_deferred``); None (the default) checks here only while the
    sources stay under ``GROUNDING_INLINE_CHARS`` (a summary of hundreds of tool outputs takes
    seconds to check: the panel is shown first, its grounding when it is done)."""
    view = session.at(at)
    live = view.state.live.get(span_id)
    out: dict[str, Any] = {"session": session.name, "at": at, "id": span_id, "live": live is not None}
    if live is not None:
        span = live
    elif span_id.startswith("o"):
        span = view.original(span_id)
    else:
        originals = view.originals(span_id)  # raises for a derived id that never existed
        out.update(span=None, originals=[span_json(o) for o in originals])
        if with_lineage:
            out["lineage"] = lineage_json(view.lineage(span_id))
        return out
    out["span"] = span_json(span)
    made = view.event(span.position)
    out["made_by"] = event_json(made)
    if span.provenance is Provenance.DERIVED:
        originals = view.originals(span_id)
        out["originals"] = [span_json(o) for o in originals]
        texts = [o.text for o in originals]
        inline = grounding if grounding is not None else sum(map(len, texts)) <= GROUNDING_INLINE_CHARS
        if inline:
            out["grounding"] = grounding_sentences(span.text, texts)
        else:
            out["grounding_deferred"] = True
    else:
        out["originals"] = []
    if with_lineage:
        out["lineage"] = lineage_json(view.lineage(span_id))
    return out


def lineage_json(lin: Any) -> dict[str, Any]:
    """``s.lineage(id)`` as plain data: the came-from tree, what became of the span, its descendants."""
    def node(n: Any) -> dict[str, Any]:
        return {
            "id": n.span_id,
            "provenance": n.provenance,
            "position": n.position,
            "generation": n.generation,
            "by": n.by,
            "text": n.text,
            "children": [node(c) for c in n.children],
        }

    return {
        "status": lin.status,
        "came_from": node(lin.came_from),
        "became": [
            {"position": b.position, "type": b.event_type, "span_id": b.span_id, "action": b.action, "by": b.by}
            for b in lin.became
        ],
        "descendants": list(lin.descendants),
    }


# -- what a compaction dropped ----------------------------------------------------------------------


def lost_json(view: Any, span_id: str) -> dict[str, Any]:
    """``projections.lost`` for the summary ``span_id`` (live at the view's position or not): per
    category (user messages, instructions, paths, commands, errors, numbers, ids) how many of its
    originals' items the summary kept, and the dropped ones (the first 20 of each)."""
    from engine.lost_kept import lost_report
    from projections.lost import summary_of

    summary = summary_of(view, span_id)
    report = lost_report(view, summary)
    return {
        "span_id": report.span_id,
        "sources": report.sources,
        "categories": [
            {"name": c.name, "kept": c.kept, "total": c.total,
             "dropped": [{"text": d.text, "span_id": d.span_id} for d in c.dropped[:20]], "more": max(0, len(c.dropped) - 20)}
            for c in report.categories
        ],
    }


# -- integrity -------------------------------------------------------------------------------------


def integrity(session: Session) -> dict[str, Any]:
    """The hash chain walked from the first event to the head: ``ok``, how many events verified,
    the first bad position and why (what ``ctxledger verify`` says)."""
    r = session.verify()
    return {
        "session": session.name,
        "ok": r.ok,
        "head": session.position,
        "checked": r.position,
        "first_bad_position": r.first_bad_position,
        "reason": r.reason,
    }


# -- the sessions page -----------------------------------------------------------------------------


def _opened(ledger: Ledger, info: Any) -> dict[str, Any]:
    """The buffer's numbers at the session's head (a snapshot read and the events after it), or
    why it cannot be read."""
    try:
        s = ledger.session(info.id)
    except StoreUnavailableError:
        raise
    except LedgerError as e:  # this session only: listed as unreadable, the others shown
        return {"unreadable": e.message}
    spans = s.state.live.values()
    return {
        "events": s.position,
        "live_spans": len(s.state.live),
        "tokens": s.tokens,
        "derived": sum(1 for x in spans if x.provenance is Provenance.DERIVED),
        "max_generation": max((x.generation for x in spans), default=0),
        "refusals": s.state.refusals,
        "violations": s.state.violations,
    }


def session_rows(ledger: Ledger, fleet_rows: dict[str, Any] | None = None, *, open_limit: int = 300,
                 heads: Any = None) -> list[dict[str, Any]]:
    """One row per session: events, live spans and tokens, derived, max generation, refusals,
    violations, last activity, and the fleet view's drift findings when it has a row. The first
    ``open_limit`` sessions are opened (a snapshot read each) for their buffer's numbers; the rest
    show what the session list and the fleet view know without opening them. ``heads`` (a
    ``CurveCache``): keeps what each session's head showed, keyed by (session id, head position),
    so a session is opened again only once its head moved (the list itself is the store's sessions
    projection: no log scan)."""
    rows = []
    for k, info in enumerate(ledger.sessions()):
        fr = (fleet_rows or {}).get(info.name)
        row: dict[str, Any] = {
            "name": info.name,
            "events": info.position,
            "strict": info.strict,
            "live_spans": None,
            "tokens": None,
            "derived": None,
            "max_generation": fr.max_generation if fr is not None else 0,
            "refusals": fr.refusals if fr is not None else 0,
            "violations": fr.violations if fr is not None else 0,
            "drift": None if fr is None else fr.drift,
            "findings": [] if fr is None else sorted({f.kind for f in (fr.audit or fr.findings)}),
            "last": _time(info.last_at) if info.last_at is not None else (_time(fr.last_event_at) if fr is not None else ""),
            "started": _time(info.started_at),
            "unreadable": "",
        }
        if k < open_limit:
            opened = _opened(ledger, info) if heads is None else heads.get((info.id, info.position),
                                                                           lambda: _opened(ledger, info))
            row.update(opened)
            if not row["last"] and "unreadable" not in opened and info.position:
                row["last"] = _time(ledger.session(info.id).event(info.position).at)
        rows.append(row)
    return rows
