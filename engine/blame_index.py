"""Blame through the search index: the facts of a needle without a pass over the whole log.

``projections.blame.walk`` folds every event to find which spans ever held the text. On a SQLite
store the same facts come from two small reads instead:

- the observations that contain the needle: the FTS5 index ``context_search`` keeps
  (``engine.search_index``) gives the rows that hold the needle's whole words (a word the needle
  may cut at either end is matched as a prefix, or through the index's vocabulary), and each row's
  text is then checked exactly (``needle in text.casefold()``, blame's own rule);
- the summaries, prunes and expansions: the session's structural events, read by topic (a few
  rows of a long session; observations are most of a log).

The buffer at the reader's position is the reader's own state. Every rule of ``walk`` is applied to
those events in log order, so the hits are the same (tests/test_blame_index.py compares both on
random sessions). The index path is not taken, and ``walk`` answers, when it cannot be exact or
cheap: a needle with non-ASCII characters (the index folds case and accents by its own tables,
``casefold`` by Python's), one whose only word is cut at both ends and matches too many indexed
words, a session with unsaved events (an open batch), and stores without a SQLite index on disk
(``memory://`` and encrypted stores would index the whole log in memory first; PostgreSQL's parser
splits words differently).

One limit of the index path: text whose match depends on a character Python's ``casefold`` turns
into ASCII (``ſ``, the Kelvin sign, ``ﬁ``-style ligatures, ``İ``, ``ß``) is found by ``walk`` and not
by the index, which keeps those characters as they are.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from engine.errors import StorageError
from engine.events import Expanded, Pruned, Rederived, Rewritten
from projections.blame import Facts, Origin
from projections.buffer import span_from_event

if TYPE_CHECKING:
    from engine.reading import LogReader
    from engine.search_index import SqliteSearchIndex

__all__ = ["finder", "index_facts", "install", "match_expression"]

_WORD = re.compile(r"[a-z0-9]+")
MAX_TERMS = 400  # a needle cut at both ends that matches more indexed words is left to the walk
_STRUCTURAL = (Rewritten, Rederived, Pruned, Expanded)


def match_expression(needle: str, terms_like: Any) -> str | None:
    """The FTS5 expression whose matches include every text that contains ``needle`` (ASCII,
    case-folded, stripped); '' when no indexed text can; None when the index cannot narrow it.
    ``terms_like(pattern, limit)`` lists indexed words matching a LIKE pattern."""
    words = list(_WORD.finditer(needle))
    if not words or not needle.isascii():
        return None
    cut_start = words[0].start() == 0  # the text's word may go on before the needle's first
    cut_end = words[-1].end() == len(needle)  # ... and after its last
    if len(words) == 1 and cut_start:
        word = words[0].group()
        pattern = f"%{word}%" if cut_end else f"%{word}"
        terms = terms_like(pattern, MAX_TERMS + 1)
        if len(terms) > MAX_TERMS:
            return None
        return " OR ".join(f'"{t}"' for t in terms)
    whole = [w.group() for w in (words[1:] if cut_start else words)]
    return '"' + " ".join(whole) + '"' + (" *" if cut_end else "")


def index_facts(reader: LogReader, needle: str, index: SqliteSearchIndex) -> Facts | None:
    """The facts ``walk`` would read for ``needle``, through ``index``; None to leave it to the walk."""
    if reader._unsaved()[1] or not index.covers(reader):
        return None
    match = match_expression(needle, lambda pattern, limit: index.terms_like(reader, pattern, limit))
    if match is None:
        return None

    def has(s: str) -> bool:
        return needle in s.casefold()

    holders: dict[str, int] = {}  # observed span -> its position, for the observations containing it
    if match:
        for position, span_id, body in index.rows_matching(reader, match, reader.position):
            if span_id.startswith("o") and has(body):
                holders[span_id] = position
    observed_with = set(holders.values())
    first_with: dict[str, Origin] = {}
    derived_inputs: dict[str, tuple[str, ...]] = {}
    removed: dict[str, tuple[Any, Any, str]] = {}
    current: dict[str, Any] = {}  # derived span -> its span as the last content event made it

    def held(span_id: str) -> Any:
        """The span as it is at this point of the log, if its text holds the needle (else None).
        Every span an event names is live when it does (the log was checked as it was written)."""
        if span_id.startswith("o"):
            if span_id not in holders:
                return None
            return span_from_event(reader.event(holders[span_id]))
        span = current.get(span_id)
        return span if span is not None and has(span.text) else None

    store = reader._store
    for ev in store.events_of_types(reader.id, _STRUCTURAL, reader.position):
        t = type(ev)
        position = ev.originator_version
        if t is Pruned:
            span = held(ev.span_id)
            if span is not None:
                removed[span.id] = (span, ev, "pruned")
        elif t is Rewritten:
            keeps = has(ev.text)
            if not keeps:
                for span_id in ev.inputs:
                    span = held(span_id)
                    if span is not None:
                        removed[span.id] = (span, ev, f"rewritten into {ev.span_id} without it")
            inputs = tuple(i for i in ev.inputs if not i.startswith("o"))
            if inputs:
                derived_inputs[ev.span_id] = inputs
            if keeps and ev.span_id not in first_with:
                first_with[ev.span_id] = Origin(position, t.__name__, ev.by, ev.at)
            current[ev.span_id] = span_from_event(ev)
        elif t is Rederived:
            span = held(ev.span_id)
            keeps = has(ev.text)
            if span is not None and not keeps:
                removed[span.id] = (span, ev, "re-derived without it")
            if keeps and ev.span_id not in first_with:
                first_with[ev.span_id] = Origin(position, t.__name__, ev.by, ev.at)
            current[ev.span_id] = span_from_event(ev)
        elif t is Expanded:
            span = held(ev.span_id)
            if span is not None and not any(p in observed_with for p in ev.restored_positions):
                removed[span.id] = (span, ev, "expanded into originals that do not contain it")
    return Facts(
        state=reader.state, observed_with=observed_with, first_with=first_with, derived_inputs=derived_inputs, removed=removed
    )


def finder(url: str | None, *, encrypted: bool) -> Any:
    """The ``find`` hook ``projections.blame.blame`` takes, for the store at ``url``: through the
    search index beside a SQLite file; None (walk the log) for every other store. (The ledger
    cannot import the search index, a layer above it: ``install`` hands it the finder.)"""
    if encrypted or not url or not url.startswith("sqlite://"):
        return None
    path = url[len("sqlite://") :][1:].split("?", 1)[0]
    if not path or path == ":memory:":
        return None

    def find(reader: LogReader, needle: str) -> Facts | None:
        from engine.search_index import SqliteSearchIndex, open_index

        try:
            index = open_index(url)
        except Exception:  # noqa: BLE001 - no index (a read-only directory): the walk answers
            return None
        if not isinstance(index, SqliteSearchIndex):
            return None
        try:
            return index_facts(reader, needle, index)
        except StorageError:  # a damaged or busy index: the walk answers
            return None

    return find


def install(ledger: Any) -> Any:
    """Let the sessions ``ledger`` opens from now on blame through the search index (the CLI's
    ledgers do: ``engine.cli._app.open_ledger``); returns the ledger."""
    ledger.blame_finder = finder(ledger.url, encrypted=ledger.encrypted)
    return ledger
