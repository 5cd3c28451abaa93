"""Drift audit: one pass over a session's log, then a grounding check of every live derived span.

``audit(reader)`` reports, at the reader's position (a Session, or a SessionView for ``at=n``):

- structure: rewrites of derived spans (generation > 1 or derived sources: permissive sessions and
  imported logs), derived spans whose sources are missing from the log or disagree with it, a buffer
  that differs from its rebuild (a bad snapshot), a broken hash chain, every recorded
  ``RewriteRefused`` (attempted drift);
- grounding: every live derived span against the union of its ORIGINAL observed sources --
  unsupported specifics, merged events, and the specifics it dropped (see ``projections.grounding``).

Cost: the log is read once. The same pass checks the hash chain (the stored bytes are hashed as they
are decoded, so verifying does not read the log a second time), folds the buffer with
``projections.buffer.apply`` (the rebuild compared with the reader's state), and keeps the texts of
the observed spans each rewrite consumed, so the grounding check of a live derived span needs no
extra read unless the span came back through ``restore``. Only events 1..n are used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from engine.errors import LedgerError
from engine.events import (
    Event,
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    RewriteRefused,
    Rewritten,
)
from engine.spans import Provenance, Span
from projections.buffer import apply
from projections.buffer import BufferState
from projections.finding import Finding
from projections.grounding import MERGED, GroundingResult, Source
from projections.grounding.evidence import seen_sources, source_of
from projections.grounding.checker import LEXICAL, Checker, run_checker

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["Finding", "SpanCoverage", "AuditReport", "audit", "grounding", "SEVERITIES"]

SEVERITIES = ("error", "warning", "info")


class SpanCoverage(msgspec.Struct, frozen=True, kw_only=True):
    """How much of its sources' specifics a live derived span kept."""

    span_id: str
    position: int
    sources: tuple[str, ...]
    source_specifics: int
    dropped: tuple[str, ...]
    coverage: float


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The audit of one session at one position. ``ok`` is False when any finding is an error."""

    session: str
    position: int
    ok: bool
    findings: tuple[Finding, ...]
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    derived_checked: int = 0
    unchecked: int = 0  # derived spans whose text cannot be checked (a provider's encrypted summary)
    chain_ok: bool = True
    coverage: tuple[SpanCoverage, ...] = ()
    checker: str = "lexical"  # the drift checker that judged the derived spans

    def __bool__(self) -> bool:
        return self.ok

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


# Finding kinds
CHAIN = "chain-broken"
REBUILD = "rebuild-mismatch"
UNREPLAYABLE = "unreplayable-event"
GENERATION = "generation-exceeded"
DERIVED_SOURCE = "derived-source"
MISSING_SOURCE = "missing-source"
SOURCE_MISMATCH = "source-mismatch"
REFUSED = "rewrite-refused"
DROPPED = "dropped-specifics"
OPAQUE = "opaque-summary"

_ORDER = {"error": 0, "warning": 1, "info": 2}


class _Fold:
    """The buffer fold plus what the audit needs to remember about it."""

    def __init__(self, reader: LogReader):
        self.reader = reader
        self.state: BufferState | None = None
        self.findings: list[Finding] = []
        # derived span id -> the observed spans it was made from, captured when it was made
        self.source_texts: dict[str, tuple[Span, ...]] = {}
        # derived span id -> (position, inputs, generation) of a rewrite that consumed derived spans
        self.violations: dict[str, tuple[int, tuple[str, ...], int]] = {}
        self.failed_at: int | None = None

    def run(self, pages: Iterator[list[Event]]) -> None:
        for events in pages:
            if not self._run(events):
                return

    def _run(self, events: list[Event]) -> bool:
        """Fold one page; False when an event cannot be applied (reported, the fold stops there)."""
        load = self.reader.event
        for ev in events:
            t = type(ev)
            try:
                if t is Observed or t is Marked:
                    self.state = apply(self.state, ev, load)
                    continue
                if t is Rewritten:
                    self._rewritten(ev)
                elif t is Rederived:
                    self._rederived(ev)
                elif t is Pruned or t is Expanded:
                    self.source_texts.pop(ev.span_id, None)
                elif t is RewriteRefused:
                    self._refused(ev)
                self.state = apply(self.state, ev, load)
            except (KeyError, TypeError, AttributeError, ValueError, IndexError, LedgerError) as e:
                position = ev.originator_version
                self.failed_at = position
                self.findings.append(
                    Finding(
                        kind=UNREPLAYABLE,
                        severity="error",
                        positions=(position,),
                        span_ids=(getattr(ev, "span_id", ""),) if getattr(ev, "span_id", "") else (),
                        message=(
                            f"the {t.__name__} at position {position} cannot be applied to the buffer "
                            f"({type(e).__name__}: {e}); the rebuild stops there"
                        ),
                    )
                )
                return False
        return True

    def _rewritten(self, ev: Rewritten) -> None:
        live = self.state.live
        inputs = [live.get(i) for i in ev.inputs]
        if any(s is None for s in inputs):
            return  # apply() will report the event as unreplayable
        observed = Provenance.OBSERVED
        if all(s.provenance is observed for s in inputs):  # the common case: a rewrite of observations
            self.source_texts[ev.span_id] = tuple(inputs)
            if ev.violation or ev.generation > 1:
                self.violations[ev.span_id] = (ev.originator_version, (), ev.generation)
            positions = tuple(s.position for s in inputs)
            if tuple(ev.sources) != tuple(ev.inputs) or tuple(ev.source_positions) != positions:
                self._mismatch(ev, list(ev.inputs), list(positions))
            return
        captured: list[Span] = []
        expect_ids: list[str] = []
        expect_pos: list[int] = []
        derived_inputs: list[str] = []
        for span_id, span in zip(ev.inputs, inputs):
            if span.provenance is observed:
                captured.append(span)
                expect_ids.append(span.id)
                expect_pos.append(span.position)
            else:
                derived_inputs.append(span_id)
                captured.extend(self.source_texts.pop(span_id, ()))
                expect_ids.extend(span.sources)
                expect_pos.extend(span.source_positions)
        self.source_texts[ev.span_id] = tuple(captured)
        if derived_inputs or ev.violation or ev.generation > 1:
            self.violations[ev.span_id] = (ev.originator_version, tuple(derived_inputs), ev.generation)
        if tuple(expect_ids) != tuple(ev.sources) or tuple(expect_pos) != tuple(ev.source_positions):
            self._mismatch(ev, expect_ids, expect_pos)

    def _mismatch(self, ev: Rewritten, expect_ids: list[str], expect_pos: list[int]) -> None:
        self._source_mismatch(
            ev,
            f"the rewrite at position {ev.originator_version} records {ev.span_id}'s sources as "
            f"{_ids(ev.sources)} at {_ids(ev.source_positions)}, but its inputs "
            f"{_ids(ev.inputs)} came from {_ids(expect_ids)} at {_ids(expect_pos)}",
        )

    def _source_mismatch(self, ev: Rewritten | Rederived, message: str) -> None:
        self.findings.append(
            Finding(
                kind=SOURCE_MISMATCH,
                severity="error",
                span_ids=(ev.span_id,),
                positions=(ev.originator_version,),
                message=message,
            )
        )

    def _rederived(self, ev: Rederived) -> None:
        span = self.state.live.get(ev.span_id)
        if span is None:
            return
        if tuple(ev.sources) != span.sources or tuple(ev.source_positions) != span.source_positions:
            self.source_texts.pop(ev.span_id, None)
            self._source_mismatch(
                ev,
                f"the re-derivation of {ev.span_id} at position {ev.originator_version} claims sources "
                f"{_ids(ev.sources)}, but {ev.span_id} was made from {_ids(span.sources)}",
            )

    def _refused(self, ev: RewriteRefused) -> None:
        position = ev.originator_version
        by = f" by {ev.by}" if ev.by else ""
        if ev.findings:
            values = ", ".join(repr(f.get("value", "")) for f in ev.findings[:5])
            what = f"the grounding gate refused a {ev.command}{by} of {_ids(ev.inputs)} stating {values}"
        else:
            what = f"refused {ev.command}{by} of {_ids(ev.inputs)}" + (
                f" (derived input {_ids(ev.offending)}): an attempt to rewrite a rewrite" if ev.offending else ""
            )
        self.findings.append(
            Finding(
                kind=REFUSED,
                severity="warning",
                span_ids=tuple(ev.inputs),
                positions=(position,),
                message=f"position {position}: {what}",
            )
        )


def _ids(items: Any) -> str:
    items = list(items)
    return ", ".join(str(i) for i in items) if items else "nothing"


def _compare(rebuilt: BufferState, state: BufferState, position: int) -> Finding | None:
    """A finding when the reader's buffer is not the one its log folds into."""
    if rebuilt == state:
        return None
    diffs: list[str] = []
    spans: list[str] = []
    missing = sorted(set(rebuilt.live) - set(state.live))
    extra = sorted(set(state.live) - set(rebuilt.live))
    changed = sorted(k for k in set(rebuilt.live) & set(state.live) if rebuilt.live[k] != state.live[k])
    if missing:
        diffs.append(f"missing {_ids(missing[:5])}")
    if extra:
        diffs.append(f"extra {_ids(extra[:5])}")
    if changed:
        diffs.append(f"changed {_ids(changed[:5])}")
    spans = missing + extra + changed
    for name in ("version", "n_obs", "n_der", "tokens", "refusals", "violations", "marks", "name", "strict"):
        if getattr(rebuilt, name) != getattr(state, name):
            diffs.append(f"{name} {getattr(state, name)!r} (rebuild: {getattr(rebuilt, name)!r})")
    return Finding(
        kind=REBUILD,
        severity="error",
        span_ids=tuple(spans),
        positions=(position,),
        message=(
            f"the buffer at position {position} differs from its rebuild from the log: "
            + ("; ".join(diffs) or "other state differs")
        ),
    )


def _sources_of(reader: LogReader, span: Span, fold: _Fold, cache: dict[int, Event | None]) -> tuple[list[Source], list[Finding]]:
    """Everything the summarizer saw: the observations the derived span replaced (its sources), and
    those it read but the compaction kept live (``meta["seen"]``: Codex keeps the recent user messages)."""
    texts, findings = _replaced_sources(reader, span, fold, cache)
    if texts:
        texts.extend(seen_sources(reader, span))
    return texts, findings


def _replaced_sources(reader: LogReader, span: Span, fold: _Fold, cache: dict[int, Event | None]) -> tuple[list[Source], list[Finding]]:
    """A live derived span's original observations (text and role), and findings about them."""
    findings: list[Finding] = []
    derived = [s for s in span.sources if not s.startswith("o")]
    if derived:
        findings.append(
            Finding(
                kind=DERIVED_SOURCE,
                severity="error",
                span_ids=(span.id, *derived),
                positions=(span.position,),
                message=(
                    f"{span.id} lists derived span {_ids(derived)} among its sources: it was made from a "
                    "rewrite, not from observations"
                ),
            )
        )
    if not span.sources or len(span.sources) != len(span.source_positions):
        findings.append(
            Finding(
                kind=MISSING_SOURCE,
                severity="error",
                span_ids=(span.id,),
                positions=(span.position,),
                message=(
                    f"{span.id} records {len(span.sources)} sources at {len(span.source_positions)} positions: "
                    "its originals cannot be found in the log"
                ),
            )
        )
        return [], findings
    captured = fold.source_texts.get(span.id)
    if captured is not None and tuple(c.position for c in captured) == span.source_positions:
        return [source_of(c) for c in captured], findings
    texts: list[Source] = []
    for span_id, position in zip(span.sources, span.source_positions):
        if position not in cache:
            try:
                cache[position] = reader.event(position) if 1 <= position <= reader.position else None
            except LedgerError:
                cache[position] = None
        ev = cache[position]
        if type(ev) is Observed and ev.span_id == span_id:
            texts.append(source_of(ev))
            continue
        what = "is not in the log" if ev is None else f"holds a {type(ev).__name__} of {getattr(ev, 'span_id', '?')}"
        findings.append(
            Finding(
                kind=MISSING_SOURCE,
                severity="error",
                span_ids=(span.id, span_id),
                positions=(span.position, position),
                message=f"{span.id}'s source {span_id} should be the observation at position {position}, which {what}",
            )
        )
    return texts, findings


def grounding(reader: LogReader, span: Span, checker: Checker, sources: list[Source], cache: Any = None) -> GroundingResult:
    """The grounding result of one live derived span: from ``cache`` when one is given (a
    ``check(session_id, span_id, position, checker, text, sources)`` hook the store side provides),
    else computed."""
    if cache is None:
        return run_checker(checker, span.text, sources)
    return cache.check(reader.id, span.id, span.position, checker, span.text, sources)


def audit(reader: LogReader, checker: Checker | None = None, *, cache: Any = None) -> AuditReport:
    """Audit ``reader`` (a Session, or a SessionView for an earlier position). Derived spans are
    judged by ``checker``, else by the reader's configured checker, else the lexical default.
    ``cache`` (else the reader's ``grounding_cache``; ``engine.grounding_cache``) answers a derived
    span's grounding check from the result kept for it, computing it only once."""
    checker = checker or getattr(reader, "checker", None) or LEXICAL
    kept = cache if cache is not None else getattr(reader, "grounding_cache", None)
    position = reader.position
    walk = reader.chain_walk()
    fold = _Fold(reader)
    fold.run(walk.pages())
    findings: list[Finding] = []
    chain_ok = walk.ok
    if not walk.ok:
        result = reader.verify()
        if not result.ok:
            findings.append(
                Finding(
                    kind=CHAIN,
                    severity="error",
                    positions=(result.first_bad_position,) if result.first_bad_position else (),
                    message=f"the hash chain breaks at position {result.first_bad_position}: {result.reason}",
                )
            )
        else:
            chain_ok = True
    findings.extend(fold.findings)
    state = reader.state
    complete = walk.ok and fold.failed_at is None and fold.state is not None
    if complete:
        mismatch = _compare(fold.state, state, position)
        if mismatch is not None:
            findings.append(mismatch)
    for span_id, (pos, inputs, generation) in fold.violations.items():
        live = span_id in state.live
        findings.append(
            Finding(
                kind=GENERATION if generation > 1 else DERIVED_SOURCE,
                severity="error" if live else "warning",
                span_ids=(span_id, *inputs),
                positions=(pos,),
                message=(
                    f"{span_id} (generation {generation}) was rewritten from derived span "
                    f"{_ids(inputs) if inputs else '(recorded as a violation)'} at position {pos}: a summary "
                    "of a summary" + ("" if live else f"; {span_id} is no longer live")
                ),
            )
        )
    coverage: list[SpanCoverage] = []
    cache: dict[int, Event | None] = {}
    checked = unchecked = 0
    for span in state.spans():
        if span.provenance is not Provenance.DERIVED:
            continue
        if span.generation > 1 and span.id not in fold.violations:
            findings.append(
                Finding(
                    kind=GENERATION,
                    severity="error",
                    span_ids=(span.id,),
                    positions=(span.position,),
                    message=f"{span.id} has generation {span.generation}; a derived span is generation 1",
                )
            )
        texts, source_findings = _sources_of(reader, span, fold if complete else _Fold(reader), cache)
        findings.extend(source_findings)
        if not texts:
            continue
        if span.meta.get("opaque") or span.meta.get("encrypted"):  # a provider's encrypted summary: nothing to check it with
            unchecked += 1
            findings.append(Finding(
                kind=OPAQUE, severity="warning", span_ids=(span.id,), positions=(span.position,),
                message=(f"{span.id} is opaque ({span.meta.get('by') or 'provider'} compaction, encrypted): its text "
                         "cannot be checked against its sources; the audit of it is not clean, it is unchecked"),
            ))
            continue
        checked += 1
        result = grounding(reader, span, checker, texts, kept)
        for f in result.findings:
            positions = (span.position,)
            if f["kind"] == MERGED:
                positions += tuple(span.source_positions[i] for i in f.get("source_indexes", ()) if i < len(span.source_positions))
            findings.append(
                Finding(
                    kind=f["kind"],
                    severity=f["severity"],
                    span_ids=(span.id,),
                    positions=positions,
                    value=f["value"],
                    category=f.get("category", ""),
                    checker=f.get("checker", ""),
                    message=f"{span.id}: {f['message']}",
                )
            )
        coverage.append(
            SpanCoverage(
                span_id=span.id,
                position=span.position,
                sources=span.sources,
                source_specifics=result.source_specifics,
                dropped=tuple(result.dropped),
                coverage=round(result.coverage, 3),
            )
        )
        if result.dropped:
            shown = ", ".join(result.dropped[:8]) + (f" and {len(result.dropped) - 8} more" if len(result.dropped) > 8 else "")
            findings.append(
                Finding(
                    kind=DROPPED,
                    severity="info",
                    span_ids=(span.id,),
                    positions=(span.position,),
                    value=", ".join(result.dropped),
                    message=(
                        f"{span.id} keeps {result.source_specifics - len(result.dropped)} of the "
                        f"{result.source_specifics} specifics of its {len(texts)} source{'s' if len(texts) != 1 else ''}; dropped: {shown}"
                    ),
                )
            )
    findings.sort(key=lambda f: (_ORDER.get(f.severity, 3), f.positions[:1] or (0,)))
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    return AuditReport(
        session=reader.name,
        position=position,
        ok=counts["error"] == 0,
        findings=tuple(findings),
        errors=counts["error"],
        warnings=counts["warning"],
        infos=counts["info"],
        derived_checked=checked,
        unchecked=unchecked,
        chain_ok=chain_ok,
        coverage=tuple(coverage),
        checker=checker.name,
    )

