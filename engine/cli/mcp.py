"""``ctxledger mcp``: serve context tools to an MCP client over stdio — a session's own context tools
(``--session``), or read-only tools over what an agent's hooks recorded (``--follow``)."""

from __future__ import annotations

import os

import click

from engine.cli._app import EXIT_USAGE, handle_errors, main, open_ledger


@main.command("mcp")
@click.option("--session", "name", default=None, metavar="NAME",
              help="The session whose context the tools edit (an agent whose context ctxledger owns).")
@click.option("--follow", "follow", type=click.Choice(["claude-code", "codex"]), default=None,
              help="Read-only tools over the session this agent's hooks recorded for the current directory.")
@click.option("--create", is_flag=True, help="Create the session (strict) if it does not exist yet.")
@click.option("--by", default="model", show_default=True, metavar="WHO",
              help="Who the edits are recorded as, e.g. model:claude-sonnet-4.")
@click.option("--budget", type=click.IntRange(min=1), default=None, metavar="TOKENS",
              help="Token budget shown to the model in context_list.")
@click.option("--recall-tokens", type=click.IntRange(min=50), default=2_000, show_default=True, metavar="TOKENS",
              help="Most tokens one page of context_recall returns.")
@click.option("--no-gate", is_flag=True, help="Accept summaries that state specifics none of their sources state.")
@click.pass_context
@handle_errors
def mcp_command(ctx: click.Context, name: str | None, follow: str | None, create: bool, by: str,
                budget: int | None, recall_tokens: int, no_gate: bool) -> None:
    """Serve context tools over stdio (the Model Context Protocol), in one of two modes.

    --session NAME: the context tools of a session whose buffer ctxledger renders for the agent
    (context_list, context_search, context_recall, context_restore, context_prune,
    context_summarize, context_rederive, and the read-only ledger_audit, ledger_blame, ledger_at;
    the buffer is the resource ledger://buffer). Every valid context_* call and its result are
    recorded in the session.

    --follow claude-code|codex: for an agent whose context ctxledger does not own (Claude Code,
    Codex): read-only tools over the session its hooks (ctxledger hooks install) recorded for the
    current directory: context_search, context_recall, ledger_blame, ledger_lost, ledger_audit.
    Nothing is recorded. Stdout carries the protocol only.

    \b
    Example (what an MCP client runs; see docs/tools-and-mcp.md for the client config):
      ctxledger --db sqlite:///agent.db mcp --session agent-42 --create --by model:claude
      ctxledger mcp --follow claude-code
    """
    if (name is None) == (follow is None):
        click.echo("ctxledger: error: give --session NAME or --follow AGENT (one of them)", err=True)
        ctx.exit(EXIT_USAGE)
    try:
        from engine.integrations.mcp import create_server
    except ImportError as e:
        click.echo(f"ctxledger: error: {e}", err=True)
        ctx.exit(EXIT_USAGE)
    if follow is not None:
        _serve_follow(ctx, follow, recall_tokens)
        return
    ledger = open_ledger(ctx, short_names=False)
    try:
        session = ledger.create_session(name) if create and name not in ledger else ledger.session(name)
        server = create_server(session, budget=budget, gate=not no_gate, by=by, ledger=ledger)
        server.run(transport="stdio")
    finally:
        ledger.close()


def _serve_follow(ctx: click.Context, agent: str, recall_tokens: int) -> None:
    from engine.errors import UnknownSessionError
    from engine.hooks.state import ensure_folder, recorded
    from engine.integrations.mcp import create_follow_server
    from engine.ledger import Ledger

    cwd = os.getcwd()
    entry = recorded(agent, cwd)
    root = ctx.find_root()
    explicit = root.get_parameter_source("url") not in (None, click.core.ParameterSource.DEFAULT)
    if entry is None and not explicit:
        from engine.hooks.state import default_db_url

        url = default_db_url()
    else:
        url = root.obj["url"] if explicit or entry is None else entry["db"]

    def resolve() -> str:
        found = recorded(agent, cwd)
        if found is None:
            raise UnknownSessionError(
                f"the {agent} hooks have recorded no session for {cwd} yet: install them "
                f"(ctxledger hooks install {agent}); a session is recorded at its first compaction")
        return found["session"]

    from engine.blame_index import install

    ensure_folder(url)
    with install(Ledger.open(url)) as ledger:  # ledger_blame through the search index
        create_follow_server(ledger, resolve, agent=agent, where=cwd, recall_tokens=recall_tokens).run(transport="stdio")
