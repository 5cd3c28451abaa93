"""``ctxledger watch``: follow growing agent transcripts and report drift as compactions land."""

from __future__ import annotations

import signal
import threading

import click

from engine.cli._app import (
    emit_json,
    handle_errors,
    main,
    open_ledger,
    printable,
    to_builtins,
)
from engine.extras import require


@main.command("watch")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", default="claude-code", show_default=True, metavar="FORMAT",
              help="claude-code, codex, openhands or messages.")
@click.option("--skip-bad", is_flag=True, help="Skip malformed lines (counted) instead of stopping on them.")
@click.option("--poll", is_flag=True, help="Poll the file system instead of using OS notifications.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per import and per drift finding.")
@click.pass_context
@handle_errors
def watch_cmd(ctx, directory, fmt, skip_bad, poll, as_json) -> None:
    """Follow the transcripts in DIRECTORY: import new lines as they are written and print a drift
    finding the moment a compaction lands whose summary is not grounded. Ctrl-C stops.

    \b
    Example:
      ctxledger watch --format claude-code ~/.claude/projects/-home-me-shop/
    """
    from engine.importers.watch import watch

    require("watchfiles", "watch", "ctxledger watch")  # before anything is printed or opened
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # finish the current write, then stop

    def show(ev) -> None:
        if as_json:
            if ev.kind == "import":
                emit_json({"event": "import", "session": ev.session, **to_builtins(ev.report)})
            elif ev.kind == "drift":
                emit_json({"event": "drift", "session": ev.session, **to_builtins(ev.finding)})
            else:
                emit_json({"event": "error", "message": ev.error.message})
            return
        if ev.kind == "import":
            r = ev.report
            click.echo(f"{ev.session}: +{r.spans} spans (lines {r.first_line}..{r.last_line})"
                       + (f", {r.compactions} compaction(s)" if r.compactions else ""))
        elif ev.kind == "drift":
            f = ev.finding
            click.echo(f"DRIFT {ev.session}: {f.kind} {', '.join(f.span_ids)}: {printable(f.message)}")
        else:
            click.echo(f"ctxledger: error: {ev.error.message}", err=True)

    try:
        with open_ledger(ctx, short_names=False) as ledger:
            click.echo(f"watching {directory} ({fmt}); Ctrl-C stops", err=True)
            watch(ledger, directory, format=fmt, on_event=show, stop_event=stop, skip_bad=skip_bad,
                  force_polling=poll or None)
    finally:
        signal.signal(signal.SIGINT, previous)
    click.echo("stopped", err=True)
