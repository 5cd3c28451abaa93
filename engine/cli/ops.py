"""Operations commands: fleet, keygen, checkpoint, verify-checkpoint."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timedelta, timezone

import click

from engine.cli._app import EXIT_FOUND, emit_json, handle_errors, main, open_ledger, progress, shorten, to_builtins
from engine.errors import InvalidInputError
from engine.session import VerifyResult

__all__ = ["parse_since", "plural", "verify_against_checkpoints"]


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``today``, ``yesterday``, a duration back from now (``90m``, ``24h``, ``7d``), or an ISO date
    or time (UTC unless it says otherwise)."""
    if text is None:
        return None
    now = now or datetime.now(timezone.utc)
    t = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if t == "today":
        return midnight
    if t == "yesterday":
        return midnight - timedelta(days=1)
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    if t[:-1].isdigit() and t[-1:] in units:
        return now - timedelta(**{units[t[-1]]: int(t[:-1])})
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"--since {text!r}: use today, yesterday, a duration like 24h or 7d, or an ISO date/time"
        ) from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _when(dt: datetime | None) -> str:
    return "-" if dt is None else dt.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _row_json(row) -> dict:
    d = to_builtins(row)
    d["drift"] = row.drift
    d["drifted"] = row.drifted
    return d


@main.command("fleet")
@click.option("--drifted", is_flag=True, help="Only sessions whose buffer drifted (with --since: drifted since then).")
@click.option("--flagged", is_flag=True, help="Sessions that drifted, had rewrites refused, or have unreadable events.")
@click.option("--since", default=None, metavar="WHEN", help="today, yesterday, 24h, 7d or an ISO date/time (UTC).")
@click.option("--detail", is_flag=True, help="List each flagged session's findings.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (one object per session).")
@click.option("--no-update", is_flag=True, help="Show the view as it is, without folding new events in first.")
@click.option("--follow", is_flag=True, help="Keep the view up to date until interrupted (live on PostgreSQL).")
@click.option("--interval", type=float, default=2.0, show_default=True, help="Polling interval of --follow on SQLite.")
@click.pass_context
@handle_errors
def fleet_cmd(ctx, drifted, flagged, since, detail, as_json, no_update, follow, interval) -> None:
    """Every session in the store, with its drift findings: which sessions drifted today?

    The view is a table in the store itself (fleet_sessions), folded from the global event log
    exactly once; the command first folds in whatever was committed since it last ran.

    Exit 1 when a session it lists drifted (like audit), 0 otherwise. DRIFT counts the audit's
    errors and warnings apart (E/W); --detail re-audits each flagged session for the findings'
    messages.

    \b
    Example:
      ctxledger --db postgresql://ops@db/agents fleet --drifted --since today
    """
    from engine.fleet import Fleet

    when = parse_since(since)
    messages: dict[str, list[str]] = {}
    with open_ledger(ctx) as ledger, Fleet(ledger) as fleet:
        if follow:
            _follow(ledger, fleet, interval)
            return
        if no_update:
            folded = 0
        else:
            with progress("folding the store's new events into the fleet view", None):
                folded = fleet.catch_up()
        rows = fleet.rows(since=when, drifted=drifted, flagged=flagged)
        if detail:
            audited = [r for r in rows if r.flagged and r.audit]
            with progress("auditing the flagged sessions for their findings", len(audited)) as advance:
                for r in audited:
                    messages[r.name] = _messages(ledger, r)
                    advance(1)
    found = EXIT_FOUND if any(r.drifted for r in rows) else 0
    if as_json:
        emit_json([{**_row_json(r), **({"messages": messages[r.name]} if r.name in messages else {})} for r in rows])
        sys.exit(found)
    if not rows:
        what = "drifted" if drifted else "flagged" if flagged else "in the view"
        click.echo(f"no sessions {what}" + (f" since {_when(when)} UTC" if when else ""))
        return
    width = max(7, *(len(r.name) for r in rows))
    click.echo(f"{'SESSION':<{width}}  {'EVENTS':>7}  {'REFUSED':>7}  {'DRIFT E/W':>9}  {'LAST EVENT (UTC)':<19}  LAST DRIFT (UTC)")
    for r in rows:
        errors, warnings = _severities(r)
        click.echo(
            f"{r.name:<{width}}  {r.position:>7}  {r.refusals:>7}  {f'{errors}/{warnings}':>9}  {_when(r.last_event_at):<19}  "
            f"{_when(r.last_drift_at)}"
        )
        if detail and r.flagged:
            for f in r.findings:
                span = f" ({f.span_id})" if f.span_id else ""
                click.echo(f"  - {f.kind} at position {f.position}{span}: {f.detail}")
            for line in messages.get(r.name, []):
                click.echo(f"  - {line}")
    n_drift = sum(1 for r in rows if r.drifted)
    n_flag = sum(1 for r in rows if r.flagged)
    tail = f"; folded {plural(folded, 'new event')}" if folded else ""
    click.echo(f"{plural(len(rows), 'session')}; {n_drift} drifted, {n_flag} flagged{tail}", err=True)
    sys.exit(found)


def plural(n: int, word: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _severities(row) -> tuple[int, int]:
    """(errors, warnings) of a fleet row: the audit's findings once it ran (each says its severity),
    else the violations recorded in the log (errors)."""
    if not row.audited_position:
        return row.violations, 0
    warnings = sum(1 for f in row.audit if f.detail.startswith("warning"))
    return len(row.audit) - warnings, warnings


def _messages(ledger, row) -> list[str]:
    """The audit's errors and warnings for a flagged session, each with its message (the fleet view
    keeps kinds and positions only, never the text)."""
    report = ledger.session(row.name).audit()
    out = []
    for f in report.findings:
        d = to_builtins(f) if not isinstance(f, dict) else f
        if d.get("severity") in ("error", "warning"):
            where = ", ".join(d.get("span_ids") or []) or (f"position {d['position']}" if d.get("position") else "")
            out.append(f"{d['severity']} {d.get('kind', '')}{f' ({where})' if where else ''}: {shorten(d.get('message', ''), 300)}")
    return out


def _follow(ledger, fleet, interval: float) -> None:
    from engine.fleet import follow, poll

    stop = threading.Event()
    if ledger.backend == "postgres":
        fleet.catch_up()
        click.echo("following the log (PostgreSQL LISTEN/NOTIFY); Ctrl-C to stop", err=True)
        with follow(ledger) as runner:
            try:
                runner.run_forever()
            except KeyboardInterrupt:
                pass
        return
    click.echo(f"following the log (polling every {interval:g}s); Ctrl-C to stop", err=True)
    try:
        for n in poll(fleet, interval=interval, stop=stop):
            if n:
                click.echo(f"folded {n} events; {fleet.tracked} tracked", err=True)
    except KeyboardInterrupt:
        stop.set()


# -- signed checkpoints ----------------------------------------------------------------------------


@main.command("keygen")
@click.argument("private_key", type=click.Path(dir_okay=False))
@click.option("--public", "public_key", type=click.Path(dir_okay=False), default=None, help="Public key file (default: PRIVATE_KEY with .pub).")
@click.option("--json", "as_json", is_flag=True, help="Print the files and the key id as a JSON object.")
@handle_errors
def keygen_cmd(private_key, public_key, as_json) -> None:
    """Make an Ed25519 key pair for signing checkpoints (PEM; the private file is mode 0600).

    Keep the private key away from the database host; give the public key to whoever audits.

    \b
    Example:
      ctxledger keygen ops-signing.pem
    """
    from engine.checkpoint import generate_keypair

    priv, pub, kid = generate_keypair(private_key, public_key)
    if as_json:
        emit_json({"private_key": str(priv), "public_key": str(pub), "key_id": kid})
        return
    click.echo(f"wrote {priv} (private, keep it off the database host) and {pub} (public); key id {kid}")


@main.command("checkpoint")
@click.argument("sessions", nargs=-1)
@click.option("--all", "all_sessions", is_flag=True, help="Sign every session in the store.")
@click.option("--key", "key_file", required=True, type=click.Path(dir_okay=False), help="Ed25519 private key (PEM).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Append to this checkpoint file (default stdout).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for the run: each session signed or not, and why.")
@click.pass_context
@handle_errors
def checkpoint_cmd(ctx, sessions, all_sessions, key_file, output, as_json) -> None:
    """Sign the chain head of sessions: evidence a third party can check without the database.

    The chain is verified first; a broken chain is never signed (exit 1). Without -o the
    checkpoints are printed, one JSON line each (already machine-readable); --json prints one
    object for the whole run instead (with -o, or to see which sessions were not signed).

    \b
    Example:
      ctxledger checkpoint --all --key ops-signing.pem -o checkpoints.jsonl
    """
    from engine.checkpoint import append_checkpoint, dumps, load_private_key, sign
    from engine.errors import CorruptLogError

    if not sessions and not all_sessions:
        raise click.UsageError("name one or more SESSIONs or pass --all")
    key = load_private_key(key_file)
    broken = False
    done: list[dict] = []
    with open_ledger(ctx) as ledger:
        names = [i.name for i in ledger.sessions()] if all_sessions else list(sessions)
        for name in names:
            try:
                cp = sign(ledger.session(name), key)
            except CorruptLogError as e:
                done.append({"session": name, "signed": False, "reason": e.message})
                if not as_json:
                    click.echo(f"{name}: NOT SIGNED: {e.message}", err=True)
                broken = True
                continue
            if output:
                append_checkpoint(cp, output)
            if as_json:
                done.append({"session": cp.session, "signed": True, "position": cp.position, "head": cp.head,
                             "checkpoint": json.loads(dumps(cp)), "file": output})
            elif output:
                click.echo(f"{cp.session}: signed position {cp.position}, head {cp.head} -> {output}", err=True)
            else:
                click.echo(dumps(cp))
    if as_json:
        emit_json({"checkpoints": done, "signed": sum(1 for d in done if d["signed"]), "not_signed": sum(1 for d in done if not d["signed"])})
    if broken:
        sys.exit(EXIT_FOUND)


def verify_against_checkpoints(ledger, session: str | None, checkpoint_file: str, public_key: str) -> list[tuple[str, VerifyResult]]:
    """``ctxledger verify --checkpoint FILE --public-key PUB``: a session (or, with None, every
    session in the store and every session the file names) held against the signed checkpoints."""
    from engine.checkpoint import check_session, check_store, load_public_key, read_checkpoints

    if not checkpoint_file or not public_key:
        raise InvalidInputError("--checkpoint and --public-key go together")
    key = load_public_key(public_key)
    cps = read_checkpoints(checkpoint_file)
    if session is not None:
        s = ledger.session(session)
        return [(s.name, check_session(s, cps, key))]
    results = dict(check_store(ledger, cps, key))
    signed = {cp.session_id for cp in cps}
    for info in ledger.sessions():
        if info.id not in signed:
            r = ledger.session(info.id).verify()
            if r.ok:
                r = VerifyResult(ok=True, position=r.position, head=r.head, reason="chain only: no checkpoint of it")
            results[info.name] = r
    return sorted(results.items())


@main.command("verify-checkpoint")
@click.argument("checkpoints", type=click.Path(dir_okay=False, exists=False))
@click.option("--public-key", "public_key", required=True, type=click.Path(dir_okay=False), help="The signer's Ed25519 public key (PEM).")
@click.option("--export", "export_file", type=click.Path(dir_okay=False), default=None, help="Check this export file instead of the store (no database needed).")
@click.option("--signatures-only", is_flag=True, help="Only check the signatures; touch no database and no export.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def verify_checkpoint_cmd(ctx, checkpoints, public_key, export_file, signatures_only, as_json) -> None:
    """Check signed checkpoints against the store, an export file, or on their own.

    Exit 1 if a signature is invalid or the history differs from what was signed (the first bad
    position is named). With --export or --signatures-only no database is opened: an auditor
    needs only the export, the checkpoint file and the public key.

    \b
    Example:
      ctxledger verify-checkpoint checkpoints.jsonl --public-key ops-signing.pub --export agent-42.jsonl
    """
    from engine.checkpoint import check_export, check_store, load_public_key, read_checkpoints, signature_ok

    key = load_public_key(public_key)
    cps = read_checkpoints(checkpoints)
    if signatures_only:
        results = [
            (
                cp.session,
                VerifyResult(ok=True, position=cp.position, head=cp.head, reason=f"signature valid ({cp.describe()})")
                if signature_ok(cp, key)
                else VerifyResult(ok=False, position=cp.position, reason=f"INVALID signature on the {cp.describe()}"),
            )
            for cp in cps
        ]
    elif export_file:
        results = check_export(export_file, cps, key)
    else:
        with open_ledger(ctx) as ledger:
            results = check_store(ledger, cps, key)
    _report(results, as_json)
    if any(not r.ok for _, r in results):
        sys.exit(EXIT_FOUND)


def _report(results: list[tuple[str, VerifyResult]], as_json: bool) -> None:
    if as_json:
        emit_json([{"session": n, **to_builtins(r)} for n, r in results])
        return
    for name, r in results:
        if r.ok:
            click.echo(f"{name}: OK, {r.position} events" + (f"; {r.reason}" if r.reason else ""))
        else:
            where = f" at position {r.first_bad_position}" if r.first_bad_position is not None else ""
            click.echo(f"{name}: BROKEN{where}: {r.reason}")

