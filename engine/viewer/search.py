"""Search over a session's whole log, or over every session of the store, with filters, for the viewer: text through the store's
full-text index (``engine.search_index``: FTS5 beside a SQLite store, ``tsvector`` in PostgreSQL),
then role, kind, provenance and "with findings only"; each hit links to its position."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import InvalidInputError
from engine.viewer.findings import Budget, audited, summary_findings

if TYPE_CHECKING:
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = ["FETCH", "MAX_QUERY", "open_search_index", "search", "search_all"]

MAX_QUERY = 500
FETCH = 200  # hits read from the index before the filters; a page shows up to ``limit`` of them
PROVENANCES = ("", "observed", "derived")


def open_search_index(ledger: Ledger):
    """The store's search index: the sidecar / PostgreSQL table shared by every reader of the store,
    or for an encrypted store (whose text must not sit in plaintext beside it) one in memory, built
    from the log — keep it and pass it to every ``search`` (a new one is a new build)."""
    from engine.search_index import open_index

    return open_index(ledger.url, encrypted=ledger.encrypted)


def search(index: Any, session: Session, query: str, *, role: str = "", kind: str = "", provenance: str = "",
           findings_only: bool = False, limit: int = 50, fleet_row: Any = None, any_words: bool = True) -> dict[str, Any]:
    """Span texts of the session's log that hold every word of ``query`` (newest first), filtered.
    ``findings_only``: summaries with grounding findings (``engine.viewer.findings``: the fleet
    view's audit, or a check within a budget; the summaries it could not check are counted in
    ``unchecked``)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("search needs some text to look for (?q=...)")
    if len(query) > MAX_QUERY:
        raise InvalidInputError(f"search text is longer than {MAX_QUERY} characters")
    if provenance not in PROVENANCES:
        raise InvalidInputError(f"provenance must be observed or derived; got {provenance!r}")
    for name, value in (("role", role), ("kind", kind)):
        if len(value) > 64:
            raise InvalidInputError(f"{name} is longer than 64 characters")
    hits = index.search(session, query, limit=FETCH, include_live=True, any_words=any_words)
    out = []
    budget = Budget()
    known = audited(session, fleet_row) if findings_only else None
    unchecked = 0
    for h in hits:
        derived = not h.span_id.startswith("o")
        if role and h.role != role or kind and h.kind != kind:
            continue
        if provenance and (provenance == "derived") != derived:
            continue
        row = {"span_id": h.span_id, "position": h.position, "role": h.role, "kind": h.kind, "status": h.status,
               "snippet": h.snippet, "provenance": "derived" if derived else "observed", "findings": []}
        if findings_only:
            if not derived:
                continue
            found = summary_findings(session, session.event(h.position), known, budget)
            if found is None:
                unchecked += 1
                continue
            if not found["items"]:
                continue
            row["findings"] = found["items"]
        out.append(row)
        if len(out) >= limit:
            break
    return {"session": session.name, "query": query, "role": role, "kind": kind, "provenance": provenance,
            "findings_only": findings_only, "hits": out, "more": len(hits) >= FETCH, "unchecked": unchecked}


def search_all(index: Any, ledger: Ledger, query: str, *, role: str = "", kind: str = "", provenance: str = "",
               findings_only: bool = False, limit: int = 50, fleet_rows: dict[str, Any] | None = None,
               open_session: Any = None) -> dict[str, Any]:
    """``search`` over every session of the store (the sessions projection lists them: no log
    scan), the most recently active sessions first and each session's hits newest first (texts with
    every word; the any-word fallback only when no session has one); every hit
    names its session, so it links to its position there. A session that cannot be read is counted
    in ``unreadable`` and skipped: the others are still searched. ``open_session(info)``: how a
    session is opened (the viewer keeps them per head position), default ``ledger.session``."""
    from engine.errors import LedgerError, StoreUnavailableError

    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be a positive int; got {limit!r}")
    infos = sorted(ledger.sessions(), key=lambda i: (i.last_at is not None, str(i.last_at or "")), reverse=True)
    hits: list[dict[str, Any]] = []
    more = False
    unchecked = unreadable = searched = 0
    # texts with every word, in every session, first; only when none has them, each session's best
    # any-word matches (the per-session search's fallback, which costs a ranking window per session)
    for any_words in (False, True):
        unchecked = unreadable = searched = 0
        for info in infos:
            if len(hits) >= limit:
                more = True
                break
            try:
                session = open_session(info) if open_session is not None else ledger.session(info.id)
            except StoreUnavailableError:
                raise
            except LedgerError:
                unreadable += 1
                continue
            searched += 1
            if (provenance == "derived" or findings_only) and not session.state.n_der:
                continue  # a session that never derived a span has no summary to find
            res = search(index, session, query, role=role, kind=kind, provenance=provenance, findings_only=findings_only,
                         limit=limit - len(hits), fleet_row=(fleet_rows or {}).get(info.name), any_words=any_words)
            hits += [{"session": session.name, **h} for h in res["hits"]]
            more = more or res["more"]
            unchecked += res["unchecked"]
        if hits or len(query.split()) < 2:
            break
    return {"session": None, "query": query, "role": role, "kind": kind, "provenance": provenance,
            "findings_only": findings_only, "hits": hits, "more": more, "unchecked": unchecked,
            "sessions": len(infos), "searched": searched, "unreadable": unreadable}
