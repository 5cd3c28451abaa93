"""The notice a resumed model gets after a compaction, re-derived from the original observations.

Three parts, plain text, within a token budget (default 1,500):

1. what the user said before the compaction, verbatim, from the user's observed messages among
   the summary's sources: instructions and constraints first, then the rest, most recent first;
   whatever does not fit is named by span id as recallable;
2. the summary's statements that nothing the model saw supports, each with why (the audit's error
   and warning findings on the summary); absent when the audit found none;
3. one line on how to read the originals back (the MCP tools of ``ctxledger mcp --follow``).

Nothing in it comes from the summary except the quoted statements it warns about.
"""

from __future__ import annotations

import re
from typing import Any

from engine.spans import Span, id_ranges
from projections.lost import is_instruction, user_words

__all__ = ["Notice", "compose", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 1_500
_MAX_STATEMENT = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


class Notice:
    """The notice and what went into it. ``tokens`` is counted when first read: the hook itself
    never reads it (the budget is checked while composing, without a count where the text's length
    settles it, so a short notice never loads the tokenizer)."""

    __slots__ = ("text", "span_id", "shown", "recallable", "statements", "budget", "_count", "_tokens")

    def __init__(self, *, text: str, span_id: str, count: Any, shown: tuple[str, ...] = (),
                 recallable: tuple[str, ...] = (), statements: int = 0, budget: int = DEFAULT_BUDGET):
        self.text = text
        self.span_id = span_id  # the summary the notice is about
        self.shown = shown  # user messages quoted in full
        self.recallable = recallable  # user messages named only
        self.statements = statements  # unsupported statements named
        self.budget = budget
        self._count = count
        self._tokens: int | None = None

    @property
    def tokens(self) -> int:
        if self._tokens is None:
            self._tokens = self._count(self.text)
        return self._tokens

    def __repr__(self) -> str:
        return f"Notice(span_id={self.span_id!r}, shown={self.shown!r}, recallable={self.recallable!r}, statements={self.statements})"


class _Costs:
    """Token counts of the notice's parts, each counted at most once and only when a byte bound does
    not already settle the comparison (a counter with ``bytes_bound`` never counts more tokens than
    a text's UTF-8 bytes): every decision is the one exact counts give."""

    def __init__(self, counter: Any):
        self.counter = counter
        self.bounded = bool(getattr(counter, "bytes_bound", False))
        self._exact: dict[str, int] = {}

    def exact(self, text: str) -> int:
        n = self._exact.get(text)
        if n is None:
            n = self._exact[text] = self.counter.count(text)
        return n

    def upper(self, text: str) -> int:
        """At least the count: the UTF-8 length where the counter is bounded by it."""
        return len(text.encode("utf-8", "surrogatepass")) if self.bounded else self.exact(text)

    def fits(self, text: str, limit: int) -> bool:
        return (self.bounded and self.upper(text) <= limit) or self.exact(text) <= limit


def compose(session: Any, summary: Span, report: Any, *, budget: int = DEFAULT_BUDGET, agent: str = "claude-code",
            counter: Any = None) -> Notice:
    """The notice for ``summary`` (a derived span of ``session``) given the session's audit ``report``."""
    counter = counter or session.counter
    costs = _Costs(counter)
    originals = session.originals(summary.id)
    said = [s for s in originals if user_words(s)]
    ordered = [s for s in reversed(said) if is_instruction(s.text)] + [s for s in reversed(said) if not is_instruction(s.text)]

    head = (f"[ctxledger] Your context was just compacted: summary {summary.id} replaced "
            f"{len(originals)} earlier items of this session. The originals are kept in the ledger.")
    tail = (f"To read originals back, use the ctxledger MCP tools (ctxledger mcp --follow {agent}): "
            f"context_recall with span_id {summary.id} or any id above, context_search to find something.")
    statements = _statements(summary, report)
    warn_lines: list[str] = []
    if statements:
        warn_lines.append("Statements in the summary that nothing you saw supports (check them before acting on them):")
        room = budget // 2
        for i, (statement, whys) in enumerate(statements):
            line = f'- "{statement}": {"; ".join(whys)}'
            if not costs.fits("\n".join([*warn_lines, line]), room):
                warn_lines.append(f"- {'and ' if i else ''}{len(statements) - i} {'more ' if i else ''}"
                                  "(ledger_audit lists every finding)")
                break
            warn_lines.append(line)

    def assemble(quoted: list[Span], named: list[Span]) -> str:
        parts = [head]
        if quoted or named:
            block = ["What the user said before the compaction, verbatim (instructions first, most recent first):"]
            block += [f"- [{s.id}] {s.text}" for s in quoted]
            if named:
                block.append(f"Also said by the user, not shown here (context_recall reads them): {id_ranges([s.id for s in named], ', ')}")
            parts.append("\n".join(block))
        if warn_lines:
            parts.append("\n".join(warn_lines))
        parts.append(tail)
        return "\n\n".join(parts)

    # Greedy, in order, on line counts (a message that does not fit is named; later ones may fit),
    # then checked on the whole text: joining lines can cost a token or two more than their sum.
    # Each step is decided on the byte bounds while they fit, on exact counts once they do not.
    fixed = assemble([], ordered)
    quoted: list[Span] = []
    lines: list[str] = []
    upper_used = costs.upper(fixed)
    exact_used: int | None = None
    for s in ordered:
        line = f"- [{s.id}] {s.text}"
        upper = costs.upper(line) + 1
        if upper_used + upper > budget:
            if exact_used is None:
                exact_used = costs.exact(fixed) + sum(costs.exact(q) + 1 for q in lines)
            if exact_used + costs.exact(line) + 1 > budget:
                continue
        quoted.append(s)
        lines.append(line)
        upper_used += upper
        if exact_used is not None:
            exact_used += costs.exact(line) + 1

    def rest() -> list[Span]:
        shown = {s.id for s in quoted}
        return [s for s in ordered if s.id not in shown]

    while quoted and not costs.fits(assemble(quoted, rest()), budget):
        quoted.pop()
    named = rest()
    text = assemble(quoted, named)
    if not costs.fits(text, budget):  # a budget smaller than the frame itself: the way back, and the count
        warn = f" The audit found {len(statements)} unsupported statement(s) in it (ledger_audit)." if statements else ""
        text = f"[ctxledger] Context compacted into {summary.id}.{warn} {tail}"
        quoted, named = [], ordered
    return Notice(text=text, count=costs.exact, span_id=summary.id, shown=tuple(s.id for s in quoted),
                  recallable=tuple(s.id for s in named), statements=len(statements), budget=budget)


def _statements(summary: Span, report: Any) -> list[tuple[str, list[str]]]:
    """The summary's sentences the audit found unsupported, each with the reasons, in text order.
    An encrypted summary (Codex remote compaction) has no readable statement: its text is the
    importer's placeholder, nothing the model wrote."""
    if summary.meta.get("encrypted"):
        return []
    prefix = f"{summary.id}: "
    grouped: dict[str, list[str]] = {}
    where: dict[str, int] = {}
    for f in report.findings:
        if f.severity not in ("error", "warning") or summary.id not in f.span_ids or not f.value:
            continue
        at = summary.text.find(f.value)
        sentence = _sentence(summary.text, at, len(f.value)) if at >= 0 else f.value
        why = f.message[len(prefix):] if f.message.startswith(prefix) else f.message
        reasons = grouped.setdefault(sentence, [])
        if why not in reasons:
            reasons.append(why)
        where.setdefault(sentence, at if at >= 0 else len(summary.text))
    return sorted(grouped.items(), key=lambda kv: where[kv[0]])


def _sentence(text: str, at: int, length: int) -> str:
    """The sentence of ``text`` around ``text[at:at+length]``, one line, at most 300 characters."""
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, at):
        start = m.end()
    m = _SENTENCE_END.search(text, at + length)
    end = m.start() if m else len(text)
    sentence = " ".join(text[start:end].split()).lstrip("-*# ")
    return sentence if len(sentence) <= _MAX_STATEMENT else sentence[: _MAX_STATEMENT - 1] + "…"
