"""``ctxledger hooks``: install, uninstall and inspect the compaction hooks of Claude Code and Codex."""

from __future__ import annotations

import sys

import click

from engine.cli._app import EXIT_FOUND, emit_json, handle_errors, main, to_builtins

__all__ = ["hooks_group"]

_AGENT = click.Choice(["claude-code", "codex"])
_SCOPE = click.option("--scope", type=click.Choice(["project", "user"]), default="project", show_default=True,
                      help="project: the settings of the current directory; user: the user's own settings.")


def _hook_db(ctx: click.Context, db: str | None) -> str:
    """The store the hooks write to: --db of this command, the global --db/$CTXLEDGER_URL when given,
    else one store in the user's data directory (shared by every project)."""
    from engine.hooks.state import default_db_url

    if db:
        return db
    root = ctx.find_root()
    if root.get_parameter_source("url") not in (None, click.core.ParameterSource.DEFAULT):
        return root.obj["url"]
    return default_db_url()


@main.group("hooks")
def hooks_group() -> None:
    """Record, check and repair every compaction of Claude Code or Codex as it happens.

    PreCompact imports the transcript up to now; PostCompact and SessionStart(compact) import the
    summary, audit it, and give the resumed model the user's own words and the summary's
    unsupported statements. See docs/hooks.md.

    \b
    Example:
      ctxledger hooks install claude-code          # .claude/settings.json of this directory
      ctxledger hooks status claude-code
    """


@hooks_group.command("install")
@click.argument("agent", type=_AGENT)
@_SCOPE
@click.option("--db", "db", default=None, metavar="URL",
              help="Store the hooks write to (default: the global --db or $CTXLEDGER_URL when given, "
                   "else ~/.local/share/ctxledger/hooks.db).")
@click.option("--budget", type=click.IntRange(min=100), default=None, metavar="TOKENS",
              help="Token budget of the notice for the resumed model (default 1500).")
@click.option("--json", "as_json", is_flag=True, help="What was written, as JSON.")
@click.pass_context
@handle_errors
def install_cmd(ctx, agent, scope, db, budget, as_json) -> None:
    """Write the hooks into AGENT's settings, merged with the hooks already there (idempotent).

    \b
    Example:
      ctxledger hooks install claude-code --scope user --db sqlite:///$HOME/agents.db
      ctxledger hooks install codex                  # .codex/hooks.json of this directory
    """
    from engine.hooks.install import install, status

    url = _hook_db(ctx, db)
    path = install(agent, scope=scope, db=url, budget=budget)
    st = status(agent, scope=scope)
    if as_json:
        emit_json({**to_builtins(st), "db": url, "installed": st.installed})
        return
    click.echo(f"installed the ctxledger hooks for {agent} ({', '.join(st.events)}) in {path}")
    click.echo(f"they record into {url}; undo with: ctxledger hooks uninstall {agent} --scope {scope}")
    if agent == "codex":
        click.echo("Codex asks you to review and trust new command hooks before they run (/hooks).")


@hooks_group.command("uninstall")
@click.argument("agent", type=_AGENT)
@_SCOPE
@click.option("--json", "as_json", is_flag=True, help="Whether anything was removed, as JSON.")
@handle_errors
def uninstall_cmd(agent, scope, as_json) -> None:
    """Take the ctxledger hooks out of AGENT's settings; every other hook stays.

    \b
    Example:
      ctxledger hooks uninstall claude-code
    """
    from engine.hooks.install import settings_path, uninstall

    removed = uninstall(agent, scope=scope)
    path = settings_path(agent, scope)
    if as_json:
        emit_json({"agent": agent, "scope": scope, "path": str(path), "removed": removed})
    else:
        click.echo(f"removed the ctxledger hooks from {path}" if removed else f"no ctxledger hooks in {path}")


@hooks_group.command("status")
@click.argument("agent", type=_AGENT, required=False)
@_SCOPE
@click.option("--json", "as_json", is_flag=True, help="The status as JSON.")
@handle_errors
def status_cmd(agent, scope, as_json) -> None:
    """Whether the hooks are installed (exit 0) or not (exit 1), for AGENT or both agents.

    \b
    Example:
      ctxledger hooks status --scope user
    """
    from engine.hooks import AGENTS
    from engine.hooks.install import status

    found = [status(a, scope=scope) for a in ([agent] if agent else AGENTS)]
    if as_json:
        emit_json([{**to_builtins(s), "installed": s.installed} for s in found])
    else:
        for s in found:
            state = "installed" if s.installed else ("partly installed" if s.events else "not installed")
            click.echo(f"{s.agent} ({s.scope}): {state} in {s.path}" + (f" — {', '.join(s.events)}" if s.events else ""))
            for c in s.commands:
                click.echo(f"  {c}")
    if not all(s.installed for s in found):
        sys.exit(EXIT_FOUND)


@hooks_group.command("run")
@click.argument("agent", type=_AGENT)
@click.option("--db", "db", default=None, metavar="URL", help="Store to record into (as for install).")
@click.option("--budget", type=click.IntRange(min=1), default=None, metavar="TOKENS", help="Token budget of the notice.")
@click.pass_context
def run_cmd(ctx, agent, db, budget) -> None:
    """Handle one hook payload on stdin (what the agent runs; always exits 0).

    The installed hooks run the faster `python -m engine.hooks AGENT`; this verb is for the
    Claude Code plugin, which finds `ctxledger` on PATH.

    \b
    Example:
      echo '{"hook_event_name": "PreCompact", "transcript_path": "t.jsonl"}' | ctxledger hooks run claude-code
    """
    from engine.hooks.handler import main as hook_main

    argv = [agent, "--db", _hook_db(ctx, db)] + (["--budget", str(budget)] if budget else [])
    sys.exit(hook_main(argv))


@hooks_group.command("plugin")
def plugin_cmd() -> None:
    """Print the directory of the Claude Code plugin shipped with ctxledger (hooks and MCP server).

    \b
    Example:
      claude --plugin-dir "$(ctxledger hooks plugin)"
    """
    from engine.hooks.install import plugin_dir

    click.echo(str(plugin_dir()))
