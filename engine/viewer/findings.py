"""What the viewer can say about a summary's grounding within a page's time.

Checking a summary against its sources is a fold over their texts (seconds for a summary of
hundreds of tool outputs), too slow to run for every summary a page lists. So a page says what is
already known — the fleet view's audit of the session (``ctxledger fleet``, kept caught up by
``serve``), which names each finding's kind and span — and checks a summary itself only while its
sources stay within a small budget of characters; otherwise it says "not checked here" and the span
panel (one click) checks it in full.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHECK_CHARS", "Budget", "audited", "summary_findings"]

CHECK_CHARS = 40_000  # source characters a page may check itself


class Budget:
    """The characters of source text one request may still check."""

    def __init__(self, chars: int = CHECK_CHARS):
        self.chars = chars


def audited(session: Any, fleet_row: Any) -> dict[str, Any] | None:
    """What the fleet view's audit knows of this session, once per request: the position it
    audited, the summaries live then (the audit speaks of those only) and their finding kinds."""
    if fleet_row is None or not getattr(fleet_row, "audited_position", 0) or fleet_row.audited_position > session.position:
        return None
    view = session.at(fleet_row.audited_position)
    kinds: dict[str, list[str]] = {}
    for f in fleet_row.audit:
        kinds.setdefault(f.span_id, []).append(f.kind)
    return {"position": fleet_row.audited_position, "kinds": kinds,
            "live": {s.id: s.position for s in view.state.live.values() if s.sources}}


def summary_findings(session: Any, ev: Any, known: dict[str, Any] | None, budget: Budget) -> dict[str, Any] | None:
    """``{"source": "audit"|"check", "items": [{severity, kind, message}]}`` for the summary ``ev``
    (a Rewritten or Rederived event), or None when nothing is known within the budget."""
    if known is not None and known["live"].get(ev.span_id) == ev.originator_version:
        return {"source": "audit", "items": [{"severity": "error", "kind": k, "message": k.replace("-", " ")}
                                             for k in known["kinds"].get(ev.span_id, [])][:20]}
    positions = list(getattr(ev, "source_positions", ()))
    if not positions:
        return None
    texts = []
    for p in positions:
        text = session.event(p).text
        budget.chars -= len(text)
        if budget.chars < 0:
            return None
        texts.append(text)
    from projections import check

    found = check(ev.text, texts, with_coverage=False).findings
    return {"source": "check", "items": [{"severity": f["severity"], "kind": f["kind"], "message": f["message"]}
                                         for f in found if f["severity"] in ("error", "warning")][:20]}
