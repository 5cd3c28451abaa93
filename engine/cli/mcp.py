"""``ctxledger mcp``: serve a session's context tools to an MCP client over stdio."""

from __future__ import annotations

import click

from engine.cli._app import EXIT_USAGE, handle_errors, main, open_ledger


@main.command("mcp")
@click.option("--session", "name", required=True, metavar="NAME", help="The session whose context the tools edit.")
@click.option("--create", is_flag=True, help="Create the session (strict) if it does not exist yet.")
@click.option("--by", default="model", show_default=True, metavar="WHO",
              help="Who the edits are recorded as, e.g. model:claude-sonnet-4.")
@click.option("--budget", type=click.IntRange(min=1), default=None, metavar="TOKENS",
              help="Token budget shown to the model in context_list.")
@click.option("--no-gate", is_flag=True, help="Accept summaries that state specifics none of their sources state.")
@click.pass_context
@handle_errors
def mcp_command(ctx: click.Context, name: str, create: bool, by: str, budget: int | None, no_gate: bool) -> None:
    """Serve the context tools of session NAME over stdio (the Model Context Protocol).

    The tools: context_list, context_search, context_recall, context_restore, context_prune,
    context_summarize, context_rederive, and the read-only ledger_audit, ledger_blame, ledger_at;
    the live buffer is the resource ledger://buffer. Every valid context_* call and its result are
    recorded in the session as a tool call and its result. Stdout carries the protocol only.

    \b
    Example (what an MCP client runs; see docs/tools-and-mcp.md for the client config):
      ctxledger --db sqlite:///agent.db mcp --session agent-42 --create --by model:claude
    """
    try:
        from engine.integrations.mcp import create_server
    except ImportError as e:
        click.echo(f"ctxledger: error: {e}", err=True)
        ctx.exit(EXIT_USAGE)
    ledger = open_ledger(ctx)
    try:
        session = ledger.create_session(name) if create and name not in ledger else ledger.session(name)
        server = create_server(session, budget=budget, gate=not no_gate, by=by, ledger=ledger)
        server.run(transport="stdio")
    finally:
        ledger.close()
