"""``ctxledger lost``: what a compaction dropped, by category (thin over ``projections.lost``)."""

from __future__ import annotations

import click

from engine.cli._app import emit_json, handle_errors, main, open_ledger, shorten, to_builtins

__all__ = ["lost_cmd"]

_TITLES = {
    "user_messages": "user messages",
    "instructions": "instructions",
    "paths": "file paths",
    "commands": "commands",
    "errors": "errors",
    "numbers": "numbers",
    "ids": "ids",
}


@main.command("lost")
@click.argument("session")
@click.argument("compaction", required=False, metavar="[COMPACTION]")
@click.option("--all", "show_all", is_flag=True, help="List every dropped item (default: the first 8 per category).")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON (every dropped item).")
@click.pass_context
@handle_errors
def lost_cmd(ctx, session, compaction, show_all, as_json) -> None:
    """What a compaction dropped: per category (user messages, instructions, file paths, commands,
    errors, numbers, ids) how many of its sources' items the summary kept, and the dropped items.

    COMPACTION is the summary's span id (d1, d2, ...); default the newest compaction.

    \b
    Example:
      ctxledger lost claude-code:ae4a77f8-aedd-4bc1-888f-c94edc91af04 d1 --json
    """
    from engine.lost_kept import lost_report
    from projections.lost import summary_of

    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        summary = summary_of(s, compaction)
        report = lost_report(s, summary)
    if as_json:
        emit_json({"session": s.name, **to_builtins(report)})
        return
    click.echo(f"{summary.id} of {s.name!r} replaced {report.sources} observations; what it kept of them:")
    width = max(len(t) for t in _TITLES.values())
    for c in report.categories:
        share = f"{100 * c.share_kept:5.1f}%" if c.total else "    -"
        click.echo(f"  {_TITLES[c.name]:<{width}}  {c.kept:>5} / {c.total:<5} kept  {share}")
    for c in report.categories:
        if not c.dropped:
            continue
        items = c.dropped if show_all else c.dropped[:8]
        click.echo(f"\ndropped {_TITLES[c.name]} ({len(c.dropped)}):")
        for item in items:
            click.echo(f"  {item.span_id:>6}  {shorten(item.text, 100)}")
        if len(items) < len(c.dropped):
            click.echo(f"  … {len(c.dropped) - len(items)} more (--all)")
