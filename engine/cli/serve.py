"""``ctxledger serve``: the read-only web viewer (time-travel replay in a browser)."""

from __future__ import annotations

import ipaddress
import sys

import click

from engine.cli._app import EXIT_USAGE, emit_json, handle_errors, main, open_ledger
from engine.extras import MissingExtraError

__all__ = ["is_loopback", "token_problem"]

MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (``0.0.0.0`` and names of other machines are not)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to guard a server others can reach (None: strong enough)."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"the token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} random ones"
    if len(set(token)) < 8:
        return f"the token uses only {len(set(token))} distinct characters; use a random one"
    return None


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind; anything but loopback needs --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port (0: any free port).")
@click.option("--token", default=None, metavar="T", envvar="CTXLEDGER_SERVE_TOKEN",
              help="Secret every request must carry (?token=T once, then a cookie); or $CTXLEDGER_SERVE_TOKEN.")
@click.option("--no-fleet", is_flag=True, help="Do not keep the fleet view (drift column of the sessions page) up to date.")
@click.option("--json", "as_json", is_flag=True, help="Print the URL as a JSON object when the server is up.")
@click.pass_context
@handle_errors
def serve_cmd(ctx: click.Context, host: str, port: int, token: str | None, no_fleet: bool, as_json: bool) -> None:
    """Replay sessions in a browser: a read-only local web app.

    The sessions page lists every session; a session page scrubs through its log (←/→ one event,
    Shift+←/→ the previous/next compaction, Home/End), with the live buffer, the event at each
    position, the live-token curve, span lineage and grounding, blame and diff. Every state has a
    URL: /s/SESSION?at=N#o17.

    \b
    Example:
      ctxledger serve                                  # http://127.0.0.1:8765/
      ctxledger --db sqlite:///demo.db serve --port 9000
      ctxledger serve --host 0.0.0.0 --token "$(python -c 'import secrets; print(secrets.token_urlsafe())')"
    """
    if not is_loopback(host) and not token:
        click.echo(f"ctxledger: error: --host {host} is not a loopback address: anyone who can reach it could read "
                   "every session, so --token is required (a long random string)", err=True)
        sys.exit(EXIT_USAGE)
    if token is not None and (problem := token_problem(token)):
        click.echo(f"ctxledger: error: --token is too weak: {problem}, e.g. "
                   "$(python -c 'import secrets; print(secrets.token_urlsafe())')", err=True)
        sys.exit(EXIT_USAGE)
    try:
        import uvicorn

        from engine.viewer.app import create_app
    except ImportError as e:
        raise MissingExtraError("ctxledger serve", "serve", getattr(e, "name", None)) from None
    ledger = open_ledger(ctx, short_names=False)
    app = create_app(ledger, token=token, fleet=not no_fleet)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)

    def announce() -> None:
        bound = server.servers[0].sockets[0].getsockname() if server.servers else (host, port)
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound[1]}/" + (f"?token={token}" if token else "")
        if as_json:
            emit_json({"url": url, "host": host, "port": bound[1], "store": ctx.find_root().obj["url"]})
        else:
            click.echo(f"ctxledger serve: {url}  (read-only; Ctrl+C stops it)")
        sys.stdout.flush()

    startup = server.startup

    async def startup_and_announce(sockets=None):
        await startup(sockets=sockets)
        if server.started:
            announce()

    server.startup = startup_and_announce  # type: ignore[method-assign]
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind
        pass
    finally:
        ledger.close()
    if not server.started:
        click.echo(f"ctxledger: error: could not listen on {host}:{port} (in use, or not an address of this machine)", err=True)
        sys.exit(EXIT_USAGE)
