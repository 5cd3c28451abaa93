"""Core commands: sessions, log, show, verify, export, import, mark."""

from __future__ import annotations

import sys

import click

from engine.cli._app import (
    EXIT_FOUND,
    console,
    emit_json,
    handle_errors,
    main,
    open_ledger,
    progress,
    shorten,
    to_builtins,
)
from engine.event_lines import describe
from engine.events import Event, RewriteRefused
from engine.spans import Span, id_ranges


_short = shorten  # kept short: used throughout this module


def event_json(ev: Event) -> dict:
    """An event for ``log --json``: every field, defaults included (an observation's ``role`` and
    ``kind`` are there even when they are ``user``/``message``, which the stored form omits)."""
    d = to_builtins(ev)
    for name in ev.__struct_fields__:
        if name not in d:
            d[name] = to_builtins(getattr(ev, name))
    d.pop("originator_id", None)
    d.pop("originator_version", None)
    d["prev"] = ev.prev.hex()
    return {"position": ev.originator_version, "type": type(ev).__name__, **d}


def span_json(span: Span) -> dict:
    return to_builtins(span)


@main.command("sessions")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def sessions_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the sessions in the store.

    \b
    Example:
      ctxledger sessions --json
    """
    with open_ledger(ctx) as ledger:
        infos = ledger.sessions()
    if as_json:
        emit_json([to_builtins(i) for i in infos])
        return
    if not infos:
        click.echo("no sessions")
        return
    width = max(len(i.name) for i in infos)
    for i in infos:
        mode = "strict" if i.strict else "permissive"
        events = "event " if i.position == 1 else "events"
        click.echo(f"{i.name:<{width}}  {i.position:>8} {events}  {mode:<10}  {i.started_at:%Y-%m-%d %H:%M:%S}")


@main.command("log")
@click.argument("session")
@click.option("--start", type=int, default=1, show_default=True, help="First position.")
@click.option("--stop", type=int, default=None, help="Last position (default: the head).")
@click.option("--type", "types", multiple=True, help="Only these event types (repeatable).")
@click.option("-n", "--limit", type=int, default=None, help="At most this many events.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event (JSON lines).")
@click.pass_context
@handle_errors
def log_cmd(ctx, session, start, stop, types, limit, as_json) -> None:
    """Show a session's log, one event per line.

    \b
    Example:
      ctxledger log agent-42 --type Rewritten --type RewriteRefused
    """
    wanted = {t.lower() for t in types}
    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        shown = 0
        for ev in s.events(start, stop):
            if wanted and type(ev).__name__.lower() not in wanted:
                continue
            if as_json:
                emit_json(event_json(ev))
            else:
                by = f"  by {shorten(ev.by, 40)}" if ev.by else ""
                why = f"  ({_short(ev.reason, 50)})" if ev.reason and type(ev) is not RewriteRefused else ""
                click.echo(f"{ev.originator_version:>7}  {type(ev).__name__:<14} {describe(ev)}{by}{why}")
            shown += 1
            if limit is not None and shown >= limit:
                break


@main.command("show")
@click.argument("session")
@click.option("--at", "at", default=None, help="Position (or mark) to show; default the head. -1 is the head.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "openai", "anthropic", "prompt"]),
    default="text",
    show_default=True,
    help="text: a table of spans; json: spans as JSON; openai/anthropic/prompt: rendered for the model.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.pass_context
@handle_errors
def show_cmd(ctx, session, at, fmt, as_json) -> None:
    """Show the live buffer, now or as it was after event N (time travel).

    \b
    Example:
      ctxledger show agent-42 --at 120
    """
    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        view = s.view(at)
        if as_json or fmt == "json":
            emit_json(
                {
                    "session": view.name,
                    "position": view.position,
                    "tokens": view.tokens,
                    "spans": [span_json(sp) for sp in view.spans()],
                }
            )
            return
        if fmt in ("openai", "anthropic", "prompt"):
            rendered = view.render("text" if fmt == "prompt" else fmt)
            if isinstance(rendered, str):
                click.echo(rendered)
            else:
                emit_json(rendered)
            return
        spans = view.spans()
        click.echo(
            f"session {view.name!r} at position {view.position} of {s.position}: "
            f"{len(spans)} live spans, {view.tokens:,} tokens"
        )
        for sp in spans:
            prov = "observed" if sp.observed else f"derived g{sp.generation} <- {id_ranges(sp.sources)}"
            click.echo(f"  {sp.id:<6} {sp.role:<9} {sp.kind:<11} {sp.tokens:>6} tok  {prov}")
            click.echo(f"         {_short(sp.text, 90)}")


@main.command("verify")
@click.argument("session", required=False)
@click.option("--all", "all_sessions", is_flag=True, help="Verify every session in the store.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--checkpoint", "checkpoint_file", type=click.Path(dir_okay=False), default=None,
              help="Also hold the log against the signed checkpoints in this file (see `ctxledger checkpoint`).")
@click.option("--public-key", type=click.Path(dir_okay=False), default=None,
              help="The Ed25519 public key the checkpoints were signed with (PEM).")
@click.pass_context
@handle_errors
def verify_cmd(ctx, session, all_sessions, as_json, checkpoint_file, public_key) -> None:
    """Walk the hash chain of a session's log; exit 1 and name the first bad position if it breaks.

    BROKEN means the stored log contradicts what was written (tampering); UNDECODABLE means an
    event's bytes are as written but cannot be decoded (e.g. nested deeper than readers allow).

    With --checkpoint and --public-key the log is also held against signed checkpoints, which
    catches what a chain cannot: a changed or deleted last event, or a recomputed chain.

    \b
    Example:
      ctxledger verify agent-42 && echo intact
    """
    if not session and not all_sessions:
        raise click.UsageError("name a SESSION or pass --all")
    with open_ledger(ctx) as ledger:
        if checkpoint_file or public_key:
            from engine.cli.ops import verify_against_checkpoints

            results = verify_against_checkpoints(
                ledger, None if all_sessions else session, checkpoint_file, public_key
            )
            all_sessions = all_sessions or len(results) != 1
        else:
            names = ledger.session_names() if all_sessions else [session]
            results = []
            with progress("verifying", len(names)) as advance:
                for name in names:
                    results.append((name, ledger.verify(name)))
                    advance(1)
    bad = [r for r in results if not r[1].ok]
    if as_json:
        payload = [{"session": n, **to_builtins(r)} for n, r in results]
        emit_json(payload if all_sessions else payload[0])
    else:
        for name, r in results:
            if r.ok:
                click.echo(f"{name}: OK, {r.position} events, head {r.head}" + (f"; {r.reason}" if r.reason else ""))
            else:
                verdict = "UNDECODABLE" if r.cause == "undecodable" else "BROKEN"
                click.echo(f"{name}: {verdict} at position {r.first_bad_position}: {r.reason}")
    if bad:
        sys.exit(EXIT_FOUND)


@main.command("export")
@click.argument("session")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None, help="File (default stdout).")
@click.pass_context
@handle_errors
def export_cmd(ctx, session, output) -> None:
    """Export a session's log as JSON lines (one object per event, lossless).

    \b
    Example:
      ctxledger export agent-42 > agent-42.jsonl
    """
    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        if output:
            n = s.export(output)
            click.echo(f"exported {n} events to {output}", err=True)
        else:
            s.export(sys.stdout)


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help="ctxledger (an export), claude-code, codex, openhands or messages; detected when omitted.")
@click.option("--session", "name", default=None, metavar="NAME",
              help="Name of the session (one transcript only); default <format>:<the transcript's session id>.")
@click.option("--skip-bad", is_flag=True, help="Skip malformed transcript lines (counted in the report) instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def import_cmd(ctx, paths, fmt, name, skip_bad, as_json) -> None:
    """Import a ctxledger export, or agent transcripts (files or directories): Claude Code, Codex,
    OpenHands, or a JSONL of successive OpenAI/Anthropic request bodies (messages).

    Compactions become derived spans written by the tool (e.g. claude-code:compact:auto); a summary
    of a summary is recorded as a violation (imports are permissive sessions). Re-importing a
    transcript that grew takes only the new lines; a malformed line fails the import naming the
    file and line, with nothing written (or is skipped and counted with --skip-bad). With
    --skip-bad a directory import also goes on past a transcript it cannot import, reports it,
    and exits 1 when any failed.

    \b
    Example:
      ctxledger --db sqlite:///other.db import agent-42.jsonl
      ctxledger import --format claude-code ~/.claude/projects/-home-me-shop/
      ctxledger import session.jsonl --session shop-debug && ctxledger audit shop-debug
    """
    from engine.errors import InvalidInputError, LedgerError, StorageError

    if name is not None and len(paths) > 1:
        raise InvalidInputError("--session names one transcript; give one PATH")
    results: list[dict] = []
    with open_ledger(ctx, short_names=False) as ledger, progress("importing", len(paths)) as advance:
        for path in paths:
            try:
                results.extend(_import_path(ledger, path, fmt, name, skip_bad))
            except StorageError:
                raise
            except LedgerError as e:  # under --skip-bad one bad PATH does not stop the others
                if not skip_bad or len(paths) == 1:
                    raise
                results.append({"source": path, "error": e.message})
            advance(1)
    failed = [r for r in results if r.get("error")]
    if as_json:
        emit_json(results[0] if len(results) == 1 else results)
    else:
        for r in results:
            if "format" not in r and r.get("error"):
                click.echo(f"{r['source']}: FAILED, nothing imported from it: {r['error']}")
            elif "format" not in r:  # a ctxledger export
                click.echo(f"imported session {r['session']!r}: {r['position']} events, chain verified")
            else:
                click.echo(_as_report(r).summary())
    if failed:
        click.echo(f"ctxledger: {len(failed)} of {len(results)} transcripts could not be imported", err=True)
        sys.exit(EXIT_FOUND)


def _import_path(ledger, path: str, fmt: str | None, name: str | None, skip_bad: bool) -> list[dict]:
    """One PATH: a ctxledger export (or stdin), else transcripts through the importers."""
    from pathlib import Path

    from engine.errors import InvalidInputError

    if fmt in (None, "ctxledger") and (path == "-" or fmt == "ctxledger" or ledger.looks_like_export(path)):
        if name is not None or skip_bad:
            raise InvalidInputError("a ctxledger export keeps its own session name; --session/--skip-bad do not apply")
        s = ledger.import_(sys.stdin if path == "-" else path)
        return [{"session": s.name, "position": s.position, "verified": s.verify().ok}]
    from engine.importers import import_path

    done = import_path(ledger, Path(path), format=fmt, name=name, skip_bad=skip_bad)
    return [{**to_builtins(report), "spans": report.spans} for report in done.reports]


def _as_report(data: dict):
    """An import report back from its JSON form (the form --json prints)."""
    import msgspec

    from engine.importers import ImportReport

    return msgspec.convert({k: v for k, v in data.items() if k != "spans"}, ImportReport)


@main.command("mark")
@click.argument("session")
@click.argument("label")
@click.option("--by", default="", help="Who sets the mark.")
@click.option("--json", "as_json", is_flag=True, help="Print the session, label and position as a JSON object.")
@click.pass_context
@handle_errors
def mark_cmd(ctx, session, label, by, as_json) -> None:
    """Label the session's current position (e.g. "cycle-9") to navigate to it later with --at.

    \b
    Example:
      ctxledger mark agent-42 before-migration && ctxledger show agent-42 --at before-migration
    """
    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        position = s.mark(label, by=by)
    if as_json:
        emit_json({"session": s.name, "label": label, "position": position})
        return
    click.echo(f"marked position {position} as {label!r}")


__all__ = ["describe", "event_json", "span_json", "console"]
