"""Read-side commands: audit, blame, lineage, diff, timeline (thin over ``projections``)."""

from __future__ import annotations

import csv
import sys

import click

from engine.cli._app import EXIT_FOUND, emit_json, handle_errors, main, open_ledger, progress, shorten, to_builtins
from engine.errors import CorruptLogError

__all__ = ["audit_cmd", "blame_cmd", "lineage_cmd", "diff_cmd", "timeline_cmd"]

_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def _short(text: str, width: int = 70) -> str:
    return shorten(text, width)


def _when(at) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S}" if at is not None else "?"


@main.command("audit")
@click.argument("session")
@click.option("--at", "at", default=None, help="Audit the session as it was at this position (or mark).")
@click.option(
    "--severity",
    type=click.Choice(["error", "warning", "info"]),
    default="info",
    show_default=True,
    help="Show findings of this severity and worse.",
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too (a claim about something that appears nowhere).")
@click.option("--json", "as_json", is_flag=True, help="The full report as JSON.")
@click.pass_context
@handle_errors
def audit_cmd(ctx, session, at, severity, strict, as_json) -> None:
    """Audit a session for drift: exit 1 when any error-level finding exists (with --strict, any
    warning too), 0 otherwise.

    An error is a literal no source states or a claim the sources contradict; a warning, a claim
    about something that appears nowhere in the sources; info, what cannot be verified either way.

    Structural checks (rewrites of rewrites, missing sources, a buffer that differs from its
    rebuild, a broken hash chain, refused rewrites) and a grounding check of every live derived span
    against its original observations (unsupported specifics, merged events, dropped specifics).

    \b
    Example:
      ctxledger audit agent-42 --strict || echo "drift found"
    """
    with open_ledger(ctx) as ledger:
        try:
            report = ledger.session(session).audit(at=at)
        except CorruptLogError:
            # A log that cannot even be replayed is a finding of the audit, not a store failure.
            report = _unreplayable_report(ledger, session)
            if report is None:  # the chain is sound: the store itself is at fault
                raise
    if as_json:
        emit_json(to_builtins(report))
    else:
        verdict = "DRIFT" if not report.ok else "UNCHECKED" if report.unchecked else "clean"
        click.echo(
            f"audit of {report.session!r} at position {report.position}: {verdict} — "
            f"{report.errors} error{'s' if report.errors != 1 else ''}, "
            f"{report.warnings} warning{'s' if report.warnings != 1 else ''}, {report.infos} info; "
            f"{report.derived_checked} derived span{'s' if report.derived_checked != 1 else ''} checked"
            + ("" if report.checker == "lexical" else f" by {report.checker}")
        )
        limit = _SEVERITY_RANK[severity]
        for f in report.findings:
            if _SEVERITY_RANK.get(f.severity, 3) > limit:
                continue
            where = ",".join(f.span_ids[:3]) or "-"
            pos = f"@{f.positions[0]}" if f.positions else ""
            click.echo(f"  {f.severity:<7} {f.kind:<21} {where}{pos:<6}  {f.message}")
    if not report.ok or (strict and report.warnings):
        sys.exit(EXIT_FOUND)


def _unreplayable_report(ledger, session: str):
    """The audit of a session whose log does not replay: the chain's verdict as its one finding
    (None when the chain is sound)."""
    from projections.audit import CHAIN, AuditReport, Finding

    result = ledger.verify(session)
    if result.ok:
        return None
    bad = result.first_bad_position
    finding = Finding(kind=CHAIN, severity="error", positions=(bad,) if bad else (),
                      message=f"the log does not replay; its hash chain breaks at position {bad}: {result.reason}")
    return AuditReport(session=session, position=result.position, ok=False, findings=(finding,),
                       errors=1, chain_ok=False, checker=ledger.checker.name if ledger.checker else "lexical")


@main.command("blame")
@click.argument("session")
@click.argument("text")
@click.option("--at", "at", default=None, help="Blame as of this position (or mark).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def blame_cmd(ctx, session, text, at, as_json) -> None:
    """Where a piece of text in the buffer came from (case-insensitive), or what removed it.

    For each live span holding TEXT: the event that put it there and its origin, the first event of
    the span's lineage whose text contains it -- an observation (grounded) or a rewrite (the model
    wrote it). Exit 1 when no span holds or held the text, like grep, or when it is NOT
    GROUNDED in a live span (the model wrote it, no source says so, and it is in the buffer: a drift
    finding, as audit's exit 1).

    \b
    Example:
      ctxledger blame agent-42 "14:02"
    """
    with open_ledger(ctx) as ledger, progress(f"tracing {shorten(text, 30)!r} through the log", None):
        hits = ledger.session(session).blame(text, at=at)
    if as_json:
        emit_json([to_builtins(h) for h in hits])
    else:
        if not hits:
            click.echo(f"{text!r} is in no span, live or removed")
        for h in hits:
            state = "live" if h.live else "gone"
            by = f" by {h.by}" if h.by else ""
            mark = "grounded" if h.grounded else "NOT GROUNDED"
            click.echo(f"{h.span_id:<6} {state}  {h.event_type} at {h.position}{by} ({_when(h.at)})  {mark}")
            click.echo(f"       {h.message}")
            for finding in h.findings:
                click.echo(f"       {h.checker}: {finding}")
            click.echo(f"       {h.text!r}")
    if not hits or any(h.live and not h.grounded for h in hits):
        sys.exit(EXIT_FOUND)


def _tree(node, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    if node.provenance == "observed":
        what = f"observed at {node.position}" if node.position else "observed (not found in the log)"
    else:
        by = f" by {node.by}" if node.by else ""
        what = f"rewrite at {node.position}{by}, generation {node.generation}" if node.position else "derived (origin not in the log)"
    text = f"  {node.text!r}" if node.text else ""
    head = "" if top else prefix + ("└── " if last else "├── ")
    lines = [f"{head}{node.span_id}  {what}{text}"]
    child_prefix = "" if top else prefix + ("    " if last else "│   ")
    for i, child in enumerate(node.children):
        lines.extend(_tree(child, child_prefix, i == len(node.children) - 1, False))
    return lines


@main.command("lineage")
@click.argument("session")
@click.argument("span")
@click.option("--at", "at", default=None, help="Lineage as of this position (or mark).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def lineage_cmd(ctx, session, span, at, as_json) -> None:
    """What a span came from (a tree down to its observations) and what it became.

    \b
    Example:
      ctxledger lineage agent-42 d3
    """
    with open_ledger(ctx) as ledger:
        lin = ledger.session(session).lineage(span, at=at)
    if as_json:
        emit_json(to_builtins(lin))
        return
    click.echo(f"{lin.span_id}: {lin.provenance}, {lin.status} at position {lin.position}")
    click.echo("came from:")
    for line in _tree(lin.came_from):
        click.echo("  " + line)
    click.echo("became:" if lin.became else "became: (nothing yet)")
    for step in lin.became:
        by = f"  by {step.by}" if step.by else ""
        click.echo(f"  {step.position:>7}  {step.event_type:<10} {step.span_id:<6} {step.action}{by}")


@main.command("diff")
@click.argument("session")
@click.argument("a")
@click.argument("b", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def diff_cmd(ctx, session, a, b, as_json) -> None:
    """Spans added, removed, rewritten or re-derived between positions A and B (default: the head).

    A and B are positions or marks; B defaults to the head. Negative offsets count back from the
    head (-1 is the head) and need `--` before them: ctxledger diff SESSION -- -10 -1

    \b
    Example:
      ctxledger diff agent-42 cycle-9 cycle-16
    """
    with open_ledger(ctx) as ledger:
        d = ledger.session(session).diff(a, b)
    if as_json:
        emit_json({**to_builtins(d), "stat": d.stat()})
        return
    click.echo(f"diff {d.session!r} {d.a}..{d.b}: {d.stat()}")
    signs = {"added": "+", "removed": "-", "rewritten": "-", "rederived": "~", "changed": "~"}
    for e in d.entries:
        if e.change == "rewritten":
            why = f"rewritten into {e.into} at {e.position}"
        elif e.event_type:
            why = f"{e.event_type} at {e.position}"
        else:
            why = e.change
        by = f" by {e.by}" if e.by else ""
        click.echo(f"  {signs.get(e.change, '?')} {e.span_id:<6} {e.provenance:<8} {e.tokens:>+7} tok  {why}{by}  {e.text!r}")


@main.command("timeline")
@click.argument("session")
@click.option("--at", "at", default=None, help="Up to this position (or mark).")
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True, help="Show every Nth event (text and CSV).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row, for plotting.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (every event).")
@click.pass_context
@handle_errors
def timeline_cmd(ctx, session, at, every, as_csv, as_json) -> None:
    """Per event: live spans and live tokens by provenance (observed vs derived).

    \b
    Example:
      ctxledger timeline agent-42 --csv > timeline.csv
    """
    with open_ledger(ctx) as ledger:
        tl = ledger.session(session).timeline(at=at)
    if as_json:
        emit_json(to_builtins(tl))
        return
    points = [p for i, p in enumerate(tl.points) if i % every == 0 or i == len(tl.points) - 1]
    if as_csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        fields = ["position", "event_type", "span_id", "live", "observed", "derived", "tokens", "observed_tokens", "derived_tokens"]
        w.writerow(fields)
        for p in points:
            w.writerow([getattr(p, f) for f in fields])
        return
    click.echo(f"{'pos':>7}  {'event':<14} {'span':<6} {'live':>5} {'obs':>5} {'der':>5} {'tokens':>8} {'obs tok':>8} {'der tok':>8}")
    for p in points:
        click.echo(
            f"{p.position:>7}  {p.event_type:<14} {p.span_id:<6} {p.live:>5} {p.observed:>5} {p.derived:>5} "
            f"{p.tokens:>8,} {p.observed_tokens:>8,} {p.derived_tokens:>8,}"
        )
