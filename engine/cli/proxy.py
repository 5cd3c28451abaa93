"""``ctxledger proxy``: record (and optionally compact) every chat call an agent makes."""

from __future__ import annotations

import logging
import sys
from urllib.parse import urlsplit

import click

from engine.cli._app import EXIT_USAGE, handle_errors, main, open_ledger
from engine.cli.otel import start_live_export
from engine.cli.serve import is_loopback, token_problem

__all__ = ["proxy_cmd"]


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT, e.g. 127.0.0.1:8788; got {value!r}")
    return host.strip("[]"), int(port)


def _origin(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"expected an http(s) origin, e.g. https://api.openai.com; got {value!r}")
    return value.rstrip("/")


@main.command("proxy")
@click.option("--upstream", required=True, metavar="ORIGIN",
              help="Where calls go, e.g. https://api.openai.com or http://127.0.0.1:8000 (a vLLM/Ollama).")
@click.option("--listen", default="127.0.0.1:8788", show_default=True, metavar="HOST:PORT", help="Address to serve on.")
@click.option("--session", "session_name", default=None, metavar="NAME",
              help="Record every call in this session (default: the X-Ctxledger-Session header, else one "
                   "session per conversation).")
@click.option("--compact", "policy_name", default=None, type=click.Choice(["guarded", "elide-only", "prune-only"]),
              help="Send upstream the session's compacted buffer instead of the client's history.")
@click.option("--budget", type=int, default=200_000, show_default=True, help="Context budget in tokens for --compact.")
@click.option("--keep-turns", type=int, default=8, show_default=True, help="Last turns --compact never touches.")
@click.option("--permissive", is_flag=True,
              help="Create sessions permissive: a client's summary of a summary is recorded as a violation "
                   "(generation 2) instead of refused.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds the upstream may stay silent.")
@click.option("--token", default=None, metavar="T", envvar="CTXLEDGER_PROXY_TOKEN",
              help="Secret every request must carry in X-Ctxledger-Token (or $CTXLEDGER_PROXY_TOKEN); "
                   "required when --listen is not a loopback address.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="A Host name answered besides loopback ones (without --token); repeatable.")
@click.option("--max-body-mb", type=float, default=32.0, show_default=True,
              help="Largest request body in MB; a larger one gets 413 and is not forwarded.")
@click.option("--quiet", "-q", is_flag=True, help="No line per proxied call on the terminal (errors are still shown).")
@click.option("--otel/--no-otel", default=None,
              help="Export each call and compaction live as OpenTelemetry spans (default: on when "
                   "$OTEL_EXPORTER_OTLP_ENDPOINT is set; see ctxledger otel export --help).")
@click.pass_context
@handle_errors
def proxy_cmd(ctx, upstream, listen, session_name, policy_name, budget, keep_turns, permissive, timeout,
              token, allow_hosts, max_body_mb, quiet, otel) -> None:
    """Serve a recording proxy for the OpenAI and Anthropic APIs.

    Point an agent's base URL at it: POST /v1/chat/completions, /v1/responses and /v1/messages are forwarded
    unchanged (streaming included) and recorded: appended messages are observed, messages the client
    dropped are pruned, a message that replaces two or more is a derived span (so `ctxledger audit`
    judges the client's own summaries), and the model's reply is observed. Headers, authorization
    included, are forwarded and never stored. GET /ctxledger/health reports store failures.

    \b
    Example:
      ctxledger --db sqlite:///agent.db proxy --upstream https://api.openai.com
      OPENAI_BASE_URL=http://127.0.0.1:8788/v1 my-agent
      ctxledger --db sqlite:///agent.db audit proxy:fix-the-login-bug:1a2b3c4d5e
      ctxledger proxy --upstream https://api.anthropic.com --listen 0.0.0.0:8788 \\
        --token "$(python -c 'import secrets; print(secrets.token_urlsafe())')"   # clients send X-Ctxledger-Token
    """
    try:
        host, port = _listen(listen)
        origin = _origin(upstream)
        if budget < 1:
            raise click.BadParameter("--budget must be a positive number of tokens")
        if not max_body_mb > 0:
            raise click.BadParameter("--max-body-mb must be a positive number")
        if not is_loopback(host) and not token:
            raise click.BadParameter(f"--listen {host} is not a loopback address: anyone who can reach it could "
                                     "write into the ledger and spend the upstream, so --token is required")
        if token is not None and (problem := token_problem(token)):
            raise click.BadParameter(f"--token is too weak: {problem}")
    except click.BadParameter as e:
        click.echo(f"ctxledger: error: {e.message}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        from engine.proxy import ProxyConfig, create_app, without_credentials
    except ImportError as e:
        click.echo(f"ctxledger: error: {e}", err=True)
        sys.exit(EXIT_USAGE)

    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # httpx logs every upstream request at INFO: a line per call is noise on the agent's terminal
    # and costs time on every call (measured: ~0.3 ms at a 100k-token conversation)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The store thread and the event loop hand the GIL back and forth on every call; at the default
    # 5 ms switch interval a busy loop makes the store thread wait up to 5 ms for each hand-off.
    sys.setswitchinterval(0.0005)
    if quiet:
        logging.getLogger("ctxledger.proxy.calls").setLevel(logging.WARNING)
    config = ProxyConfig(
        upstream=origin, session=session_name, compact=policy_name, budget=budget,
        keep_last_turns=keep_turns, permissive=permissive, timeout=timeout,
        token=token, allowed_hosts=tuple(allow_hosts), max_body=int(max_body_mb * 1024 * 1024),
    )
    app = create_app(config, lambda: open_ledger(ctx, short_names=False))
    start_live_export(otel)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"ctxledger proxy: http://{shown}:{port} -> {without_credentials(origin)}"
               f"{f' (compacting: {policy_name}, budget {budget:,})' if policy_name else ''}"
               f"{' (token required: X-Ctxledger-Token)' if token else ''}", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
