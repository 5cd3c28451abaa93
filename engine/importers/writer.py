"""The writer: a parser's items applied to one session, a chunk per transaction, each ending with
the checkpoint."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from engine import validate
from engine.errors import InvalidInputError
from engine.importers.items import Apply, Compact, Forget, ImportReport, Observe
from engine.importers.source import CHECKPOINT_LABEL
from engine.spans import Provenance, Span

if TYPE_CHECKING:
    from engine.session import Session

__all__ = ["SessionWriter"]


class SessionWriter:
    """Applies a parser's items to one session. Items wait in a queue; ``commit`` writes them in order
    in ONE transaction together with the checkpoint (so a crash or Ctrl-C never leaves spans the
    checkpoint does not cover): observations with their tokens counted in a batch, compactions as
    rewrites of the live spans, forgotten events as prunes."""

    def __init__(self, session: Session | None, report: ImportReport, *, counter: Any = None):
        self.session = session
        self.report = report
        self.dry = session is None  # the validating first pass: parse, write nothing
        self._queue: list[Any] = []
        self._count_many = getattr(counter, "count_many", None)
        self._count = getattr(counter, "count", None)
        self.derived_by: dict[str, str] = {}
        self._time_raw: Any = None
        self._last_time: datetime | None = None

    def add(self, item: Any) -> None:
        self._queue.append(item)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def commit(self, checkpoint: str | None = None, *, by: str = "") -> None:
        queue, self._queue = self._queue, []
        if self.dry:
            return
        if not queue and checkpoint is None:
            return
        observed = [i for i in queue if type(i) is Observe]
        held: set[str] | None = None
        for c in queue:
            if type(c) is Compact:
                if c.inputs:
                    # a compaction's inputs are mostly spans the session holds already (imported
                    # before the boundary): only the others are observed, so only they are counted
                    held = held if held is not None else {sp.text for sp in self.session.spans()}
                    observed.extend(i for i in c.inputs if i.text not in held)
                if not callable(c.after):
                    observed.extend(c.after)
        texts = [i.text for i in observed]
        if self._count_many is not None:
            counts = self._count_many(texts)
        else:
            counts = [self._count(t) if self._count else None for t in texts]
        tokens = {id(item): n for item, n in zip(observed, counts)}
        s = self.session
        with s.batch(atomic=True):  # items and their checkpoint, or nothing (a Ctrl-C mid-commit)
            for item in queue:
                t = type(item)
                # each event keeps the transcript's own time (the append time goes to ``recorded``)
                with s.happened_at(self._time(item)):
                    if t is Observe:
                        self._observe(item, tokens.get(id(item)))
                    elif t is Compact:
                        self._compact(item, tokens)
                    elif t is Forget:
                        self._forget(item)
                    elif t is Apply:
                        item.fn(s, self.report)
            if checkpoint is not None:
                with s.happened_at(self._last_time):
                    s.mark(CHECKPOINT_LABEL, by=by, reason=checkpoint)

    def _time(self, item: Any) -> datetime | None:
        """The item's original time (``item_time``); the last one seen is the time of the
        checkpoint that follows. Consecutive items of one line share it: parsed once."""
        meta = getattr(item, "meta", None)
        raw = meta.get("timestamp") if isinstance(meta, dict) else None
        if raw is None:
            return None
        if raw == self._time_raw:
            return self._last_time
        when = item_time(item)
        if when is None:
            return None
        self._time_raw, self._last_time = raw, when
        return when

    def _observe(self, item: Observe, tokens: int | None) -> None:
        span = self.session.observe(item.text, role=item.role, kind=item.kind, meta=item.meta, tokens=tokens)
        obs = self.report.observed
        obs[item.category] = obs.get(item.category, 0) + 1
        self.report.tokens += span.tokens

    def _compact(self, item: Compact, tokens: dict[int, int]) -> None:
        self.report.compactions += 1
        s = self.session
        if item.inputs:
            held = {sp.text for sp in s.spans()}
            for obs in item.inputs:
                if obs.text not in held:
                    held.add(obs.text)
                    n = tokens.get(id(obs))
                    if n is None and self._count is not None:  # held when the commit began, gone since
                        n = self._count(obs.text)
                    self._observe(obs, n)
        live = s.spans()
        kept = item.keep(live) if item.keep else set()
        after = item.after(live) if callable(item.after) else item.after
        inputs = [sp for sp in live if sp.id not in kept]
        if item.text is not None and inputs:
            meta = item.meta
            seen = [sp.id for sp in live if sp.id in kept and sp.provenance is Provenance.OBSERVED]
            if seen:  # what the summarizer read and the compaction kept live (recent user messages)
                meta = {**meta, "seen": seen[:1000]}
            self._rewrite(inputs, item.text, item.by, meta, item.role)
        elif item.text is not None:
            # Nothing live to derive from (the transcript starts after a compaction): the summary is
            # all there is; keep it, observed, and say so.
            s.observe(item.text, role=item.role, kind="message", meta={**item.meta, "summary_without_sources": True})
            self.report.observed["summary"] = self.report.observed.get("summary", 0) + 1
            self.report.notes.append(f"a {item.by} summary had no live spans to derive from; kept as an observation")
        else:
            for sp in inputs:
                s.prune(sp.id, by=item.by, reason="compaction (summary not readable)")
            self.report.pruned += len(inputs)
        for obs in after:
            self._observe(obs, tokens.get(id(obs)))

    def _forget(self, item: Forget) -> None:
        s = self.session
        live = s.spans()
        forgotten = [sp for sp in live if sp.meta.get(item.key) in item.ids]
        if item.summary is None:
            for sp in forgotten:
                s.prune(sp.id, by=item.by, reason="forgotten by the condenser")
            self.report.pruned += len(forgotten)
            return
        self.report.compactions += 1
        chosen = {sp.id for sp in forgotten}
        earlier = [sp for sp in live if sp.provenance is Provenance.DERIVED and sp.id not in chosen
                   and self.derived_by.get(sp.id, sp.meta.get("by")) == item.by]
        inputs = sorted(forgotten + earlier, key=lambda sp: sp.order)
        if inputs:
            self._rewrite(inputs, item.summary, item.by, item.meta, "user")
        else:
            s.observe(item.summary, role="user", meta={**item.meta, "summary_without_sources": True})
            self.report.observed["summary"] = self.report.observed.get("summary", 0) + 1

    def _rewrite(self, inputs: list[Span], text: str, by: str, meta: dict, role: str) -> str:
        if any(sp.provenance is not Provenance.OBSERVED for sp in inputs):
            self.report.violations += 1
        meta = {**meta, "by": by}
        span = self.session.rewrite([sp.id for sp in inputs], text, by=by, meta=meta, role=role,
                                    reason="compaction recorded in the transcript")
        self.derived_by[span.id] = by
        return span.id


def item_time(item: Any) -> datetime | None:
    """An item's original time: its meta's ``timestamp`` (ISO 8601 or epoch seconds), when it has a
    readable one; None otherwise (the event then keeps its append time)."""
    meta = getattr(item, "meta", None)
    raw = meta.get("timestamp") if isinstance(meta, dict) else None
    if raw is None or isinstance(raw, bool):
        return None
    try:
        return datetime.fromtimestamp(raw, timezone.utc) if isinstance(raw, (int, float)) else validate.moment(raw)
    except (InvalidInputError, ValueError, OverflowError, OSError):
        return None
