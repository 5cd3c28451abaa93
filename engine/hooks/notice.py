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

import msgspec

from engine.spans import Span, id_ranges
from projections.lost import is_instruction, user_words

__all__ = ["Notice", "compose", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 1_500
_MAX_STATEMENT = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    tokens: int
    span_id: str  # the summary the notice is about
    shown: tuple[str, ...] = ()  # user messages quoted in full
    recallable: tuple[str, ...] = ()  # user messages named only
    statements: int = 0  # unsupported statements named
    budget: int = DEFAULT_BUDGET


def compose(session: Any, summary: Span, report: Any, *, budget: int = DEFAULT_BUDGET, agent: str = "claude-code",
            counter: Any = None) -> Notice:
    """The notice for ``summary`` (a derived span of ``session``) given the session's audit ``report``."""
    count = (counter or session.counter).count
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
            if count("\n".join([*warn_lines, line])) > room:
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
    fixed = count(assemble([], ordered))
    quoted: list[Span] = []
    used = fixed
    for s in ordered:
        cost = count(f"- [{s.id}] {s.text}") + 1
        if used + cost <= budget:
            quoted.append(s)
            used += cost
    def rest() -> list[Span]:
        shown = {s.id for s in quoted}
        return [s for s in ordered if s.id not in shown]

    while quoted and count(assemble(quoted, rest())) > budget:
        quoted.pop()
    named = rest()
    text = assemble(quoted, named)
    if count(text) > budget:  # a budget smaller than the frame itself: the way back, and the count
        warn = f" The audit found {len(statements)} unsupported statement(s) in it (ledger_audit)." if statements else ""
        text = f"[ctxledger] Context compacted into {summary.id}.{warn} {tail}"
        quoted, named = [], ordered
    return Notice(text=text, tokens=count(text), span_id=summary.id, shown=tuple(s.id for s in quoted),
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
